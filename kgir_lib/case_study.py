"""A step-by-step case study of KGIR-RAG for one question (paper §3.5, Fig. 6; notebook 07).

One import for the notebook; each concern lives in its own module:

- :mod:`kgir_lib.case_records`: :class:`CaseRound`, :class:`CaseStudy` (every round's retrieved
  passages, ``G_q`` (eq. 3), NER and n-gram matches (eq. 4-5), ``G_tmp`` / ``G_Ans`` (eq. 5-7), the
  rewrite (eq. 8), the reflection with its reasoning (Fig. 5), the final answer scored);
- :mod:`kgir_lib.case_build`: trace -> case, :func:`case_from_dataset`, :func:`case_from_passages`,
  :data:`FIGURE6_EXAMPLE` (package data ``examples/figure6.json``);
- :mod:`kgir_lib.case_baselines`: :func:`baseline_answers`, what every other method answered;
- :mod:`kgir_lib.bridge_cases`: :func:`find_bridge_cases`, Fig. 6 candidates ranked, :func:`bridge_summary`;
- :mod:`kgir_lib.case_display`: ``show_*``, :func:`draw_case` (the Fig. 6 bridge drawing), :func:`display_case`;
- here: the run's traces for the case study (:func:`load_kgir_traces`, :func:`traced_answers`; file
  reading is :mod:`kgir_lib.traces`).

Everything goes through the workspace's LLM and its cache: a case already run
by notebook 04 costs no LLM call.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from .bridge_cases import bridge_entities, bridge_features, bridge_summary, find_bridge_cases, is_question_rewrite
from .case_baselines import baseline_answers, default_baselines
from .case_build import (FIGURE6_EXAMPLE, case_from_dataset, case_from_output, case_from_passages, find_question,
                         free_workspace, load_example, run_case)
from .case_display import (display_case, draw_case, repeated_rounds, show_ner, show_reflections, show_retrieval,
                           show_rewrites, show_subgraphs)
from .case_records import FREE_DATASET, FREE_QID, KGIR_METHOD, CaseRound, CaseStudy, CaseStudyError
from .config import Config
from .traces import read_traces, trace_dataset, trace_files

__all__ = ["CaseRound", "CaseStudy", "CaseStudyError", "KGIR_METHOD", "FREE_DATASET", "FREE_QID", "FIGURE6_EXAMPLE",
           "load_example", "case_from_output", "run_case", "find_question",
           "case_from_dataset", "free_workspace", "case_from_passages", "baseline_answers", "default_baselines",
           "is_question_rewrite", "bridge_entities", "bridge_features", "find_bridge_cases", "bridge_summary",
           "repeated_rounds",
           "show_retrieval", "show_ner", "draw_case", "show_subgraphs", "show_rewrites", "show_reflections",
           "display_case", "trace_files", "traced_answers", "trace_dataset", "load_kgir_traces"]


# ----------------------------------------------------------------------------- the run's trace files
def _method_of(record: dict, path: Path) -> str:
    trace = record.get("trace") or {}
    return str(trace.get("method") or path.parent.name)


def traced_answers(cfg: Config, dataset: str, qid: str) -> dict:
    """``{method: (answer, ranked_pids)}`` for question ``qid`` from the run's trace files."""
    out = {}
    for path in trace_files(cfg):
        if trace_dataset(path) != dataset:
            continue
        for rec in read_traces(path):
            if str(rec.get("qid")) == str(qid):
                found = (rec.get("answer", ""), rec.get("ranked_pids", []))
                out.setdefault(_method_of(rec, path), found)  # by the trace's method name ...
                out.setdefault(path.parent.name, found)        # ... and by the folder (the method's key)
    return out


def load_kgir_traces(cfg: Config, datasets: Optional[Iterable[str]] = None) -> list:
    """Every full KGIR-RAG trace record in the run directory, each tagged with its ``dataset``."""
    wanted = set(datasets) if datasets is not None else None
    out, seen = [], set()
    for path in trace_files(cfg):
        if wanted is not None and trace_dataset(path) not in wanted:
            continue
        for rec in read_traces(path):
            trace = rec.get("trace") or {}
            key = (trace_dataset(path), str(rec.get("qid")))
            if trace.get("method") == KGIR_METHOD and trace.get("variant", "full") == "full" and key not in seen:
                seen.add(key)  # the same question traced by two notebooks counts once
                out.append({**rec, "dataset": trace_dataset(path)})
    return out
