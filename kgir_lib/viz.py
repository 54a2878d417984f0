"""Drawing an evidence subgraph (paper §2.2, Algorithm 1): ``G_tmp`` with ``G_Ans`` highlighted.

:func:`draw_subgraph` draws the entities of ``G_tmp`` and every triple as an
edge: those the maximum spanning trees kept (``G_Ans``) solid blue (darker =
heavier), the pruned ones grey and dashed (parallel triples of one entity pair
as arcs); seeds are larger, outlined red nodes. :func:`render_trace` writes a
KGIR-RAG question trace as Markdown.
"""
from __future__ import annotations

import textwrap
from typing import Optional, Sequence

import networkx as nx
import numpy as np
import pandas as pd

from .subgraph import EvidenceSubgraph

KEPT_CMAP = "Blues"
PRUNED_COLOR = "#bbbbbb"
SEED_COLOR = "#e4572e"
NODE_COLOR = "#9ecae1"


def _short(s: str, width: int) -> str:
    s = str(s)
    s = s if len(s) <= 2 * width else s[:2 * width - 1] + "…"
    return "\n".join(textwrap.wrap(s, width)) or s


def subgraph_edges(sub: EvidenceSubgraph) -> dict:
    """``{(u, v): {"kept": bool, "weight": float, "relations": [...], "label": str}}``, one entry per entity pair.

    A pair is kept if any of its triples is in ``G_Ans``; its weight and label
    are those of the kept triple, else of the heaviest pruned one.
    """
    kept = set(sub.kept)
    pairs: dict = {}
    for t in sub.G_tmp:
        if t.head == t.tail:
            continue
        key = tuple(sorted((t.head, t.tail)))
        e = pairs.setdefault(key, {"kept": False, "weight": float("-inf"), "relations": [], "label": ""})
        e["relations"].append(t.relation)
        w = float(sub.weights.get(t, 0.0))
        better = (t in kept and not e["kept"]) or ((t in kept) == e["kept"] and w > e["weight"])
        if better:
            e["kept"], e["weight"], e["label"] = t in kept, w, t.relation
    for e in pairs.values():
        extra = len(e["relations"]) - 1
        e["label"] = e["label"] + (f" (+{extra})" if extra else "")
    return pairs


def component_layout(g: nx.Graph, seed: int = 0) -> dict:
    """Positions: each connected component laid out on its own (spring layout), components on a grid.

    Larger components get more room (scale ~ sqrt of their size), so a star of
    ten triples stays legible next to a single edge. Each component is rebuilt with
    its nodes and edges in sorted order: the spring layout's result depends on the
    order nodes were inserted, and G_tmp's triples can arrive in another order in
    another process, which redrew the same figure differently.
    """
    import math

    comps = sorted(nx.connected_components(g), key=lambda c: (-len(c), sorted(c)[0]))
    cols = max(1, math.ceil(math.sqrt(len(comps))))
    pos, x, y, row_h = {}, 0.0, 0.0, 0.0
    for i, comp in enumerate(comps):
        sub = g.__class__()
        sub.add_nodes_from(sorted(comp))
        sub.add_edges_from(sorted(g.subgraph(comp).edges(data=True), key=lambda e: sorted(e[:2])))
        scale = 0.5 * math.sqrt(len(comp))
        p = nx.spring_layout(sub, seed=seed, scale=scale) if len(comp) > 1 else {next(iter(comp)): (0.0, 0.0)}
        if i and i % cols == 0:
            x, y, row_h = 0.0, y - row_h - 0.8, 0.0
        for n, (px, py) in p.items():
            pos[n] = (x + scale + px, y - scale + py)
        x += 2 * scale + 0.8
        row_h = max(row_h, 2 * scale)
    return pos


def draw_subgraph(ax, sub: EvidenceSubgraph, title: Optional[str] = None, seed: int = 0, label_width: int = 16,
                  edge_labels: bool = True) -> dict:
    """Draw ``G_tmp`` of ``sub`` on matplotlib axes ``ax``: G_Ans edges blue (darker = heavier), pruned ones grey.

    Every triple of ``G_tmp`` is one line: the kept triple of an entity pair is
    straight, further (parallel) triples of the pair are grey dashed arcs beside
    it; a pruned triple alone on its pair is a straight grey dashed line. Edge
    labels show the kept relation of each pair (``+n`` = n parallel triples).
    Returns counts of what was drawn: ``{"nodes", "seeds", "kept_edges",
    "pruned_edges"}`` (triples). An empty ``G_tmp`` draws a note instead.
    """
    import matplotlib.pyplot as plt

    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=9)
    pairs = subgraph_edges(sub)
    if not pairs:
        ax.text(0.5, 0.5, "no matched entity: G_tmp is empty" if not sub.seeds else "seeds without edges",
                ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#555555")
        return {"nodes": 0, "seeds": 0, "kept_edges": 0, "pruned_edges": 0}
    g = nx.Graph()
    for (u, v), e in pairs.items():
        g.add_edge(u, v, **e)
    pos = component_layout(g, seed)
    seed_set = set(sub.seeds)
    kept_set = set(sub.kept)
    straight_kept, straight_pruned, arcs = [], [], []  # arcs: (u, v, rad)
    drawn_first: dict = {}
    for t in sorted(sub.G_tmp, key=lambda t: t not in kept_set):  # kept triples claim the straight line
        if t.head == t.tail:
            continue
        key = tuple(sorted((t.head, t.tail)))
        n = drawn_first.get(key, 0)
        drawn_first[key] = n + 1
        if n == 0:
            (straight_kept if t in kept_set else straight_pruned).append((t.head, t.tail, sub.weights.get(t, 0.0)))
        else:
            arcs.append((t.head, t.tail, 0.25 * ((n + 1) // 2) * (1 if n % 2 else -1)))
    if straight_pruned:
        nx.draw_networkx_edges(g, pos, edgelist=[(u, v) for u, v, _ in straight_pruned], ax=ax,
                               edge_color=PRUNED_COLOR, style="dashed", width=1.2)
    for u, v, rad in arcs:
        nx.draw_networkx_edges(g, pos, edgelist=[(u, v)], ax=ax, edge_color=PRUNED_COLOR, style="dashed",
                               width=1.2, arrows=True, arrowstyle="-", connectionstyle=f"arc3,rad={rad}")
    if straight_kept:
        ws = [w for _, _, w in straight_kept]
        lo, hi = min(ws), max(ws)
        span = hi - lo if hi > lo else 1.0
        nx.draw_networkx_edges(g, pos, edgelist=[(u, v) for u, v, _ in straight_kept], ax=ax, edge_color=ws,
                               edge_cmap=plt.get_cmap(KEPT_CMAP), edge_vmin=lo - 0.6 * span, edge_vmax=hi,
                               width=2.5)
    seeds = [n for n in g if n in seed_set]
    others = [n for n in g if n not in seed_set]
    nx.draw_networkx_nodes(g, pos, nodelist=others, ax=ax, node_color=NODE_COLOR, node_size=220)
    nx.draw_networkx_nodes(g, pos, nodelist=seeds, ax=ax, node_color=SEED_COLOR, node_size=420,
                           edgecolors="black", linewidths=1.2)
    nx.draw_networkx_labels(g, pos, labels={n: _short(n, label_width) for n in g}, ax=ax, font_size=7)
    if edge_labels:
        nx.draw_networkx_edge_labels(g, pos, ax=ax, font_size=6,
                                     edge_labels={(u, v): _short(d["label"], label_width)
                                                  for u, v, d in g.edges(data=True)})
    n_kept = len(straight_kept)
    return {"nodes": g.number_of_nodes(), "seeds": len(seeds), "kept_edges": n_kept,
            "pruned_edges": len(straight_pruned) + len(arcs)}


def legend_handles() -> list:
    """Legend entries for :func:`draw_subgraph` figures."""
    from matplotlib.lines import Line2D

    return [Line2D([0], [0], color="#2171b5", lw=2.5, label="G_Ans edge (darker = heavier)"),
            Line2D([0], [0], color=PRUNED_COLOR, lw=1.0, ls="--", label="pruned by the MST"),
            Line2D([0], [0], marker="o", color="w", markerfacecolor=SEED_COLOR, markeredgecolor="black",
                   markersize=9, label="seed entity"),
            Line2D([0], [0], marker="o", color="w", markerfacecolor=NODE_COLOR, markersize=7, label="entity")]


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
             f"({trace.get('answered_by')}, {trace.get('iterations_used')} round(s), {trace.get('variant')})", ""]
    from .methods.kgir_rounds import trace_rounds

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
            lines.append(f"reader ({'forced' if fin.forced else 'ablation'}) on *{_md(fin.question)}* "
                         f"→ **{fin.answer}**  ")
        lines.append("")
    llm = trace.get("llm", {})
    if llm:
        lines.append("LLM: " + ", ".join(f"{k} {v.get('calls', 0)} call(s) / {v.get('prompt_tokens', 0)}+"
                                         f"{v.get('completion_tokens', 0)} tokens" for k, v in llm.items()))
    return "\n".join(lines)


def pick_drawable(subs, n: int = 3, max_pairs: int = 16) -> list:
    """Indices of up to ``n`` subgraphs worth drawing: legible (3..``max_pairs`` entity pairs), pruned ones first."""
    sizes = [len(subgraph_edges(s)) for s in subs]
    ok = [i for i, s in enumerate(subs) if 3 <= sizes[i] <= max_pairs]
    ok.sort(key=lambda i: (not subs[i].pruned, -sizes[i]))
    return ok[:n]


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
        ax.annotate(str(i), (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=8)
        legend.append(f"{i}  {' = '.join(names)}")
    ax.text(1.02, 1.0, "\n".join(legend), transform=ax.transAxes, va="top", fontsize=8, family="monospace")
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
    """Bars: our change of ``metric`` per variant (from :func:`ablation_table`) beside the paper's drop."""
    part = table[(table["dataset"] == dataset) & (table["variant"] != full_label)]
    x = np.arange(len(part))
    bars = ax.bar(x - 0.2, part[f"Δ{metric} (ours)"], width=0.4, label="ours")
    ax.bar_label(bars, fmt="%.1f", fontsize=7)  # a zero change stays readable
    col = f"Δ{metric} (paper, Qwen2.5-72B)"
    paper = part[col] if col in part else pd.Series(dtype=float)
    if paper.notna().any():
        bars = ax.bar(x + 0.2, paper.fillna(0.0), width=0.4, label="paper (Table 7, Qwen2.5-72B)", hatch="//")
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, part["variant"], rotation=15)
    ax.set_ylabel(f"Δ{metric} vs full (points)")
    ax.set_title(f"{dataset}: {metric}")
    ax.legend(fontsize=8)


def plot_variant_scores(ax, table: pd.DataFrame, metric: str = "F1") -> None:
    """Grouped bars: ``metric`` of each variant (x) for each dataset (colour), from :func:`ablation_table`."""
    datasets = list(dict.fromkeys(table["dataset"]))
    variants = list(dict.fromkeys(table["variant"]))
    width = 0.8 / max(len(datasets), 1)
    for i, d in enumerate(datasets):
        part = table[table["dataset"] == d].set_index("variant").reindex(variants)
        x = np.arange(len(variants)) - 0.4 + width * (i + 0.5)
        bars = ax.bar(x, part[metric], width=width, label=d)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(np.arange(len(variants)), variants, rotation=15)
    ax.set_ylabel(f"{metric} (×100)")
    ax.set_title(metric)
    ax.legend(fontsize=8)


def plot_sweep(ax, df: pd.DataFrame, metrics: Sequence[str] = ("EM", "F1"), title: str = "") -> None:
    """One line per dataset and metric against the swept value."""
    for dataset, part in df.groupby("dataset", sort=False):
        for m in metrics:
            if m in part:
                ax.plot(part["value"].astype(float), part[m], marker="o", label=f"{dataset} {m}")
    if len(df):
        ax.set_xticks(sorted({float(v) for v in df["value"]}))
    ax.set_xlabel(str(df["param"].iloc[0]) if len(df) else "value")
    ax.set_ylabel("score (×100)")
    ax.set_title(title)
    ax.legend(fontsize=8)


def plot_robustness(ax, summary: pd.DataFrame, metrics: Sequence[str] = ("EM", "F1"), title: str = "") -> None:
    """Mean ± std over seeds against the share of triples dropped."""
    for dataset, part in summary.groupby("dataset", sort=False):
        for m in metrics:
            if f"{m} mean" in part:
                ax.errorbar(100 * part["fraction"], part[f"{m} mean"], yerr=part[f"{m} std"], marker="o",
                            capsize=3, label=f"{dataset} {m}")
    ax.set_xlabel("triples dropped (%)")
    ax.set_ylabel("score (×100), mean ± std over seeds")
    ax.set_title(title)
    ax.legend(fontsize=8)
