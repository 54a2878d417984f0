"""Running the compared methods, scoring them, and the paper-shaped tables (notebook 05).

- :func:`run_method`: one method on one dataset's questions, traces written to
  ``traces/<method key>/<dataset>.trace.jsonl`` (+ ``.meta.json``), resumable.
- :func:`score`: per-question EM, F1, Recall@2/5 and LLM usage (all ×100 where a
  metric, paper §3.3.3).
- :func:`run_suite`: every method on every dataset with one LLM, one index and one
  cache per dataset, on one fixed question sample.
- :func:`summary_table`: our column group of KGIR-RAG Tables 4/5 (EM/F1) and 6
  (Recall@2/5); :func:`kgir_lib.report.with_published` puts the published numbers
  beside it in separate, labelled column groups; the figures are in :mod:`kgir_lib.notebook.viz`.
- :func:`cost_table`: LLM calls, tokens and seconds per question (the LLM cost of building each graph:
  :func:`kgir_lib.eval.cost.indexing_cost`; confidence intervals: :mod:`kgir_lib.eval.bootstrap`).

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from .. import traces
from ..data import Question, sample_questions
from ..llm import LLM, LLMUsage, cache_key
from ..llm.prompts import PROMPT_DIR
from ..llm.response_log import logged_seconds
from ..methods.base import MethodOutput, Workspace
from .cost import indexing_cost
from .metrics import best_em, best_f1, recall_at_k

METRICS = ("EM", "F1", "R@2", "R@5")
USAGE = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "seconds", "truncated")  # LLMUsage fields in score()
SEEDS = ("subgraph_rounds", "rounds_with_seed")  # KGIR-RAG evidence-subgraph rounds, and those with >= 1 seed (eq. 5)
# Config fields that cannot change a method's outputs (not part of the resume fingerprint). ``eval_methods``
# (``attribution_methods``) says which methods notebook 05 (04) runs; since every run starts from notebook 01's
# graph (Workspace.method_view), the others that ran cannot change a method's outputs either.
_NEUTRAL_FIELDS = {"description", "datasets", "n_questions", "data_dir", "results_dir", "figures_dir", "run_name",
                   "eval_methods", "attribution_methods", "decomposition_readers",
                   "llm_max_concurrency", "llm_timeout_s", "llm_max_retries", "llm_retry_window_s", "embed_batch_size",
                   "llm_api_key_env", "llm_base_urls", "extract_datasets", "allow_fewer_questions",
                   "llm_tensor_parallel_size", "kg_llm_base_urls"}
_NEUTRAL_PREFIXES = ("ablation_", "study_", "robustness_")  # notebook 06's study fields


# ----------------------------------------------------------------------------- running
class StoredTimeLLM:
    """A wrapper around an LLM whose cache hits report their stored backend seconds.

    Everything but :meth:`generate` is the wrapped LLM's (its cache, backend, usage, ``model_id``,
    ``progress``): calls go through ``inner.generate``, so they are counted in ``inner.usage``.
    """

    def __init__(self, inner: LLM):
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # only reached for attributes this wrapper does not define
        return getattr(self.inner, name)

    def generate(self, requests, stage: str = "default", desc: Optional[str] = None) -> list:
        results = self.inner.generate(requests, stage=stage, desc=desc)
        if self.cache is not None:
            for req, res in zip(requests, results):
                if res.cached:
                    hit = self.cache.get(cache_key(self.model_id, req.payload()))
                    res.seconds = logged_seconds(hit.get("seconds")) if hit else 0.0
        return results


def method_key(method: Any) -> str:
    """The method's registry key (its trace folder), else its name made file-safe."""
    key = getattr(method, "key", None)
    return key or re.sub(r"[^A-Za-z0-9_.-]+", "_", str(getattr(method, "name", type(method).__name__))).strip("_")


def method_label(method: Any, cfg) -> str:
    """A method's row label in a run with config ``cfg``: its ``label(cfg)`` (:meth:`MethodBase.label`, which names
    a setting that changes what the method is), else its ``name``, else its key."""
    if callable(getattr(method, "label", None)):
        return method.label(cfg)
    return getattr(method, "name", None) or method_key(method)


def trace_path(cfg, method: Any, dataset: str) -> Path:
    path = traces.trace_file(cfg.run_dir, method_key(method), dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


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
    return [MethodOutput.from_json(rec) for rec in traces.read_traces(Path(path))]


def read_meta(path: Path) -> Optional[dict]:
    """The ``.meta.json`` of trace file ``path`` (:func:`kgir_lib.traces.read_meta`); ``None`` if missing."""
    return traces.read_meta(path)


def run_method(ws: Any, method: Any, questions: Sequence[Question], resume: bool = True,
               path: Optional[Path] = None) -> list:
    """Run ``method`` on ``questions`` of ``ws.dataset``; write and return the per-question outputs.

    Traces go to ``path`` (default ``traces/<method key>/<dataset>.trace.jsonl``), run facts
    (question ids, fingerprint, wall seconds, LLM usage by stage, and whatever the method's optional
    ``run_meta()`` adds) to the ``.meta.json`` beside it. **Resume**: with ``resume=True``, a trace file whose meta lists exactly
    these question ids in this order and the same :func:`run_fingerprint` is read back
    instead of running again, and the passages that run extracted on demand (meta ``kg_on_demand``) are
    extracted into the shared graph again, from the cache, so later readers of the graph see what a run made
    here would have left, and the meta's row label is brought up to date (:func:`method_label`; it is not in
    the fingerprint) (code changes are not in the fingerprint: delete
    ``traces/`` or pass ``resume=False`` after changing a method). The LLM cache makes a
    rerun cheap anyway; resuming also keeps the first run's wall time.
    """
    if not isinstance(ws, Workspace):
        raise TypeError(f"run_method: expected a Workspace, got {type(ws).__name__}")
    questions = list(questions)
    path = Path(path) if path is not None else trace_path(ws.cfg, method, ws.dataset.name)
    qids = [q.qid for q in questions]
    ws = ws.method_view()
    fp = run_fingerprint(ws, method)
    meta = read_meta(path)
    if resume and meta and path.exists() and meta.get("qids") == qids and meta.get("fingerprint") == fp:
        outputs = load_outputs(path)
        if [o.qid for o in outputs] == qids:
            label = method_label(method, ws.cfg)
            if meta.get("method") != label:  # a label is display, not fingerprint: the reused run gets today's
                traces.write_meta(path, {**meta, "method": label})
            if meta.get("kg_on_demand") and ws.ensure_kg is not None:
                ws.ensure_kg(meta["kg_on_demand"])  # the shared graph as if the run had been made here
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
        o.trace.setdefault("method", method_label(method, ws.cfg))
    traces.write_traces(outputs, path)
    stages = {k: v for k, v in ws.llm.usage.since(snap).snapshot().items() if v.get("calls")}
    meta = {"method": method_label(method, ws.cfg), "key": method_key(method), "dataset": ws.dataset.name,
            "qids": qids, "fingerprint": fp, "wall_seconds": wall, "llm_model": ws.llm.model_id,
            "stages": stages, "params": _method_params(method), "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
            "run_id": uuid.uuid4().hex, "kg_on_demand": ws.on_demand(),
            **(method.run_meta() if callable(getattr(method, "run_meta", None)) else {})}
    traces.write_meta(path, meta)  # atomic, after the traces (write_traces removed the stale one)
    return outputs


# ----------------------------------------------------------------------------- scoring
def score(outputs: Sequence[MethodOutput], questions: Sequence[Question]) -> pd.DataFrame:
    """One row a question: EM, F1 (×100, SQuAD normalisation, max over aliases), R@2, R@5 (×100) and usage.

    Recall is NaN for a method without retrieval (trace ``no_retrieval``) and for a
    question without gold passages. Rows follow ``outputs``; every output's question
    must be in ``questions``.
    """
    outputs, questions = list(outputs), list(questions)
    if any(isinstance(o, Question) for o in outputs[:1]):
        raise TypeError("score(outputs, questions): the method outputs come first")
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
        u = o.usage if isinstance(o.usage, LLMUsage) else LLMUsage.from_dict(o.usage)
        row.update({k: getattr(u, k) for k in USAGE})
        row.update(_seed_rounds(o.trace or {}))
        rows.append(row)
    cols = ["qid", "answer", "gold", *METRICS, *USAGE, *SEEDS]
    return pd.DataFrame(rows, columns=cols)


def _seed_rounds(trace: dict) -> dict:
    """Subgraph rounds and rounds with a seed of a KGIR-RAG trace; NaN for other methods."""
    if "rounds" not in trace:
        return {k: np.nan for k in SEEDS}
    from ..kgir.rounds import trace_row

    row = trace_row(trace)
    return {k: row[k] for k in SEEDS}


def mean_scores(df: pd.DataFrame) -> dict:
    """Means of the metric and usage columns of a :func:`score` frame (NaN-skipping), plus ``n``."""
    out = {"n": int(len(df))}
    for c in (*METRICS, *USAGE):
        if c in df:
            out[c] = float(df[c].mean()) if len(df) else float("nan")
    return out


def answer_form(scores: pd.DataFrame) -> pd.DataFrame:
    """How each method's answers are written, per method and dataset: mean answer length in words and the
    answers with partial credit (F1 > 0 but EM = 0), beside EM and F1 (×100).

    EM and F1 (paper §3.3.2, SQuAD normalisation) part ways when an answer holds the gold answer and more
    words: such an answer costs EM, not F1. A method whose EM trails its F1 by more than the others' is
    writing longer answers, not retrieving worse. Rows in first-seen order of ``(method, dataset)``;
    ``scores`` as from :func:`run_suite` (columns ``method``, ``dataset``, ``answer``, ``EM``, ``F1``).
    """
    missing = {"method", "dataset", "answer", "EM", "F1"} - set(scores.columns)
    if missing:
        raise KeyError(f"answer_form: scores lack column(s) {sorted(missing)}")
    df = scores.assign(
        words=scores["answer"].fillna("").astype(str).str.split().str.len(),
        partial=((scores["F1"] > 0) & (scores["EM"] == 0)).astype(int))
    g = df.groupby(["method", "dataset"], sort=False)
    return pd.DataFrame({
        "questions": g.size(),
        "answer words (mean)": g["words"].mean(),
        "partial credit (F1 > 0, EM = 0)": g["partial"].sum(),
        "EM": g["EM"].mean(),
        "F1": g["F1"].mean(),
    })


# ----------------------------------------------------------------------------- the suite
@dataclass
class SuiteResult:
    scores: pd.DataFrame            # one row a (dataset, method, question)
    runs: pd.DataFrame              # one row a (dataset, method): wall time, resumed, LLM usage
    indexing: pd.DataFrame          # one row a dataset: the graph and its extraction cost


def run_suite(cfg, llm: LLM, datasets: Sequence[str], method_keys: Sequence[str],
              n_questions: Optional[int] = None, seed: Optional[int] = None, resume: bool = True,
              method_kwargs: Optional[Mapping[str, dict]] = None, workspace_fn: Optional[Callable] = None,
              progress: bool = True) -> SuiteResult:
    """Every method on every dataset: ONE ``llm`` (one cache), one workspace (index, KG) per dataset,
    the same question sample (:func:`kgir_lib.data.sample_questions` with ``n_questions``, ``seed``) for all.

    A method that cannot be built (unknown key, bad parameter) raises before anything runs: nothing is dropped
    silently.
    """
    from ..progress import progress as tqdm

    from ..registry import LABELS, build_method, check_method_keys

    check_method_keys(method_keys, "methods")
    if workspace_fn is None:
        from ..pipeline import workspace as workspace_fn
    n = cfg.n_questions if n_questions is None else n_questions
    seed = cfg.seed if seed is None else seed
    kw = dict(method_kwargs or {})
    score_frames, runs, indexing = [], [], []
    bar = tqdm(total=len(datasets) * len(method_keys), desc="methods × datasets", disable=not progress)
    for name in datasets:
        ws = workspace_fn(cfg, name, llm)
        questions = sample_questions(ws.dataset.questions, n, seed)
        snap = llm.usage.snapshot()
        for key in method_keys:
            bar.set_postfix_str(f"{name}: {key}")
            method = build_method(key, **kw.get(key, {}))
            label = method_label(method, ws.cfg) or LABELS.get(key, key)
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
                       if indexing else pd.DataFrame())


# ----------------------------------------------------------------------------- tables
def questions_per_dataset(scores: pd.DataFrame) -> str:
    """How many questions each dataset of ``scores`` holds, for labels: ``"10"`` when every dataset has the
    same number, else each dataset's, e.g. ``"musique_train 100, hotpotqa 84"`` (a sample capped by a
    dataset's size)."""
    n = scores.groupby("dataset", sort=False)["qid"].nunique()
    if n.empty:
        return "0"
    if n.nunique() == 1:
        return str(int(n.iloc[0]))
    return ", ".join(f"{d} {int(k)}" for d, k in n.items())


def ours_label(cfg, n) -> str:
    """The column-group label of our numbers, e.g. ``ours (Qwen2.5-Coder-0.5B-Instruct-Q4_K_M, n=10)``;
    ``n`` as from :func:`questions_per_dataset`."""
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


def cost_table(scores: pd.DataFrame, runs: Optional[pd.DataFrame] = None, by_dataset: bool = False) -> pd.DataFrame:
    """Per method (and dataset): LLM calls, prompt / completion tokens, LLM seconds and wall seconds per question,
    completions cut at their token budget (finish reason "length") per question and, for KGIR-RAG and its
    ablations, the seed-match rate: the share of evidence-subgraph rounds with at least one seed (eq. 5).

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
        "truncated / q": g["truncated"].mean() if "truncated" in scores else np.nan,
        "seed-match % of rounds": (100 * g["rounds_with_seed"].sum(min_count=1) / g["subgraph_rounds"].sum(min_count=1)
                                   if "subgraph_rounds" in scores else np.nan),
        "F1": g["F1"].mean(),
    })
    if runs is not None and not runs.empty:
        r = runs.groupby(keys, sort=False)[["wall_seconds", "n"]].sum()
        out["wall seconds / q (this run)"] = r["wall_seconds"] / r["n"].where(r["n"] > 0)
    return out
