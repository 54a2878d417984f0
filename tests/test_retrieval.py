"""Dense cosine top-k (paper eq. 2) with an on-disk embedding cache, BM25, and the real MiniLM encoder."""
from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import BagOfWordsEncoder, make_passage, tiny_passages

from kgir_lib.retrieval import BM25Index, DenseIndex, Encoder, corpus_fingerprint, tokenize

PASSAGES = tiny_passages()
QUERIES = ["Which company merged with Compaq?", "Who founded Dell?", "Macintosh 1984", "zzz unknown words"]


class CountingEncoder(BagOfWordsEncoder):
    def __init__(self, name: str = "bow-test"):
        self.model_name = name
        self.encoded: list = []

    def encode(self, texts, progress=False):
        self.encoded.extend(texts)
        return super().encode(texts, progress)


def test_exact_cosine_top_k():
    enc = BagOfWordsEncoder()
    index = DenseIndex(PASSAGES, enc, progress=False)
    p = enc.encode([x.content for x in PASSAGES])
    q = enc.encode(QUERIES)
    sims = q @ p.T
    for row, hits in zip(sims, index.search(QUERIES, 3)):
        expected = np.argsort(-row, kind="stable")[:3]
        assert [pid for pid, _ in hits] == [PASSAGES[i].pid for i in expected]
        assert [s for _, s in hits] == pytest.approx([row[i] for i in expected], abs=1e-6)
        assert all(a >= b for (_, a), (_, b) in zip(hits, hits[1:]))
    assert index.search(["Which company merged with Compaq?"], 1)[0][0][0] == PASSAGES[1].pid
    assert index.scores(QUERIES) == pytest.approx(sims, abs=1e-6)
    assert index.scores(QUERIES).shape == (4, 6)


def test_cosine_is_a_true_cosine():
    enc = BagOfWordsEncoder()
    index = DenseIndex(PASSAGES, enc, progress=False)
    same = index.search([PASSAGES[3].content], 1)[0][0]
    assert same == (PASSAGES[3].pid, pytest.approx(1.0, abs=1e-6))
    assert np.linalg.norm(index.embeddings, axis=1) == pytest.approx(np.ones(6), abs=1e-6)


def test_ties_keep_corpus_order_and_k_bounds():
    enc = BagOfWordsEncoder()
    index = DenseIndex(PASSAGES, enc, progress=False)
    hits = index.search_vectors(np.zeros((1, enc.dim), dtype=np.float32), 10)[0]  # every score 0: a tie
    assert [pid for pid, _ in hits] == [p.pid for p in PASSAGES]
    assert index.search(QUERIES, 0) == [[]] * 4
    assert index.search([], 3) == []


def test_search_vectors_and_query_cache():
    enc = CountingEncoder()
    index = DenseIndex(PASSAGES, enc, progress=False)
    enc.encoded.clear()
    v = index.embed_queries(["a b", "c d", "a b"])
    assert v.shape == (3, enc.dim) and np.allclose(v[0], v[2])
    assert enc.encoded == ["a b", "c d"]
    index.embed_queries(["a b"])
    assert enc.encoded == ["a b", "c d"]  # cached
    assert index.search_vectors(v, 2) == index.search(["a b", "c d", "a b"], 2)


def test_embedding_cache_file_is_reused(tmp_path):
    first = CountingEncoder()
    a = DenseIndex(PASSAGES, first, cache_dir=tmp_path, progress=False)
    files = list(tmp_path.glob("*.npy"))
    assert len(files) == 1 and files[0] == a.cache_path
    assert files[0].name.startswith("bow-test-")
    assert len(first.encoded) == 6
    second = CountingEncoder()
    b = DenseIndex(PASSAGES, second, cache_dir=tmp_path, progress=False)
    assert second.encoded == []  # nothing re-encoded
    assert np.array_equal(a.embeddings, b.embeddings)
    assert not list(tmp_path.glob("*.tmp*"))


def test_embedding_cache_is_keyed_by_content_and_model(tmp_path):
    DenseIndex(PASSAGES, CountingEncoder(), cache_dir=tmp_path, progress=False)
    changed = PASSAGES[:2] + [make_passage("IBM", "IBM sold its PC business to Lenovo in 2004.")] + PASSAGES[3:]
    enc = CountingEncoder()
    DenseIndex(changed, enc, cache_dir=tmp_path, progress=False)
    assert len(enc.encoded) == 6 and len(list(tmp_path.glob("*.npy"))) == 2
    other_model = CountingEncoder("org/other-model")
    DenseIndex(PASSAGES, other_model, cache_dir=tmp_path, progress=False)
    names = sorted(p.name for p in tmp_path.glob("*.npy"))
    assert len(names) == 3 and any(n.startswith("org_other-model-") for n in names)
    assert len(other_model.encoded) == 6
    # order matters too: the rows are aligned with the passages
    assert corpus_fingerprint("m", ["a", "b"]) != corpus_fingerprint("m", ["b", "a"])
    assert corpus_fingerprint("m", ["ab"]) != corpus_fingerprint("m", ["a", "b"])


def test_broken_cache_file_is_rebuilt(tmp_path):
    a = DenseIndex(PASSAGES, CountingEncoder(), cache_dir=tmp_path, progress=False)
    a.cache_path.write_bytes(b"garbage")
    enc = CountingEncoder()
    with pytest.warns(UserWarning, match="checksum"):
        b = DenseIndex(PASSAGES, enc, cache_dir=tmp_path, progress=False)
    assert len(enc.encoded) == 6 and np.array_equal(a.embeddings, b.embeddings)
    np.save(a.cache_path, np.zeros((2, 3), dtype=np.float32))  # wrong shape
    enc = CountingEncoder()
    with pytest.warns(UserWarning, match="checksum"):
        DenseIndex(PASSAGES, enc, cache_dir=tmp_path, progress=False)
    assert len(enc.encoded) == 6


def test_empty_corpus():
    index = DenseIndex([], BagOfWordsEncoder(), progress=False)
    assert index.embeddings.shape == (0, BagOfWordsEncoder.dim)
    assert index.search(["x"], 3) == [[]]


def test_bm25_ranks_the_exact_match_first():
    bm25 = BM25Index(PASSAGES)
    hits = bm25.search(["Hewlett-Packard merged with Compaq 2002", "Michael Dell founded", "Lenovo"], 3)
    assert hits[0][0][0] == PASSAGES[1].pid
    assert hits[1][0][0] == PASSAGES[4].pid
    assert {pid for pid, _ in hits[2][:2]} == {PASSAGES[2].pid, PASSAGES[3].pid}
    for row in hits:
        assert all(a >= b for (_, a), (_, b) in zip(row, row[1:]))
    assert len(bm25.search(["x"], 100)[0]) == 6


def musique_like_passages(n=120, seed=0):
    """A corpus with a long tail of rare terms and a few words in most passages (negative rank_bm25 idf)."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(400)]
    out = []
    for i in range(n):
        words = list(rng.choice(vocab, int(rng.integers(5, 40)), p=np.arange(400, 0, -1) / np.arange(400, 0, -1).sum()))
        if i % 3:
            words += ["the", "of"]  # in two thirds of the passages: idf < 0 -> rank_bm25's floor
        out.append(make_passage(f"T{i}", " ".join(words)))
    return out


def test_sparse_bm25_scores_equal_rank_bm25_bit_for_bit():
    ps = musique_like_passages()
    index = BM25Index(ps)
    rng = np.random.default_rng(1)
    queries = ["the w1 w1 of w7 w399 unseen", "w3", "zzz", ""] + [
        " ".join(rng.choice([f"w{i}" for i in range(400)] + ["the", "of"], 8)) for _ in range(20)]
    for q in queries:
        ref = np.asarray(index._bm25.get_scores(tokenize(q)))
        assert np.array_equal(index.scores(q), ref), q
        assert [p for p, _ in index.search([q], 10)[0]] == [ps[i].pid for i in np.argsort(-ref, kind="stable")[:10]]


def test_bm25s_agrees_with_rank_bm25_where_no_term_is_in_half_the_passages():
    pytest.importorskip("bm25s")
    ps = musique_like_passages()
    ref, fast = BM25Index(ps), BM25Index(ps, backend="bm25s")
    n = len(ps)
    df = {}
    for p in ps:
        for t in set(tokenize(p.content)):
            df[t] = df.get(t, 0) + 1
    rare = [t for t, f in df.items() if f < n / 2]
    rng = np.random.default_rng(2)
    for _ in range(20):
        q = " ".join(rng.choice(rare, 6))
        np.testing.assert_allclose(fast.scores(q), ref.scores(q), rtol=2e-6, atol=1e-6)
    # a word in most passages: rank_bm25 floors its negative idf at 0.25 x mean idf, bm25s clips it to 0
    common = ref.scores("the") - fast.scores("the")
    assert common.max() > 0 and np.allclose(fast.scores("the"), 0.0)
    assert fast.scores("zzz unknown").tolist() == [0.0] * n
    with pytest.raises(ValueError, match="backend"):
        BM25Index(ps, backend="nope")


def test_tokenize():
    assert tokenize("Hewlett-Packard's PC, 1994!") == ["hewlett", "packard", "s", "pc", "1994"]


@pytest.mark.slow
def test_real_minilm_loads_offline_and_embeds(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # as a user's shell has it: the suite sets it itself
    enc = Encoder("all-MiniLM-L6-v2")
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set for the packaged model: the hub is never asked
    emb = enc.encode(["Paris is the capital of France.", "What is the capital of France?",
                      "Dell was founded by Michael Dell in 1984."])
    assert emb.shape == (3, 384) and emb.dtype == np.float32 and enc.dim == 384
    assert np.linalg.norm(emb, axis=1) == pytest.approx(np.ones(3), abs=1e-5)
    assert emb[1] @ emb[0] > emb[1] @ emb[2] + 0.2
    assert Encoder("all-MiniLM-L6-v2")._model is enc._model  # loaded once per process
    assert enc.encode([]).shape == (0, 384)
    index = DenseIndex(PASSAGES, enc, progress=False)
    assert index.search(["Who bought IBM's PC business?"], 1)[0][0][0] in {PASSAGES[2].pid, PASSAGES[3].pid}


def test_a_damaged_embeddings_cache_is_caught_by_its_checksum_and_recomputed(tmp_path):
    """64 garbled bytes in the data of a ``.npy`` load fine and keep the shape; the stored checksum catches them."""
    a = DenseIndex(PASSAGES, CountingEncoder(), cache_dir=tmp_path, progress=False)
    assert a.cache_path.with_name(a.cache_path.name + ".sha256").exists()
    data = bytearray(a.cache_path.read_bytes())
    data[200:264] = bytes(range(64))  # past the .npy header: still a loadable array of the same shape
    a.cache_path.write_bytes(bytes(data))
    assert np.load(a.cache_path).shape == a.embeddings.shape
    enc = CountingEncoder()
    with pytest.warns(UserWarning, match="does not match its checksum"):
        b = DenseIndex(PASSAGES, enc, cache_dir=tmp_path, progress=False)
    assert len(enc.encoded) == 6 and np.array_equal(a.embeddings, b.embeddings)
    again = CountingEncoder()
    DenseIndex(PASSAGES, again, cache_dir=tmp_path, progress=False)  # the rewritten cache is trusted again
    assert again.encoded == []


def test_an_embeddings_cache_without_a_checksum_is_recomputed(tmp_path):
    a = DenseIndex(PASSAGES, CountingEncoder(), cache_dir=tmp_path, progress=False)
    a.cache_path.with_name(a.cache_path.name + ".sha256").unlink()  # a cache written before checksums
    enc = CountingEncoder()
    with pytest.warns(UserWarning, match="has no stored checksum"):
        DenseIndex(PASSAGES, enc, cache_dir=tmp_path, progress=False)
    assert len(enc.encoded) == 6


def test_hipporag2_phrase_embeddings_share_the_checked_cache(tmp_path):
    from types import SimpleNamespace

    from kgir_lib.baselines.hipporag2 import cached_encode

    enc = CountingEncoder()
    dense = SimpleNamespace(encoder=enc, embeddings=np.zeros((1, enc.dim)))
    ws = SimpleNamespace(dense=dense, cfg=SimpleNamespace(run_dir=tmp_path))
    first = cached_encode(ws, ["alpha", "beta"], "phrases")
    (path,) = (tmp_path / "cache" / "embeddings").glob("*.npy")
    data = bytearray(path.read_bytes())
    data[-8:] = b"\xff" * 8
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="does not match its checksum"):
        assert np.array_equal(cached_encode(ws, ["alpha", "beta"], "phrases"), first)
    assert enc.encoded.count("alpha") == 2
