"""Ablations, sensitivity sweeps and KG-robustness studies (notebook 06).

- KGIR-RAG, paper §3.4 / Table 7: the full method against ``w/o subgraph``,
  ``w/o reflection`` and ``w/o rewrite`` (:func:`variant_scores`, :func:`variant_intervals`,
  :func:`ablation_table`), with paired bootstrap intervals and the paper's reported drops
  (:data:`kgir_lib.report.KGIR_ABLATION_DROPS`, MuSiQue, Qwen2.5-72B) in separate,
  labelled columns beside ours.
- KG²RAG (report, Tables 3-6 and Fig. 5): ``w/o expansion`` and ``w/o
  organisation``; sensitivity to the seed count ``k`` and the expansion depth
  ``m``; robustness when 5 % / 10 % of the triples are dropped at random
  (:func:`drop_triples`, :func:`robustness`).
- KGIR-RAG's own knobs: ``max_iterations``, top-k and the n-gram matching
  threshold of eq. 5 (:func:`sweep`).

Every run goes through the workspace's LLM, hence its SQLite cache: rerunning a
study repeats no LLM call. The figures of notebook 06 are drawn by :mod:`kgir_lib.viz`.
"""
from __future__ import annotations

import dataclasses
import random
import re
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from .kg import KnowledgeGraph
from .methods.base import Method, Workspace
from .traces import trace_filename
from .evaluate import METRICS  # the score columns every study reports (×100), as run_and_score returns them
from .report import KGIR_ABLATION_DATASETS, KGIR_ABLATION_DROPS

# KGIRRAG(variant=...) -> the row label of paper Table 7.
KGIR_VARIANT_LABELS = {"full": "KGIR-RAG (full)", "no_subgraph": "w/o subgraph",
                       "no_reflection": "w/o reflection", "no_rewrite": "w/o rewrite"}
# KG2RAG(variant=...) -> the row label of the KG²RAG report's Tables 3-4.
KG2RAG_VARIANT_LABELS = {"full": "KG²RAG (full)", "no_expansion": "w/o expansion",
                         "no_organisation": "w/o organisation"}


# Default values of each study (notebook 06 parameters override them; the profile's value is in each).
GRID = {
    "drop_fractions": (0.05, 0.10),          # KG²RAG report Table 6
    "kg2rag_k": (5, 10, 15, 20),             # seed passages k (report Fig. 5; paper default 10)
    "kg2rag_m": (0, 1, 2),                   # expansion hops m (report Table 5; default 1, 0 = w/o expansion)
    "kgir_max_iterations": (1, 2, 3),        # KGIR-RAG loop bound (profile default 3)
    "kgir_top_k": (5, 10, 15),               # |D_q| (paper: 10)
    "kgir_ngram_threshold": (0.5, 0.7, 1.0),  # eq. 5 threshold of the profile's match_method (tokens: 0.5 lets a name
    #                                          gain one word, 0.7 only names of 3+ words, 1.0 equal content words)
}
_INT_GRIDS = {"kg2rag_k", "kg2rag_m", "kgir_max_iterations", "kgir_top_k"}


def study_grid(**overrides: Optional[Sequence]) -> dict:
    """:data:`GRID` with the non-``None`` ``overrides`` (notebook parameters), each checked.

    Raises ``ValueError`` naming the parameter for an unknown study, an empty
    list, a non-number, a non-integer where counts are swept, or a fraction or
    threshold outside [0, 1].
    """
    grid = dict(GRID)
    for key, values in overrides.items():
        if key not in GRID:
            raise ValueError(f"unknown study {key!r} (known: {sorted(GRID)})")
        if values is None:
            continue
        values = [values] if isinstance(values, (int, float)) else list(values)
        if not values:
            raise ValueError(f"parameter {key!r}: give at least one value")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"parameter {key!r}: {v!r} is not a number")
            if key in _INT_GRIDS and float(v) != int(v):
                raise ValueError(f"parameter {key!r}: {v!r} is not a whole number")
            if key in ("drop_fractions", "kgir_ngram_threshold") and not 0.0 <= v <= 1.0:
                raise ValueError(f"parameter {key!r}: {v!r} is outside [0, 1]")
            if key in ("kg2rag_k", "kgir_max_iterations", "kgir_top_k") and v < 1:
                raise ValueError(f"parameter {key!r}: {v!r} must be >= 1")
            if key == "kg2rag_m" and v < 0:
                raise ValueError(f"parameter {key!r}: {v!r} must be >= 0")
        grid[key] = tuple(int(v) if key in _INT_GRIDS else float(v) for v in values)
    return grid


# ----------------------------------------------------------------------------- KG perturbation
def drop_triples(kg: KnowledgeGraph, fraction: float, seed: int) -> KnowledgeGraph:
    """A copy of ``kg`` without exactly ``round(fraction * len(kg))`` triples chosen at random.

    KG²RAG report, robustness study (Table 6): "randomly discard 5 % or 10 % of the
    triples" to simulate an imperfect graph. The choice is ``random.Random(seed)``
    sampling triple positions, so the same ``(kg, fraction, seed)`` always drops
    the same triples. The set of processed passages (``extracted``) is kept: a
    passage that lost all its triples is still "extracted", so the on-demand
    extraction does not silently restore what was dropped. Triple order is kept.
    ``round`` is Python's (half to even).
    """
    if not isinstance(fraction, (int, float)) or not 0.0 <= float(fraction) <= 1.0:
        raise ValueError(f"parameter 'fraction': must be a number in [0, 1], got {fraction!r}")
    triples = kg.triples
    n_drop = round(float(fraction) * len(triples))
    dropped = set(random.Random(seed).sample(range(len(triples)), n_drop))
    kept = [t for i, t in enumerate(triples) if i not in dropped]
    # passages with triples first, in kg order; then the rest (sorted: deterministic across processes)
    order = list(dict.fromkeys(t.pid for t in triples))
    extracted = order + sorted(kg.extracted - set(order))
    return KnowledgeGraph(kept, extracted)


def _keep_by_hash(triples: Sequence, fraction: float, seed: int) -> list:
    """Each triple dropped with probability ``fraction``, decided by a seeded hash of the triple itself.

    Unlike :func:`drop_triples` the count is only expected to be ``fraction * n``,
    but the fate of a triple never depends on which other triples exist, so it is
    stable however the graph grows (``hash`` of a str is not stable across
    processes; CRC-32 is).
    """
    kept, seen = [], {}
    for t in triples:
        key = (t.head, t.relation, t.tail, t.pid)
        seen[key] = seen.get(key, -1) + 1  # repeated triples get distinct draws
        draw = zlib.crc32("\x1f".join((str(seed), *key, str(seen[key]))).encode("utf-8")) / 2 ** 32
        if draw >= fraction:
            kept.append(t)
    return kept


def perturbed_workspace(ws: Workspace, fraction: float, seed: int,
                        scope: Optional[Iterable[str]] = None) -> Workspace:
    """``ws`` whose knowledge graph lost ``fraction`` of its triples at random (KG²RAG robustness study).

    The passages of ``scope`` (default: every passage extracted so far) form the
    graph that :func:`drop_triples` perturbs exactly. Methods extract passages
    they retrieve on demand (:meth:`Workspace.kg_for`): a passage outside that
    graph is extracted into the base graph as usual and copied into the perturbed
    one with each triple dropped with probability ``fraction``
    (:func:`_keep_by_hash`). The base graph is never modified by the copy.
    """
    base, base_ensure = ws.kg, ws.ensure_kg
    start = base if scope is None else base.subset(list(dict.fromkeys(scope)))
    kg = drop_triples(start, fraction, seed)

    def ensure(pids: Sequence[str]) -> None:
        pids = list(pids)
        if base_ensure is not None and base.missing(pids):
            base_ensure(pids)
        for pid in kg.missing(p for p in pids if p in base.extracted):
            kg.add(pid, _keep_by_hash(base.triples_of([pid]), fraction, seed))

    return dataclasses.replace(ws, kg=kg, ensure_kg=ensure)


def recording_workspace(ws: Workspace) -> tuple:
    """``(ws', read)``: ``ws'`` behaves as ``ws`` and ``read`` collects every passage id it read the KG for."""
    read: list = []
    base_ensure = ws.ensure_kg

    def ensure(pids: Sequence[str]) -> None:
        pids = list(pids)
        read.extend(pids)
        if base_ensure is not None:
            base_ensure(pids)

    return dataclasses.replace(ws, ensure_kg=ensure), read


# ----------------------------------------------------------------------------- running and scoring
STUDY_TRACE_DIR = "06_ablation"  # traces/06_ablation/<run>/<dataset>.trace.jsonl: apart from notebooks 04/05's traces


def study_trace_path(ws: Workspace, method: Method, run: str) -> Path:
    """Where a study run's traces go: ``traces/06_ablation/<method key>-<run>/<dataset>.trace.jsonl``.

    Sweep points and perturbed graphs must not overwrite the method's own trace
    file (``traces/<key>/<dataset>.trace.jsonl``, notebooks 04/05), which the case study
    and the tables read; their own paths also let :func:`kgir_lib.evaluate.run_method`
    resume each of them.
    """
    from .evaluate import method_key

    name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{method_key(method)}-{run}").strip("_")
    return ws.cfg.path("traces", STUDY_TRACE_DIR, name, trace_filename(ws.dataset.name))


def run_and_score(ws: Workspace, questions: Sequence, method: Method, path: Optional[Path] = None,
                  resume: bool = True) -> tuple:
    """Run ``method`` (:func:`kgir_lib.evaluate.run_method`, traces at ``path``) and score it.

    Returns ``(outputs, scores)``; ``scores`` holds ``n``, mean EM, F1, R@2, R@5
    (×100; recall NaN without retrieval) and mean LLM usage per question
    (:func:`kgir_lib.evaluate.mean_scores`; calls include cache hits).
    """
    from .evaluate import mean_scores, run_method, score

    outputs = run_method(ws, method, list(questions), resume=resume, path=path)
    return outputs, mean_scores(score(outputs, list(questions)))


def variant_scores(ws: Workspace, questions: Sequence, factory: Callable[[str], Method],
                   variants: Sequence[str], labels: Optional[Mapping[str, str]] = None) -> pd.DataFrame:
    """One row per (variant, question): ``factory(variant)`` run on ``questions`` of ``ws.dataset`` and scored
    (:func:`kgir_lib.evaluate.score`), with ``dataset``, ``variant`` and ``label`` columns in front.

    Traces go to the method's own file (``traces/<key>/<dataset>.trace.jsonl``): an
    ablation variant is a method of its own (notebook 05 runs them too, and a run
    with the same questions and settings is read back, not repeated).
    """
    from .evaluate import run_method, score

    questions = list(questions)
    frames = []
    for variant in variants:
        df = score(run_method(ws, factory(variant), questions), questions)
        df.insert(0, "label", (labels or {}).get(variant, variant))
        df.insert(0, "variant", variant)
        df.insert(0, "dataset", ws.dataset.name)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def variant_means(per_question: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, variant) of :func:`variant_scores` rows: ``n``, mean metrics and usage
    (:func:`kgir_lib.evaluate.mean_scores`)."""
    from .evaluate import mean_scores

    return pd.DataFrame([{"dataset": d, "variant": v, "label": part["label"].iloc[0], **mean_scores(part)}
                         for (d, v), part in per_question.groupby(["dataset", "variant"], sort=False)])


def run_variants(ws: Workspace, questions: Sequence, factory: Callable[[str], Method],
                 variants: Sequence[str], labels: Optional[Mapping[str, str]] = None) -> pd.DataFrame:
    """One row per variant: ``factory(variant)`` run and scored on ``questions`` of ``ws.dataset``
    (:func:`variant_means` of :func:`variant_scores`)."""
    return variant_means(variant_scores(ws, questions, factory, variants, labels))


def variant_intervals(per_question: pd.DataFrame, full: str = "full", metrics: Sequence[str] = ("EM", "F1"),
                      n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Paired bootstrap 95 % CI of each variant minus ``full`` (Table 7's sign: a drop is negative), per dataset.

    ``per_question`` as from :func:`variant_scores`. Rows: ``dataset``, ``variant``, ``metric``, ``n``,
    ``diff``, ``CI lo``, ``CI hi``: :func:`kgir_lib.bootstrap.bootstrap_table` with ``full`` as the
    reference, turned round (full minus variant, negated).
    """
    from .bootstrap import bootstrap_table

    for d, part in per_question.groupby("dataset", sort=False):
        if full not in set(part["variant"]):
            raise ValueError(f"variant_intervals: dataset {d!r} has no {full!r} variant to compare with")
    bt = bootstrap_table(per_question.rename(columns={"variant": "method"}), reference=full, metrics=metrics,
                         n_boot=n_boot, seed=seed, pooled=False)
    if bt.empty:  # the full method alone: nothing to compare
        return pd.DataFrame(columns=["dataset", "variant", "metric", "n", "diff", "CI lo", "CI hi"])
    turned = {c: 0.0 - bt[c] for c in ("mean diff", "CI lo", "CI hi")}  # 0.0 - x: no "-0.0" for a zero bound
    return pd.DataFrame({"dataset": bt["dataset"], "variant": bt["baseline"], "metric": bt["metric"],
                         "n": bt["n"].astype(int), "diff": turned["mean diff"], "CI lo": turned["CI hi"],
                         "CI hi": turned["CI lo"]})


def sweep(ws: Workspace, questions: Sequence, factory: Callable[[Any], Method], values: Iterable[Any],
          param: str = "value") -> pd.DataFrame:
    """Sensitivity study: one row per parameter value, ``factory(value)`` run and scored on ``questions``.

    KG²RAG report Fig. 5 (k) and Table 5 (m); KGIR-RAG's own knobs (iterations,
    top-k, n-gram threshold). ``param`` names the swept parameter (a column and
    part of each point's trace path, :func:`study_trace_path`).
    """
    values = list(values)
    if not values:
        raise ValueError(f"parameter 'values': nothing to sweep for {param!r}")
    rows = []
    for value in values:
        method = factory(value)
        _, scores = run_and_score(ws, questions, method, study_trace_path(ws, method, f"{param}={value}"))
        rows.append({"dataset": ws.dataset.name, "param": param, "value": value, **scores})
    df = pd.DataFrame(rows)
    df["value"] = df["value"].astype(object)  # 3 stays 3 when sweeps of ints and floats are concatenated
    return df


def robustness_runs(ws: Workspace, questions: Sequence, factory: Callable[[], Method],
                    fractions: Sequence[float], seeds: Sequence[int], scope: str = "read") -> pd.DataFrame:
    """One row per (fraction, seed): the method on a graph with that share of triples dropped.

    Fraction 0 is the unperturbed run; it is the same for every seed, so it runs
    once, first. ``scope`` says which graph is perturbed exactly:

    - ``"read"`` (default): the passages the unperturbed run read the KG for.
      That set is fixed by the questions (and the LLM cache), while the stored
      graph of a partly extracted dataset grows as later notebooks extract more
      passages; perturbing a fixed graph keeps a rerun identical, hence free.
    - ``"all"``: every passage extracted when the study starts (for methods that
      read the whole graph, e.g. KG²RAG's BFS over the global ``G``; stable
      where the graph is complete, e.g. musique_train or the paper profile).
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError("parameter 'seeds': at least one seed is needed")
    if scope not in ("read", "all"):
        raise ValueError(f"parameter 'scope': 'read' or 'all', got {scope!r}")
    fractions = sorted({float(f) for f in fractions} | {0.0})
    rec_ws, read = recording_workspace(ws)
    method = factory()
    # the recording run must really run (a resumed trace reads no passage)
    _, scores = run_and_score(rec_ws, questions, method, study_trace_path(ws, method, "drop=0"),
                              resume=scope != "read")
    passages = list(dict.fromkeys(read)) if scope == "read" else None
    n0 = len(ws.kg.subset(passages)) if scope == "read" else len(ws.kg)
    rows = [{"dataset": ws.dataset.name, "fraction": 0.0, "seed": seeds[0], "triples": n0, **scores}]
    for fraction in fractions[1:]:
        for seed in seeds:
            pws = perturbed_workspace(ws, fraction, seed, passages)
            n_start = len(pws.kg)
            method = factory()
            _, scores = run_and_score(pws, questions, method,
                                      study_trace_path(ws, method, f"drop={fraction:g}-seed={seed}"))
            rows.append({"dataset": ws.dataset.name, "fraction": fraction, "seed": seed, "triples": n_start,
                         **scores})
    return pd.DataFrame(rows)


def summarise_seeds(runs: pd.DataFrame, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Mean and standard deviation (ddof=1; 0 for a single seed) over seeds, per dataset and fraction."""
    metrics = [m for m in metrics if m in runs.columns]
    grouped = runs.groupby(["dataset", "fraction"], sort=True)
    out = grouped.agg(seeds=("seed", "nunique"), triples=("triples", "mean"))
    for m in metrics:
        out[f"{m} mean"] = grouped[m].mean()
        out[f"{m} std"] = grouped[m].std(ddof=1).fillna(0.0)
    return out.reset_index()


def robustness(ws: Workspace, questions: Sequence, factory: Callable[[], Method],
               fractions: Sequence[float] = (0.0, 0.05, 0.10), seeds: Sequence[int] = (0, 1, 2),
               scope: str = "read") -> pd.DataFrame:
    """KG²RAG report Table 6: scores with 5 % / 10 % of triples dropped, mean and std over ``seeds``.

    :func:`robustness_runs` then :func:`summarise_seeds`; ``scope`` as in :func:`robustness_runs`.
    """
    return summarise_seeds(robustness_runs(ws, questions, factory, fractions, seeds, scope))


# ----------------------------------------------------------------------------- tables
def ablation_table(results: pd.DataFrame, full: str = "full",
                   labels: Mapping[str, str] = KGIR_VARIANT_LABELS,
                   paper_drops: Optional[Mapping[str, tuple]] = KGIR_ABLATION_DROPS,
                   paper_datasets: Sequence[str] = KGIR_ABLATION_DATASETS,
                   paper_label: str = "paper, Qwen2.5-72B",
                   intervals: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """Paper Table 7 beside ours: EM/F1 of each variant, our change against ``full``, the paper's drop.

    ``results`` has one row per (dataset, variant) with ``EM`` and ``F1`` (as from
    :func:`run_variants`). Our columns: ``EM``, ``F1``, ``ΔEM (ours)``, ``ΔF1
    (ours)``. The paper's drops (KGIR-RAG Table 7, MuSiQue, Qwen2.5-72B) go beside
    the ``paper_datasets`` rows (MuSiQue's dev and train samples) in their own labelled
    columns; other datasets leave them empty. ``paper_drops=None`` omits the paper's columns
    (the KG²RAG report gives its ablations in words, not numbers). ``intervals`` (from
    :func:`variant_intervals`) adds ``ΔEM CI lo`` / ``ΔEM CI hi`` (and F1's) beside our changes;
    the full method's row has none.
    """
    missing = [c for c in ("dataset", "variant", "EM", "F1") if c not in results.columns]
    if missing:
        raise ValueError(f"ablation_table: results lack columns {missing}")
    ci = ({} if intervals is None else
          {(d, v, m): (lo, hi) for d, v, m, lo, hi in
           intervals[["dataset", "variant", "metric", "CI lo", "CI hi"]].itertuples(index=False)})
    rows = []
    for dataset, part in results.groupby("dataset", sort=False):
        base = part[part["variant"] == full]
        if base.empty:
            raise ValueError(f"ablation_table: dataset {dataset!r} has no {full!r} row to compare with")
        em0, f10 = float(base["EM"].iloc[0]), float(base["F1"].iloc[0])
        for r in part.itertuples(index=False):
            label = labels.get(r.variant, r.variant)
            row = {"dataset": dataset, "variant": label, "n": getattr(r, "n", np.nan),
                   "EM": float(r.EM), "F1": float(r.F1),
                   "ΔEM (ours)": float(r.EM) - em0, "ΔF1 (ours)": float(r.F1) - f10}
            if intervals is not None:
                for m in ("EM", "F1"):
                    lo, hi = ci.get((dataset, r.variant, m), (np.nan, np.nan))
                    row[f"Δ{m} CI lo"], row[f"Δ{m} CI hi"] = lo, hi
            for m in ("R@2", "R@5"):  # recall, where the results have it
                if m in part.columns:
                    row[m] = float(part.loc[part["variant"] == r.variant, m].iloc[0])
            if paper_drops is not None:
                paper = paper_drops.get(label) if dataset in paper_datasets else None
                if dataset in paper_datasets and r.variant == full:
                    paper = (0.0, 0.0)
                row[f"ΔEM ({paper_label})"] = paper[0] if paper else np.nan
                row[f"ΔF1 ({paper_label})"] = paper[1] if paper else np.nan
            rows.append(row)
    return pd.DataFrame(rows)
