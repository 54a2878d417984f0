"""The paper profile's encoder and reranker code paths, executed on tiny local models.

BGE-M3 and bge-reranker-large are XLM-RoBERTa models; no weights can be fetched here, so this builds
XLM-RoBERTa models with the same architecture classes (2 layers, hidden size 32, random weights,
``save_pretrained`` into a temporary folder) and an XLM-R-style tokenizer (a Unigram model with a
Metaspace pre-tokenizer and XLM-R's special tokens, trained here on a few sentences with the
``tokenizers`` library), then loads them through :class:`kgir_lib.retrieval.Encoder` (FlagEmbedding's
``BGEM3FlagModel``) and :class:`kgir_lib.retrieval.Reranker` (``FlagReranker``) on the CPU: everything
is real except the weights.

Needs FlagEmbedding 1.4.2 (in the dev extra); skipped when it is not installed:

    .venv/bin/pip install FlagEmbedding==1.4.2 && .venv/bin/python -m pytest tests/test_flagembedding.py
"""
from __future__ import annotations

import numpy as np
import pytest

from kgir_lib.retrieval import DenseIndex, Encoder, Reranker
from conftest import make_passage

pytestmark = pytest.mark.slow  # imports torch, transformers and FlagEmbedding and builds models: the whole suite's

torch = transformers = None  # imported by the fixture below: collecting this module (every worker, every tier,
                             # these tests selected or not) must not import FlagEmbedding, torch and transformers


@pytest.fixture(scope="module", autouse=True)
def libraries():
    global torch, transformers
    pytest.importorskip("FlagEmbedding")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

SENTENCES = [
    "Compaq was the largest supplier of personal computers in 1994.",
    "In 2002 Hewlett-Packard merged with Compaq.",
    "IBM sold its PC business to Lenovo in 2005.",
    "Lenovo is a Chinese technology company.",
    "Dell was founded by Michael Dell in 1984.",
    "Apple released the Macintosh in 1984.",
    "Which company merged with the top PC maker of 1994?",
]


def build_tokenizer(folder):
    """An XLM-R-style fast tokenizer trained locally (Unigram + Metaspace, <s> … </s> templates)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(SENTENCES * 4, trainers.UnigramTrainer(vocab_size=120, special_tokens=specials,
                                                                  unk_token="<unk>"))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    fast = transformers.XLMRobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                sep_token="</s>", cls_token="<s>", unk_token="<unk>",
                                                pad_token="<pad>", mask_token="<mask>", model_max_length=512)
    fast.save_pretrained(folder)
    return fast


def tiny_config(tok, **kw):
    return transformers.XLMRobertaConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=514, type_vocab_size=1, pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, **kw)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """``(encoder folder, reranker folder)``: random-weight XLM-RoBERTa models saved with their tokenizer."""
    root = tmp_path_factory.mktemp("tiny-xlmr")
    enc_dir, rr_dir = root / "tiny-bge-m3", root / "tiny-bge-reranker"
    torch.manual_seed(0)
    tok = build_tokenizer(enc_dir)
    transformers.XLMRobertaModel(tiny_config(tok)).save_pretrained(enc_dir)
    tok.save_pretrained(rr_dir)
    transformers.XLMRobertaForSequenceClassification(  # wide init: logits far apart, so order is tested
        tiny_config(tok, num_labels=1, initializer_range=0.5)).save_pretrained(rr_dir)
    return str(enc_dir), str(rr_dir)


def reference_cls(folder, texts, max_length=512):
    """What BGE-M3's dense vector is: the normalised last-layer [CLS] (<s>) state, computed by hand."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        out = []
        for t in texts:  # one at a time: no padding involved
            h = model(**tok([t], return_tensors="pt", truncation=True, max_length=max_length)).last_hidden_state[:, 0]
            out.append(torch.nn.functional.normalize(h, dim=-1)[0].numpy())
    return np.stack(out)


def test_bge_m3_path_shapes_normalisation_batching(tiny_models):
    enc_dir, _ = tiny_models
    enc = Encoder(enc_dir, batch_size=2, device="cpu")
    from FlagEmbedding import BGEM3FlagModel

    assert enc.backend == "bge-m3" and isinstance(enc._model, BGEM3FlagModel)
    emb = enc.encode(SENTENCES)
    assert emb.shape == (len(SENTENCES), 32) and emb.dtype == np.float32 and enc.dim == 32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    # batching (2 at a time, padded) gives the vectors of one-at-a-time CLS pooling
    np.testing.assert_allclose(emb, reference_cls(enc_dir, SENTENCES), atol=1e-5)
    np.testing.assert_allclose(enc.encode(SENTENCES[:1]), emb[:1], atol=1e-5)  # a single text: still 2-D
    assert enc.encode([]).shape == (0, 32)
    assert Encoder(enc_dir, batch_size=2, device="cpu")._model is enc._model  # loaded once per process


def test_bge_m3_dense_index_ordering_and_cache_key(tiny_models, tmp_path):
    enc_dir, _ = tiny_models
    enc = Encoder(enc_dir, batch_size=4, device="cpu")
    passages = [make_passage(f"T{i}", s) for i, s in enumerate(SENTENCES[:6])]
    index = DenseIndex(passages, enc, cache_dir=tmp_path, progress=False)
    q = SENTENCES[6]
    sims = index.scores([q])[0]
    hits = index.search([q], 6)[0]
    assert [p for p, _ in hits] == [passages[i].pid for i in np.argsort(-sims, kind="stable")]  # best first
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert np.all(np.abs(sims) <= 1 + 1e-5)  # cosine of normalised vectors
    # the cache key names the model and the FlagEmbedding backend; a second index reads the file
    assert enc.cache_name == f"{enc_dir}|bge-m3"
    files = list(tmp_path.glob("*.npy"))
    assert len(files) == 1 and "tiny-bge-m3" in files[0].name
    again = DenseIndex(passages, enc, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(again.embeddings, index.embeddings)
    st_key = Encoder.__new__(Encoder)
    st_key.model_name, st_key.backend, st_key.max_length = enc_dir, "sentence-transformers", None
    assert st_key.cache_name != enc.cache_name  # sentence-transformers vectors never read for BGE-M3's


def test_bge_m3_input_length_is_passed_and_keys_the_cache(tiny_models):
    """The paper runs BGE-M3 at 8192 tokens (§3.2), FlagEmbedding's default is 512: ``max_length`` reaches
    ``encode``, and vectors of another length are another cache entry."""
    enc_dir, _ = tiny_models
    short, default = Encoder(enc_dir, device="cpu", max_length=4), Encoder(enc_dir, device="cpu")
    long_text = [" ".join(SENTENCES)]
    assert short.cache_name == f"{enc_dir}|bge-m3|len4" and default.cache_name == f"{enc_dir}|bge-m3"
    assert not np.allclose(short.encode(long_text), default.encode(long_text))
    np.testing.assert_allclose(short.encode(long_text), reference_cls(enc_dir, long_text, max_length=4), atol=1e-5)


def test_flag_reranker_path_scores_ordering_batching(tiny_models):
    _, rr_dir = tiny_models
    rr = Reranker(rr_dir, batch_size=2, device="cpu")
    from FlagEmbedding import FlagReranker

    assert isinstance(rr._flag, FlagReranker)
    q = SENTENCES[6]
    pairs = [(q, s) for s in SENTENCES[:6]]
    scores = rr.score(pairs)
    assert len(scores) == 6 and all(0.0 < s < 1.0 for s in scores)  # normalize=True: sigmoid of the logit
    # reference: the classification head's logit, one pair at a time; same order after the sigmoid
    tok = transformers.AutoTokenizer.from_pretrained(rr_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(rr_dir).eval()
    with torch.no_grad():
        logits = [float(model(**tok([a], [b], return_tensors="pt", truncation=True)).logits[0, 0]) for a, b in pairs]
    np.testing.assert_allclose(scores, 1 / (1 + np.exp(-np.asarray(logits))), rtol=1e-5, atol=1e-7)
    assert np.ptp(logits) > 0.1  # the pairs are told apart, so the next line checks a real order
    assert np.argsort(scores).tolist() == np.argsort(logits).tolist()  # higher = more relevant, input order kept
    assert rr.score(pairs[:1]) == pytest.approx(scores[:1], abs=1e-6)  # one pair: still a list
    assert rr.score([]) == []
