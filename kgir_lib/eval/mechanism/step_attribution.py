"""Step attribution: what fixing each step of KGIR-RAG's chain would buy (notebook 04, ``04_step_attribution``).

The bridge funnel (:mod:`kgir_lib.eval.mechanism.funnel`) says where the chain seed -> bridge in ``G_Ans`` ->
rewrite names it -> ``D'_t`` finds the next hop -> answer breaks. The oracle study variants
(:mod:`kgir_lib.kgir.study`) hand one step the gold and keep the rest of the full method; this module reads
their traces beside the full method's (``kgir``) and says, per dataset, what each step is worth:

- each variant's EM, F1 and R@5 (×100) on the questions both it and the full method answered (``n``), the full
  method's on the same questions, and the difference;
- the exact paired tests against the full method (:mod:`kgir_lib.eval.stats`): McNemar for EM, the sign-flip
  test for F1 and R@5, with :data:`kgir_lib.eval.claims.ALPHA`'s convention. **The family is declared here, before
  any run** (:data:`FAMILY`: every variant of :data:`ROWS` by every metric of :data:`METRICS`), one family per
  dataset, Holm-adjusted within it (:func:`kgir_lib.eval.stats.holm`); a test no dataset can make (recall of the
  context oracle, which retrieves nothing) is left out of the family (:data:`FAMILY_SIZE` tests). A profile that
  runs only some variants, or a variant with no question in common with the full method, still adjusts for the
  whole family: each test not made counts as p = 1, so a narrower run never buys a smaller correction;
- the minimum detectable EM difference of each row (``MDE EM``: exact McNemar, power :data:`POWER`, level
  ``ALPHA`` / :data:`FAMILY_SIZE`, the family's first Holm level), from the row's own discordance rate;
- the funnel steps each variant passes (the chain up to each step, any round, over the questions with a gold
  bridge), and how many of those questions had a next-hop passage in the final answer's context (``next hop
  read``: what the next-hop oracle changes, which step 4 -- a passage ``D'_t`` retrieved -- does not see);
- ``oracle applied``: the questions whose trace says every oracle step of the variant applied (the others ran
  the missing step as the full method), and per step (``gold given: <step>``, :data:`GIVEN`) the questions that
  step had its gold on. A step with gold on no question of a dataset (the ideal rewrite on HotpotQA, which has no
  sub-questions) leaves its variant the full method's requests: :func:`headroom_sentence` and
  :func:`plot_headroom` say it has no gold there instead of drawing it as a step that adds nothing.

:func:`plot_headroom` draws the waterfall (full method -> each cumulative oracle -> the gold-context ceiling,
with the single-step oracles and our two repairs apart), :func:`headroom_sentence` says it in one sentence from
the table.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from ...gold import Bridge
from ...report import panel_order
from ...kgir.study import PARTS
from ...kgir.variants import STUDY_VARIANTS
from ..claims import ALPHA, POWER
from ..metrics import best_em, best_f1, recall_at_k
from ..stats import holm, mcnemar_exact, mde_mcnemar, sign_flip_test
from . import round_facts as rf
from .funnel import STEPS, funnel_rows, funnel_table

REFERENCE = "kgir"
CUMULATIVE = ("kgir_oracle_seeds", "kgir_oracle_seeds_rewrite", "kgir_oracle_seeds_rewrite_next_hop")
SINGLE = ("kgir_oracle_rewrite", "kgir_oracle_next_hop")
CEILING = "kgir_oracle_context"
OURS = ("kgir_bridge_rewrite", "kgir_all_passages")
ROWS = (*CUMULATIVE, *SINGLE, CEILING, *OURS)  # compared with the full method, in this order
METRICS = ("EM", "F1", "R@5")
FAMILY = tuple((key, m) for key in ROWS for m in METRICS)  # one family per dataset (module docstring)
NO_RECALL = (CEILING,)  # retrieves nothing: its R@5 is not a test
FAMILY_SIZE = sum(1 for key, m in FAMILY if not (m == "R@5" and key in NO_RECALL))  # the tests Holm adjusts for
# how headroom_sentence names the variants beside the waterfall
IN_WORDS = {"kgir_oracle_rewrite": "the ideal rewrite",
            "kgir_oracle_next_hop": "the answer-bearing gold next hop",
            "kgir_bridge_rewrite": "the bridge rewrite", "kgir_all_passages": "the reflection reading all of D'_t"}
KINDS = {REFERENCE: "the paper's method", **{k: "oracle" for k in (*CUMULATIVE, *SINGLE, CEILING)},
         **{k: "ours" for k in OURS}}
# the oracle steps (kgir_lib.kgir.study.PARTS, as the traces name them), in words and in the waterfall's labels
PART_WORDS = {"seeds": "oracle seeds", "rewrite": "the ideal rewrite", "next_hop": "the gold next hop",
              "context": "the gold passages"}
PART_LABELS = {part: part.replace("_", " ") for part in PARTS}
GIVEN = {part: f"gold given: {label}" for part, label in PART_LABELS.items()}  # a column per oracle step
ADDS = {v.key: v.oracle for v in STUDY_VARIANTS.values() if v.oracle}  # registry key -> the steps it hands the gold
MDE_COLUMN = f"MDE EM ({POWER:.0%} power, α = {ALPHA} / family size)"
# What the columns of step_attribution_table mean (shown under the table in notebook 04).
COLUMN_NOTES = {
    "kind": "the paper's method, an oracle (handed one step's gold) or a repair of ours",
    "n": "questions both the variant and the full method answered",
    "oracle applied": "questions the oracle had gold for (the others ran that step as the full method)",
    **{col: f"questions the oracle had the gold of the {PART_LABELS[p]} step for" for p, col in GIVEN.items()},
    **{k: v for m in METRICS for k, v in {
        f"{m} full": f"the full method's {m} on the same questions",
        f"Δ{m}": f"the variant's {m} minus the full method's",
        f"{m} discordant": ("questions only the variant got right / only the full method did (McNemar's b / c)"
                            if m == "EM" else f"questions whose {m} differs between the two"),
        f"p {m}": "exact paired test against the full method (McNemar for EM, sign-flip otherwise)",
        f"p {m} (Holm)": "p adjusted by Holm's procedure within the dataset's family of tests",
    }.items()},
    MDE_COLUMN: (f"the smallest EM difference these questions detect, given the variant's discordance, at level "
                 f"{ALPHA} / {FAMILY_SIZE} (the declared family's size, whichever variants ran)"),
    "bridge questions": ("questions with a gold bridge entity; the funnel's steps count among them, in any round, "
                         "each step only after every one before it; step 2 counts a triple entity whose name "
                         "contains the bridge's (the funnel table's looser rule)"),
    "next hop read": "bridge questions whose final answer's context held a next-hop passage",
}


def question_scores(records: Sequence[Mapping]) -> pd.DataFrame:
    """EM, F1 and R@5 (×100) of each trace-file line, from the gold answers and passages its trace records;
    R@5 is NaN for a trace marked ``no_retrieval`` and for a question without gold passages."""
    rows = []
    for r in records:
        answers, gold = rf.golds(r)
        answer = rf.final_answer(r)
        no_retrieval = bool(rf.trace_of(r).get("no_retrieval"))
        rows.append({"qid": rf.qid_of(r), "EM": 100.0 * best_em(answer, answers), "F1": 100.0 * best_f1(answer, answers),
                     "R@5": np.nan if no_retrieval else 100.0 * recall_at_k(list(r.get("ranked_pids") or []), gold, 5)})
    return pd.DataFrame(rows, columns=["qid", *METRICS])


def oracle_applied(records: Sequence[Mapping]) -> int:
    """Questions whose trace's ``oracle`` has every step of the variant applied (``not_applied`` empty)."""
    return sum(1 for r in records if (o := rf.trace_of(r).get("oracle")) and not o.get("not_applied"))


def oracle_given(records: Sequence[Mapping]) -> dict:
    """Per oracle step (:data:`GIVEN`'s keys): the questions whose trace has that step among the variant's
    ``parts`` and not in ``not_applied``; NaN for a step no trace has among its parts."""
    out = {}
    for part in GIVEN:
        having = [o for r in records if (o := rf.trace_of(r).get("oracle")) and part in (o.get("parts") or ())]
        out[GIVEN[part]] = sum(1 for o in having if part not in (o.get("not_applied") or {})) if having else np.nan
    return out


def funnel_counts(records: Sequence[Mapping], bridges: Mapping[str, Sequence[Bridge]], n_ctx: int,
                  mode: str = "contains") -> dict:
    """The funnel (any round) of one variant's traces: bridge questions, the chain's count up to each step, and
    the bridge questions whose final answer's context held a next-hop passage."""
    keep = [r for r in records if bridges.get(rf.qid_of(r))]
    out = {"bridge questions": len(keep), **{s: 0 for s in STEPS[1:]}, "next hop read": 0}
    if not keep:
        return out
    table = funnel_table(funnel_rows(keep, bridges, mode, "d"))
    out.update(table[table["round"] == "any"].set_index("step")["n"].reindex(list(STEPS[1:])).astype(int).to_dict())
    out["next hop read"] = sum(any(p in set(rf.answer_context(r, n_ctx)) for b in bridges[rf.qid_of(r)]
                                   for p in b.next_pids) for r in keep)
    return out


def _tests(a: pd.Series, b: pd.Series, metric: str) -> tuple:
    """(p, discordant) of the exact paired test of variant ``a`` against the full method ``b``."""
    if metric == "EM":
        t = mcnemar_exact(a.to_numpy(), b.to_numpy())
        return t.p, f"{t.b}/{t.c}"  # only the variant right / only the full method right
    return sign_flip_test(a.to_numpy() - b.to_numpy()), str(int((a != b).sum()))


def step_attribution_table(runs: Mapping[str, Sequence[Mapping]], bridges: Mapping[str, Sequence[Bridge]],
                           dataset: str, n_ctx: int, labels: Optional[Mapping[str, str]] = None,
                           mode: str = "contains", alpha: float = ALPHA) -> pd.DataFrame:
    """One dataset's step attribution (module docstring): one row for the full method, one per variant of
    :data:`ROWS` that has traces in ``runs`` (``{registry key: trace-file lines}``), in that order.

    Questions are paired by id; a metric NaN for a question (recall without gold passages) leaves it out of that
    metric's test. The p-values of every row's tests form the dataset's family (:data:`FAMILY`), Holm-adjusted.
    """
    if REFERENCE not in runs:
        raise ValueError(f"step_attribution_table: no {REFERENCE!r} traces for dataset {dataset!r}")
    labels = dict(labels or {})
    ref = question_scores(runs[REFERENCE]).set_index("qid")
    rows, tests = [], []
    for key in (REFERENCE, *[k for k in ROWS if k in runs]):
        scores = question_scores(runs[key]).set_index("qid")
        both = scores.index.intersection(ref.index)
        a, b = scores.loc[both], ref.loc[both]
        row = {"dataset": dataset, "key": key, "method": labels.get(key, key), "kind": KINDS[key], "n": len(both),
               "oracle applied": oracle_applied(runs[key]) if KINDS[key] == "oracle" else np.nan,
               **oracle_given(runs[key])}
        for m in METRICS:
            ok = a[m].notna() & b[m].notna()
            row[m], row[f"{m} full"] = float(a.loc[ok, m].mean()), float(b.loc[ok, m].mean())
            row[f"Δ{m}"] = row[m] - row[f"{m} full"]
            row[f"p {m}"], row[f"{m} discordant"] = np.nan, ""
            if key != REFERENCE and ok.any() and not (m == "R@5" and key in NO_RECALL):
                row[f"p {m}"], row[f"{m} discordant"] = _tests(a.loc[ok, m], b.loc[ok, m], m)
                tests.append((len(rows), m))
        row[MDE_COLUMN] = np.nan
        row.update(funnel_counts(runs[key], bridges, n_ctx, mode))
        rows.append(row)
    # the declared family, whichever variants ran: a test not made counts as p = 1 (Holm stays conservative)
    adjusted = holm([rows[i][f"p {m}"] for i, m in tests] + [1.0] * (FAMILY_SIZE - len(tests)))
    for (i, m), p in zip(tests, adjusted):
        rows[i][f"p {m} (Holm)"] = float(p)
    for i, row in enumerate(rows[1:], 1):
        em = question_scores(runs[row["key"]]).set_index("qid")["EM"].reindex(ref.index).dropna()
        if len(em) and tests:
            d = float((em != ref.loc[em.index, "EM"]).mean())
            row[MDE_COLUMN] = 100.0 * mde_mcnemar(len(em), d, alpha / FAMILY_SIZE, POWER)
    cols = ["dataset", "key", "method", "kind", "n", "oracle applied", *GIVEN.values()]
    for m in METRICS:
        cols += [m, f"{m} full", f"Δ{m}", f"{m} discordant", f"p {m}", f"p {m} (Holm)"]
    cols += [MDE_COLUMN, "bridge questions", *STEPS[1:], "next hop read"]
    return pd.DataFrame(rows).reindex(columns=cols)


# ---------------------------------------------------------------------------- in words and as a figure
def _row(table: pd.DataFrame, dataset: str, key: str) -> Optional[pd.Series]:
    sub = table[(table["dataset"] == dataset) & (table["key"] == key)]
    return None if sub.empty else sub.iloc[0]


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
        r = _row(table, dataset, key)
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
        base = float(_row(table, ds, REFERENCE)["EM"])
        x, prev = 0, 0.0
        for k in seq:
            em = float(_row(table, ds, k)["EM"])
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
        ticks = list(range(len(seq)))
        for group, style in ((alone, "alone"), (ours, "ours")):
            x += 0.6 if group else 0
            for k in group:
                em = float(_row(table, ds, k)["EM"])
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
        ax.set_title(f"{ds} (n = {int(_row(table, ds, REFERENCE)['n'])})", fontsize=FONT + 1, loc="left")
    handles = []
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
STYLES = {
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
