"""Every method on every dataset with one LLM, one index and one cache per dataset, on one fixed question
sample (notebook 05): :func:`run_suite`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

import pandas as pd

from ...data import sample_questions
from ...llm import LLM
from ..cost import indexing_cost
from .run import method_label, read_meta, run_method, trace_path
from .scoring import USAGE, reader_contexts, score


@dataclass
class SuiteResult:
    scores: pd.DataFrame            # one row a (dataset, method, question)
    runs: pd.DataFrame              # one row a (dataset, method): wall time, resumed, LLM usage
    indexing: pd.DataFrame          # one row a dataset: the graph and its extraction cost
    # one row a (dataset, method, question): the passages the shared reader read (scoring.reader_contexts), with
    # the question's EM and F1
    contexts: pd.DataFrame = field(default_factory=pd.DataFrame)


def run_suite(cfg, llm: LLM, datasets: Sequence[str], method_keys: Sequence[str], *,
              n_questions: Optional[int] = None, seed: Optional[int] = None, resume: bool = True,
              method_kwargs: Optional[Mapping[str, dict]] = None, workspace_fn: Optional[Callable] = None,
              progress: bool = True) -> SuiteResult:
    """Every method on every dataset: ONE ``llm`` (one cache), one workspace (index, KG) per dataset,
    the same question sample (:func:`kgir_lib.data.sample_questions` with ``n_questions``, ``seed``) for all.

    A method that cannot be built (unknown key, bad parameter) raises before anything runs: nothing is dropped
    silently.
    """
    from ...progress import progress as tqdm

    from ...registry import LABELS, build_method, check_method_keys

    check_method_keys(method_keys, "methods")
    if workspace_fn is None:
        from ...pipeline import workspace

        workspace_fn = workspace
    n = cfg.n_questions if n_questions is None else n_questions
    seed = cfg.seed if seed is None else seed
    kw = dict(method_kwargs or {})
    score_frames, context_frames, runs, indexing = [], [], [], []
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
            resumed = bool(before and before.get("run_id") == meta.get("run_id"))
            df = score(outputs, questions)
            df.insert(0, "method", label)
            df.insert(0, "key", key)
            df.insert(0, "dataset", name)
            score_frames.append(df)
            read = reader_contexts(outputs)
            context_frames.append(read.assign(dataset=name, method=label, EM=df["EM"].to_numpy(),
                                              F1=df["F1"].to_numpy()))
            runs.append({"dataset": name, "key": key, "method": label, "n": len(questions),
                         "wall_seconds": float(meta.get("wall_seconds", elapsed)), "resumed": resumed,
                         **{f"llm_{k}": float(df[k].sum()) for k in USAGE}})
            bar.update(1)
        indexing.append(indexing_cost(ws, extract_usage=llm.usage.since(snap)))
    bar.close()
    scores = pd.concat(score_frames, ignore_index=True) if score_frames else pd.DataFrame()
    contexts = pd.concat(context_frames, ignore_index=True) if context_frames else pd.DataFrame()
    return SuiteResult(scores, pd.DataFrame(runs), pd.DataFrame(indexing).set_index("dataset")
                       if indexing else pd.DataFrame(), contexts)
