"""The Fig. 6 drawing of a case (paper §3.5): only the path that matters, the bridge marked.

For a :class:`kgir_lib.notebook.case.records.CaseStudy`, :func:`bridge_view` picks

* the **bridge path**: in round 1's ``G_Ans``, a shortest chain of triples from another seed to each bridge entity
  (an entity of ``G_Ans`` the rewrite names and the question does not,
  :func:`kgir_lib.notebook.case.bridges.bridge_entities`);
* the **answer edges**: the shortest chain (at most ``max_hops`` triples) of any round's ``G_Ans`` from a bridge
  entity to an entity naming the final answer or a gold answer (the next hop);
* **context**: other ``G_Ans`` triples touching those entities, nearest first, at most ``max_context``;

at most ``max_edges`` triples in all. Without a bridge it shows the seeds' ``G_Ans`` neighbourhood and says so;
without ``G_Ans`` it draws nothing and says so (:attr:`BridgeView.note`).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Optional, Sequence

import networkx as nx

from ...kg import Triple
from ...kgir.entity_matching import normalize_name
from ..graph_draw import EDGE_FONT, LEGEND_FONT, NODE_FONT, NOTE_FONT, TITLE_FONT, layout, place_labels, short_label
from .bridges import bridge_entities

COLORS = {"path": "#7b3294", "answer": "#1a9850", "context": "#9ecae1", "seed": "#e4572e", "bridge": "#7b3294",
          "answer_node": "#1a9850", "node": "#deebf7"}


@dataclass
class BridgeView:
    """What :func:`draw_bridge` draws for one case, and one sentence on what it shows."""

    path: list = field(default_factory=list)        # seed -> bridge triples (round 1's G_Ans)
    answer_edges: list = field(default_factory=list)  # bridge -> answer triples (any round's G_Ans)
    context: list = field(default_factory=list)
    seeds: list = field(default_factory=list)
    bridges: list = field(default_factory=list)
    answers: list = field(default_factory=list)     # entities that name the answer or a gold answer
    note: str = ""

    @property
    def triples(self) -> list:
        return list(dict.fromkeys(self.path + self.answer_edges + self.context))


def _names_any(entity: str, texts: Sequence[str]) -> bool:
    e = f" {normalize_name(entity)} "
    return any(len(n) >= 3 and (f" {n} " in e or e.strip() == n) for n in (normalize_name(t) for t in texts if t))


def shortest_chain(triples: Sequence[Triple], sources: Sequence[str], target: str) -> list:
    """A shortest chain of ``triples`` from any of ``sources`` to ``target`` (undirected), as triples."""
    adj: dict = {}
    for t in triples:
        if t.head != t.tail:
            adj.setdefault(t.head, []).append((t.tail, t))
            adj.setdefault(t.tail, []).append((t.head, t))
    prev: dict = {s: None for s in sources if s in adj}
    queue = deque(prev)
    while queue:
        u = queue.popleft()
        if u == target:
            break
        for v, t in adj.get(u, ()):
            if v not in prev:
                prev[v] = (u, t)
                queue.append(v)
    if target not in prev:
        return []
    out, node = [], target
    while prev[node] is not None:
        node, t = prev[node]
        out.append(t)
    return out[::-1]


def bridge_view(case, max_edges: int = 30, max_context: int = 25, max_hops: int = 3) -> BridgeView:
    """The drawn part of ``case`` (module docstring); the next hop is a chain of at most ``max_hops`` triples."""
    rounds = [r for r in case.rounds if r.subgraph is not None]
    if not rounds or not rounds[0].G_Ans:
        return BridgeView(note="G_Ans of round 1 is empty (no seed matched an entity of G_q): there is no evidence "
                               "subgraph, so nothing to draw.")
    r1 = rounds[0]
    seeds = list(r1.seeds)
    bridges = bridge_entities(case.question, r1.rewrite, r1.G_Ans)
    all_ans = list(dict.fromkeys(t for r in rounds for t in r.G_Ans))
    answer_texts = [case.answer, *case.gold_answers]
    path = list(dict.fromkeys(t for b in bridges for t in shortest_chain(r1.G_Ans, [s for s in seeds if s != b], b)))
    named = sorted({e for t in all_ans for e in (t.head, t.tail) if e not in bridges and _names_any(e, answer_texts)})
    hops = ([p for p in (shortest_chain(all_ans, bridges, e) for e in named) if 0 < len(p) <= max_hops]
            if bridges else [])
    answer_edges = [t for t in min(hops, key=len, default=[]) if t not in path]
    answers = [e for e in named if any(e in (t.head, t.tail) for t in answer_edges)]
    focus = set(seeds) | set(bridges) | {e for t in path + answer_edges for e in (t.head, t.tail)}
    pool = r1.G_Ans if bridges else all_ans
    room = max(0, min(max_context, max_edges - len(path) - len(answer_edges)))
    context = _nearest(pool, focus if bridges else set(seeds), set(path) | set(answer_edges), room)
    if bridges:
        note = (f"the rewrite names {', '.join(repr(b) for b in bridges)}, an entity of round 1's G_Ans the question "
                f"does not name: the bridge of Fig. 6. Purple: the chain from a seed to it"
                + (f"; green: on from the bridge to {', '.join(repr(a) for a in answers)}, which names "
                   f"{'the answer' if _names_any(answers[0], [case.answer]) else 'a gold answer'}." if answer_edges else
                   "; no triple of G_Ans joins it to the answer (the next hop was not found in the graph)."))
    else:
        note = ("the rewrite names no entity of G_Ans that the question does not: there is no bridge in this case, "
                "so the drawing shows the seeds' part of G_Ans instead.")
    return BridgeView(path, answer_edges, context, seeds, bridges, answers, note)


def _nearest(pool: Sequence[Triple], focus: set, taken: set, room: int) -> list:
    """Up to ``room`` triples of ``pool`` (not in ``taken``), those touching ``focus`` first, then growing outwards."""
    out: list = []
    reached = set(focus)
    while len(out) < room:
        ring = [t for t in pool if t not in taken and t not in out and (t.head in reached or t.tail in reached)]
        if not ring:
            break
        for t in ring[:room - len(out)]:
            out.append(t)
        reached |= {e for t in ring for e in (t.head, t.tail)}
    return out


def draw_bridge(ax, view: BridgeView, title: Optional[str] = None, label_width: int = 16) -> dict:
    """Draw ``view`` on ``ax``: the bridge chain purple, the next hop green, context pale; legend outside.
    With nothing to draw, the axes say why in words (:attr:`BridgeView.note`). Returns the drawn counts."""
    import textwrap

    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=TITLE_FONT, loc="left")
    triples = view.triples
    if not triples:
        ax.text(0.0, 0.5, textwrap.fill(view.note, 90), ha="left", va="center", transform=ax.transAxes,
                fontsize=NOTE_FONT)
        return {"edges": 0, "path": 0, "answer": 0, "context": 0}
    g = nx.Graph()
    g.add_edges_from((t.head, t.tail) for t in triples)
    pos = layout(g, view.seeds)
    styles = [(view.context, COLORS["context"], 1.4), (view.path, COLORS["path"], 3.2),
              (view.answer_edges, COLORS["answer"], 3.2)]
    for group, color, width in styles:
        if group:
            nx.draw_networkx_edges(g, pos, edgelist=[(t.head, t.tail) for t in group], ax=ax, edge_color=color,
                                   width=width)
    role = {n: "node" for n in g}
    role.update({n: "answer_node" for n in view.answers if n in g})
    role.update({n: "seed" for n in view.seeds if n in g})
    role.update({n: "bridge" for n in view.bridges if n in g})
    for kind, size in (("node", 240), ("answer_node", 520), ("seed", 520), ("bridge", 620)):
        nodes = [n for n in g if role[n] == kind]
        if nodes:
            nx.draw_networkx_nodes(g, pos, nodelist=nodes, ax=ax, node_color=COLORS[kind], node_size=size,
                                   edgecolors="black" if kind != "node" else "none", linewidths=1.2,
                                   node_shape="D" if kind == "bridge" else "o")
    box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
    node_texts = {n: ax.text(*pos[n], short_label(n, label_width), fontsize=NODE_FONT, ha="center", va="center",
                             bbox=box, zorder=4, weight="normal" if role[n] == "node" else "bold") for n in g}
    labels = {(t.head, t.tail): short_label(t.relation, label_width) for t in view.path + view.answer_edges}
    edge_texts = [(u, v, ax.text(*pos[u], text, fontsize=EDGE_FONT, ha="center", va="center", bbox=box, zorder=3))
                  for (u, v), text in labels.items()]
    ax.legend(handles=_legend(view), loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              fontsize=LEGEND_FONT, frameon=False, labelspacing=0.9)
    ax.margins(0.1)
    place_labels(ax, node_texts, edge_texts, pos)
    return {"edges": len(triples), "path": len(view.path), "answer": len(view.answer_edges),
            "context": len(view.context)}


def _legend(view: BridgeView) -> list:
    from matplotlib.lines import Line2D

    def line(color, label, lw=3.0):
        return Line2D([0], [0], color=color, lw=lw, label=label)

    def dot(color, label, marker="o", size=10):
        return Line2D([0], [0], marker=marker, color="w", markerfacecolor=color, markeredgecolor="black",
                      markersize=size, label=label)

    out = [dot(COLORS["seed"], "seed (question entity)")]
    if view.bridges:
        out += [dot(COLORS["bridge"], "bridge entity (named by the rewrite)", "D"),
                line(COLORS["path"], "chain from a seed to the bridge (round 1's G_Ans)")]
    if view.answer_edges:
        out += [dot(COLORS["answer_node"], "entity naming the answer"),
                line(COLORS["answer"], "next hop to the answer")]
    out.append(line(COLORS["context"], "other G_Ans triples (context)", 1.4))
    return out
