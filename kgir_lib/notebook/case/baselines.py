"""What every other method answered for a case study's question (notebook 07, §8).

Answers already in the run's trace files (notebooks 04/05) are read from there (:func:`traced_answers`); a
method that did not answer the question runs now on it alone (through the LLM cache).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional, Sequence

import pandas as pd

from ...config import Config
from ...data import Question
from ...eval.metrics import best_em, best_f1, recall_at_k
from ...registry import DEFAULT_METHODS, build_method
from ...traces import read_traces, trace_dataset, trace_files
from .build import find_question
from .records import FREE_DATASET, KGIR_METHOD, CaseStudy


def baseline_answers(case: CaseStudy, methods: Optional[Iterable[str]] = None, run_missing: bool = True,
                     use_traces: bool = True, traced: Optional[dict] = None) -> pd.DataFrame:
    """What every other method answered for the case's question, scored like KGIR-RAG's answer.

    ``methods`` are registry keys for :func:`kgir_lib.registry.build_method` (default:
    notebook 05's methods, ``cfg.eval_methods`` or every method, except KGIR-RAG and the ablation variants). An
    answer already in the run's traces (notebooks 04/05)
    is read from there (``source = "trace"``); otherwise the method runs now on
    this one question (``source = "run"``; cached). KGIR-RAG's own row comes first. ``traced``: the question's
    traced answers when the caller has read them already (:func:`all_traced_answers`), else they are read here.
    """
    names = list(methods) if methods is not None else default_baselines(case.ws.cfg.eval_methods or DEFAULT_METHODS)
    if traced is None:
        use = use_traces and case.dataset != FREE_DATASET
        traced = traced_answers(case.ws.cfg, case.dataset, case.qid) if use else {}
    q = find_question(case.ws.dataset, case.qid)
    rows = [_answer_row(KGIR_METHOD, case.answer, case.output.ranked_pids, q, "this case")]
    for name in names:
        method = build_method(name)
        label = method.label(case.ws.cfg) if hasattr(method, "label") else getattr(method, "name", name)
        if label == KGIR_METHOD:
            continue
        hit = next((traced[k] for k in (label, getattr(method, "key", None), name) if k in traced), None)
        if hit is not None:
            answer, ranked_pids = hit
            rows.append(_answer_row(label, answer, ranked_pids, q, "trace"))
        elif run_missing:
            [out] = method.run(case.ws, [q])
            rows.append(_answer_row(label, out.answer, out.ranked_pids, q, "run"))
    return pd.DataFrame(rows).set_index("method")


def _method_of(record: dict, path: Path) -> str:
    trace = record.get("trace") or {}
    return str(trace.get("method") or path.parent.name)


def traced_answers(cfg: Config, dataset: str, qid: str) -> dict:
    """``{method: (answer, ranked_pids)}`` for question ``qid`` from the run's trace files."""
    return all_traced_answers(cfg, dataset).get(str(qid), {})


def all_traced_answers(cfg: Config, dataset: str) -> dict:
    """``{qid: {method: (answer, ranked_pids)}}`` for every question of ``dataset`` in the run's trace files (each
    file read once), as :func:`traced_answers` gives them one question at a time."""
    out: dict[str, dict] = {}
    for path in trace_files(cfg):
        if trace_dataset(path) != dataset:
            continue
        for rec in read_traces(path):
            found = (rec.get("answer", ""), rec.get("ranked_pids", []))
            mine = out.setdefault(str(rec.get("qid")), {})
            mine.setdefault(_method_of(rec, path), found)  # by the trace's method name ...
            mine.setdefault(path.parent.name, found)        # ... and by the folder (the method's key)
    return out


def default_baselines(keys: Iterable[str]) -> list:
    """The baselines of a method list: no KGIR-RAG key and no ablation variant (``*_no_*``)."""
    return [k for k in keys if not k.startswith("kgir") and "_no_" not in k]


def _answer_row(method: str, answer: str, ranked: Sequence[str], q: Question, source: str) -> dict:
    row = {"method": method, "answer": answer, "EM": 100 * best_em(answer, q.answers),
           "F1": 100 * best_f1(answer, q.answers)}
    if q.gold_pids:
        row.update({f"R@{k}": 100 * recall_at_k(ranked, q.gold_pids, k) for k in (2, 5)})
    row["source"] = source
    return row
