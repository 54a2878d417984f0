"""Every mechanism table of a run, from its traces: one call for the notebooks (paper §2, §3.4-3.5).

:func:`mechanism_tables` reads ``traces/<method>/<dataset>.trace.jsonl`` of a run directory and the
datasets' gold bridges, and returns the tables of :mod:`kgir_lib.eval.mechanism.funnel`,
:mod:`kgir_lib.eval.mechanism.calibration`, :mod:`kgir_lib.eval.mechanism.forced_rounds` and
:mod:`kgir_lib.eval.mechanism.rewrite_retrieval` and :mod:`kgir_lib.eval.mechanism.reader_context`. A trace file
that is missing makes the tables that need it empty (``sources`` says which files were read). The funnel,
calibration and rewrite-retrieval tables, computed from the traces of both loops, carry a ``method`` column
(``kgir``, and ``kgir_forced`` when a forced-rounds run exists); the forced-rounds and oracle-stop tables come from
``kgir_forced`` alone, the ranked-list rules compare ``kgir`` with ``kgir_no_rewrite``, the reader-context table pairs
each Table 7 variant with ``kgir``, and the step attribution (:mod:`kgir_lib.eval.mechanism.step_attribution`)
compares each study variant with ``kgir``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from ...config import Config
from ...data import load_dataset
from ...traces import read_traces, trace_file
from . import round_facts as rf
from .bridges import MODES, load_bridges
from .calibration import calibration_table, oracle_stop_table
from .forced_rounds import forced_round_table
from .funnel import MATCH, TABLE_COLUMNS, bridge_naming_table, funnel_rows, funnel_table
from .reader_context import VARIANTS, reader_context_table
from .rewrite_retrieval import KS, current_rule_agreement, rewrite_retrieval_table, rule_table
from .step_attribution import ROWS as STUDY_ROWS, step_attribution_table

LOOP_METHODS = ("kgir", "kgir_forced")          # the loop's traces: funnel, calibration, rewrite retrieval
NAMING_METHODS = ("kgir", "ircot", "iter_retgen", "hyde")
READ = (*LOOP_METHODS, "kgir_no_subgraph", "kgir_no_reflection", "kgir_no_rewrite", "ircot", "iter_retgen", "hyde",
        *STUDY_ROWS)
TABLES = ("sources", "funnel", "bridge_naming", "calibration", "oracle_stop", "forced_rounds", "rewrite_retrieval",
          "ranked_list_rules", "reader_context", "step_attribution")
_CONTEXT_PASSAGES = Config.context_passages  # the field's default (a dataclass keeps it as the class attribute)
# The trace files each table is read from (a table is empty when none of them exists; :func:`empty_note`)
NEEDS = {"funnel": LOOP_METHODS, "calibration": LOOP_METHODS, "rewrite_retrieval": LOOP_METHODS,
         "forced_rounds": ("kgir_forced",), "oracle_stop": ("kgir_forced",), "bridge_naming": NAMING_METHODS,
         "ranked_list_rules": ("kgir", "kgir_no_rewrite"), "reader_context": ("kgir", "a Table 7 variant")}


def read_run(run_dir: Path, datasets: Sequence[str], methods: Sequence[str] = READ) -> dict:
    """``{(method, dataset): [records]}`` of the trace files that exist under ``run_dir/traces``."""
    out = {}
    for m in methods:
        for ds in datasets:
            path = trace_file(run_dir, m, ds)
            if path.is_file():
                out[(m, ds)] = _checked(read_traces(path), path)
    return out


def _checked(records: list, path: Path) -> list:
    """The records of a trace file whose ``trace.rounds`` (where present) is a list of round objects; a
    hand-edited or foreign file is a ValueError naming it, not an AttributeError deep in a table."""
    for i, rec in enumerate(records, 1):
        trace = rec.get("trace") if isinstance(rec, dict) else None
        rounds = trace.get("rounds") if isinstance(trace, dict) else None
        if rounds is not None and not (isinstance(rounds, list) and all(isinstance(r, dict) for r in rounds)):
            raise ValueError(f"trace file {path}: record {i} (qid {rec.get('qid')!r}): 'trace.rounds' must be a "
                             f"list of rounds; rerun the method to rewrite the file")
    return records


def _with(df: pd.DataFrame, **cols) -> pd.DataFrame:
    for i, (k, v) in enumerate(cols.items()):
        df.insert(i, k, v)
    return df


def _concat(frames: list, columns: Sequence[str] = ()) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(columns))


def empty_note(tables: dict, name: str) -> str:
    """Why table ``name`` of :func:`mechanism_tables` is empty (which trace files it is read from and that the
    run has none), or ``""`` when it has rows: what a notebook prints instead of an empty table."""
    if name not in NEEDS:
        raise ValueError(f"parameter 'name': one of {sorted(NEEDS)}, got {name!r}")
    if len(tables[name]):
        return ""
    read = tables.get("sources")
    found = sorted(set(read.loc[read["read"], "method"])) if read is not None and len(read) else []
    return (f"{name}: no rows. It is read from the traces of {', '.join(NEEDS[name])} "
            f"(traces/<method>/<dataset>.trace.jsonl), and this run has "
            f"{'traces of ' + ', '.join(found) + ' only' if found else 'no such trace'}; "
            f"run KGIR-RAG (notebook 04, or 'kgir' among notebook 05's methods) to fill it.")


def mechanism_tables(run_dir: Path, datasets: Sequence[str], data_dir: Optional[Path] = None,
                     context_passages: Optional[int] = None, modes: Sequence[str] = MODES,
                     ks: Sequence[int] = KS, tables: Optional[Sequence[str]] = None) -> dict:
    """Every mechanism table (:data:`TABLES`) of the run in ``run_dir``, as DataFrames.

    ``context_passages`` is the run's ``cfg.context_passages`` (default: the config default), used for
    the reflection's evidence passages, the loss of ``D_1``'s context and the reader-context rule;
    ``modes`` the entity matches of the funnel's step 2 (:func:`kgir_lib.eval.mechanism.bridges.entity_matches`),
    each a full funnel named in its ``bridge match`` column. A table whose traces the run lacks is empty (the
    funnel keeps its columns); :func:`empty_note` says why. ``tables`` names the tables to compute (default: all
    of :data:`TABLES`); the result then holds ``sources`` and those, each the same as in the full result.
    """
    wanted = _wanted(tables)
    if isinstance(modes, str) or not modes or any(m not in MODES for m in modes):
        raise ValueError(f"parameter 'modes': a non-empty list of {MODES}, got {modes!r}")
    if isinstance(datasets, str) or not datasets:
        raise ValueError(f"parameter 'datasets': a non-empty list of dataset names, got {datasets!r}")
    if not Path(run_dir).is_dir():
        raise ValueError(f"parameter 'run_dir': {run_dir} is not a run directory (cfg.run_dir of a run)")
    n_ctx = int(context_passages or _CONTEXT_PASSAGES)
    runs = read_run(run_dir, datasets)
    sources = pd.DataFrame([{"method": m, "dataset": ds, "questions": len(runs.get((m, ds), [])),
                             "read": (m, ds) in runs} for m in READ for ds in datasets])
    out: dict[str, list] = {k: [] for k in TABLES if k in wanted and k != "sources"}
    agreement = []
    for ds in datasets:
        if not any(d == ds for _, d in runs):
            continue
        bridges = load_bridges(ds, data_dir) if wanted & {"funnel", "bridge_naming", "step_attribution"} else {}
        for m in LOOP_METHODS:
            recs = runs.get((m, ds))
            if not recs:
                continue
            if "funnel" in wanted:
                for mode in modes:
                    out["funnel"].append(_with(funnel_table(funnel_rows(recs, bridges, mode, ds)), method=m,
                                               **{MATCH: mode}))
            if "calibration" in wanted:
                out["calibration"].append(_with(calibration_table(recs, n_ctx, ds), method=m))
            if "rewrite_retrieval" in wanted:
                out["rewrite_retrieval"].append(_with(rewrite_retrieval_table(recs, n_ctx, ks, ds), method=m))
            agreement.append({"method": m, "dataset": ds, "questions": len(recs),
                              "current rule = stored ranked_pids": current_rule_agreement(recs, n_ctx)})
        forced = runs.get(("kgir_forced", ds))
        if forced and "forced_rounds" in wanted:
            out["forced_rounds"].append(forced_round_table(forced, ds))
        if forced and "oracle_stop" in wanted:
            out["oracle_stop"].append(oracle_stop_table(forced, ds))
        naming = {m: runs[(m, ds)] for m in NAMING_METHODS if (m, ds) in runs}
        if naming and "bridge_naming" in wanted:
            questions = {q.qid: q for q in load_dataset(ds, data_dir).questions}
            baseline = {rf.qid_of(r): rf.d_first(r) for r in runs.get(("kgir", ds), [])}
            out["bridge_naming"].append(bridge_naming_table(naming, bridges, baseline, "kgir", ds, questions))
        if ("kgir", ds) in runs and ("kgir_no_rewrite", ds) in runs and "ranked_list_rules" in wanted:
            out["ranked_list_rules"].append(rule_table(runs[("kgir", ds)], runs[("kgir_no_rewrite", ds)], n_ctx, ks,
                                                       ds))
        variants = {m: runs[(m, ds)] for m in VARIANTS if (m, ds) in runs}
        if "kgir" in variants and len(variants) > 1 and "reader_context" in wanted:
            out["reader_context"].append(reader_context_table(variants, n_ctx, ds))
        study = {m: runs[(m, ds)] for m in ("kgir", *STUDY_ROWS) if (m, ds) in runs}
        if "kgir" in study and len(study) > 1 and "step_attribution" in wanted:
            from ...registry import LABELS

            out["step_attribution"].append(step_attribution_table(study, bridges, ds, n_ctx, LABELS, modes[-1]))
    tables = {"sources": sources.merge(pd.DataFrame(agreement, columns=["method", "dataset", "questions",
                                                                        "current rule = stored ranked_pids"]),
                                       on=["method", "dataset", "questions"], how="left")}
    tables.update({k: _concat(v, ("method", MATCH, *TABLE_COLUMNS) if k == "funnel" else ()) for k, v in out.items()})
    return tables


def _wanted(tables: Optional[Sequence[str]]) -> set:
    """The tables :func:`mechanism_tables` computes: all of :data:`TABLES` for ``None``, else the named ones."""
    if tables is None:
        return set(TABLES)
    if isinstance(tables, str) or any(t not in TABLES for t in tables):
        raise ValueError(f"parameter 'tables': a list of names among {TABLES}, got {tables!r}")
    return set(tables)
