"""The step attribution read (notebook 04 §4, ``04_headroom``): the table of
:mod:`kgir_lib.eval.mechanism.step_attribution` in one sentence a dataset (:func:`headroom_sentence`, the
results page renders it) and as a waterfall (:func:`plot_headroom`): the full method, each cumulative oracle's
rise, the gold-context ceiling, the single-step oracles and our two repairs apart. A step whose gold no question
of a dataset has (the ideal rewrite on HotpotQA) is named, never drawn as a step that adds nothing, and the
tests of the declared family it makes inert are counted (:func:`inert_tests`).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import pandas as pd

from ...report import panel_order
from .step_attribution import (ADDS, CEILING, CUMULATIVE, FAMILY, FAMILY_SIZE, GIVEN, IN_WORDS, NO_RECALL, OURS,
                               PART_LABELS, PART_WORDS, REFERENCE, ROWS, SINGLE)


def _row(table: pd.DataFrame, dataset: str, key: str) -> Optional[pd.Series]:
    sub = table[(table["dataset"] == dataset) & (table["key"] == key)]
    return None if sub.empty else sub.iloc[0]


def _present(table: pd.DataFrame, dataset: str, key: str) -> pd.Series:
    """:func:`_row` of a row the table holds (listed by :func:`_layout`, or the full method's)."""
    row = _row(table, dataset, key)
    if row is None:
        raise ValueError(f"the headroom table has no {key!r} row for dataset {dataset!r}")
    return row


def _no_gold(row: Optional[pd.Series], parts: Sequence[str]) -> bool:
    """Whether the row's oracle had the gold of none of ``parts`` on any question (its variant then asked the
    requests of the row before it); False for a missing row or a step not counted."""
    if row is None or not parts:
        return False
    given = [row.get(GIVEN[p]) for p in parts]
    return all(g is not None and not pd.isna(g) and int(g) == 0 for g in given)


def _layout(table: pd.DataFrame, dataset: str) -> tuple:
    """``(steps, alone, no_gold)`` of one dataset, for the sentence and the figure alike: the cumulative oracles
    the table has, each with the oracle steps it adds to the previous one it has (without the seeds-only row, the
    next row's rise is seeds and rewrite together, and says so); the single-step oracles to show apart; and the
    steps that had gold on no question, whose rows are left out of both (they repeat the row before them)."""
    steps, no_gold, shown = [], [], 0
    for key in CUMULATIVE:
        row, depth = _row(table, dataset, key), len(ADDS[key])
        if row is None:
            continue
        added = list(ADDS[key][shown:depth])
        empty = [p for p in added if _no_gold(row, (p,))]
        no_gold += empty
        if len(empty) < len(added):
            steps.append((key, [p for p in added if p not in empty]))
        shown = depth
    alone = []
    for key in SINGLE:
        row = _row(table, dataset, key)
        if _no_gold(row, ADDS[key]):
            no_gold += ADDS[key]
        elif row is not None:
            alone.append(key)
    return steps, alone, list(dict.fromkeys(no_gold))


def headroom_sentence(table: pd.DataFrame, dataset: str) -> str:
    """The headroom of one dataset in one sentence, from the table: the full method's EM, what each cumulative
    oracle adds, the gold-context ceiling, each single-step oracle and our two repairs with their difference from
    the full method on the same questions and Holm-adjusted McNemar p; last, the oracle steps the dataset's gold
    defines on no question (their variants ran as the full method)."""
    full = _row(table, dataset, REFERENCE)
    if full is None:
        raise ValueError(f"headroom_sentence: no {REFERENCE!r} row for dataset {dataset!r}")
    parts, prev = [], float(full["EM"])
    steps, alone, no_gold = _layout(table, dataset)
    for i, (key, added) in enumerate(steps):
        r = _present(table, dataset, key)
        name = " + ".join(PART_WORDS[p] for p in added)
        parts.append(f"{name if i == 0 else '+ ' + name} {r['EM']:.1f} ({r['EM'] - prev:+.1f}{_given(r, added)})")
        prev = float(r["EM"])
    text = f"{dataset} (n = {int(full['n'])}): EM of the full method {full['EM']:.1f}"
    text += "; " + ", ".join(parts) if parts else ""
    ceil = _row(table, dataset, CEILING)
    if ceil is not None:
        text += (f"; the shared reader over the gold passages alone {ceil['EM']:.1f} "
                 f"({ceil['EM'] - full['EM']:+.1f}{_given(ceil, ADDS[CEILING])})")
    if alone:
        text += "; one step alone: " + ", ".join(f"{IN_WORDS[k]} {_versus(_row(table, dataset, k), full)}"
                                                 for k in alone)
    ours = [r for r in (_row(table, dataset, k) for k in OURS) if r is not None]
    if ours:
        text += "; ours: " + ", ".join(f"{IN_WORDS[r['key']]} {_versus(r, full)}" for r in ours)
    if no_gold:
        names = " or ".join(PART_WORDS[p] for p in no_gold)
        text += f"; no gold for {names} on any question here"
        same, repeat = inert_tests(table, dataset)
        text += (f", so of the family's {FAMILY_SIZE} declared tests {same} cannot differ by construction (a "
                 f"variant with nothing but that step ran as the full method) and {repeat} repeat another variant's")
    return text + "."


def _effective(table: pd.DataFrame, dataset: str, key: str) -> tuple:
    """The oracle steps of ``key`` that had gold on some question of ``dataset`` (a step with none ran as the
    variant without it)."""
    row = _row(table, dataset, key)
    return tuple(p for p in ADDS.get(key, ()) if not _no_gold(row, (p,)))


def inert_tests(table: pd.DataFrame, dataset: str) -> tuple:
    """``(cannot differ, repeated)``: how many tests of the dataset's declared family (:data:`FAMILY`) compare
    the full method with a variant that is, by construction, the full method (every step it hands the gold had
    gold on no question), and how many repeat an earlier variant's tests (its steps with gold are that
    variant's). Counted over the oracles that ran; a row of ours changes a step for every question."""
    same = repeat = 0
    seen: dict = {}
    for key in ROWS:
        if key not in ADDS or _row(table, dataset, key) is None:
            continue
        tests = sum(1 for k, m in FAMILY if k == key and not (m == "R@5" and key in NO_RECALL))
        steps = _effective(table, dataset, key)
        if not steps:
            same += tests
        elif steps in seen and steps != ADDS[key]:
            repeat += tests
        seen.setdefault(steps, key)
    return same, repeat


def _versus(row: pd.Series, full: pd.Series) -> str:
    """A variant's EM, its difference from the full method on the same questions and the Holm-adjusted McNemar p;
    the row's ``n`` when it answered fewer questions than the full method."""
    if int(row["n"]) == 0:
        return "(no question answered by both)"
    n = "" if int(row["n"]) == int(full["n"]) else f"n = {int(row['n'])}, "
    given = _given(row, ADDS.get(row["key"], ()))
    return f"{row['EM']:.1f} ({n}{row['ΔEM']:+.1f}, p(Holm) {row['p EM (Holm)']:.2g}{given})"


def _given(row: pd.Series, parts: Sequence[str]) -> str:
    """For an oracle whose steps ``parts`` had their gold on fewer questions than it ran (``gold given: <step>``): on
    how many; the others ran those steps as the full method."""
    n = int(row["n"])
    short = [(p, int(g)) for p in parts if (g := row.get(GIVEN[p])) is not None and not pd.isna(g) and int(g) < n]
    if not short:
        return ""
    if len(parts) == 1:
        return f"; gold given on {short[0][1]} of {n}"
    return "; gold given: " + ", ".join(f"{PART_LABELS[p]} on {k} of {n}" for p, k in short)


# Figure drawing (colours, positions, labels): outside the mutation run, which covers the numbers.
# pragma: no mutate start
FONT = 11.0        # tick labels, bar values, legend (pt; 18 px at the suite's 120 dpi)
NOTE_FONT = 10.0   # the panels' notes


def plot_headroom(table: pd.DataFrame, published_em: Optional[Mapping[str, float]] = None):
    """The waterfall per dataset, one panel a row (:func:`panel_order`): the full method, each cumulative oracle
    (the bar's rise is what that step adds), the gold-context ceiling, then the single-step oracles apart (outlined)
    and our two repairs (hatched); a dotted line at the full method's EM. One legend names every style the figure
    draws. ``published_em`` ({dataset: EM}) draws the paper's KGIR-RAG EM as a labelled line; without it the figure
    says that none is drawn. Returns the figure (9.5 in wide: shown at its own size on a 1280-px page)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    datasets = panel_order(dict.fromkeys(table["dataset"]))
    rows = max(len(datasets), 1)
    width = max(len(table[table["dataset"] == ds]) for ds in datasets) + 1.2 if datasets else 1  # bars, gaps
    fig, axes = plt.subplots(rows, 1, figsize=(9.5, 3.4 * rows + 1.7), squeeze=False)
    drawn = set()
    for ax, ds in zip(axes[:, 0], datasets):
        steps, alone, no_gold = _layout(table, ds)
        rises = {k: "\n".join(f"+ {PART_LABELS[p]}".replace("next ", "next\n") for p in added) for k, added in steps}
        seq = [k for k in (REFERENCE, *rises, CEILING) if _row(table, ds, k) is not None]
        ours = [k for k in OURS if _row(table, ds, k) is not None]
        base = float(_present(table, ds, REFERENCE)["EM"])
        x, prev = 0, 0.0
        for k in seq:
            em = float(_present(table, ds, k)["EM"])
            step = k in CUMULATIVE
            style = ("rise" if em >= prev else "fall") if step else "full" if k == REFERENCE else "ceiling"
            ax.bar(x, em - prev if step else em, bottom=prev if step else 0.0, color=STYLES[style]["color"])
            drawn.add(style)
            if step and em == prev:  # a step that adds nothing: a flat mark where its bar would be
                ax.hlines(em, x - 0.4, x + 0.4, color=STYLES["rise"]["color"], lw=3)
                drawn.add("flat")
            ax.text(x, em + 1, f"{em:.1f}", ha="center", fontsize=FONT)
            prev = em if k != CEILING else prev
            x += 1
        ticks: list[float] = list(range(len(seq)))
        for group, style in ((alone, "alone"), (ours, "ours")):
            x += 0.6 if group else 0
            for k in group:
                em = float(_present(table, ds, k)["EM"])
                ax.bar(x, em, color="white", edgecolor=STYLES[style]["edgecolor"], hatch=STYLES[style].get("hatch"),
                       linewidth=1.5)
                drawn.add(style)
                ax.text(x, em + 1, f"{em:.1f}", ha="center", fontsize=FONT)
                ticks.append(x)
                x += 1
        short = {REFERENCE: "full", **rises, CEILING: "gold\ncontext",
                 "kgir_oracle_rewrite": "rewrite\nalone", "kgir_oracle_next_hop": "next hop\nalone",
                 "kgir_bridge_rewrite": "bridge\nrewrite", "kgir_all_passages": "all of\nD'_t"}
        ax.set_xticks(ticks, labels=[short[k] for k in (*seq, *alone, *ours)], fontsize=FONT)
        ax.tick_params(axis="y", labelsize=FONT)
        ax.axhline(base, color=STYLES["full"]["color"], lw=1.2, ls=":")
        drawn.add("baseline")
        if published_em and ds in published_em:
            ax.axhline(published_em[ds], color="black", ls="--")
            drawn.add("published")
        if no_gold:
            ax.text(0.99, 0.95, "no gold here for: " + ", ".join(PART_LABELS[p] for p in no_gold), ha="right",
                    transform=ax.transAxes, va="top", fontsize=NOTE_FONT, color="dimgray")
        top = float(table.loc[table["dataset"] == ds, "EM"].max())
        if published_em and ds in published_em:
            top = max(top, float(published_em[ds]))
        ax.set_ylim(0, min(100.0, top * 1.2 + 6))  # EM's scale, cut above the tallest bar or line
        ax.set_xlim(-0.6, max(x - 0.4, width - 0.6))  # every panel the same bar width
        ax.set_ylabel("EM (×100)", fontsize=FONT)
        ax.set_title(f"{ds} (n = {int(_present(table, ds, REFERENCE)['n'])})", fontsize=FONT + 1, loc="left")
    handles: list[Line2D | Patch] = []
    for key in STYLE_ORDER:
        if key not in drawn:
            continue
        st = STYLES[key]
        if key in ("baseline", "published", "flat"):
            handles.append(Line2D([], [], color=st["color"], ls=st["ls"], lw=st["lw"], label=st["label"]))
        else:
            handles.append(Patch(facecolor=st.get("color", "white"), edgecolor=st.get("edgecolor", "none"),
                                 hatch=st.get("hatch"), label=st["label"]))
    if not published_em:
        handles.append(Line2D([], [], color="none", label="no published KGIR-RAG EM: the paper prints it only in "
                                                          "its Tables 4-5"))
    fig.suptitle("What each step is worth: KGIR-RAG with one step, then several, handed the gold", fontsize=FONT + 2,
                 x=0.01, ha="left")
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.01, 0.96), ncol=2, fontsize=FONT,
               frameon=False, handlelength=1.8, columnspacing=1.2)
    fig.tight_layout(rect=(0, 0, 1, 1 - 1.15 / (3.4 * rows + 1.7)))
    return fig


# Every style the waterfall can draw, and the legend's words for it (in the legend's order).
STYLES: dict[str, dict[str, Any]] = {
    "full": {"color": "tab:blue", "label": "KGIR-RAG as the model runs it (full)"},
    "rise": {"color": "tab:green", "label": "a cumulative oracle: what its step adds"},
    "fall": {"color": "tab:red", "label": "a cumulative oracle step that lowers EM"},
    "flat": {"color": "tab:green", "ls": "-", "lw": 3, "label": "a step that adds nothing"},
    "ceiling": {"color": "tab:gray", "label": "the reader over the gold passages (ceiling)"},
    "alone": {"edgecolor": "tab:orange", "label": "one oracle step alone"},
    "ours": {"edgecolor": "tab:purple", "hatch": "//", "label": "a repair of ours (not the paper's)"},
    "baseline": {"color": "tab:blue", "ls": ":", "lw": 1.5, "label": "the full method's EM"},
    "published": {"color": "black", "ls": "--", "lw": 1.5, "label": "KGIR-RAG EM as published"},
}
STYLE_ORDER = ("full", "rise", "fall", "flat", "ceiling", "alone", "ours", "baseline", "published")
# pragma: no mutate end
