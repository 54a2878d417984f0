"""Algorithm 1 drawn step by step (paper §2.2, eqs. 2-7): the panels of notebook 03.

:func:`draw_step` draws one step of a :class:`~kgir_lib.notebook.steps_viz.FocusView` on its fixed layout, so the
panels of a figure differ only in what the step adds: ``G_q`` (step 2), the seeds (steps 3-4), the components
(steps 4-5; with the seeds when ``G_tmp`` is ``G_q``, :func:`~kgir_lib.notebook.steps_viz.panels`), the weights and
the maximum spanning trees (steps 6-7), ``G_Ans``. Seeds are red; from the seeds on, the question's gold bridge
entities are purple diamonds. Legends sit outside the axes; each title says what the panel leaves out
(:meth:`~kgir_lib.notebook.steps_viz.FocusView.panel_note`); labels are placed by
:func:`kgir_lib.notebook.graph_draw.place_labels` at :data:`~kgir_lib.notebook.graph_draw.FIGSIZE`.
"""
from __future__ import annotations

import textwrap
from typing import Optional

import networkx as nx

from ..kg import Triple
from .graph_draw import EDGE_FONT, FIGSIZE, LEGEND_FONT, NODE_FONT, NOTE_FONT, TITLE_FONT, place_labels, short_label
from .steps_viz import KEPT, PRUNED, SEEDLESS, STEPS, FocusView, covers_G_q

TITLE_CHARS = 90  # a panel's title wraps here (at TITLE_FONT, about the panel's width)

__all__ = ["STEP_TITLES", "COLORS", "step_title", "step_legend", "draw_step", "steps_figure"]

STEP_TITLES = {
    "G_q": "Step 2 (eq. 3): G_q, the triples of the retrieved passages",
    "seeds": "Steps 3-4 (eqs. 4-5): question entities matched to graph entities = seeds",
    "components": "Steps 4-5 (eqs. 5-6): components of G_tmp; only those holding a seed go on",
    "mst": "Steps 6-7 (eq. 7): edge weights, one maximum spanning tree per seed component",
    "G_Ans": "Result: G_Ans, the union of the trees",
}
COLORS = {"kept": "#2171b5", "pruned": "#e6550d", "seedless": "#b0b0b0", "plain": "#7f7f7f",
          "component": "#31a354", "seed": "#e4572e", "node": "#c6dbef", "bridge": "#7b3294", "outside": "#d9d9d9"}


def step_title(view: FocusView, step: str) -> str:
    """The title of ``step``'s panel; the components panel of a ``G_tmp`` equal to ``G_q`` says so."""
    if step == "components" and covers_G_q(view.sub):
        return ("Steps 3-5 (eqs. 4-6): seeds, and the components of G_tmp (here all of G_q); only those holding a "
                "seed go on")
    return STEP_TITLES[step]


def _style(view: FocusView, step: str, t: Triple) -> Optional[dict]:
    """Line style of triple ``t`` at ``step`` (``None``: not drawn at this step)."""
    cls = view.classes.get(t)
    if step in ("G_q", "seeds"):
        return {"color": COLORS["plain"], "style": "solid", "width": 1.4}
    if step == "components":
        if cls == SEEDLESS:
            return {"color": COLORS["seedless"], "style": "dotted", "width": 1.6}
        if cls is None:
            return {"color": COLORS["outside"], "style": "solid", "width": 1.0}
        return {"color": COLORS["component"], "style": "solid", "width": 2.0}
    if step == "mst":
        styles: dict[Optional[str], dict] = {KEPT: {"color": COLORS["kept"], "style": "solid", "width": 3.0},
                                             PRUNED: {"color": COLORS["pruned"], "style": "dashed", "width": 2.0},
                                             SEEDLESS: {"color": COLORS["seedless"], "style": "dotted", "width": 1.4}}
        return styles.get(cls)
    if step == "G_Ans":
        return {"color": COLORS["kept"], "style": "solid", "width": 3.0} if cls == KEPT else None
    raise ValueError(f"unknown step {step!r} (choose from {STEPS})")


def step_legend(step: str, bridge: bool = False, outside: bool = False) -> list:
    """Legend handles for :func:`draw_step` at ``step``; ``bridge``: the gold bridge's marker; ``outside``: the
    style of a ``G_q`` triple that is not in ``G_tmp`` (the ``seed_star`` reading)."""
    from matplotlib.lines import Line2D

    def line(key, ls, label, lw=2.0):
        return Line2D([0], [0], color=COLORS[key], lw=lw, ls=ls, label=label)

    def dot(key, label, edge="none", size=10, marker="o"):
        return Line2D([0], [0], marker=marker, color="w", markerfacecolor=COLORS[key], markeredgecolor=edge,
                      markersize=size, label=label)

    entity = [dot("node", "entity")]
    seed = [dot("seed", "seed (matched question entity)", "black", 12)]
    gold = [dot("bridge", "gold bridge entity\n(the hop the question hides)", "black", 12, "D")] if bridge else []
    if step == "G_q":
        return [line("plain", "-", "triple (edge label: relation)", 1.4)] + entity
    if step == "seeds":
        return [line("plain", "-", "triple", 1.4)] + seed + gold + entity
    if step == "components":
        extra = [line("outside", "-", "in G_q, not in G_tmp", 1.0)] if outside else []
        return [line("component", "-", "in a component with a seed (B_i)"),
                line("seedless", ":", "in a component without a seed:\ndropped (eq. 6)")] + extra + seed + gold + entity
    if step == "mst":
        return [line("kept", "-", "kept: in a maximum spanning tree\n(label: weight)", 3.0),
                line("pruned", "--", "pruned by the MST (closes a cycle\nor is a parallel edge)"),
                line("seedless", ":", "component without a seed:\nnever weighted", 1.4)] + seed + gold + entity
    return [line("kept", "-", "G_Ans triple (label: relation)", 3.0)] + seed + gold + entity


def draw_step(ax, view: FocusView, step: str, title: Optional[str] = None, label_width: int = 16,
              legend: bool = True) -> dict:
    """Draw ``step`` of Algorithm 1 (one of :data:`STEPS`) for ``view`` on ``ax``; legend outside the axes.

    Every drawn triple is one line; further triples between the same two entities are arcs beside the
    first. Seeds are red; from the seeds on, the question's gold bridge entities (``view.bridges``) are purple
    diamonds. The title's second line says what the panel leaves out. Labels are placed by
    :func:`place_labels`. Returns what was drawn: ``{"edges", "kept", "pruned", "seedless", "seeds", "nodes",
    "bridges", "label clashes"}``.
    """
    import matplotlib.pyplot as plt  # noqa: F401  (backend set by the caller)

    ax.set_axis_off()
    head = title or step_title(view, step)
    head = "\n".join(textwrap.fill(line, TITLE_CHARS) for line in head.split("\n"))  # a long question wraps, so the
    ax.set_title(head + (f"\n{view.panel_note(step)}" if view.triples else ""),   # panel is not widened past the page
                 fontsize=TITLE_FONT, loc="left")
    empty = {"edges": 0, "kept": 0, "pruned": 0, "seedless": 0, "seeds": 0, "nodes": 0, "bridges": 0,
             "label clashes": 0}
    if not view.triples:
        ax.text(0.5, 0.5, "nothing to draw: no seed matched an entity of G_q", ha="center", va="center",
                transform=ax.transAxes, fontsize=NOTE_FONT, color="#555555")
        return empty
    sub, pos = view.sub, view.pos
    g = nx.Graph()
    g.add_nodes_from(pos)
    g.add_edges_from((t.head, t.tail) for t in view.triples)
    seen: dict = {}
    drawn = {"edges": 0, KEPT: 0, PRUNED: 0, SEEDLESS: 0}
    labels: dict = {}
    # a kept triple takes the straight line; then by name, so the drawing order (which of two crossing lines is on
    # top, a parallel edge's bend) does not follow the order the view happens to list its triples in
    order = sorted(view.triples, key=lambda t: (view.classes.get(t) != KEPT, t.head, t.tail, t.relation))
    for t in order:
        style = _style(view, step, t)
        if style is None:
            continue
        key = tuple(sorted((t.head, t.tail)))
        n = seen.get(key, 0)
        seen[key] = n + 1
        rad = 0.0 if n == 0 else 0.25 * ((n + 1) // 2) * (1 if n % 2 else -1)
        nx.draw_networkx_edges(g, pos, edgelist=[(t.head, t.tail)], ax=ax, edge_color=style["color"],
                               style=style["style"], width=style["width"], arrows=True, arrowstyle="-",
                               connectionstyle=f"arc3,rad={rad}", node_size=420)
        drawn["edges"] += 1
        cls = view.classes.get(t)
        if step in ("mst", "G_Ans") and cls in drawn:
            drawn[cls] += 1
        if n == 0:
            if step == "mst" and cls in (KEPT, PRUNED):
                labels[(t.head, t.tail)] = f"{sub.weights.get(t, 0.0):.2f}"
            elif step != "mst":
                labels[(t.head, t.tail)] = short_label(t.relation, label_width)
    for key, n in seen.items():
        first = next(((u, v) for (u, v) in labels if tuple(sorted((u, v))) == key), None)
        if first is not None and n > 1 and step != "mst":
            labels[first] = f"{labels[first]} (+{n - 1})"
    visible = {e for t in view.triples if _style(view, step, t) is not None for e in (t.head, t.tail)}
    seeds = [n for n in pos if n in set(sub.seeds) and n in visible] if step != "G_q" else []
    bridges = [n for n in pos if n in set(view.bridges) and n in visible and n not in set(seeds)] \
        if step != "G_q" else []
    others = [n for n in pos if n in visible and n not in set(seeds) | set(bridges)]
    nx.draw_networkx_nodes(g, pos, nodelist=others, ax=ax, node_color=COLORS["node"], node_size=320)
    if seeds:
        nx.draw_networkx_nodes(g, pos, nodelist=seeds, ax=ax, node_color=COLORS["seed"], node_size=520,
                               edgecolors="black", linewidths=1.3)
    if bridges:
        nx.draw_networkx_nodes(g, pos, nodelist=bridges, ax=ax, node_color=COLORS["bridge"], node_size=560,
                               node_shape="D", edgecolors="black", linewidths=1.3)
    box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
    node_texts = {n: ax.text(*pos[n], short_label(n, label_width), fontsize=NODE_FONT, ha="center", va="center",
                             bbox=box, zorder=4,
                             weight="bold" if n in set(seeds) | set(bridges) else "normal")
                  for n in pos if n in visible}  # in the layout's order: a set's order changes with the hash seed
    edge_texts = [(u, v, ax.text(*pos[u], text, fontsize=EDGE_FONT, ha="center", va="center", bbox=box, zorder=3,
                                 color="#222222")) for (u, v), text in labels.items()]
    if legend:
        outside = step == "components" and any(view.classes.get(t) is None for t in view.triples)
        ax.legend(handles=step_legend(step, bool(bridges), outside), loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0, fontsize=LEGEND_FONT, frameon=False, labelspacing=0.9)
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    pad_x, pad_y = 0.08 * (max(xs) - min(xs) + 1), 0.1 * (max(ys) - min(ys) + 1)
    ax.set_xlim(min(xs) - pad_x, max(xs) + pad_x)  # the same frame at every step
    ax.set_ylim(min(ys) - pad_y, max(ys) + pad_y)
    clashes = place_labels(ax, node_texts, edge_texts, pos)
    return {"edges": drawn["edges"], "kept": drawn[KEPT], "pruned": drawn[PRUNED], "seedless": drawn[SEEDLESS],
            "seeds": len(seeds), "nodes": len(visible), "bridges": len(bridges), "label clashes": clashes}


def steps_figure():
    """A figure and axes for one panel of :func:`draw_step`: :data:`FIGSIZE` at 100 dpi, the legend outside on the
    right."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=FIGSIZE, dpi=100)
    ax = fig.add_axes((0.01, 0.02, 0.70, 0.86))
    return fig, ax
