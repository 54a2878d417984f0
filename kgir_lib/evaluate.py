"""Running the compared methods, scoring them, and the paper-shaped tables (notebook 05).

- :func:`run_method`: one method on one dataset's questions, traces written to
  ``traces/<method key>/<dataset>.trace.jsonl`` (+ ``.meta.json``), resumable.
- :func:`score`: per-question EM, F1, Recall@2/5 and LLM usage (all ×100 where a
  metric, METHOD.md §6).
- :func:`run_suite`: every method on every dataset with one LLM, one index and one
  cache per dataset, on one fixed question sample.
- :func:`summary_table`, :func:`with_published`: KGIR-RAG Tables 4/5 (EM/F1) and 6
  (Recall@2/5) with published numbers (:mod:`kgir_lib.report`) in separate,
  labelled column groups.
- :func:`cost_table`, :func:`indexing_cost`: LLM calls, tokens and seconds per
  question; the LLM cost of building each graph.
- :func:`paired_bootstrap`, :func:`bootstrap_table`: confidence intervals for the
  difference between KGIR-RAG and each baseline.

**LLM seconds.** A cache hit costs nothing now, but the method did cost that
time when the call was first computed (possibly by an earlier notebook). So that
the cost table does not depend on which notebook ran first, :func:`run_method`
counts a cache hit with the backend time stored with it in the cache
(:class:`StoredTimeLLM`); the run's own wall time is reported beside it.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from .data import Question, sample_questions
from .llm import LLM, cache_key
from .methods.base import MethodOutput, QuestionUsage, Workspace, read_traces, trace_filename, write_traces
from .metrics import best_em, best_f1, recall_at_k
from .prompts import PROMPT_DIR
from . import traces

METRICS = ("EM", "F1", "R@2", "R@5")
USAGE = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "seconds")
# Config fields that cannot change a method's outputs (not part of the resume fingerprint).
_NEUTRAL_FIELDS = {"description", "datasets", "n_questions", "data_dir", "results_dir", "figures_dir",
                   "llm_max_concurrency", "llm_timeout_s", "llm_max_retries", "llm_retry_window_s", "embed_batch_size",
                   "llm_api_key_env", "llm_base_urls", "extract_datasets"}
_NEUTRAL_PREFIXES = ("ablation_", "study_", "robustness_")  # notebook 06's study fields


# ----------------------------------------------------------------------------- running
class StoredTimeLLM(LLM):
    """The same LLM (shared cache, backend and usage) whose cache hits report their stored backend seconds."""

    def __init__(self, inner: LLM):  # super().__init__ is not called: this object is a view on ``inner``
        self.__dict__ = inner.__dict__

    def generate(self, requests, stage: str = "default", desc: Optional[str] = None) -> list:
        results = LLM.generate(self, requests, stage=stage, desc=desc)
        if self.cache is not None:
            for req, res in zip(requests, results):
                if res.cached:
                    hit = self.cache.get(cache_key(self.model_id, req.payload()))
                    res.seconds = float(hit.get("seconds") or 0.0) if hit else 0.0
        return results


def method_key(method: Any) -> str:
    """The method's registry key (its trace folder), else its name made file-safe."""
    key = getattr(method, "key", None)
    return key or re.sub(r"[^A-Za-z0-9_.-]+", "_", str(getattr(method, "name", type(method).__name__))).strip("_")


def trace_path(cfg, method: Any, dataset: str) -> Path:
    return cfg.path("traces", method_key(method), trace_filename(dataset))


def _prompts_digest() -> str:
    h = hashlib.sha1()
    for p in sorted(PROMPT_DIR.glob("*.txt")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def _method_params(method: Any) -> dict:
    if hasattr(method, "params") and callable(method.params):
        return method.params()
    return {k: v for k, v in vars(method).items()
            if not k.startswith("_") and isinstance(v, (str, int, float, bool, type(None)))}


def run_fingerprint(ws: Workspace, method: Any) -> str:
    """What a trace file must match to be reused: config, method parameters, prompts, LLM and,
    for methods that read the KG, the KG's size and processed passages at the start of the run."""
    cfg = {k: v for k, v in ws.cfg.to_dict().items()
           if k not in _NEUTRAL_FIELDS and not k.startswith(_NEUTRAL_PREFIXES)}
    parts = {"cfg": cfg, "method": type(method).__name__, "params": _method_params(method),
             "prompts": _prompts_digest(), "llm": ws.llm.model_id, "dataset": ws.dataset.name,
             "corpus": len(ws.dataset.corpus)}
    if getattr(method, "uses_kg", True):
        parts["kg"] = [len(ws.kg), hashlib.sha1("\n".join(sorted(ws.kg.extracted)).encode()).hexdigest()[:12]]
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_outputs(path: Path) -> list:
    """:class:`MethodOutput` objects back from a trace file."""
    out = []
    for rec in read_traces(Path(path)):
        usage = QuestionUsage(**{k: rec.get("usage", {}).get(k, 0) for k in USAGE})
        out.append(MethodOutput(str(rec["qid"]), rec.get("answer", ""), list(rec.get("ranked_pids", [])),
                                usage, rec.get("trace", {})))
    return out


def read_meta(path: Path) -> Optional[dict]:
    """The ``.meta.json`` of trace file ``path`` (:func:`kgir_lib.traces.read_meta`); ``None`` if missing."""
    return traces.read_meta(path)


def run_method(ws: Any, method: Any, questions: Sequence[Question], resume: bool = True,
               path: Optional[Path] = None) -> list:
    """Run ``method`` on ``questions`` of ``ws.dataset``; write and return the per-question outputs.

    Traces go to ``path`` (default ``traces/<method key>/<dataset>.trace.jsonl``), run facts
    (question ids, fingerprint, wall seconds, LLM usage by stage) to the ``.meta.json``
    beside it. **Resume**: with ``resume=True``, a trace file whose meta lists exactly
    these question ids in this order and the same :func:`run_fingerprint` is read back
    instead of running again (code changes are not in the fingerprint: delete
    ``traces/`` or pass ``resume=False`` after changing a method). The LLM cache makes a
    rerun cheap anyway; resuming also keeps the first run's wall time.

    ``run_method(method, ws, questions)`` (arguments swapped) is accepted too.
    """
    if isinstance(method, Workspace) and not isinstance(ws, Workspace):
        ws, method = method, ws
    if not isinstance(ws, Workspace):
        raise TypeError(f"run_method: expected a Workspace, got {type(ws).__name__}")
    questions = list(questions)
    path = Path(path) if path is not None else trace_path(ws.cfg, method, ws.dataset.name)
    qids = [q.qid for q in questions]
    fp = run_fingerprint(ws, method)
    meta = read_meta(path)
    if resume and meta and path.exists() and meta.get("qids") == qids and meta.get("fingerprint") == fp:
        outputs = load_outputs(path)
        if [o.qid for o in outputs] == qids:
            return outputs
    timed_ws = replace(ws, llm=StoredTimeLLM(ws.llm))
    snap = ws.llm.usage.snapshot()
    t0 = time.perf_counter()
    outputs = list(method.run(timed_ws, questions))
    wall = time.perf_counter() - t0
    if [o.qid for o in outputs] != qids:
        raise ValueError(f"method {getattr(method, 'name', method)!r} returned outputs for "
                         f"{[o.qid for o in outputs]} instead of the questions {qids}")
    for o in outputs:
        o.trace.setdefault("method", getattr(method, "name", method_key(method)))
    write_traces(outputs, path)
    stages = {k: v for k, v in ws.llm.usage.since(snap).snapshot().items() if v.get("calls")}
    meta = {"method": getattr(method, "name", None), "key": method_key(method), "dataset": ws.dataset.name,
            "qids": qids, "fingerprint": fp, "wall_seconds": wall, "llm_model": ws.llm.model_id,
            "stages": stages, "params": _method_params(method), "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
            "run_id": uuid.uuid4().hex}
    traces.write_meta(path, meta)  # atomic, after the traces (write_traces removed the stale one)
    return outputs


# ----------------------------------------------------------------------------- scoring
def score(outputs: Sequence[MethodOutput], questions: Sequence[Question]) -> pd.DataFrame:
    """One row a question: EM, F1 (×100, SQuAD normalisation, max over aliases), R@2, R@5 (×100) and usage.

    Recall is NaN for a method without retrieval (trace ``no_retrieval``) and for a
    question without gold passages. Rows follow ``outputs``; every output's question
    must be in ``questions``. ``score(questions, outputs)`` is accepted too.
    """
    outputs, questions = list(outputs), list(questions)
    if outputs and isinstance(outputs[0], Question) or questions and isinstance(questions[0], MethodOutput):
        outputs, questions = questions, outputs
    by_qid = {q.qid: q for q in questions}
    rows = []
    for o in outputs:
        if o.qid not in by_qid:
            raise KeyError(f"score: output for question {o.qid!r} is not among the questions")
        q = by_qid[o.qid]
        row = {"qid": q.qid, "answer": o.answer, "gold": q.answers[0] if q.answers else "",
               "EM": 100.0 * best_em(o.answer, q.answers), "F1": 100.0 * best_f1(o.answer, q.answers)}
        no_retrieval = bool((o.trace or {}).get("no_retrieval"))
        for k in (2, 5):
            # no gold passages: recall_at_k is NaN (metrics module docstring: one rule with summarise)
            row[f"R@{k}"] = np.nan if no_retrieval else 100.0 * recall_at_k(o.ranked_pids, q.gold_pids, k)
        u = o.usage if isinstance(o.usage, QuestionUsage) else QuestionUsage(**o.usage)
        row.update({k: getattr(u, k) for k in USAGE})
        rows.append(row)
    cols = ["qid", "answer", "gold", *METRICS, *USAGE]
    return pd.DataFrame(rows, columns=cols)


def mean_scores(df: pd.DataFrame) -> dict:
    """Means of the metric and usage columns of a :func:`score` frame (NaN-skipping), plus ``n``."""
    out = {"n": int(len(df))}
    for c in (*METRICS, *USAGE):
        if c in df:
            out[c] = float(df[c].mean()) if len(df) else float("nan")
    return out


# ----------------------------------------------------------------------------- the suite
@dataclass
class SuiteResult:
    scores: pd.DataFrame            # one row a (dataset, method, question)
    runs: pd.DataFrame              # one row a (dataset, method): wall time, resumed, LLM usage
    indexing: pd.DataFrame          # one row a dataset: the graph and its extraction cost
    skipped: dict = field(default_factory=dict)  # method key -> reason it could not be built


def run_suite(cfg, llm: LLM, datasets: Sequence[str], method_keys: Sequence[str],
              n_questions: Optional[int] = None, seed: Optional[int] = None, resume: bool = True,
              method_kwargs: Optional[Mapping[str, dict]] = None, workspace_fn: Optional[Callable] = None,
              progress: bool = True) -> SuiteResult:
    """Every method on every dataset: ONE ``llm`` (one cache), one workspace (index, KG) per dataset,
    the same question sample (:func:`kgir_lib.data.sample_questions` with ``n_questions``, ``seed``) for all.

    A method that cannot be built (e.g. KGIR-RAG's module missing) is reported in
    ``skipped`` with the reason, never dropped silently.
    """
    from .progress import progress as tqdm

    from .methods import LABELS, build_method

    if workspace_fn is None:
        from .pipeline import workspace as workspace_fn
    n = cfg.n_questions if n_questions is None else n_questions
    seed = cfg.seed if seed is None else seed
    kw = dict(method_kwargs or {})
    score_frames, runs, indexing, skipped = [], [], [], {}
    bar = tqdm(total=len(datasets) * len(method_keys), desc="methods × datasets", disable=not progress)
    for name in datasets:
        ws = workspace_fn(cfg, name, llm)
        questions = sample_questions(ws.dataset.questions, n, seed)
        snap = llm.usage.snapshot()
        for key in method_keys:
            bar.set_postfix_str(f"{name}: {key}")
            try:
                method = build_method(key, **kw.get(key, {}))
            except (ImportError, AttributeError) as exc:
                skipped[key] = f"{type(exc).__name__}: {exc}"
                bar.update(1)
                continue
            label = getattr(method, "name", None) or LABELS.get(key, key)
            path = trace_path(cfg, method, name)
            before = read_meta(path)
            t0 = time.perf_counter()
            outputs = run_method(ws, method, questions, resume=resume)
            elapsed = time.perf_counter() - t0
            meta = read_meta(path) or {}
            resumed = bool(before) and before.get("run_id") == meta.get("run_id")
            df = score(outputs, questions)
            df.insert(0, "method", label)
            df.insert(0, "key", key)
            df.insert(0, "dataset", name)
            score_frames.append(df)
            runs.append({"dataset": name, "key": key, "method": label, "n": len(questions),
                         "wall_seconds": float(meta.get("wall_seconds", elapsed)), "resumed": resumed,
                         **{f"llm_{k}": float(df[k].sum()) for k in USAGE}})
            bar.update(1)
        indexing.append(indexing_cost(ws, extract_usage=llm.usage.since(snap)))
    bar.close()
    scores = pd.concat(score_frames, ignore_index=True) if score_frames else pd.DataFrame()
    return SuiteResult(scores, pd.DataFrame(runs), pd.DataFrame(indexing).set_index("dataset")
                       if indexing else pd.DataFrame(), skipped)


# ----------------------------------------------------------------------------- indexing cost
def indexing_cost(ws: Workspace, extract_usage=None, stage_prefix: str = "extract") -> dict:
    """The graph of ``ws`` and what building it cost.

    ``source``: ``openie`` (published OpenIE imported, e.g. musique_train: GPT-3.5,
    cost not measured here) or ``llm``. For an LLM graph the cost is read back from
    the LLM cache: every processed passage's extraction request
    (:func:`kgir_lib.kg.extract.extraction_requests`) is looked up and its stored
    tokens and backend seconds summed, whichever notebook extracted it.
    ``extract_usage`` (a :class:`kgir_lib.llm.Usage`) adds how many extraction calls
    were made while this notebook ran (on demand).
    """
    from .pipeline import openie_file

    kg = ws.kg
    st = kg.stats()
    row: dict = {"dataset": ws.dataset.name, "passages_in_corpus": len(ws.dataset.corpus),
                 "passages_extracted": st["passages"], "entities": st["entities"], "relations": st["relations"],
                 "triples": st["triples"]}
    imported = openie_file(ws.cfg, ws.dataset.name) is not None
    row["source"] = "openie (published GPT-3.5 OpenIE, imported)" if imported else f"llm ({ws.llm.model_id})"
    row.update({"extract_calls_found": 0, "extract_prompt_tokens": 0, "extract_completion_tokens": 0,
                "extract_seconds": 0.0})
    if not imported and ws.llm.cache is not None and st["passages"]:
        from .kg.extract import extraction_requests

        pids = sorted(kg.extracted)
        reqs = extraction_requests([ws.dataset.corpus[p] for p in pids if p in ws.dataset.corpus])
        for req in reqs:
            hit = ws.llm.cache.get(cache_key(ws.llm.model_id, req.payload()))
            if hit:
                row["extract_calls_found"] += 1
                row["extract_prompt_tokens"] += int(hit["prompt_tokens"])
                row["extract_completion_tokens"] += int(hit["completion_tokens"])
                row["extract_seconds"] += float(hit.get("seconds") or 0.0)
    if extract_usage is not None:
        calls = sum(s.calls - s.cache_hits for name, s in extract_usage.stages.items() if name.startswith(stage_prefix))
        row["extract_calls_in_this_run"] = int(calls)
    return row


# ----------------------------------------------------------------------------- tables
def ours_label(cfg, n: int) -> str:
    """The column-group label of our numbers, e.g. ``ours (SmolLM2-135M-Instruct-Q4_1, n=8)``."""
    return f"ours ({cfg.llm_model}, n={n})"


def summary_table(scores: pd.DataFrame, metrics: Sequence[str] = ("EM", "F1"), label: str = "ours",
                  datasets: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """Mean metrics per method (rows, in first-seen order) and dataset: columns ``(label, dataset, metric)``."""
    if scores.empty:
        return pd.DataFrame()
    datasets = list(datasets) if datasets is not None else list(dict.fromkeys(scores["dataset"]))
    methods = list(dict.fromkeys(scores["method"]))
    mean = scores.groupby(["method", "dataset"], sort=False)[list(metrics)].mean()
    cols = pd.MultiIndex.from_tuples([(label, d, m) for d in datasets for m in metrics],
                                     names=["source", "dataset", "metric"])
    out = pd.DataFrame(index=pd.Index(methods, name="method"), columns=cols, dtype=float)
    for (method, d), row in mean.iterrows():
        if d in datasets:
            for m in metrics:
                out.loc[method, (label, d, m)] = row[m]
    return out


def _published_frame(source: str, numbers: Mapping[str, Mapping[str, tuple]], metrics: Sequence[str],
                     rename: Mapping[str, str], datasets: Sequence[str], scale: float = 1.0) -> pd.DataFrame:
    rows = {}
    for method, by_ds in numbers.items():
        row = {}
        for d in datasets:
            if d in by_ds:
                vals = by_ds[d] if isinstance(by_ds[d], (tuple, list)) else (by_ds[d],)
                for m, v in zip(metrics, vals):
                    if v is not None:
                        row[(source, d, m)] = float(v) * scale
        if row:
            rows[rename.get(method, method)] = row
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns, names=["source", "dataset", "metric"])
    df.index.name = "method"
    return df


# Published rows that are the same method as one of ours (by our display name); other rows keep their names.
PUBLISHED_SAME_METHOD = {"no retrieval": "Naive Gen", "BM25": "BM25", "HippoRAG 2": "HippoRAG 2",
                         "KG²RAG": "KG²RAG", "semantic RAG": "Naive RAG"}


def published_qa(datasets: Sequence[str]) -> list:
    """The published EM/F1 column groups of METHOD.md §7 (one frame per source)."""
    from . import report

    kg2rag = {m: {"hotpotqa": (None, 100 * v)} for m, v in report.KG2RAG_F1.items()}
    return [
        _published_frame(f"published: {report.SOURCES['hipporag2']}", report.HIPPORAG2_QA, ("EM", "F1"),
                         PUBLISHED_SAME_METHOD, datasets),
        _published_frame(f"published: {report.SOURCES['kag']}", {"KAG": report.KAG_QA}, ("EM", "F1"), {}, datasets),
        _published_frame("published: KG²RAG paper (LLaMA3-8B, HotpotQA distractor setting, response F1)", kg2rag,
                         ("EM", "F1"), PUBLISHED_SAME_METHOD, datasets),
    ]


def published_recall(datasets: Sequence[str]) -> list:
    """The published Recall@2/@5 column groups of METHOD.md §7, the derived KGIR-RAG numbers labelled so."""
    from . import report

    return [
        _published_frame(f"published: {report.SOURCES['hipporag2']}", report.HIPPORAG2_RECALL, ("R@2", "R@5"),
                         PUBLISHED_SAME_METHOD, datasets),
        _published_frame(f"published: {report.SOURCES['kag']}", {"KAG": report.KAG_RECALL}, ("R@2", "R@5"), {},
                         datasets),
        _published_frame(report.SOURCES["kgir_derived"], {"KGIR-RAG": report.KGIR_RECALL_DERIVED},
                         ("R@2", "R@5"), {}, datasets),
    ]


def with_published(ours: pd.DataFrame, published: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Our column group, then each published group beside it (outer join on the method rows).

    Rows: our methods in their order, then published-only methods (e.g. GraphRAG,
    KAG). A published number sits only in its own labelled column group, never in ours.
    """
    out = ours.copy()
    for pub in published:
        if pub is None or pub.empty:
            continue
        out = out.join(pub, how="outer", sort=False)
    order = list(ours.index) + [m for m in out.index if m not in set(ours.index)]
    return out.loc[order]


def flat_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Column tuples joined with " / " (for Markdown/CSV readers that dislike MultiIndex; no "|": Markdown)."""
    out = df.copy()
    if isinstance(out.columns, pd.MultiIndex):
        out.columns = [" / ".join(str(x) for x in c) for c in out.columns]
    return out


def cost_table(scores: pd.DataFrame, runs: Optional[pd.DataFrame] = None, by_dataset: bool = False) -> pd.DataFrame:
    """Per method (and dataset): LLM calls, prompt / completion tokens, LLM seconds and wall seconds per question.

    LLM seconds: backend time of the method's calls when first computed (cache hits
    count their stored time, :class:`StoredTimeLLM`); wall seconds: this run's total
    time divided by its questions (embedding, graph work and cache look-ups included).
    """
    keys = ["method", "dataset"] if by_dataset else ["method"]
    g = scores.groupby(keys, sort=False)
    out = pd.DataFrame({
        "questions": g.size(),
        "LLM calls / q": g["calls"].mean(),
        "prompt tokens / q": g["prompt_tokens"].mean(),
        "completion tokens / q": g["completion_tokens"].mean(),
        "tokens / q": g["prompt_tokens"].mean() + g["completion_tokens"].mean(),
        "LLM seconds / q": g["seconds"].mean(),
        "cache hits / q": g["cache_hits"].mean(),
        "F1": g["F1"].mean(),
    })
    if runs is not None and not runs.empty:
        r = runs.groupby(keys, sort=False)[["wall_seconds", "n"]].sum()
        out["wall seconds / q (this run)"] = r["wall_seconds"] / r["n"].where(r["n"] > 0)
    return out


# ----------------------------------------------------------------------------- bootstrap
def paired_bootstrap(a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0,
                     alpha: float = 0.05) -> tuple:
    """Paired bootstrap CI of mean(a - b) over questions: ``(mean_diff, lo, hi)``.

    ``a[i]`` and ``b[i]`` are two methods' scores on the same question i. Resample the
    question indices with replacement ``n_boot`` times (``numpy.random.default_rng(seed)``),
    take the mean difference of each resample; the interval is the (α/2, 1-α/2)
    percentiles of those means (numpy's linear interpolation); ``mean_diff`` is the
    observed mean difference.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired_bootstrap: a and b must be 1-D and of equal length, got {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("paired_bootstrap: no paired values")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("paired_bootstrap: NaN scores (a metric not defined for some question)")
    if n_boot < 1 or not 0 < alpha < 1:
        raise ValueError(f"paired_bootstrap: need n_boot >= 1 and 0 < alpha < 1, got {n_boot}, {alpha}")
    d = a - b
    idx = np.random.default_rng(seed).integers(0, d.size, size=(n_boot, d.size))
    means = d[idx].mean(axis=1)
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(d.mean()), float(lo), float(hi)


def bootstrap_table(scores: pd.DataFrame, reference: str = "KGIR-RAG", metrics: Sequence[str] = ("EM", "F1"),
                    n_boot: int = 2000, seed: int = 0, pooled: bool = True) -> pd.DataFrame:
    """``reference`` minus every other method, per dataset (and pooled over datasets), paired by question.

    Columns: ``n``, ``mean diff``, ``CI lo``, ``CI hi`` (95 %), and ``supported``:
    ``reference better`` / ``baseline better`` when the CI excludes 0, else ``no``.
    Pooled rows (dataset ``all``) resample (dataset, question) pairs together.
    """
    if scores.empty or reference not in set(scores["method"]):
        return pd.DataFrame(columns=["dataset", "baseline", "metric", "n", "mean diff", "CI lo", "CI hi",
                                     "supported"])
    groups = [(d, scores[scores["dataset"] == d]) for d in dict.fromkeys(scores["dataset"])]
    if pooled and len(groups) > 1:
        groups.append(("all", scores))
    rows = []
    for d, df in groups:
        ref = df[df["method"] == reference].set_index(["dataset", "qid"])
        for other in dict.fromkeys(df["method"]):
            if other == reference:
                continue
            oth = df[df["method"] == other].set_index(["dataset", "qid"])
            common = ref.index.intersection(oth.index)
            if len(common) == 0:
                continue
            for m in metrics:
                diff, lo, hi = paired_bootstrap(ref.loc[common, m].to_numpy(), oth.loc[common, m].to_numpy(),
                                                n_boot=n_boot, seed=seed)
                verdict = "reference better" if lo > 0 else "baseline better" if hi < 0 else "no"
                rows.append({"dataset": d, "baseline": other, "metric": m, "n": len(common), "mean diff": diff,
                             "CI lo": lo, "CI hi": hi, "supported": verdict})
    return pd.DataFrame(rows)


def published_indexing() -> pd.DataFrame:
    """Indexing cost on MuSiQue as published in the HippoRAG 2 paper (millions of tokens), its own table."""
    from . import report

    label = f"published: {report.SOURCES['hipporag2']} (MuSiQue, 1000-question corpus)"
    df = pd.DataFrame({(label, "input tokens (M)"): {k: v[0] for k, v in report.INDEXING_TOKENS_M.items()},
                       (label, "output tokens (M)"): {k: v[1] for k, v in report.INDEXING_TOKENS_M.items()}})
    df.columns = pd.MultiIndex.from_tuples(df.columns, names=["source", "quantity"])
    df.index.name = "system"
    return df


# ----------------------------------------------------------------------------- figures
def plot_f1_vs_tokens(cost: pd.DataFrame, title: str = "", ax=None):
    """One point per method: mean F1 against LLM tokens (prompt + completion) per question (log x)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    x, y = cost["tokens / q"].astype(float), cost["F1"].astype(float)
    ax.scatter(x, y, color="tab:blue")
    groups: dict = {}  # methods at the same point share one number (e.g. Naive RAG = Dense)
    for name, xi, yi in zip(cost.index, x, y):
        groups.setdefault((round(xi, 1), round(yi, 2)), []).append(str(name))
    legend = []
    for i, ((xi, yi), names) in enumerate(groups.items(), start=1):
        ax.annotate(str(i), (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=8)
        legend.append(f"{i}  {' = '.join(names)}")
    ax.text(1.02, 1.0, "\n".join(legend), transform=ax.transAxes, va="top", fontsize=8, family="monospace")
    if len(x) and (x > 0).all():
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("LLM tokens per question (prompt + completion)")
    ax.set_ylabel("F1 (×100)")
    ax.set_title(title or "F1 against LLM tokens per question")
    ax.grid(alpha=0.3)
    return ax.figure


def plot_bootstrap(bt: pd.DataFrame, metric: str = "F1", dataset: str = "all", reference: str = "KGIR-RAG",
                   ax=None):
    """Forest plot: ``reference`` minus each baseline on ``metric`` with its 95 % bootstrap CI."""
    import matplotlib.pyplot as plt

    sub = bt[(bt["metric"] == metric) & (bt["dataset"] == dataset)]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * max(len(sub), 1) + 1.2))
    ys = np.arange(len(sub))[::-1]
    ax.errorbar(sub["mean diff"], ys, xerr=[sub["mean diff"] - sub["CI lo"], sub["CI hi"] - sub["mean diff"]],
                fmt="o", color="tab:blue", ecolor="gray", capsize=3)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels(sub["baseline"])
    ax.set_xlabel(f"{reference} − baseline, {metric} (×100), 95 % paired bootstrap CI")
    ax.set_title(f"{metric}: {reference} against each baseline ({dataset})")
    ax.grid(alpha=0.3, axis="x")
    return ax.figure
