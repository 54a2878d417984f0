"""Traces as text and the figures of notebooks 05 and 06.

:func:`render_trace` writes a KGIR-RAG question trace as Markdown; the ``plot_*`` functions draw the F1-cost
plot, the bootstrap forest plot and the ablation, sweep and robustness figures. Evidence subgraphs are drawn by
:mod:`kgir_lib.notebook.steps_viz` (Algorithm 1 step by step) and :mod:`kgir_lib.notebook.case.bridge_viz` (the Fig. 6
bridge path).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd


# ---------------------------------------------------------------------- traces as text
def _md(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ").strip()


def render_trace(trace: dict, corpus=None, max_triples: int = 8, max_passages: int = 3) -> str:
    """One KGIR-RAG question trace (``MethodOutput.trace``) as readable Markdown, round by round.

    With ``corpus`` (``Dataset.corpus``) passage ids are shown as titles, gold ones marked ★.
    """
    gold = set(trace.get("gold_pids", []))

    def title(pid: str) -> str:
        name = corpus[pid].title if corpus is not None and pid in corpus else pid
        return f"{'★ ' if pid in gold else ''}{name}"

    lines = [f"**Q:** {trace.get('question', '')}  ",
             f"**gold:** {', '.join(trace.get('gold_answers', [])[:3])} · **answer:** {trace.get('answer', '')!r} "
             f"(worded by the {trace.get('answer_source') or 'reader'}; stopped by {trace.get('answered_by')}; "
             f"{trace.get('iterations_used')} round(s), {trace.get('variant')})", ""]
    from ..kgir.rounds import trace_rounds

    for r in trace_rounds(trace):
        lines.append(f"**Round {r.iteration}** — query: *{_md(r.query)}*  ")
        lines.append("retrieved: " + "; ".join(title(p) for p, _ in r.retrieved[:max_passages]) + "  ")
        sub = r.subgraph
        if sub:
            fb = f" (fallback: {sub.fallback_reason})" if sub.used_fallback else ""
            lines.append(f"NER: {sub.llm_entities} → E_q {sub.E_q}{fb}; seeds {sub.seeds[:6]}; "
                         f"|G_q| {r.n_G_q}, |G_tmp| {r.n_G_tmp}, |G_Ans| {len(sub.kept)}, "
                         f"pruned {len(sub.pruned)}  ")
            best = sub.ranked_evidence()[:max_triples]
            if best:
                lines.append("G_Ans (by weight): " + "; ".join(f"({t.head}, {t.relation}, {t.tail}) "
                                                               f"{sub.weights.get(t, 0.0):.2f}" for t in best) + "  ")
        if r.rewrite_raw is not None:
            flag = " — *malformed, question kept*" if r.rewrite_malformed else ""
            lines.append(f"rewrite: *{_md(r.rewrite or '')}*{flag}  ")
            if r.reflection_passages is not None:
                lines.append("new passages: " + ("; ".join(title(p) for p in r.new_passages[:max_passages]) or "none")
                             + "  ")
        rf = r.reflection
        if rf:
            verdict = (f"answer **{rf.answer}**" if rf.answerable else
                       f"missing: {rf.missing!r}" + (" (malformed reply)" if rf.malformed else ""))
            lines.append(f"reflection{' (last round)' if rf.final else ''}: {_md(rf.reasoning)[:200]} → {verdict}  ")
        fin = r.final
        if fin:
            lines.append(f"reader ({'forced at the round cap' if fin.forced else 'words the answer'}) on "
                         f"*{_md(fin.question)}* → **{fin.answer}**  ")
        lines.append("")
    llm = trace.get("llm", {})
    if llm:
        lines.append("LLM: " + ", ".join(f"{k} {v.get('calls', 0)} call(s) / {v.get('prompt_tokens', 0)}+"
                                         f"{v.get('completion_tokens', 0)} tokens" for k, v in llm.items()))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- notebook 05 figures
def plot_f1_vs_tokens(cost: pd.DataFrame, title: str = "", ax=None):
    """One point per method: mean F1 against LLM tokens (prompt + completion) per question (log x)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    x, y = cost["tokens / q"].astype(float), cost["F1"].astype(float)
    ax.scatter(x, y, color="tab:blue")
    groups: dict = {}  # methods at the same point share one number (e.g. Naive RAG = Dense)
    for name, xi, yi in zip(cost.index, x, y):
        groups.setdefault((round(xi, 1), round(yi, 2)), []).append(str(name))
    legend = []
    for i, ((xi, yi), names) in enumerate(groups.items(), start=1):
        ax.annotate(str(i), (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=9.5)
        legend.append(f"{i}  {' = '.join(names)}")
    # the key under the axes, not beside them: the figure stays narrow enough to show unshrunk on a 1024-px page
    ax.text(0.0, -0.2, "\n".join(legend), transform=ax.transAxes, va="top", fontsize=9.5, family="monospace")
    if len(x) and (x > 0).all():
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("LLM tokens per question (prompt + completion)")
    ax.set_ylabel("F1 (×100)")
    ax.set_title(title or "F1 against LLM tokens per question")
    ax.grid(alpha=0.3)
    return ax.figure


def plot_bootstrap(bt: pd.DataFrame, metric: str = "F1", dataset: str = "all", reference: str = "KGIR-RAG",
                   ax=None):
    """Forest plot: ``reference`` minus each baseline on ``metric`` with its 95 % bootstrap CI."""
    import matplotlib.pyplot as plt

    sub = bt[(bt["metric"] == metric) & (bt["dataset"] == dataset)]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * max(len(sub), 1) + 1.2))
    ys = np.arange(len(sub))[::-1]
    ax.errorbar(sub["mean diff"], ys, xerr=[sub["mean diff"] - sub["CI lo"], sub["CI hi"] - sub["mean diff"]],
                fmt="o", color="tab:blue", ecolor="gray", capsize=3)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels(sub["baseline"])
    ax.set_xlabel(f"{reference} − baseline, {metric} (×100), 95 % paired bootstrap CI")
    ax.set_title(f"{metric}: {reference} against each baseline ({dataset})")
    ax.grid(alpha=0.3, axis="x")
    return ax.figure


# ----------------------------------------------------------------------------- notebook 06 figures
def plot_ablation(ax, table: pd.DataFrame, dataset: str, metric: str = "EM",
                  full_label: str = "KGIR-RAG (full)") -> None:
    """Bars: the full method minus each variant in ``metric`` (from :func:`ablation_table`; the sign of
    :data:`kgir_lib.report.TABLE7_SIGN`), with its paired bootstrap 95 % interval as an error bar where the table
    has one (unadjusted, an effect size: :data:`kgir_lib.eval.claims.READING_RULE`), beside the paper's."""
    part = table[(table["dataset"] == dataset) & (table["variant"] != full_label)]
    x = np.arange(len(part))
    ours = part[f"Δ{metric} (ours)"].astype(float)
    lo_col, hi_col = f"Δ{metric} CI lo", f"Δ{metric} CI hi"
    err = None
    if lo_col in part and hi_col in part and part[[lo_col, hi_col]].notna().any().any():
        err = np.vstack([(ours - part[lo_col]).fillna(0.0).to_numpy(float),
                         (part[hi_col] - ours).fillna(0.0).to_numpy(float)])
    bars = ax.bar(x - 0.2, ours, width=0.4, yerr=err, capsize=4,
                  label="ours (95 % CI)" if err is not None else "ours")
    ax.bar_label(bars, fmt="%.1f", fontsize=9.5, label_type="center")  # a zero change stays readable
    col = f"Δ{metric} (paper, Qwen2.5-72B)"
    paper = part[col] if col in part else pd.Series(dtype=float)
    if paper.notna().any():
        bars = ax.bar(x + 0.2, paper.fillna(0.0), width=0.4, label="paper (Table 7, Qwen2.5-72B)", hatch="//")
        ax.bar_label(bars, fmt="%.1f", fontsize=9.5)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, part["variant"], rotation=15)
    ax.set_ylabel(f"{metric}: full minus variant (points)")
    ax.set_title(f"{dataset}: {metric}")
    shown = [0.0, *ours.dropna(), *paper.dropna()]
    if err is not None:
        shown += [*part[lo_col].dropna(), *part[hi_col].dropna()]
    lo, hi = min(shown), max(shown)
    span = (hi - lo) or 1.0
    ax.set_ylim(lo - 0.15 * span, hi + 0.5 * span)  # a band above every bar and its label, for the legend
    ax.legend(fontsize=9.5, loc="upper center", ncol=2, frameon=False)


VARIANT_PT = 11.0  # plot_variant_scores' labels: legible when notebook 06's 11-in figure is shrunk to a 1024-px page
SWEEP_PT = 9.5     # plot_sweep's and plot_robustness' point labels and legends, likewise for their 9-in figures


def plot_variant_scores(ax, table: pd.DataFrame, metric: str = "F1", legend: bool = True) -> None:
    """Grouped bars: ``metric`` of each variant (x) for each dataset (colour), from :func:`ablation_table`.

    Readable at a glance: value labels above the bars, variant names wrapped under them, the legend (when
    asked for) above the axes, never over a bar."""
    import textwrap

    datasets = list(dict.fromkeys(table["dataset"]))
    variants = list(dict.fromkeys(table["variant"]))
    width = 0.8 / max(len(datasets), 1)
    for i, d in enumerate(datasets):
        part = table[table["dataset"] == d].set_index("variant").reindex(variants)
        x = np.arange(len(variants)) - 0.4 + width * (i + 0.5)
        bars = ax.bar(x, part[metric], width=width, label=d)
        ax.bar_label(bars, fmt="%.1f", fontsize=VARIANT_PT, padding=2)
    ax.set_xticks(np.arange(len(variants)), [textwrap.fill(str(v), 14) for v in variants], fontsize=VARIANT_PT)
    ax.tick_params(axis="y", labelsize=VARIANT_PT)
    ax.set_ylabel(f"{metric} (×100)", fontsize=11)
    ax.set_title(metric, fontsize=12)
    ax.margins(y=0.18)
    if legend:
        ax.legend(fontsize=VARIANT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.08), ncol=len(datasets),
                  frameon=False)


def plot_sweep(ax, df: pd.DataFrame, metrics: Sequence[str] = ("EM", "F1"), title: str = "",
               n_questions: Optional[int] = None) -> None:
    """One line per dataset and metric against the swept value, every point labelled with its value.

    With ``n_questions`` the title says what the points stand on: at n questions one question moves EM by
    100 / n points, so a step smaller than that is no change at all."""
    markers = "osD^v"
    for dataset, part in df.groupby("dataset", sort=False):
        for i, m in enumerate(metrics):
            if m in part:
                xs, ys = part["value"].astype(float), part[m]
                ax.plot(xs, ys, marker=markers[i % len(markers)], label=f"{dataset} {m}")
                for x, y in zip(xs, ys):
                    ax.annotate(f"{y:.0f}", (x, y), textcoords="offset points", xytext=(0, 5), ha="center",
                                fontsize=SWEEP_PT)
    if len(df):
        ax.set_xticks(sorted({float(v) for v in df["value"]}))
    ax.set_xlabel(str(df["param"].iloc[0]) if len(df) else "value", fontsize=10)
    ax.set_ylabel("score (×100)", fontsize=10)
    ax.margins(y=0.2)
    note = f"\nn = {n_questions} questions a point: one question = {100 / n_questions:.0f} EM points" \
        if n_questions else ""
    ax.set_title(title + note, fontsize=10)
    ax.legend(fontsize=SWEEP_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def plot_robustness(ax, summary: pd.DataFrame, metrics: Sequence[str] = ("EM", "F1"), title: str = "",
                    runs: Optional[pd.DataFrame] = None, n_questions: Optional[int] = None) -> None:
    """The mean over seeds against the share of triples dropped; with ``runs`` (one row a seed) every seed's
    score is drawn as a dot beside it, so the spread is seen as what it is, a handful of runs."""
    for dataset, part in summary.groupby("dataset", sort=False):
        for j, m in enumerate(metrics):
            if f"{m} mean" not in part:
                continue
            line, = ax.plot(100 * part["fraction"], part[f"{m} mean"], marker="o", label=f"{dataset} {m} (mean)")
            if runs is not None and m in runs:
                seeds = runs[runs["dataset"] == dataset]
                offset = 0.25 * (j - (len(metrics) - 1) / 2)  # side by side, not on top of each other
                ax.scatter(100 * seeds["fraction"] + offset, seeds[m], s=14, alpha=0.6, color=line.get_color())
    ax.set_xlabel("triples dropped (%)", fontsize=10)
    ax.set_ylabel("score (×100)", fontsize=10)
    seeds_n = int(summary["seeds"].max()) if "seeds" in summary and len(summary) else None
    parts = [p for p in (f"n = {n_questions} questions" if n_questions else "",
                         f"{seeds_n} seeds a share (dots: each seed)" if seeds_n and runs is not None else "") if p]
    ax.set_title(title + ("\n" + ", ".join(parts) if parts else ""), fontsize=10)
    ax.legend(fontsize=SWEEP_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


LOOP_STEPS = (  # (title, paper reference) of each box of plot_loop, left to right
    ("question q", ""), ("1. retrieve\nD_t", "eq. 2, dense top-k"), ("2. evidence\nsubgraph G_Ans", "Algorithm 1"),
    ("3. rewrite\nq'_t", "eq. 8, Fig. 4"), ("retrieve D'_t\nwith q'_t", "new passages P_t"),
    ("4. reflect", "§2.4, Fig. 5"), ("5. the reader\nanswers q", "shared reader"),
)


def loop_box_lines(counts: dict) -> list:
    """The counts written in each box of :func:`plot_loop` (one list of lines a box, :data:`LOOP_STEPS` order),
    from :func:`kgir_lib.eval.mechanism.loop_tables.loop_counts`."""
    c = counts
    by_round = [f"round {t}: {n}" for t, n in c.get("rounds by number", {}).items()]
    return [
        [f"{c['questions']} questions"],
        [f"{c['rounds']} rounds:", *by_round],
        [f"with a seed: {c['with seed']}", f"no seed: {c['without seed']}", "(D_t's passages", "stand in)"],
        [f"usable: {c['rewrite usable']}", f"malformed: {c['rewrite malformed']}", "(query kept)"],
        [f"new passages: {c['new passages']}", f"none new: {c['no new passage']}", "(top of D'_t", "stands in)"],
        [f"answer: {c['answer']}", f"missing: {c['missing']}", f"no verdict: {c['no verdict']}"],
        [f"after an answer: {c['stopped by reflection']}", "forced at the", f"round cap: {c['forced at cap']}"],
    ]


def plot_loop(counts: dict, title: str = "", width: float = 9.5):
    """Algorithm 2 as one diagram (notebook 04), drawn as the loop it is: retrieve -> subgraph -> rewrite along the
    top, retrieve with the rewrite -> reflect -> answer back along the bottom, and from the reflection an arrow back
    to retrieval with ``q'_t``; each box and arrow carries this run's counts
    (:func:`kgir_lib.eval.mechanism.loop_tables.loop_counts`). ``width`` inches (at the suite's 120 dpi, 9.5 in is
    shown at its own size on a 1280-px page). Returns the figure."""
    import textwrap

    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    height = 6.2
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    gap = 0.45
    box_w = (width - 0.3 - 3 * gap) / 4
    box_h, top_y, bottom_y = 2.05, 3.4, 0.3
    col = [0.15 + i * (box_w + gap) for i in range(4)]
    # (column, row) of each box of LOOP_STEPS: the top row left to right, then the bottom row right to left
    places = [(0, top_y), (1, top_y), (2, top_y), (3, top_y), (3, bottom_y), (2, bottom_y), (1, bottom_y)]
    colors = ["#f0f0f0", "#deebf7", "#deebf7", "#fde0c5", "#deebf7", "#e5f5e0", "#e5f5e0"]
    for (c, y0), (name, ref), body, color in zip(places, LOOP_STEPS, loop_box_lines(counts), colors):
        x = col[c]
        ax.add_patch(FancyBboxPatch((x, y0), box_w, box_h, boxstyle="round,pad=0.04,rounding_size=0.12",
                                    fc=color, ec="#555555", lw=1.2))
        ax.text(x + box_w / 2, y0 + box_h - 0.12, name.replace("\n", " ") if len(name) < 22 else name, ha="center",
                va="top", fontsize=12, weight="bold")
        if ref:
            ax.text(x + box_w / 2, y0 + box_h - 0.62, ref, ha="center", va="top", fontsize=10.5, color="#444444")
        ax.text(x + box_w / 2, y0 + 0.1, "\n".join(body), ha="center", va="bottom", fontsize=11, linespacing=1.3)
    arrow = dict(arrowstyle="-|>", lw=1.6, color="#333333", shrinkA=2, shrinkB=2, mutation_scale=16)
    rounds = f"{counts['rounds']}"
    mid_top, mid_bottom = top_y + box_h / 2, bottom_y + box_h / 2
    for i, label in enumerate((f"{counts['questions']}", rounds, rounds)):  # along the top
        a, b = col[i] + box_w, col[i + 1]
        ax.annotate("", xy=(b, mid_top), xytext=(a, mid_top), arrowprops=arrow)
        ax.text((a + b) / 2, mid_top + 0.1, label, ha="center", va="bottom", fontsize=11)
    down = col[3] + box_w / 2  # the rewrite's question retrieves D'_t
    ax.annotate("", xy=(down, bottom_y + box_h), xytext=(down, top_y), arrowprops=arrow)
    ax.text(down + 0.1, (top_y + bottom_y + box_h) / 2, rounds, ha="left", va="center", fontsize=11)
    answered = f"{counts['stopped by reflection'] + counts['forced at cap']}"
    for (a, b), label in (((col[3], col[2] + box_w), rounds), ((col[2], col[1] + box_w), answered)):  # along the bottom
        ax.annotate("", xy=(b, mid_bottom), xytext=(a, mid_bottom), arrowprops=arrow)
        ax.text((a + b) / 2, mid_bottom + 0.1, label, ha="center", va="bottom", fontsize=11)
    # the loop: from the reflection back up to retrieval
    loop = "#e6550d"
    x_from, x_to, y_mid = col[2] + box_w * 0.3, col[1] + box_w * 0.5, (top_y + bottom_y + box_h) / 2
    ax.plot([x_from, x_from, x_to], [bottom_y + box_h + 0.03, y_mid, y_mid], color=loop, lw=2.2)
    ax.annotate("", xy=(x_to, top_y - 0.03), xytext=(x_to, y_mid), arrowprops={**arrow, "color": loop, "lw": 2.2})
    ax.text(x_from - 0.12, y_mid - 0.08, f"missing, rounds left:\nnext round with q'_t ({counts['next round']}×)",
            ha="right", va="top", fontsize=11, color="#a63603")
    legend = ("Boxes: this run's rounds (a round counts once in each step it ran). Arrows: rounds passing on "
              "(questions into the first and out of the last step).")
    ax.text(col[0], bottom_y + box_h, textwrap.fill(legend, 26),
            ha="left", va="top", fontsize=10.5, color="#444444")
    if title:
        ax.text(0.15, height - 0.15, textwrap.fill(title, 95), ha="left", va="top", fontsize=12)
    return fig
