"""Ablations, sensitivity sweeps and KG-robustness studies (notebook 06).

- KGIR-RAG, paper §3.4 / Table 7: the full method against ``w/o subgraph``,
  ``w/o reflection`` and ``w/o rewrite`` (:func:`variant_scores`, :func:`variant_intervals`,
  :func:`ablation_table`), with paired bootstrap intervals and the paper's reported differences
  (:data:`kgir_lib.report.KGIR_ABLATION_DROPS`, MuSiQue, Qwen2.5-72B) in separate,
  labelled columns beside ours.
- KG²RAG (report, Tables 3-6 and Fig. 5): ``w/o expansion`` and ``w/o
  organisation``; sensitivity to the seed count k (its ``top_k``) and the expansion depth
  m (``m_hops``); robustness when 5 % / 10 % of the triples are dropped at random
  (:func:`kgir_lib.eval.perturb.drop_triples`, :func:`robustness`).
- KGIR-RAG's own knobs: ``max_iterations``, ``top_k`` and the n-gram matching
  threshold of eq. 5 (:func:`sweep`; the values: :data:`GRID`, :func:`study_grid`).

Every run goes through the workspace's LLM, hence its SQLite cache: rerunning a
study repeats no LLM call. The figures of notebook 06 are drawn by :mod:`kgir_lib.notebook.viz`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from ..kgir.first_retrieval import KEY as FIRST_AND_NEW_KEY
from ..methods.base import MethodBase, Workspace
from ..registry import build_method
from ..report import KGIR_ABLATION_DATASETS, KGIR_ABLATION_DROPS
from ..traces import trace_filename
from .evaluate import METRICS  # the score columns every study reports (×100), as run_and_score returns them
from .perturb import check_fraction, perturbed_workspace, recording_workspace

# KGIRRAG(variant=...) -> the row label of paper Table 7.
KGIR_VARIANT_LABELS = {"full": "KGIR-RAG (full)", "no_subgraph": "w/o subgraph",
                       "no_reflection": "w/o reflection", "no_rewrite": "w/o rewrite"}
# Repairs of ours (never the paper's) that the KGIR-RAG ablation lists beside Table 7's rows when the profile runs
# them (its notebook 05 methods): variant -> row label; the registry key is "kgir_<variant>".
KGIR_REPAIR_LABELS = {FIRST_AND_NEW_KEY.removeprefix("kgir_"): "+ D_1 beside D'_t (ours, a repair)"}
REPAIR_SIGN = ("A repair's row (ours) is, as every row, the full method minus it: negative when the repair answers "
               "more; the paper has no such row.")


def kgir_ablation_labels(method_keys: Iterable[str]) -> dict:
    """The KGIR-RAG ablation's rows (variant -> label): Table 7's (:data:`KGIR_VARIANT_LABELS`), then each repair
    of :data:`KGIR_REPAIR_LABELS` whose registry key is among ``method_keys`` (the profile's ``eval_methods``, or
    :data:`kgir_lib.registry.DEFAULT_METHODS` when it is null). A repair's ``ΔEM (ours)`` is the full method minus
    the repair, as every row's: negative when the repair answers more."""
    keys = set(method_keys)
    return {**KGIR_VARIANT_LABELS, **{v: label for v, label in KGIR_REPAIR_LABELS.items() if f"kgir_{v}" in keys}}


# KG2RAG(variant=...) -> the row label of the KG²RAG report's Tables 3-4; "code": KG²RAG as its authors' code runs it
# (registry key kg2rag_code), beside them in the same table.
KG2RAG_VARIANT_LABELS = {"full": "KG²RAG (full)", "no_expansion": "w/o expansion",
                         "no_organisation": "w/o organisation", "code": "as the authors' code runs it"}


# Default values of each study (notebook 06 parameters override them; the profile's value is in each). A sweep of a
# method's knob is keyed by the knob's one name (its constructor parameter, kgir_lib.methods.base.MethodBase.knobs).
GRID: dict[str, Any] = {
    "drop_fractions": (0.05, 0.10),            # KG²RAG report Table 6
    "kg2rag": {
        "top_k": (5, 10, 15, 20),              # seed passages k (report Fig. 5; paper default 10)
        "m_hops": (0, 1, 2),                   # expansion hops m (report Table 5; default 1, 0 = w/o expansion)
    },
    "kgir": {
        "max_iterations": (1, 2, 3),           # KGIR-RAG loop bound (profile default 3)
        "top_k": (5, 10, 15),                  # |D_q| (paper: 10)
        "ngram_threshold": (0.5, 0.7, 1.0),    # eq. 5 threshold of the profile's match_method (tokens: 0.5 lets a
        #                                        name gain one word, 0.7 only names of 3+ words, 1.0 equal words)
    },
}


def _values(name: str, values) -> list:
    values = [values] if isinstance(values, (int, float, str)) else list(values)
    if not values:
        raise ValueError(f"parameter {name!r}: give at least one value")
    return values


def _knob_values(method_key: str, sweeps: Mapping, name: str) -> dict:
    """``GRID[method_key]`` with ``sweeps`` ({knob: values}) in place of its entries; each value as the method
    takes it, checked by the method itself (:meth:`kgir_lib.methods.base.MethodBase.__post_init__`)."""
    if not isinstance(sweeps, Mapping):
        raise ValueError(f"parameter {name!r}: expected {{knob: values}}, e.g. {{'top_k': [5, 10]}}, got {sweeps!r}")
    knobs = type(build_method(method_key)).knobs
    out = dict(GRID[method_key])
    for knob, values in sweeps.items():
        if knob not in knobs:
            raise ValueError(f"parameter {name!r}: {knob!r} is not a knob of {method_key!r} (knobs: {sorted(knobs)})")
        if values is not None:
            out[knob] = tuple(getattr(build_method(method_key, **{knob: v}), knob)
                              for v in _values(f"{name}[{knob!r}]", values))
    return out


def study_grid(drop_fractions: Optional[Sequence] = None, kg2rag: Optional[Mapping] = None,
               kgir: Optional[Mapping] = None) -> dict:
    """:data:`GRID` with notebook 06's parameters in place of its defaults (``None`` keeps a default): the drop
    fractions, and ``{knob: values}`` of KG²RAG's and of KGIR-RAG's knobs (a knob not given keeps its values).

    A value is checked as the method checks it (the config's rule for the field the knob overrides); a drop
    fraction by :func:`check_fraction`. Raises ``ValueError`` naming the parameter.
    """
    grid = {**GRID, "kg2rag": dict(GRID["kg2rag"]), "kgir": dict(GRID["kgir"])}
    if drop_fractions is not None:
        grid["drop_fractions"] = tuple(check_fraction(v, "drop_fractions")
                                       for v in _values("drop_fractions", drop_fractions))
    for key, sweeps in (("kg2rag", kg2rag), ("kgir", kgir)):
        if sweeps is not None:
            grid[key] = _knob_values(key, sweeps, f"{key}_sweeps")
    return grid


def _listed(values: Sequence) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def grid_sentence(grid: Mapping) -> str:
    """The study grid (:func:`study_grid`) as one sentence a reader reads, not a dict: each method's knobs with their
    values, then the drop fractions in per cent. Raises ``ValueError`` naming a missing key."""
    missing = [k for k in ("kg2rag", "kgir", "drop_fractions") if k not in grid]
    if missing:
        raise ValueError(f"grid: missing {missing} (expected the keys of ablation.GRID)")
    parts = [f"{name} sweeps " + "; ".join(f"{knob} over {_listed(values)}" for knob, values in grid[key].items())
             for key, name in (("kg2rag", "KG²RAG"), ("kgir", "KGIR-RAG")) if grid[key]]
    drops = ", ".join(f"{100 * f:g} %" for f in grid["drop_fractions"])
    return ". ".join(parts + [f"The robustness study drops {drops} of the triples"]) + "."


# ----------------------------------------------------------------------------- running and scoring
STUDY_TRACE_DIR = "06_ablation"  # traces/06_ablation/<run>/<dataset>.trace.jsonl: apart from notebooks 04/05's traces


def study_trace_path(ws: Workspace, method: MethodBase, run: str) -> Path:
    """Where a study run's traces go: ``traces/06_ablation/<method key>-<run>/<dataset>.trace.jsonl``.

    Sweep points and perturbed graphs must not overwrite the method's own trace
    file (``traces/<key>/<dataset>.trace.jsonl``, notebooks 04/05), which the case study
    and the tables read; their own paths also let :func:`kgir_lib.eval.evaluate.run_method`
    resume each of them.
    """
    from .evaluate import method_key

    name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{method_key(method)}-{run}").strip("_")
    return ws.cfg.path("traces", STUDY_TRACE_DIR, name, trace_filename(ws.dataset.name))


def run_and_score(ws: Workspace, questions: Sequence, method: MethodBase, path: Optional[Path] = None,
                  resume: bool = True, ran: Optional[list] = None) -> tuple:
    """Run ``method`` (:func:`kgir_lib.eval.evaluate.run_method`, traces at ``path``) and score it.

    Returns ``(outputs, scores)``; ``scores`` holds ``n``, mean EM, F1, R@2, R@5
    (×100; recall NaN without retrieval) and mean LLM usage per question
    (:func:`kgir_lib.eval.evaluate.mean_scores`; calls include cache hits). The run's trace file is appended to
    ``ran`` when given (:func:`_run`).
    """
    from .evaluate import mean_scores, score

    outputs = _run(ws, method, questions, ran, resume=resume, path=path)
    return outputs, mean_scores(score(outputs, list(questions)))


def _run(ws: Workspace, method: MethodBase, questions: Sequence, ran: Optional[list], resume: bool = True,
         path: Optional[Path] = None) -> list:
    """:func:`kgir_lib.eval.evaluate.run_method`, then the trace file it wrote or read back appended to ``ran``
    (when given): a notebook's list of its runs, whose metas hold what each cost
    (:func:`kgir_lib.eval.evaluate.runs_usage`), whether this execution made the run or read it back."""
    from .evaluate import run_method, trace_path

    outputs = run_method(ws, method, list(questions), resume=resume, path=path)
    if ran is not None:
        ran.append(Path(path) if path is not None else trace_path(ws.cfg, method, ws.dataset.name))
    return outputs


def variant_scores(ws: Workspace, questions: Sequence, factory: Callable[[str], MethodBase],
                   variants: Sequence[str], labels: Optional[Mapping[str, str]] = None,
                   ran: Optional[list] = None) -> pd.DataFrame:
    """One row per (variant, question): ``factory(variant)`` run on ``questions`` of ``ws.dataset`` and scored
    (:func:`kgir_lib.eval.evaluate.score`), with ``dataset``, ``variant`` and ``label`` columns in front.

    Traces go to the method's own file (``traces/<key>/<dataset>.trace.jsonl``): an
    ablation variant is a method of its own (notebook 05 runs them too, and a run
    with the same questions and settings is read back, not repeated). Each run's trace file is appended to
    ``ran`` when given.
    """
    from .evaluate import score

    questions = list(questions)
    frames = []
    for variant in variants:
        df = score(_run(ws, factory(variant), questions, ran), questions)
        df.insert(0, "label", (labels or {}).get(variant, variant))
        df.insert(0, "variant", variant)
        df.insert(0, "dataset", ws.dataset.name)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def variant_means(per_question: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, variant) of :func:`variant_scores` rows: ``n``, mean metrics and usage
    (:func:`kgir_lib.eval.evaluate.mean_scores`)."""
    from .evaluate import mean_scores

    return pd.DataFrame([{"dataset": d, "variant": v, "label": part["label"].iloc[0], **mean_scores(part)}
                         for (d, v), part in per_question.groupby(["dataset", "variant"], sort=False)])


def variant_intervals(per_question: pd.DataFrame, full: str = "full", metrics: Sequence[str] = ("EM", "F1"),
                      n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Paired bootstrap 95 % CI of ``full`` minus each variant (:data:`kgir_lib.report.TABLE7_SIGN`: what the
    removed part adds, positive when it helps), per dataset.

    ``per_question`` as from :func:`variant_scores`. Rows: ``dataset``, ``variant``, ``metric``, ``n``,
    ``diff``, ``CI lo``, ``CI hi``: :func:`kgir_lib.eval.bootstrap.bootstrap_table` with ``full`` as the
    reference.
    """
    from .bootstrap import bootstrap_table

    for d, part in per_question.groupby("dataset", sort=False):
        if full not in set(part["variant"]):
            raise ValueError(f"variant_intervals: dataset {d!r} has no {full!r} variant to compare with")
    bt = bootstrap_table(per_question.rename(columns={"variant": "method"}), reference=full, metrics=metrics,
                         n_boot=n_boot, seed=seed, pooled=False)
    if bt.empty:  # the full method alone: nothing to compare
        return pd.DataFrame(columns=["dataset", "variant", "metric", "n", "diff", "CI lo", "CI hi"])
    return pd.DataFrame({"dataset": bt["dataset"], "variant": bt["baseline"], "metric": bt["metric"],
                         "n": bt["n"].astype(int), "diff": bt["mean diff"], "CI lo": bt["CI lo"],
                         "CI hi": bt["CI hi"]})


def sweep(ws: Workspace, questions: Sequence, factory: Callable[[Any], MethodBase], values: Iterable[Any],
          param: str = "value", ran: Optional[list] = None) -> pd.DataFrame:
    """Sensitivity study: one row per parameter value, ``factory(value)`` run and scored on ``questions``.

    KG²RAG report Fig. 5 (k) and Table 5 (m); KGIR-RAG's own knobs (iterations,
    top-k, n-gram threshold). ``param`` names the swept parameter (a column and
    part of each point's trace path, :func:`study_trace_path`). Each point's trace file is appended to ``ran``
    when given.
    """
    values = list(values)
    if not values:
        raise ValueError(f"parameter 'values': nothing to sweep for {param!r}")
    rows = []
    for value in values:
        method = factory(value)
        _, scores = run_and_score(ws, questions, method, study_trace_path(ws, method, f"{param}={value}"),
                                  ran=ran)
        rows.append({"dataset": ws.dataset.name, "param": param, "value": value, **scores})
    df = pd.DataFrame(rows)
    df["value"] = df["value"].astype(object)  # 3 stays 3 when sweeps of ints and floats are concatenated
    return df


def sweep_each(studies: Mapping[str, tuple], factory: Callable[[Any], MethodBase], values: Iterable[Any],
               param: str = "value", ran: Optional[list] = None) -> pd.DataFrame:
    """:func:`sweep` on every study dataset, concatenated: ``studies`` maps a dataset's name to its
    ``(workspace, questions)``, in the order the rows come out."""
    values = list(values)
    return pd.concat([sweep(ws, questions, factory, values, param, ran) for ws, questions in studies.values()],
                     ignore_index=True)


def robustness_runs(ws: Workspace, questions: Sequence, factory: Callable[[], MethodBase],
                    fractions: Sequence[float], seeds: Sequence[int], scope: str = "read",
                    ran: Optional[list] = None) -> pd.DataFrame:
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

    Each run's trace file is appended to ``ran`` when given.
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
                              resume=scope != "read", ran=ran)
    passages = list(dict.fromkeys(read)) if scope == "read" else None
    n0 = len(ws.kg.subset(passages)) if passages is not None else len(ws.method_view().kg)
    rows = [{"dataset": ws.dataset.name, "fraction": 0.0, "seed": seeds[0], "triples": n0, **scores}]
    for fraction in fractions[1:]:
        for seed in seeds:
            pws = perturbed_workspace(ws, fraction, seed, passages)
            n_start = len(pws.method_view().kg)
            method = factory()
            _, scores = run_and_score(pws, questions, method,
                                      study_trace_path(ws, method, f"drop={fraction:g}-seed={seed}"), ran=ran)
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


def robustness(ws: Workspace, questions: Sequence, factory: Callable[[], MethodBase],
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
    """Paper Table 7 beside ours: EM/F1 of each variant, ``full`` minus the variant, the paper's.

    ``results`` has one row per (dataset, variant) with ``EM`` and ``F1`` (as from
    :func:`variant_means`). Our columns: ``EM``, ``F1``, ``ΔEM (ours)``, ``ΔF1 (ours)``, each the full
    method minus the variant (:data:`kgir_lib.report.TABLE7_SIGN`: what the removed part adds, the sign of the
    claims' KGIR-RAG minus the variant). The paper's (KGIR-RAG Table 7, MuSiQue, Qwen2.5-72B), in the same sign,
    go beside the ``paper_datasets`` rows (MuSiQue's dev and train samples) in their own labelled
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
                   "ΔEM (ours)": em0 - float(r.EM), "ΔF1 (ours)": f10 - float(r.F1)}
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
