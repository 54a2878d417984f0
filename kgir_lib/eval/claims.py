"""The paper's claims, read off a run with exact paired tests and a correction for multiplicity.

KGIR-RAG claims (§3.3, §3.4, Table 7) that its rewrite raises Recall@k, that the evidence subgraph, the
reflection and the rewrite each add accuracy, and that it answers multi-hop questions better than IRCoT,
KG²RAG and HippoRAG 2. Each claim is a comparison of KGIR-RAG with one other method on the same questions.

**Families, declared before any run.** Each paper claim (:data:`PAPER_CLAIMS`) is one family: its tests
are every (dataset, metric) row the run has for it, the pooled ``all`` rows included. The p-values of a
family are adjusted with Holm's step-down procedure (:func:`kgir_lib.eval.stats.holm`), so the chance of any
false "supports" or "contradicts" within a claim stays at ``ALPHA``.

**The verdict comes from the adjusted exact test** (:mod:`kgir_lib.eval.stats`): EM by the exact McNemar test,
F1 and Recall@k by the paired sign-flip permutation test. ``supports`` when the adjusted p is below
``ALPHA`` and KGIR-RAG is ahead; ``contradicts`` when it is below and KGIR-RAG is behind; ``cannot tell``
otherwise. The paired percentile bootstrap interval (:func:`kgir_lib.eval.bootstrap.paired_bootstrap`) stays in
the table as the effect size's interval; it does not decide.

**Minimum detectable effect** (``MDE``): the smallest difference this many questions detect with 80 %
power at the family's first Holm level (``ALPHA`` / family size): for EM from the run's own discordance
rate (:func:`kgir_lib.eval.stats.mde_mcnemar`), for F1 and recall from the spread of the per-question differences
(:func:`kgir_lib.eval.stats.mde_paired`). Beside the paper's Table 7 drop it says whether a run this size could
have seen the published effect at all.

The paper's own number for a comparison sits beside ours where the paper states it: Table 7's ablation
drops (MuSiQue, Qwen2.5-72B), as KGIR-RAG minus the variant, on the MuSiQue rows only
(:data:`kgir_lib.report.KGIR_ABLATION_DATASETS`). The paper prints no numbers as text for the recall
claim or for KGIR-RAG against IRCoT, KG²RAG and HippoRAG 2, so those cells stay empty.

Questions the prompts were tuned on can be left out with :func:`drop_questions`: a robustness check
reported beside the main reading, never in its place.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from ..data import load_dataset, tuning_questions
from ..report import KGIR_ABLATION_DATASETS, KGIR_ABLATION_DROPS
from .bootstrap import dataset_groups, paired_bootstrap, paired_scores
from .stats import holm, mcnemar_exact, mde_mcnemar, mde_paired, sign_flip_test

SUPPORTS, CONTRADICTS, CANNOT_TELL, NOT_RUN = "supports", "contradicts", "cannot tell", "not run"
REFERENCE = "KGIR-RAG"
ALPHA = 0.05
POWER = 0.8
PAPER_COLUMN = "paper: KGIR-RAG minus other (Table 7, MuSiQue, Qwen2.5-72B)"
BINARY_METRICS = ("EM",)


@dataclass(frozen=True)
class Claim:
    """One paper claim: KGIR-RAG beats ``other`` on ``metrics`` (higher is better for each). One family."""

    name: str
    other: str
    metrics: tuple
    paper: Mapping[str, float] = field(default_factory=dict)  # metric -> KGIR-RAG minus other, as published
    paper_datasets: tuple = ()  # the datasets the published numbers were measured on


def _ablation(variant: str, what: str) -> Claim:
    em, f1 = KGIR_ABLATION_DROPS[variant]  # the paper's drops: variant minus full, so negative
    return Claim(f"the {what} adds accuracy (Table 7)", f"KGIR-RAG {variant}", ("EM", "F1"),
                 {"EM": -em, "F1": -f1}, KGIR_ABLATION_DATASETS)


PAPER_CLAIMS: tuple = (
    Claim("the rewrite raises recall", "KGIR-RAG w/o rewrite", ("R@2", "R@5")),
    _ablation("w/o subgraph", "evidence subgraph"),
    _ablation("w/o reflection", "reflection"),
    _ablation("w/o rewrite", "rewrite"),
    Claim("KGIR-RAG ahead of IRCoT", "IRCoT", ("EM", "F1")),
    Claim("KGIR-RAG ahead of KG²RAG", "KG²RAG", ("EM", "F1")),
    Claim("KGIR-RAG ahead of HippoRAG 2", "HippoRAG 2", ("EM", "F1")),
)


def verdict(diff: float, p_adjusted: float, alpha: float = ALPHA) -> str:
    """``supports`` / ``contradicts`` when the family-adjusted exact p is below ``alpha`` (by the sign of
    KGIR-RAG minus the other), else ``cannot tell``."""
    if np.isnan(p_adjusted) or p_adjusted >= alpha or diff == 0:
        return CANNOT_TELL
    return SUPPORTS if diff > 0 else CONTRADICTS


def exact_test(a: np.ndarray, b: np.ndarray, metric: str) -> dict:
    """The exact paired test of ``a`` against ``b`` for ``metric``: ``{"test", "p", "discordant"}`` (EM:
    McNemar, with "b/c" the questions only KGIR-RAG / only the other got right; else the sign-flip test,
    with the number of questions whose scores differ)."""
    if metric in BINARY_METRICS:
        t = mcnemar_exact(a, b)
        return {"test": "McNemar", "p": t.p, "discordant": f"{t.b}/{t.c}"}
    return {"test": "sign-flip", "p": sign_flip_test(a - b), "discordant": str(int((a != b).sum()))}


def minimum_detectable(a: np.ndarray, b: np.ndarray, metric: str, alpha: float) -> float:
    """The MDE (module docstring) of a paired comparison of ``a`` and ``b``, in the metric's points."""
    n = a.size
    if metric in BINARY_METRICS:
        discordance = float((a != b).mean())
        return 100.0 * mde_mcnemar(n, discordance, alpha, POWER)
    sd = float(np.std(a - b, ddof=1)) if n > 1 else float("nan")
    return mde_paired(sd, n, alpha, POWER)


def drop_questions(scores: pd.DataFrame, exclude: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """``scores`` without the questions ``exclude[dataset]`` (e.g. the questions prompts were tuned on)."""
    keep = np.ones(len(scores), dtype=bool)
    for dataset, qids in exclude.items():
        keep &= ~((scores["dataset"] == dataset) & scores["qid"].isin(set(qids))).to_numpy()
    return scores[keep]


def tuned_questions(cfg, datasets: Iterable[str] = ("musique_train",)) -> dict:
    """{dataset: qids} of the prompt-tuning questions (:func:`kgir_lib.data.tuning_questions`, with the
    profile's seed) for each of ``datasets`` the profile evaluates: the reading is also given without them."""
    return {d: [q.qid for q in tuning_questions(load_dataset(d, cfg.data_path).questions, seed=cfg.seed)]
            for d in datasets if d in cfg.datasets}


def _row(claim: Claim, dataset: str, metric: str, reference: str) -> dict:
    return {"claim": claim.name, "dataset": dataset, "compared with": claim.other, "metric": metric, "n": 0,
            reference: np.nan, "other": np.nan, "diff": np.nan, "CI lo": np.nan, "CI hi": np.nan, "test": "",
            "discordant": "", "p": np.nan, "p (Holm)": np.nan, "MDE": np.nan, "reading": NOT_RUN,
            PAPER_COLUMN: claim.paper.get(metric, np.nan) if dataset in claim.paper_datasets else np.nan}


def claims_table(scores: pd.DataFrame, claims: Sequence[Claim] = PAPER_CLAIMS, reference: str = REFERENCE,
                 n_boot: int = 2000, seed: int = 0, pooled: bool = True, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per (claim, dataset, metric): our means, KGIR-RAG minus the other with its paired bootstrap
    95 % interval, the exact test and its p, the p adjusted within the claim's family (Holm), the minimum
    detectable effect, the verdict, and the paper's difference where the paper states it.

    ``scores`` has one row per (method, dataset, qid) with the metric columns (``evaluate.score``). Only
    questions both methods answered are paired; a metric that is NaN for a question (recall without gold
    passages) leaves that question out. A claim whose method is missing from a dataset gets ``not run`` rows.
    Rows ``all`` pool the datasets over (dataset, question) pairs.
    """
    missing = [c for c in ("method", "dataset", "qid") if c not in scores.columns]
    if missing:
        raise ValueError(f"claims_table: scores lack columns {missing}")
    families = []
    for claim in claims:
        rows, pairs = [], []
        for dataset, df in dataset_groups(scores, pooled):
            for m in claim.metrics:
                row = _row(claim, dataset, m, reference)
                a, b = paired_scores(df, reference, claim.other, m)
                if a.size:
                    diff, lo, hi = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
                    row.update({"n": a.size, reference: float(a.mean()), "other": float(b.mean()), "diff": diff,
                                "CI lo": lo, "CI hi": hi, **exact_test(a, b, m)})
                rows.append(row)
                pairs.append((a, b, m))
        tested = [i for i, r in enumerate(rows) if r["n"]]
        adjusted = holm([rows[i]["p"] for i in tested])
        for i, p_adj in zip(tested, adjusted):
            a, b, m = pairs[i]
            rows[i].update({"p (Holm)": float(p_adj), "reading": verdict(rows[i]["diff"], p_adj, alpha),
                            "MDE": minimum_detectable(a, b, m, alpha / len(tested))})
        families.extend(rows)
    return pd.DataFrame(families)


def _fmt(x: float) -> str:
    return f"{x:+.1f}"


def _cell(r: dict) -> str:
    if r["reading"] == NOT_RUN:
        return f"{r['metric']} not run"
    return (f"{r['metric']} {r['reading']} ({_fmt(r['diff'])} [{_fmt(r['CI lo'])}, {_fmt(r['CI hi'])}], "
            f"p(Holm)={r['p (Holm)']:.2g}, n={r['n']})")


def claims_summary(table: pd.DataFrame, reference: str = REFERENCE) -> str:
    """The reading in words, one Markdown bullet per claim: each dataset's verdict per metric, with
    KGIR-RAG minus the other, its interval, the adjusted p and n, and the paper's number where it has one."""
    lines = []
    for name, part in table.groupby("claim", sort=False):
        bits = [f"{dataset}: " + "; ".join(_cell(r) for r in rows.to_dict("records"))
                for dataset, rows in part.groupby("dataset", sort=False)]
        paper = part.dropna(subset=[PAPER_COLUMN]).drop_duplicates("metric")  # the rows that hold one (MuSiQue's)
        tail = ""
        if len(paper):
            tail = " Paper (MuSiQue, Qwen2.5-72B): " + ", ".join(
                f"{m} {_fmt(v)}" for m, v in zip(paper["metric"], paper[PAPER_COLUMN])) + "."
        lines.append(f"- **{name}** ({reference} minus {part['compared with'].iloc[0]}). "
                     + " | ".join(bits) + "." + tail)
    return "\n".join(lines)


def _number(x: float, fmt: str) -> str:
    if np.isnan(x) or np.isinf(x):
        return "–" if np.isnan(x) else "∞"
    text = format(x, fmt)
    return "1.0" if text == "1" else text  # a p that rounds to one


def _headline_cell(rows: pd.DataFrame) -> str:
    """One dataset's rows of one claim: the differences, then (adjusted p; MDE), then any verdict that is
    not "cannot tell", in bold."""
    if (rows["reading"] == NOT_RUN).all():
        return "not run"
    diffs = " / ".join(_number(d, "+.1f") for d in rows["diff"])
    ps = " / ".join(_number(p, ".2g") for p in rows["p (Holm)"])
    mdes = " / ".join(_number(m, ".1f") for m in rows["MDE"])
    cell = f"{diffs} (p {ps}; MDE {mdes})"
    decided = [f"{m} {r}" for m, r in zip(rows["metric"], rows["reading"]) if r in (SUPPORTS, CONTRADICTS)]
    return f"**{cell}: {', '.join(decided)}**" if decided else cell


def claims_headline(table: pd.DataFrame, datasets: Optional[Sequence[str]] = None,
                    claims: Sequence[Claim] = PAPER_CLAIMS) -> str:
    """The claims table (:func:`claims_table`) as one Markdown row per claim and one column per dataset:
    KGIR-RAG minus the other per metric, the Holm-adjusted exact p, the minimum detectable effect, and the
    verdict where the test decides one. The paper's Table 7 difference (from ``claims``), where it states
    one, follows the claim's name. ``datasets``: the columns, by default every dataset of the table but the
    pooled ``all``. This is the table the README's headline shows."""
    published = {c.name: c.paper for c in claims}
    if datasets is None:
        datasets = [d for d in dict.fromkeys(table["dataset"]) if d != "all"]
    absent = [d for d in datasets if d not in set(table["dataset"])]
    if absent:
        raise ValueError(f"claims_headline: the claims table has no rows for {absent}")
    header = ["paper claim"] + [f"{d} (n = {int(table.loc[table['dataset'] == d, 'n'].max())})" for d in datasets]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, part in table.groupby("claim", sort=False):
        metrics = list(dict.fromkeys(part["metric"]))
        label = f"{name.replace(' (Table 7)', '')}, {' / '.join(metrics)}"
        paper = [published.get(name, {}).get(m) for m in metrics]
        if all(v is not None for v in paper):
            label += " (Table 7: " + " / ".join(_fmt(v) for v in paper) + ")"
        cells = [_headline_cell(part[part["dataset"] == d]) for d in datasets]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)
