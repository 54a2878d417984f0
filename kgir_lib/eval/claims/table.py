"""The exact paired tests, the minimum detectable effect and the claims table (:mod:`kgir_lib.eval.claims`:
the verdict comes from the Holm-adjusted exact test; the bootstrap interval is the effect size)."""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..bootstrap import dataset_groups, paired_bootstrap, paired_scores
from ..stats import holm, mcnemar_exact, mde_mcnemar, mde_paired, sign_flip_test
from .family import (ALPHA, BINARY_METRICS, NOT_RUN, PAPER_CLAIMS, PAPER_COLUMN, POWER, REFERENCE, Claim,
                     verdict)


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



def mde_condition(alpha: float, power: float, family_sizes: Iterable[int]) -> str:
    """The level and power of the MDE: ``"α = 0.05/6, power 0.8"`` when every family has 6 tests (the first
    Holm level of each), ``"α = 0.05/tests in its family, power 0.8"`` when the sizes differ."""
    sizes = sorted({int(k) for k in family_sizes if k})
    if sizes == [1]:
        level = f"{alpha:g}"
    elif len(sizes) == 1:
        level = f"{alpha:g}/{sizes[0]}"
    else:  # families of different sizes, or none tested
        level = f"{alpha:g}/tests in its family"
    return f"α = {level}, power {power:g}"


def mde_label(alpha: float, power: float, family_sizes: Iterable[int]) -> str:
    """The MDE column's header (:func:`mde_condition` in brackets), so the table says what was computed."""
    return f"MDE ({mde_condition(alpha, power, family_sizes)})"


def mde_column(table: pd.DataFrame) -> str:
    """The name of a claims table's MDE column (``MDE (...)``, or ``MDE`` in a table written before its header
    said the level and power)."""
    found = [c for c in table.columns if c == "MDE" or str(c).startswith("MDE (")]
    if len(found) != 1:
        raise ValueError(f"claims table: expected one MDE column, found {found}")
    return found[0]


def table_mde_condition(table: pd.DataFrame) -> str:
    """The MDE's level and power as a claims table states them: from its column header, else (a table written
    before the header said so) from :data:`ALPHA`, :data:`POWER` and the size of its families (tested rows a
    claim), which is how that table's MDE was computed."""
    col = mde_column(table)
    if col != "MDE":
        return col[len("MDE ("):-1]
    sizes = table[table["n"] > 0].groupby("claim").size()
    return mde_condition(ALPHA, POWER, sizes)


def _row(claim: Claim, other: str, dataset: str, metric: str, reference: str) -> dict:
    return {"claim": claim.name, "dataset": dataset, "compared with": other, "metric": metric, "n": 0,
            reference: np.nan, "other": np.nan, "diff": np.nan, "CI lo": np.nan, "CI hi": np.nan, "test": "",
            "discordant": "", "p": np.nan, "p (Holm)": np.nan, "MDE": np.nan, "reading": NOT_RUN,
            PAPER_COLUMN: claim.paper.get(metric, np.nan) if dataset in claim.paper_datasets else np.nan}


def claims_table(scores: pd.DataFrame, claims: Sequence[Claim] = PAPER_CLAIMS, reference: str = REFERENCE,
                 n_boot: int = 2000, seed: int = 0, pooled: bool = True, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per (claim, compared method, dataset, metric): our means, KGIR-RAG minus the other with its paired
    bootstrap 95 % interval, the exact test and its p, the p adjusted within the claim's family (Holm), the minimum
    detectable effect (column :func:`mde_label`, e.g. "MDE (α = 0.05/6, power 0.8)"), the verdict, and the
    paper's difference where the paper states it.

    ``scores`` has one row per (method, dataset, qid) with the metric columns (``evaluate.score``). Only
    questions both methods answered are paired; a metric that is NaN for a question (recall without gold
    passages) leaves that question out. A claim whose method is missing from a dataset gets ``not run`` rows.
    Rows ``all`` pool the datasets over (dataset, question) pairs.
    """
    missing = [c for c in ("method", "dataset", "qid") if c not in scores.columns]
    if missing:
        raise ValueError(f"claims_table: scores lack columns {missing}")
    families, sizes = [], []
    for claim in claims:
        rows, pairs = [], []
        for other in claim.others:
            for dataset, df in dataset_groups(scores, pooled):
                for m in claim.metrics:
                    row = _row(claim, other, dataset, m, reference)
                    a, b = paired_scores(df, reference, other, m)
                    if a.size:
                        diff, lo, hi = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
                        row.update({"n": a.size, reference: float(a.mean()), "other": float(b.mean()), "diff": diff,
                                    "CI lo": lo, "CI hi": hi, **exact_test(a, b, m)})
                    rows.append(row)
                    pairs.append((a, b, m))
        tested = [i for i, r in enumerate(rows) if r["n"]]
        sizes.append(len(tested))
        adjusted = holm([rows[i]["p"] for i in tested])
        for i, p_adj in zip(tested, adjusted):
            a, b, m = pairs[i]
            rows[i].update({"p (Holm)": float(p_adj), "reading": verdict(rows[i]["diff"], p_adj, alpha),
                            "MDE": minimum_detectable(a, b, m, alpha / len(tested))})
        families.extend(rows)
    return pd.DataFrame(families).rename(columns={"MDE": mde_label(alpha, POWER, sizes)})
