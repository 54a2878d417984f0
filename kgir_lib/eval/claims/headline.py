"""The claims table as the README's headline (:func:`claims_headline`)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .family import CONTRADICTS, NOT_RUN, PAPER_CLAIMS, SUPPORTS, Claim
from .table import mde_column


def _fmt(x: float) -> str:
    return f"{x:+.1f}"


def _number(x: float, fmt: str) -> str:
    if np.isnan(x) or np.isinf(x):
        return "–" if np.isnan(x) else "∞"
    text = format(x, fmt)
    return "1.0" if text == "1" else text  # a p that rounds to one


def _headline_cell(rows: pd.DataFrame, mde: str) -> str:
    """One dataset's rows of one claim: the differences, then (adjusted p; MDE, from column ``mde``), then any
    verdict that is not "cannot tell", in bold."""
    if (rows["reading"] == NOT_RUN).all():
        return "not run"
    diffs = " / ".join(_number(d, "+.1f") for d in rows["diff"])
    ps = " / ".join(_number(p, ".2g") for p in rows["p (Holm)"])
    mdes = " / ".join(_number(m, ".1f") for m in rows[mde])
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
    firsts = {c.name: c.other for c in claims}
    for (name, other), part in table.groupby(["claim", "compared with"], sort=False):
        metrics = list(dict.fromkeys(part["metric"]))
        against = "" if firsts.get(name, other) == other else f": against {other}"
        label = f"{name.replace(' (Table 7)', '')}{against}, {' / '.join(metrics)}"
        paper = [v for v in (published.get(name, {}).get(m) for m in metrics) if v is not None]
        if len(paper) == len(metrics):  # the paper states every metric of the row
            label += " (Table 7: " + " / ".join(_fmt(v) for v in paper) + ")"
        cells = [_headline_cell(part[part["dataset"] == d], mde_column(table)) for d in datasets]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)
