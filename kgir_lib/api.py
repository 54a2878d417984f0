"""KGIR-RAG on your own passages: index a list of passages, answer questions, each answer with its
trace (the public API, ``from kgir_lib import KGIRPipeline``)::

    rag = KGIRPipeline("sample")                 # a profile: its LLM, encoder, settings and cache
    rag.index([(title, text), ...])              # dense index and knowledge graph (§2.1)
    for out in rag.answer(["a question?"]):      # Algorithm 2 (§2.2-2.4), one output a question
        print(out.answer, out.trace["rounds"])

:meth:`KGIRPipeline.index` builds a workspace over the passages (:func:`kgir_lib.pipeline.workspace`,
the graph in memory only) and extracts the triples of every passage with the profile's LLM, the
offline stage of §2.1 (:attr:`KGIRPipeline.index_report`: passages, triples, the extraction
prompts cut to fit the model and what the parser dropped); :meth:`KGIRPipeline.answer` runs KGIR-RAG
(``variant``: a row of :data:`kgir_lib.kgir.variants.VARIANTS`, default the paper's method; or
``steps``: a composition of your own, :class:`kgir_lib.kgir.loop.Steps`) and returns one
:class:`~kgir_lib.methods.base.MethodOutput` per question: the answer, the final ranked passages
and the trace of every round. Every LLM call goes through the pipeline's own cache, which starts from the
profile's committed response log (read, never written), so a question the suite has already
answered costs no model call.

The pipeline keeps its run folder (LLM cache, embeddings) in a cache folder of its own, outside the
repository: ``cache_dir``, else ``$KGIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/kgir/api``, else
``~/.cache/kgir/api`` (:func:`kgir_lib.config.fields.api_cache_dir`). What you index never reaches the
profile's run folder (``results/<profile>/``), whose cache the runner exports into the committed
response log; only ``use_profile_cache=True`` writes there.
"""
from __future__ import annotations

import warnings
from dataclasses import fields, replace
from pathlib import Path
from typing import Optional, Sequence, Union

from .config import NULL, Config, ConfigError, load_config
from .config.checks import check_value, validate
from .data import Corpus, Dataset, Passage, Question, load_example, passage_id
from .kg.store import total_drops
from .kgir.loop import Steps
from .kgir.variants import KEYS, STUDY_VARIANTS, KGIRRAG, OwnKGIRRAG, StudyKGIRRAG, compose
from .llm.router import RoutedLLM
from .methods.base import Workspace
from .traces import replace_surrogates

__all__ = ["KGIRPipeline", "load_example", "passages_of"]


def passages_of(items: Sequence, parameter: str = "passages") -> list:
    """``(title, text)`` pairs (or ``{"title", "text"}`` dicts, or :class:`~kgir_lib.data.Passage`
    objects) as passages, in order, a passage given twice kept once; a ``ValueError`` names
    ``parameter`` and the item that is unusable."""
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"parameter {parameter!r}: a list of (title, text) pairs, got "
                         f"{type(items).__name__}")
    if not items:
        raise ValueError(f"parameter {parameter!r}: give at least one (title, text) pair")
    out = []
    seen = set()
    for i, item in enumerate(items):
        if isinstance(item, Passage):
            item = (item.title, item.text)
        if isinstance(item, dict):
            item = (item.get("title"), item.get("text"))
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ValueError(f"parameter {parameter!r}: item {i} is not a (title, text) pair: "
                             f"{item!r}")
        title, text = item
        if not isinstance(title, str) or not isinstance(text, str) or not text.strip():
            raise ValueError(f"parameter {parameter!r}: item {i} needs a string title and a "
                             f"non-empty text")
        title, n_title = replace_surrogates(title)
        text, n_text = replace_surrogates(text)
        if n_title or n_text:  # they cannot be written as UTF-8: U+FFFD, as in the data files
            warnings.warn(f"parameter {parameter!r}: item {i} ({title[:40]!r}): {n_title + n_text} lone "
                          f"UTF-16 surrogate(s) replaced by U+FFFD", stacklevel=2)
        pid = passage_id(title, text)
        if pid not in seen:
            seen.add(pid)
            out.append(Passage(pid, title, text))
    return out


class KGIRPipeline:
    """KGIR-RAG over a corpus you give it (module docstring).

    ``profile``: a profile name or file, or a :class:`~kgir_lib.config.Config`; ``settings``:
    Config fields that override the profile's, checked as a profile's are whatever form the
    config comes in (:func:`settings_config`). What runs is ONE of ``variant``: a row of
    :data:`~kgir_lib.kgir.variants.VARIANTS` (default ``"full"``: the paper's method),
    ``method``: a KGIR-RAG method built with parameters of its own
    (:func:`kgir_lib.registry.build_method`, a registered composition included), or ``steps``: a
    composition of your own (:class:`~kgir_lib.kgir.loop.Steps`, e.g. the paper's with another
    retriever), run by the loop of Algorithm 2 with the method's settings. ``llm`` and
    ``encoder`` replace the profile's (default: :func:`kgir_lib.llm.build_llm` on the pipeline's run
    folder, its cache filled from the profile's committed response log, and the profile's dense encoder).
    ``cache_dir``: where the pipeline's run folder lives (default
    :func:`~kgir_lib.config.fields.api_cache_dir`, outside the repository); ``use_profile_cache=True``: the
    profile's own run folder instead (``results/<profile>/``: its LLM cache, which the runner exports into
    the committed response log).
    """

    def __init__(self, profile: Union[str, Config] = "sample", *, variant: Optional[str] = None,
                 method: Optional[KGIRRAG] = None, steps: Optional[Steps] = None, llm=None,
                 encoder=None, cache_dir: Union[str, Path, None] = None, use_profile_cache: bool = False,
                 **settings):
        self.cfg = settings_config(profile, settings)
        self._committed_log = None  # the profile's committed response log, read into the pipeline's own cache
        if not use_profile_cache:
            from .config.fields import api_cache_dir
            from .llm.cache import LOG_NAME

            self._committed_log = self.cfg.reference_dir / LOG_NAME
            self.cfg = replace(self.cfg, results_dir=str(api_cache_dir(cache_dir)))
        given = [name for name, value in (("variant", variant), ("method", method), ("steps", steps))
                 if value is not None]
        if len(given) > 1:
            raise ValueError(f"parameters {' and '.join(repr(g) for g in given)}: give one of "
                             f"'variant', 'method' and 'steps' (each says what runs)")
        variant = variant if variant is not None else "full"
        if variant not in KEYS:
            raise ValueError(f"parameter 'variant': unknown KGIR-RAG variant {variant!r} "
                             f"(choose from {sorted(KEYS)})")
        if method is not None and not isinstance(method, KGIRRAG):
            raise ValueError(f"parameter 'method': a KGIR-RAG method (kgir_lib.registry.build_method"
                             f"('kgir...')), got {type(method).__name__}")
        if steps is not None and not isinstance(steps, Steps):
            raise ValueError(f"parameter 'steps': a kgir_lib.kgir.loop.Steps, got "
                             f"{type(steps).__name__}")
        kind = StudyKGIRRAG if variant in STUDY_VARIANTS else KGIRRAG
        if steps is not None:
            method = OwnKGIRRAG(composition=compose(OWN_STEPS, "own_steps", steps,
                                                    "A composition of one's own steps."))
        self.method = method if method is not None else kind(variant=variant)
        self.steps = steps
        self._llm = llm
        self._encoder = encoder
        self.workspace: Optional[Workspace] = None
        self.index_report: dict = {}

    @property
    def llm(self):
        """The LLM every call goes through (built on first use, with the pipeline's cache)."""
        if self._llm is None:
            from .llm import LLMCache, build_llm
            from .llm.response_log import cache_path, import_log

            if self._committed_log is not None:  # read only: nothing of this pipeline is written there
                cache = LLMCache(cache_path(self.cfg))
                try:
                    import_log(cache, self._committed_log)
                finally:
                    cache.close()

            self._llm = build_llm(self.cfg, progress=False)
        return self._llm

    def index(self, passages: Sequence, name: str = "passages") -> "KGIRPipeline":
        """Index ``passages`` (``(title, text)`` pairs, :func:`passages_of`) as the dataset
        ``name``: the dense index over them (eq. 2) and the triples of every passage, extracted
        with the profile's LLM (§2.1). Returns the pipeline; :attr:`index_report` says what was
        indexed: ``passages``, ``triples``, ``prompts_cut``, the extraction prompts the embedded
        model cut in the middle to fit its context (``llm_n_ctx``; a warning says so), and ``drops``,
        what indexing dropped by reason (:func:`kgir_lib.kg.store.total_drops`: the parser's drops and
        the extraction replies cut at the token limit, ``reply_cut_at_token_limit``, whose triples
        after the cut are lost)."""
        from .pipeline import workspace

        dataset = Dataset(name, [], Corpus(passages_of(passages)))
        cut_before = _prompts_cut(self.llm)
        ws = workspace(self.cfg, dataset, llm=self.llm, progress=False, encoder=self._encoder,
                       store=False)
        ws.kg_for([p.pid for p in dataset.corpus.passages])  # extracts every passage's triples
        self.workspace = ws
        cut = _prompts_cut(self.llm) - cut_before
        self.index_report = {"passages": len(dataset.corpus), "triples": len(ws.kg),
                             "prompts_cut": cut, "drops": dict(total_drops(ws.kg))}
        if cut:
            warnings.warn(f"index: {cut} extraction prompt(s) cut in the middle to fit the model's "
                          f"context (llm_n_ctx {self.cfg.llm_n_ctx}): the triples of the cut part of "
                          f"a passage are missing; split long passages", stacklevel=2)
        return self

    def answer(self, questions: Sequence[Union[str, Question]]) -> list:
        """KGIR-RAG on ``questions`` (a list of strings, or of :class:`~kgir_lib.data.Question`
        objects when you know their gold answers and chain) over the indexed passages: one
        :class:`~kgir_lib.methods.base.MethodOutput` a question, in order (``answer``,
        ``ranked_pids``, ``usage``, ``trace``). The questions join the indexed dataset's."""
        if self.workspace is None:
            raise ValueError("KGIRPipeline.answer: index(passages) first")
        if isinstance(questions, (str, Question)) or not isinstance(questions, (list, tuple)):
            raise ValueError(f"parameter 'questions': a list of questions, got "
                             f"{type(questions).__name__} {questions!r:.60} (one question: "
                             f"answer([question]))")
        dataset = self.workspace.dataset
        qs = [self._question(q, len(dataset.questions) + i, dataset.name) for i, q in enumerate(questions)]
        dataset.questions.extend(qs)
        return self.method.run(self.workspace, qs)

    @staticmethod
    def _question(q: Union[str, Question], i: int, dataset: str) -> Question:
        if isinstance(q, Question):
            return q
        if not isinstance(q, str) or not q.strip():
            raise ValueError(f"parameter 'questions': item {i} is not a non-empty question: {q!r}")
        return Question(f"q{i + 1}", q.strip(), (), (), dataset)


OWN_STEPS = "KGIR-RAG (own steps)"  # the name of a composition handed to KGIRPipeline(steps=...)


def settings_config(profile: Union[str, Config], settings: dict) -> Config:
    """The config of ``profile`` (a profile name or file, or a :class:`~kgir_lib.config.Config`)
    with ``settings`` over it, every value checked as a profile's is (its type, range and
    choices: ``top_k=0`` or ``temperature=nan`` is refused naming the setting) and the whole
    validated, whatever form it came in. A setting given as ``None`` is an explicit null
    (``passage_chars=None``: the whole passage), refused naming the setting where the field may not be null."""
    if not isinstance(profile, Config):
        for key in settings:
            _setting_name(key)
        return load_config(profile, **{k: NULL if v is None else v for k, v in settings.items()})
    values = {}
    for key, value in settings.items():
        _setting_name(key)
        values[key] = check_value(key, value, f"setting {key!r}")
    cfg = replace(profile, **values) if values else profile
    validate(cfg)
    return cfg


def _setting_name(key: str) -> None:
    if key not in {f.name for f in fields(Config)} - {"profile"}:
        raise ConfigError(f"setting {key!r}: unknown (not a field of kgir_lib.config.Config; "
                          f"KGIRPipeline takes variant, method, steps, llm, encoder and settings)")


def _prompts_cut(llm) -> int:
    """How many prompts the backends of ``llm`` (both models of a routed LLM) have cut to fit their
    context so far (the embedded model's count; a backend that cuts none has none). Counted when
    the model answers: an answer read from the cache was counted when it was made."""
    llms = [llm.main, llm.other] if isinstance(llm, RoutedLLM) else [llm]
    return sum(int(getattr(getattr(x, "backend", None), "prompts_cut", 0)) for x in llms)
