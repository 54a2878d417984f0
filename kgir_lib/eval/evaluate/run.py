"""Running a method on a dataset's questions, resumably (notebooks 04-06).

- :func:`run_method`: one method on one dataset's questions, traces written to
  ``traces/<method key>/<dataset>.trace.jsonl`` (+ ``.meta.json``), resumable (:func:`run_fingerprint`).

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
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence, cast

from ... import traces
from ...data import Question
from ...llm import LLM, LLMUsage, Usage, cache_key
from ...llm.prompts import PROMPT_DIR
from ...llm.response_log import logged_seconds
from ...methods.base import MethodBase, MethodOutput, Workspace

# Config fields that cannot change a method's outputs (not part of the resume fingerprint). ``eval_methods``
# (``attribution_methods``) says which methods notebook 05 (04) runs; since every run starts from notebook 01's
# graph (Workspace.method_view), the others that ran cannot change a method's outputs either.
_NEUTRAL_FIELDS = {"description", "datasets", "n_questions", "data_dir", "results_dir", "figures_dir", "run_name",
                   "eval_methods", "attribution_methods", "decomposition_readers", "decomposition_datasets",
                   "decomposition_orders",
                   "llm_max_concurrency", "llm_timeout_s", "llm_max_retries", "llm_retry_window_s", "embed_batch_size",
                   "llm_api_key_env", "llm_base_urls", "extract_datasets", "allow_fewer_questions",
                   "llm_tensor_parallel_size", "kg_llm_base_urls"}
_NEUTRAL_PREFIXES = ("ablation_", "study_", "robustness_")  # notebook 06's study fields


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


def method_key(method: MethodBase) -> str:
    """The method's registry key (its trace folder), else its name made file-safe."""
    return method.key or re.sub(r"[^A-Za-z0-9_.-]+", "_", method.name).strip("_")


def method_label(method: MethodBase, cfg) -> str:
    """A method's row label in a run with config ``cfg`` (:meth:`MethodBase.label`: its name, or what a setting
    makes of it)."""
    return method.label(cfg)


def trace_path(cfg, method: MethodBase, dataset: str) -> Path:
    path = traces.trace_file(cfg.run_dir, method_key(method), dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _prompts_digest() -> str:
    h = hashlib.sha1()
    for p in sorted(PROMPT_DIR.glob("*.txt")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def run_fingerprint(ws: Workspace, method: MethodBase) -> str:
    """What a trace file must match to be reused: config, method parameters, prompts, LLM and,
    for methods that read the KG, the KG's size and processed passages at the start of the run."""
    cfg = {k: v for k, v in ws.cfg.to_dict().items()
           if k not in _NEUTRAL_FIELDS and not k.startswith(_NEUTRAL_PREFIXES)}
    parts = {"cfg": cfg, "method": type(method).__name__, "params": method.params(),
             "prompts": _prompts_digest(), "llm": ws.llm.model_id, "dataset": ws.dataset.name,
             "corpus": len(ws.dataset.corpus)}
    if method.uses_kg:
        parts["kg"] = [len(ws.kg), hashlib.sha1("\n".join(sorted(ws.kg.extracted)).encode()).hexdigest()[:12]]
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_outputs(path: Path) -> list:
    """:class:`MethodOutput` objects back from a trace file."""
    return [MethodOutput.from_json(rec) for rec in traces.read_traces(Path(path))]


def read_meta(path: Path) -> Optional[dict]:
    """The ``.meta.json`` of trace file ``path`` (:func:`kgir_lib.traces.read_meta`); ``None`` if missing."""
    return traces.read_meta(path)


def runs_usage(paths: Sequence[Path], *more: Usage) -> Usage:
    """The LLM usage of the method runs whose trace files are ``paths`` (each ``.meta.json``'s ``stages``), plus
    the usages ``more`` (calls made outside a method run), summed stage by stage in the order first met.

    A meta records what its run cost when it was made, and :func:`run_method` keeps it when it reads the run back,
    so this is a notebook's usage whether this execution ran its methods or resumed them (counting the LLM's own
    usage would give the calls of a cold run on one execution and none on the next). A trace file listed twice counts
    once: a run read twice cost what it cost. A trace file without a meta is an error naming it."""
    out = Usage()
    for path in dict.fromkeys(Path(p) for p in paths):
        meta = read_meta(Path(path))
        if meta is None:
            raise FileNotFoundError(f"{path}: no .meta.json beside the trace file, so its run's LLM usage is unknown")
        _add(out, meta.get("stages", {}))
    for usage in more:
        _add(out, usage.snapshot())
    return out


def _add(out: Usage, stages: dict) -> None:
    for name, counts in stages.items():
        stage, extra = out.stage(name), LLMUsage(**counts)
        for key, value in vars(extra).items():
            setattr(stage, key, getattr(stage, key) + value)


def run_method(ws: Workspace, method: MethodBase, questions: Sequence[Question], *, resume: bool = True,
               path: Optional[Path] = None) -> list:
    """Run ``method`` on ``questions`` of ``ws.dataset``; write and return the per-question outputs.

    Traces go to ``path`` (default ``traces/<method key>/<dataset>.trace.jsonl``), run facts
    (question ids, fingerprint, wall seconds, LLM usage by stage, and whatever the method's optional
    :meth:`~kgir_lib.methods.base.MethodBase.run_meta` adds) to the ``.meta.json`` beside it. **Resume**: with
    ``resume=True``, a trace file whose meta lists exactly these question ids in this order and the same
    :func:`run_fingerprint` is read back
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
    timed_ws = replace(ws, llm=cast(LLM, StoredTimeLLM(ws.llm)))  # (an LLM: its own generate, the rest delegated)
    snap = ws.llm.usage.snapshot()
    t0 = time.perf_counter()
    outputs = list(method.run(timed_ws, questions))
    wall = time.perf_counter() - t0
    if [o.qid for o in outputs] != qids:
        raise ValueError(f"method {method.name!r} returned outputs for "
                         f"{[o.qid for o in outputs]} instead of the questions {qids}")
    for o in outputs:
        o.trace.setdefault("method", method_label(method, ws.cfg))
    traces.write_traces(outputs, path)
    stages = {k: v for k, v in ws.llm.usage.since(snap).snapshot().items() if v.get("calls")}
    meta = {"method": method_label(method, ws.cfg), "key": method_key(method), "dataset": ws.dataset.name,
            "qids": qids, "fingerprint": fp, "wall_seconds": wall, "llm_model": ws.llm.model_id,
            "stages": stages, "params": method.params(), "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
            "run_id": uuid.uuid4().hex, "kg_on_demand": ws.on_demand(),
            **method.run_meta()}
    traces.write_meta(path, meta)  # atomic, after the traces (write_traces removed the stale one)
    return outputs
