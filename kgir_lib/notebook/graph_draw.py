"""Drawing a small graph legibly at projection size: one layout, one label placement (notebooks 03 and 07).

:func:`layout` places each connected component on its own (Kamada-Kawai), the components holding a seed first,
deterministically. :func:`place_labels` moves every node and edge label to the first spot where it overlaps no
label placed before it and no node marker, so edge labels around a hub do not print over the names of its
neighbours. :data:`FIGSIZE`, :data:`NODE_FONT`, :data:`EDGE_FONT`, :data:`TITLE_FONT`, :data:`LEGEND_FONT` and
:data:`NOTE_FONT` are the sizes a lecture hall can read: a panel is shrunk to the output area of the page (1170 px on a
1280-px page, 914 px on a 1024-px one), and its smallest text (an edge label) still stands at least 12 px high on
both (``tests/test_figures_legible.py``).
"""
from __future__ import annotations

import textwrap
from typing import Any, Sequence

import networkx as nx

__all__ = ["FIGSIZE", "NODE_FONT", "EDGE_FONT", "TITLE_FONT", "LEGEND_FONT", "NOTE_FONT", "layout", "short_label",
           "place_labels"]

FIGSIZE = (10.0, 6.8)   # inches of one panel: 1200 px at the suite's 120 dpi, about 1250 with the legend beside it
NODE_FONT, EDGE_FONT = 11.0, 11.0   # pt: at least 12 px high when a panel with its legend is shrunk to a 1024-px page
TITLE_FONT, LEGEND_FONT, NOTE_FONT = 12.0, 11.0, 11.0


def layout(g: nx.Graph, seeds: Sequence[str] = ()) -> dict:
    """Positions for a drawing: each connected component laid out on its own (Kamada-Kawai, which spreads a
    hub's neighbours evenly). The components holding a seed come first, largest first, side by side and given
    the room; the components without one are stacked in a narrow column to their right, so they do not squeeze
    the part of the graph that matters. Nodes and edges are inserted in sorted order and positions rounded to 3
    decimals, so the same graph always gets the same picture (the optimiser's last bits can differ between
    machines; a rounded position does not move a pixel)."""
    import math

    seed_set = set(seeds)
    comps = sorted(nx.connected_components(g), key=lambda c: (not (c & seed_set), -len(c), sorted(c)[0]))

    def place(comp, scale):
        h = nx.Graph()
        h.add_nodes_from(sorted(comp))
        h.add_edges_from(sorted(tuple(sorted(e)) for e in g.subgraph(comp).edges()))
        return nx.kamada_kawai_layout(h, scale=scale) if len(comp) > 2 else \
            nx.circular_layout(h, scale=0.5 * scale) if len(comp) == 2 else {next(iter(comp)): (0.0, 0.0)}

    pos, x, top = {}, 0.0, 0.0
    with_seed = [c for c in comps if c & seed_set] or comps[:1]
    for comp in with_seed:
        scale = 0.9 * math.sqrt(len(comp))
        for n, (px, py) in place(comp, scale).items():
            pos[n] = (round(x + scale + float(px), 3), round(float(py), 3))
        top = max(top, scale)
        x += 2 * scale + 0.7
    rest = [c for c in comps if not any(c is w for w in with_seed)]
    y = top
    for comp in rest:
        scale = 0.5 * math.sqrt(len(comp))
        for n, (px, py) in place(comp, scale).items():
            pos[n] = (round(x + scale + float(px), 3), round(y - scale + float(py), 3))
        y -= 2 * scale + 0.5
    return pos


def short_label(s: str, width: int) -> str:
    """``s`` cut to two lines of ``width`` characters (an ellipsis when longer)."""
    s = str(s)
    s = s if len(s) <= 2 * width else s[:2 * width - 1] + "…"
    return "\n".join(textwrap.wrap(s, width)) or s


def _overlap(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def place_labels(ax, node_texts: dict, edge_texts: list, pos: dict, node_px: float = 11.0) -> int:
    """Move labels so that none overlaps another (module docstring): node labels first (busiest node first),
    each to the first spot beside its node (above, below, right, left, then the corners and further out) where
    it overlaps no label placed and no node marker; then each
    edge label to the first spot along its edge (the middle, then outwards to either end) that overlaps no
    label and no node marker. A label with no free spot takes the one overlapping least. ``node_texts``:
    ``{node: Text}``; ``edge_texts``: ``[(u, v, Text)]``. Returns how many labels still overlap one placed before
    them (0 when every label found a free spot)."""
    from matplotlib.transforms import Bbox

    ax.autoscale_view()  # the axes' final limits and place (as a drawing settles them first) without drawing
    ax.apply_aspect()
    renderer = ax.figure.canvas.get_renderer()
    to_data = ax.transData.inverted()
    placed: list = []
    markers = []
    for x, y in pos.values():
        cx, cy = ax.transData.transform((x, y))
        markers.append(Bbox.from_extents(cx - node_px, cy - node_px, cx + node_px, cy + node_px))

    def best(text, spots, avoid_markers):
        choice: Any = None  # (spot, box) of the least overlap so far
        least = None
        for spot in spots:
            text.set_position(spot)
            box = text.get_window_extent(renderer).expanded(1.04, 1.1)
            cost = sum(_overlap(box, b) for b in placed)
            if avoid_markers:
                cost += sum(_overlap(box, b) for b in markers)
            if cost == 0:
                return spot, box, 0.0
            if least is None or cost < least:
                choice, least = (spot, box), cost
        text.set_position(choice[0])
        return choice[0], choice[1], least

    clashes = 0
    degree: dict = {}
    for u, v, _ in edge_texts:
        degree[u], degree[v] = degree.get(u, 0) + 1, degree.get(v, 0) + 1
    for n in sorted(node_texts, key=lambda n: (-degree.get(n, 0), n)):
        text = node_texts[n]
        cx, cy = ax.transData.transform(pos[n])
        h = text.get_window_extent(renderer).height
        w = text.get_window_extent(renderer).width
        up = h / 2 + node_px + 3
        offsets = [(0, up), (0, -up), (w / 2 + node_px + 4, 0), (-w / 2 - node_px - 4, 0), (w / 2, up),
                   (-w / 2, up), (w / 2, -up), (-w / 2, -up), (0, 2 * up), (0, -2 * up)]
        spots = [tuple(to_data.transform((cx + dx, cy + dy))) for dx, dy in offsets]
        _, box, cost = best(text, spots, avoid_markers=True)
        placed.append(box)
        clashes += int(cost > 0)
    for u, v, text in edge_texts:
        (x0, y0), (x1, y1) = pos[u], pos[v]
        fractions = [0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78, 0.15, 0.85]
        spots = [(x0 + f * (x1 - x0), y0 + f * (y1 - y0)) for f in fractions]
        _, box, cost = best(text, spots, avoid_markers=True)
        placed.append(box)
        clashes += int(cost > 0)
    return clashes
