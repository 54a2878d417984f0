"""Notebook 05's first screen: every method ranked, with the paper's claim about it and this run's verdict."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .family import CANNOT_TELL, CONTRADICTS, NOT_RUN, REFERENCE, SUPPORTS
from .headline import _number

SCOREBOARD_CLAIM = "paper's claim (KGIR-RAG against this method)"
SCOREBOARD_VERDICT = "verdict of this run (exact test, Holm)"


def _rank(values: pd.DataFrame) -> pd.Series:
    """Rank 1 = best by the first column, ties broken by the second; equal pairs share a rank."""
    order = values.apply(tuple, axis=1).map(lambda t: tuple(-np.inf if np.isnan(x) else x for x in t))
    return order.rank(method="min", ascending=False).astype("Int64")


def _verdict_text(part: pd.DataFrame) -> str:
    """One claim's rows as two lines per dataset (``pooled`` last): the verdict(s), then KGIR-RAG minus the method
    per metric (in the claim's metric order) and the Holm-adjusted p, e.g. "hotpotqa: cannot tell" and
    "  -7.1 / -4.7 (p 1.0 / 1.0)"."""
    lines = []
    for dataset, rows in part.groupby("dataset", sort=False):
        name = "pooled" if dataset == "all" else dataset
        if (rows["reading"] == NOT_RUN).all():
            lines.append(f"{name}: {NOT_RUN}")
            continue
        words = list(dict.fromkeys(rows["reading"]))
        said = words[0] if len(words) == 1 else ", ".join(f"{m} {r}" for m, r in zip(rows["metric"], rows["reading"]))
        lines.append(f"{name}: {said}\n  {' / '.join(_number(d, '+.1f') for d in rows['diff'])} "
                     f"(p {' / '.join(_number(p, '.2g') for p in rows['p (Holm)'])})")
    return "\n".join(lines)


def scoreboard(scores: pd.DataFrame, table: pd.DataFrame, datasets: Optional[Sequence[str]] = None,
               reference: str = REFERENCE, metrics: Sequence[str] = ("EM", "F1")) -> pd.DataFrame:
    """Notebook 05's first screen: every method of the run ranked by EM (then F1) per dataset, with the paper's
    claim about it and this run's verdict beside it.

    The means are Tables 4/5's (:func:`kgir_lib.eval.evaluate.summary_table` of the same ``scores``); the claims
    and verdicts are ``table`` (:func:`claims_table`, the table the README's :func:`claims_headline` renders):
    the claim column names each claim whose compared method is the row's, the verdict column gives, per
    dataset and pooled, the verdict, KGIR-RAG minus the method and the Holm-adjusted p. Columns ``(dataset,
    "rank" | metric)``, then ``(SCOREBOARD_CLAIM, "")`` and ``(SCOREBOARD_VERDICT, "")``. Rows: by mean rank over
    the datasets (best first), ties in the run's order."""
    from ..evaluate import summary_table

    if datasets is None:
        datasets = list(dict.fromkeys(scores["dataset"]))
    means = summary_table(scores, tuple(metrics), label="ours", datasets=datasets)
    cols: dict = {}
    for d in datasets:
        cols[(d, "rank")] = _rank(means[[("ours", d, m) for m in metrics]])
        for m in metrics:
            cols[(d, m)] = means[("ours", d, m)].astype(float)
    claim_of: dict[str, list[str]] = {}
    verdict_of: dict[str, list[str]] = {}
    for (name, other), part in table.groupby(["claim", "compared with"], sort=False):
        claim_of.setdefault(other, []).append(f"{name} ({' / '.join(dict.fromkeys(part['metric']))})")
        verdict_of.setdefault(other, []).append(_verdict_text(part))
    cols[(SCOREBOARD_CLAIM, "")] = pd.Series(
        ["the method every claim is about" if m == reference else "\n".join(claim_of.get(m, [])) or "none"
         for m in means.index], index=means.index)
    cols[(SCOREBOARD_VERDICT, "")] = pd.Series(["\n".join(verdict_of.get(m, [])) for m in means.index],
                                               index=means.index)
    out = pd.DataFrame(cols, index=means.index)
    out.columns = pd.MultiIndex.from_tuples(out.columns, names=["dataset", ""])
    mean_rank = out[[(d, "rank") for d in datasets]].astype(float).mean(axis=1)
    order = sorted(range(len(out)), key=lambda i: (mean_rank.iloc[i], i))
    out = out.iloc[order]
    out.index.name = "method"
    return out


def scoreboard_sentence(board: pd.DataFrame, table: pd.DataFrame, reference: str = REFERENCE) -> str:
    """The answer of :func:`scoreboard` in words: where ``reference`` ranks on each dataset, how many claim rows
    the exact tests decide each way, and the smallest EM difference the run could detect (its MDE)."""
    datasets = [d for d, what in board.columns if what == "rank"]
    if reference not in board.index:
        return f"{reference} was not run: no claim can be read."
    row = board.loc[reference]
    ranks = "; ".join(f"{row[(d, 'rank')]} of {int(board[(d, 'rank')].notna().sum())} on {d} (EM "
                      f"{_number(row[(d, 'EM')], '.1f')}, F1 {_number(row[(d, 'F1')], '.1f')})" for d in datasets)
    tested = table[table["reading"] != NOT_RUN]
    counts = tested["reading"].value_counts()
    mde_column = next(c for c in table.columns if str(c).startswith("MDE"))  # its label may name α and power
    em = tested.loc[(tested["metric"] == "EM") & (tested["dataset"] != "all"), mde_column].astype(float)
    mde = em[np.isfinite(em)]
    sure = (f" Differences in EM smaller than {_number(mde.min(), '.0f')}-{_number(mde.max(), '.0f')} points cannot "
            f"be detected with these questions (MDE, 80 % power), so {CANNOT_TELL!r} is no evidence against the "
            f"paper." if len(mde) else
            f" With these questions no EM difference, however large, could reach significance (MDE ∞), so "
            f"{CANNOT_TELL!r} is no evidence against the paper." if len(em) else "")
    k = table["claim"].nunique()
    return (f"{reference} ranks {ranks} by EM. Of the {len(tested)} tests of the paper's {k} claim{'s' * (k != 1)}, "
            f"the verdict is {SUPPORTS!r} on {int(counts.get(SUPPORTS, 0))}, {CONTRADICTS!r} on "
            f"{int(counts.get(CONTRADICTS, 0))} and {CANNOT_TELL!r} on {int(counts.get(CANNOT_TELL, 0))}." + sure)
