"""Algorithm 1 drawn step by step on one question (paper §2.2, eqs. 2-7).

A question's ``G_q`` holds 40-110 triples on the sample; drawn whole it is a hairball. :func:`focus_view`
picks the neighbourhood that matters and says what it leaves out:

* **around the seeds**: entities of the seed components ``B_i`` are added nearest-first (hops from a seed,
  over any triple of the component), and every triple among the chosen entities is drawn (the induced
  subgraph), until ``max_edges`` is reached; so every MST-pruned triple between two drawn entities is drawn
  with the tree edges that made it redundant;
* **one or two small components without a seed** (up to ``max_seedless`` triples), drawn apart: under the
  ``passages`` reading ``G_tmp`` holds them, and eq. 6 drops them.

:func:`draw_step` draws one step on that fixed layout, so the panels of a figure differ only in what the
step adds: ``G_q`` (step 2), the seeds (steps 3-4), the components (steps 4-5), the weights and the
maximum spanning trees (steps 6-7), ``G_Ans``. Each triple is classified exactly as Algorithm 1 left it
(:func:`triple_class`): kept in ``G_Ans``, pruned by the MST (in a seed component, not in the tree), or in a
component without a seed (never weighted). Legends sit outside the axes.
"""
from __future__ import annotations

import textwrap
from collections import deque
from dataclasses import dataclass, field
from typing import Optional, Sequence

import networkx as nx

from ..kg import Triple
from ..kgir.subgraph import EvidenceSubgraph

STEPS = ("G_q", "seeds", "components", "mst", "G_Ans")
STEP_TITLES = {
    "G_q": "Step 2 (eq. 3): G_q, the triples of the retrieved passages",
    "seeds": "Steps 3-4 (eqs. 4-5): question entities matched to graph entities = seeds",
    "components": "Steps 4-5 (eqs. 5-6): components of G_tmp; only those holding a seed go on",
    "mst": "Steps 6-7 (eq. 7): edge weights, one maximum spanning tree per seed component",
    "G_Ans": "Result: G_Ans, the union of the trees",
}
COLORS = {"kept": "#2171b5", "pruned": "#e6550d", "seedless": "#b0b0b0", "plain": "#7f7f7f",
          "component": "#31a354", "seed": "#e4572e", "node": "#c6dbef"}
KEPT, PRUNED, SEEDLESS = "kept", "pruned", "seedless"


def triple_class(sub: EvidenceSubgraph, t: Triple) -> Optional[str]:
    """How Algorithm 1 left triple ``t`` of ``sub``: ``"kept"`` (in G_Ans), ``"pruned"`` (in a seed
    component but not in its maximum spanning tree), ``"seedless"`` (in ``G_tmp`` but in no component with a
    seed), or ``None`` (not in ``G_tmp``: under the ``seed_star`` reading, a triple of ``G_q`` away from the
    seeds)."""
    if t in set(sub.kept):
        return KEPT
    if t in set(sub.pruned):
        return PRUNED
    if t in set(sub.G_tmp) and t.head != t.tail:
        return SEEDLESS
    return None


@dataclass
class FocusView:
    """The part of one question's subgraph that is drawn, its fixed layout, and what was left out."""

    sub: EvidenceSubgraph
    triples: list                                    # drawn triples (seed neighbourhood, then seedless examples)
    classes: dict                                    # Triple -> kept | pruned | seedless | None
    counts: dict = field(default_factory=dict)       # drawn and total counts (see :func:`focus_view`)
    _pos: Optional[dict] = None

    @property
    def pos(self) -> dict:
        """Entity -> (x, y): :func:`layout` of the drawn triples, computed when first drawn."""
        if self._pos is None:
            g = nx.Graph()
            g.add_nodes_from(s for s in self.sub.seeds if any(s in (t.head, t.tail) for t in self.triples))
            g.add_edges_from((t.head, t.tail) for t in self.triples)
            self._pos = layout(g, self.sub.seeds)
        return self._pos

    def drawn(self, cls: str) -> list:
        return [t for t in self.triples if self.classes.get(t) == cls]

    def left_out(self) -> str:
        """One sentence: what the drawing shows of ``G_q`` and what it leaves out."""
        c = self.counts
        parts = [f"drawn: {c['drawn']} of the {c['G_q']} triples of G_q ({c['drawn_entities']} of "
                 f"{c['G_q_entities']} entities)"]
        if c["component_triples"]:
            parts.append(f"{c['drawn_component']} of the {c['component_triples']} triples of the seed components "
                         f"(the entities nearest the seeds, all triples among them)")
        if c["seedless_triples"]:
            parts.append(f"{c['drawn_seedless']} of the {c['seedless_triples']} triples in "
                         f"{c['seedless_components']} component(s) without a seed")
        outside = c["G_q"] - c["component_triples"] - c["seedless_triples"]
        if outside:
            parts.append(f"{outside} triple(s) of G_q are not in G_tmp (self-loops, or the seed_star reading)")
        return "; ".join(parts) + "."


def _adjacency(triples: Sequence[Triple]) -> dict:
    adj: dict = {}
    for t in triples:
        if t.head == t.tail:
            continue
        adj.setdefault(t.head, set()).add(t.tail)
        adj.setdefault(t.tail, set()).add(t.head)
    return adj


def _hops(adj: dict, sources: Sequence[str]) -> dict:
    dist = {s: 0 for s in sources if s in adj}
    queue = deque(dist)
    while queue:
        u = queue.popleft()
        for v in sorted(adj.get(u, ())):
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def _induced(triples: Sequence[Triple], nodes: set) -> list:
    return [t for t in triples if t.head in nodes and t.tail in nodes and t.head != t.tail]


def _seed_neighbourhood(comp_triples: Sequence[Triple], seeds: Sequence[str], pruned: set,
                        budget: int) -> list:
    """Entities of the seed components, nearest the seeds first, while the induced triples fit ``budget``.

    Grows from the seeds through adjacent entities; among the entities at the same distance the one that
    brings the most MST-pruned triples (then the most triples, then the name) goes first, so the drawing
    shows the tree's work where there is any."""
    adj = _adjacency(comp_triples)
    dist = _hops(adj, seeds)
    chosen = {s for s in seeds if s in adj}
    if len(_induced(comp_triples, chosen)) > budget:
        chosen = set(sorted(chosen)[:1])
    while True:
        frontier = sorted({v for u in chosen for v in adj.get(u, ()) if v not in chosen})
        best, best_key = None, None
        for v in frontier:
            edges = _induced(comp_triples, chosen | {v})
            if len(edges) > budget:
                continue
            new = [t for t in edges if v in (t.head, t.tail)]
            key = (dist.get(v, 99), -sum(t in pruned for t in new), -len(new), v)
            if best_key is None or key < best_key:
                best, best_key = v, key
        if best is None:
            return _induced(comp_triples, chosen)
        chosen.add(best)


def _seedless_examples(seedless: Sequence[Triple], budget: int) -> tuple:
    """Up to ``budget`` triples from the smallest components without a seed (whole components, at least
    one); returns ``(triples, number of seedless components)``."""
    adj = _adjacency(seedless)
    g = nx.Graph()
    g.add_edges_from((a, b) for a in adj for b in adj[a])
    comps = sorted(nx.connected_components(g), key=lambda c: (len(_induced(seedless, c)), sorted(c)[0]))
    out: list = []
    for c in comps:
        edges = _induced(seedless, c)
        if out and len(out) + len(edges) > budget:
            break
        if len(edges) <= budget:
            out.extend(edges)
        if len(out) >= budget:
            break
    return out, len(comps)


def focus_view(sub: EvidenceSubgraph, max_edges: int = 25, max_seedless: int = 4, seed: int = 0) -> FocusView:
    """The drawn part of ``sub`` (module docstring): at most ``max_edges`` triples, of which at most
    ``max_seedless`` from components without a seed (none when no seed matched); positions from :func:`layout`.

    ``counts``: ``G_q``, ``G_q_entities``, ``component_triples``, ``seedless_triples``,
    ``seedless_components``, ``drawn``, ``drawn_entities``, ``drawn_component``, ``drawn_seedless``.
    """
    comp = [t for c in sub.components for t in c.triples if t.head != t.tail]
    classes = {t: triple_class(sub, t) for t in dict.fromkeys(list(sub.G_q) + list(sub.G_tmp))}
    seedless_all = [t for t, c in classes.items() if c == SEEDLESS]
    seedless, n_seedless_comps = _seedless_examples(seedless_all, min(max_seedless, max_edges))
    main = _seed_neighbourhood(comp, sub.seeds, set(sub.pruned), max_edges - len(seedless))
    triples = list(dict.fromkeys(main + seedless)) if sub.seeds else []  # no seed: nothing to show (in words)
    g = nx.Graph()
    g.add_nodes_from(s for s in sub.seeds if any(s in (t.head, t.tail) for t in triples))
    g.add_edges_from((t.head, t.tail) for t in triples)
    entities_gq = {e for t in sub.G_q for e in (t.head, t.tail)}
    counts = {"G_q": len(sub.G_q), "G_q_entities": len(entities_gq), "component_triples": len(comp),
              "seedless_triples": len(seedless_all), "seedless_components": n_seedless_comps,
              "drawn": len(triples), "drawn_entities": g.number_of_nodes(), "drawn_component": len(main),
              "drawn_seedless": len(seedless)}
    return FocusView(sub=sub, triples=triples, classes=classes, counts=counts)


def layout(g: nx.Graph, seeds: Sequence[str] = ()) -> dict:
    """Positions for a drawing: each connected component laid out on its own (Kamada-Kawai, which spreads a
    hub's neighbours evenly), components holding a seed first and largest, side by side; nodes and edges
    are inserted in sorted order and positions rounded to 3 decimals, so the same graph always gets the same
    picture (the optimiser's last bits can differ between machines; a rounded position does not move a pixel)."""
    import math

    seed_set = set(seeds)
    comps = sorted(nx.connected_components(g), key=lambda c: (not (c & seed_set), -len(c), sorted(c)[0]))
    pos, x = {}, 0.0
    for comp in comps:
        h = nx.Graph()
        h.add_nodes_from(sorted(comp))
        h.add_edges_from(sorted(tuple(sorted(e)) for e in g.subgraph(comp).edges()))
        scale = 0.6 * math.sqrt(len(comp))
        p = nx.kamada_kawai_layout(h, scale=scale) if len(comp) > 2 else \
            nx.circular_layout(h, scale=0.5 * scale) if len(comp) == 2 else {next(iter(comp)): (0.0, 0.0)}
        for n, (px, py) in p.items():
            pos[n] = (round(x + scale + float(px), 3), round(float(py), 3))
        x += 2 * scale + 0.7
    return pos


def _short(s: str, width: int) -> str:
    s = str(s)
    s = s if len(s) <= 2 * width else s[:2 * width - 1] + "…"
    return "\n".join(textwrap.wrap(s, width)) or s


def _style(view: FocusView, step: str, t: Triple) -> Optional[dict]:
    """Line style of triple ``t`` at ``step`` (``None``: not drawn at this step)."""
    cls = view.classes.get(t)
    if step in ("G_q", "seeds"):
        return {"color": COLORS["plain"], "style": "solid", "width": 1.2}
    if step == "components":
        if cls == SEEDLESS:
            return {"color": COLORS["seedless"], "style": "dotted", "width": 1.4}
        return {"color": COLORS["component"], "style": "solid", "width": 1.8}
    if step == "mst":
        return {KEPT: {"color": COLORS["kept"], "style": "solid", "width": 2.6},
                PRUNED: {"color": COLORS["pruned"], "style": "dashed", "width": 1.8},
                SEEDLESS: {"color": COLORS["seedless"], "style": "dotted", "width": 1.2}}.get(cls)
    if step == "G_Ans":
        return {"color": COLORS["kept"], "style": "solid", "width": 2.6} if cls == KEPT else None
    raise ValueError(f"unknown step {step!r} (choose from {STEPS})")


def step_legend(step: str) -> list:
    """Legend handles for :func:`draw_step` at ``step``."""
    from matplotlib.lines import Line2D

    def line(key, ls, label, lw=2.0):
        return Line2D([0], [0], color=COLORS[key], lw=lw, ls=ls, label=label)

    def dot(key, label, edge="none", size=9):
        return Line2D([0], [0], marker="o", color="w", markerfacecolor=COLORS[key], markeredgecolor=edge,
                      markersize=size, label=label)

    entity = [dot("node", "entity")]
    seed = [dot("seed", "seed (matched question entity)", "black", 11)]
    if step == "G_q":
        return [line("plain", "-", "triple (edge label: relation)", 1.2)] + entity
    if step == "seeds":
        return [line("plain", "-", "triple", 1.2)] + seed + entity
    if step == "components":
        return [line("component", "-", "in a component with a seed (B_i)"),
                line("seedless", ":", "in a component without a seed: dropped (eq. 6)")] + seed + entity
    if step == "mst":
        return [line("kept", "-", "kept: in a maximum spanning tree (label: weight)", 2.6),
                line("pruned", "--", "pruned by the MST (closes a cycle or\nis a parallel edge)"),
                line("seedless", ":", "component without a seed: never weighted", 1.2)] + seed + entity
    return [line("kept", "-", "G_Ans triple (label: relation)", 2.6)] + seed + entity


def draw_step(ax, view: FocusView, step: str, title: Optional[str] = None, label_width: int = 16,
              legend: bool = True) -> dict:
    """Draw ``step`` of Algorithm 1 (one of :data:`STEPS`) for ``view`` on ``ax``; legend outside the axes.

    Every drawn triple is one line; further triples between the same two entities are arcs beside the
    first. Returns what was drawn: ``{"edges", "kept", "pruned", "seedless", "seeds", "nodes"}``.
    """
    import matplotlib.pyplot as plt  # noqa: F401  (backend set by the caller)

    ax.set_axis_off()
    ax.set_title(title or STEP_TITLES[step], fontsize=10, loc="left")
    if not view.triples:
        ax.text(0.5, 0.5, "nothing to draw: no seed matched an entity of G_q", ha="center", va="center",
                transform=ax.transAxes, fontsize=10, color="#555555")
        return {"edges": 0, "kept": 0, "pruned": 0, "seedless": 0, "seeds": 0, "nodes": 0}
    sub, pos = view.sub, view.pos
    g = nx.Graph()
    g.add_nodes_from(pos)
    g.add_edges_from((t.head, t.tail) for t in view.triples)
    seen: dict = {}
    drawn = {"edges": 0, KEPT: 0, PRUNED: 0, SEEDLESS: 0}
    labels: dict = {}
    order = sorted(view.triples, key=lambda t: view.classes.get(t) != KEPT)  # a kept triple takes the straight line
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
                               connectionstyle=f"arc3,rad={rad}", node_size=300)
        drawn["edges"] += 1
        cls = view.classes.get(t)
        if step in ("mst", "G_Ans") and cls in drawn:
            drawn[cls] += 1
        if n == 0:
            if step == "mst" and cls in (KEPT, PRUNED):
                labels[(t.head, t.tail)] = f"{sub.weights.get(t, 0.0):.2f}"
            elif step != "mst":
                labels[(t.head, t.tail)] = _short(t.relation, label_width)
    for key, n in seen.items():
        first = next(((u, v) for (u, v) in labels if tuple(sorted((u, v))) == key), None)
        if first is not None and n > 1 and step != "mst":
            labels[first] = f"{labels[first]} (+{n - 1})"
    visible = {e for t in view.triples if _style(view, step, t) is not None for e in (t.head, t.tail)}
    seeds = [n for n in pos if n in set(sub.seeds) and n in visible] if step != "G_q" else []
    others = [n for n in pos if n in visible and n not in set(seeds)]
    nx.draw_networkx_nodes(g, pos, nodelist=others, ax=ax, node_color=COLORS["node"], node_size=260)
    if seeds:
        nx.draw_networkx_nodes(g, pos, nodelist=seeds, ax=ax, node_color=COLORS["seed"], node_size=460,
                               edgecolors="black", linewidths=1.3)
    nx.draw_networkx_labels(g, pos, labels={n: _short(n, label_width) for n in visible}, ax=ax, font_size=7.5)
    if labels:
        nx.draw_networkx_edge_labels(nx.Graph(list(labels)), pos, edge_labels=labels, ax=ax, font_size=6.5,
                                     bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    if legend:
        ax.legend(handles=step_legend(step), loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                  fontsize=8, frameon=False)
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    pad_x, pad_y = 0.08 * (max(xs) - min(xs) + 1), 0.1 * (max(ys) - min(ys) + 1)
    ax.set_xlim(min(xs) - pad_x, max(xs) + pad_x)  # the same frame at every step
    ax.set_ylim(min(ys) - pad_y, max(ys) + pad_y)
    return {"edges": drawn["edges"], "kept": drawn[KEPT], "pruned": drawn[PRUNED], "seedless": drawn[SEEDLESS],
            "seeds": len(seeds), "nodes": len(visible)}


def teaching_score(view: FocusView) -> tuple:
    """How well one question shows every step of Algorithm 1 at work (larger is better): drawn MST-pruned
    triples, drawn seedless components, drawn kept triples, and seeds, each capped so a mid-sized case wins."""
    sub = view.sub
    return (min(len(view.drawn(PRUNED)), 6) > 0 and bool(view.drawn(SEEDLESS)) and not sub.used_fallback,
            min(len(view.drawn(PRUNED)), 6), min(len(view.drawn(KEPT)), 12), min(len(sub.seeds), 3))


def prune_reasons(sub: EvidenceSubgraph) -> dict:
    """Why the trees dropped each pruned triple: ``"parallel"`` (a kept triple joins the same two entities)
    or ``"closes a cycle"`` (the tree already connects its entities through heavier edges, eq. 7)."""
    kept_pairs = {frozenset((t.head, t.tail)) for t in sub.kept}
    return {t: "parallel" if frozenset((t.head, t.tail)) in kept_pairs else "closes a cycle" for t in sub.pruned}


def edge_table(view: FocusView, titles: Optional[dict] = None, gold: Sequence[str] = ()):
    """The drawn triples as a table: verdict (kept / pruned: why / no seed), weight, source passage."""
    import pandas as pd

    reasons = prune_reasons(view.sub)
    verdict = {KEPT: "kept in G_Ans", SEEDLESS: "component without a seed"}
    rows = []
    for t in view.triples:
        cls = view.classes.get(t)
        rows.append({"head": t.head, "relation": t.relation, "tail": t.tail,
                     "verdict": f"pruned: {reasons[t]}" if cls == PRUNED else verdict.get(cls, "not in G_tmp"),
                     "weight": view.sub.weights.get(t, float("nan")),
                     "source": (titles or {}).get(t.pid, t.pid), "gold source": t.pid in set(gold)})
    order = {"kept in G_Ans": 0, "pruned: parallel": 1, "pruned: closes a cycle": 2}
    df = pd.DataFrame(rows)
    if len(df):
        df = df.sort_values(["verdict", "weight"], key=lambda s: s.map(order).fillna(3) if s.name == "verdict"
                            else -s.fillna(-1), kind="stable").reset_index(drop=True)
    return df


def pick_case(subs: dict, qids: dict, dataset: Optional[str] = None, qid: Optional[str] = None,
              max_edges: int = 25) -> tuple:
    """``(dataset, index, note)`` of the worked question: ``qid`` of ``dataset`` when given and sampled,
    else the question of any dataset where every step does something (:func:`teaching_score`).

    ``subs`` and ``qids``: per dataset, the subgraphs and question ids in the same order. ``index`` is
    ``None`` when no question has a seed; ``note`` says how the question was chosen."""
    if qid is not None:
        for name in ([dataset] if dataset else list(subs)):
            if str(qid) in [str(q) for q in qids.get(name, [])]:
                return name, [str(q) for q in qids[name]].index(str(qid)), f"question {qid} of {name}, as asked"
    best = None
    for name, ss in subs.items():
        for i, sub in enumerate(ss):
            if not sub.seeds or not sub.kept:
                continue
            key = teaching_score(focus_view(sub, max_edges))
            if best is None or key > best[0]:
                best = (key, name, i)
    asked = f"question {qid} is not among the sampled questions; " if qid is not None else ""
    if best is None:
        return None, None, asked + "no sampled question has a seed"
    full = best[0][0]
    why = ("every step does something: the trees prune triples, and components without a seed exist" if full
           else "no sampled question shows every step; this one shows the most")
    return best[1], best[2], f"{asked}question {qids[best[1]][best[2]]} of {best[1]}: {why}"
