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

**The question's own bridge.** Given the question's gold bridge entities (:func:`bridge_entities`, from
``Question.gold_bridges``), the view draws the chain of triples from a seed to each first, then the seeds'
neighbourhood around it, and every panel after the seeds marks the bridge (a purple diamond): the hop the
question does not name, which the trees keep or lose. :func:`pick_case` takes a question whose seed, bridge and
MST pruning are all in the drawing (:func:`teaching_score`).

The panels themselves are drawn by :mod:`kgir_lib.notebook.steps_draw` (legible at projection size:
:mod:`kgir_lib.notebook.graph_draw`).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import AbstractSet, Optional, Sequence

import networkx as nx

from ..kg import Triple
from ..kgir.subgraph import EvidenceSubgraph
from .graph_draw import layout

STEPS = ("G_q", "seeds", "components", "mst", "G_Ans")
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
    bridges: list = field(default_factory=list)      # gold bridge entities in the drawing
    bridge_path: list = field(default_factory=list)  # the triples from a seed to a bridge, drawn first
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

    def panel_note(self, step: str) -> str:
        """What the panel of ``step`` draws of the set it shows, e.g. "drawn: 12 of the 67 triples of G_Ans"."""
        if step == "G_Ans":
            return f"drawn: {len(self.drawn(KEPT))} of the {len(self.sub.kept)} triples of G_Ans"
        if step == "mst":
            return (f"drawn: {len(self.drawn(KEPT))} of {len(self.sub.kept)} kept and {len(self.drawn(PRUNED))} of "
                    f"{len(self.sub.pruned)} pruned triples")
        return f"drawn: {self.counts['drawn']} of the {self.counts['G_q']} triples of G_q"

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
                        budget: int, must: AbstractSet[str] = frozenset()) -> list:
    """Entities of the seed components, nearest the seeds first, while the induced triples fit ``budget``.

    Grows from the seeds through adjacent entities; among the entities at the same distance the one that
    brings the most MST-pruned triples (then the most triples, then the name) goes first, so the drawing
    shows the tree's work where there is any."""
    adj = _adjacency(comp_triples)
    dist = _hops(adj, seeds)
    chosen = {s for s in seeds if s in adj} | {e for e in must if e in adj}
    if len(_induced(comp_triples, chosen)) > budget:
        chosen = {e for e in must if e in adj} or set(sorted(chosen)[:1])
        if len(_induced(comp_triples, chosen)) > budget:
            return []
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


def _bridge_path(triples: Sequence[Triple], seeds: Sequence[str], bridge: str) -> list:
    """A shortest chain of ``triples`` from a seed (other than ``bridge``) to ``bridge``, as triples."""
    adj: dict = {}
    for t in triples:
        if t.head != t.tail:
            adj.setdefault(t.head, []).append((t.tail, t))
            adj.setdefault(t.tail, []).append((t.head, t))
    prev: dict = {s: None for s in sorted(set(seeds) - {bridge}) if s in adj}
    queue = deque(prev)
    while queue:
        u = queue.popleft()
        if u == bridge:
            break
        for v, t in sorted(adj.get(u, ()), key=lambda x: (x[0], x[1].relation)):
            if v not in prev:
                prev[v] = (u, t)
                queue.append(v)
    if bridge not in prev or prev[bridge] is None:
        return []
    out, node = [], bridge
    while prev[node] is not None:
        node, t = prev[node]
        out.append(t)
    return out[::-1]


def bridge_entities(sub: EvidenceSubgraph, bridges: Sequence = (), mode: str = "contains") -> list:
    """The entities of the seed components that are one of the question's gold ``bridges``
    (:class:`kgir_lib.gold.Bridge`; :func:`kgir_lib.eval.mechanism.bridges.entity_matches`), kept-triple entities
    first. Seeds are not bridges: the question names them."""
    from ..eval.mechanism.bridges import entity_matches

    comp = [t for c in sub.components for t in c.triples]
    ents = list(dict.fromkeys(e for t in list(sub.kept) + comp for e in (t.head, t.tail)))
    return [e for e in ents if e not in set(sub.seeds) and any(entity_matches(e, b, mode) for b in bridges)]


def focus_view(sub: EvidenceSubgraph, max_edges: int = 25, max_seedless: int = 4, seed: int = 0,
               bridges: Sequence = ()) -> FocusView:
    """The drawn part of ``sub`` (module docstring): at most ``max_edges`` triples, of which at most
    ``max_seedless`` from components without a seed (none when no seed matched); positions from :func:`layout`.
    ``bridges``: the question's gold bridges (:class:`kgir_lib.gold.Bridge`): the chain from a seed to each
    bridge entity (through ``G_Ans`` where it can, else through the seed components) is drawn first.

    ``counts``: ``G_q``, ``G_q_entities``, ``component_triples``, ``seedless_triples``,
    ``seedless_components``, ``drawn``, ``drawn_entities``, ``drawn_component``, ``drawn_seedless``.
    """
    comp = [t for c in sub.components for t in c.triples if t.head != t.tail]
    classes = {t: triple_class(sub, t) for t in dict.fromkeys(list(sub.G_q) + list(sub.G_tmp))}
    seedless_all = [t for t, c in classes.items() if c == SEEDLESS]
    seedless, n_seedless_comps = _seedless_examples(seedless_all, min(max_seedless, max_edges))
    budget = max_edges - len(seedless)
    found = bridge_entities(sub, bridges) if bridges and sub.seeds else []
    path: list = []
    shown_bridges = []
    for b in found:
        chain = _bridge_path(sub.kept, sub.seeds, b) or _bridge_path(comp, sub.seeds, b)
        if chain and len(set(path) | set(chain)) <= budget // 2:
            path = list(dict.fromkeys(path + chain))
            shown_bridges.append(b)
    must = {e for t in path for e in (t.head, t.tail)}
    main = _seed_neighbourhood(comp, sub.seeds, set(sub.pruned), budget, must=must)
    if not set(path) <= set(main):  # the bridge's chain did not fit with its neighbourhood: draw the chain alone
        main = list(dict.fromkeys(path + _seed_neighbourhood(comp, sub.seeds, set(sub.pruned), budget - len(path))))
        main = main[:budget]
    triples = list(dict.fromkeys(main + seedless)) if sub.seeds else []  # no seed: nothing to show (in words)
    g = nx.Graph()
    g.add_nodes_from(s for s in sub.seeds if any(s in (t.head, t.tail) for t in triples))
    g.add_edges_from((t.head, t.tail) for t in triples)
    entities_gq = {e for t in sub.G_q for e in (t.head, t.tail)}
    counts = {"G_q": len(sub.G_q), "G_q_entities": len(entities_gq), "component_triples": len(comp),
              "seedless_triples": len(seedless_all), "seedless_components": n_seedless_comps,
              "drawn": len(triples), "drawn_entities": g.number_of_nodes(), "drawn_component": len(main),
              "drawn_seedless": len(seedless)}
    drawn_nodes = set(g.nodes)
    return FocusView(sub=sub, triples=triples, classes=classes, counts=counts,
                     bridges=[b for b in shown_bridges if b in drawn_nodes],
                     bridge_path=[t for t in path if t in set(triples)])


def covers_G_q(sub: EvidenceSubgraph) -> bool:
    """Whether ``G_tmp`` holds every triple of ``G_q`` but self-loops (the ``passages`` reading): step 4 then
    adds nothing to a drawing, and the seeds and the components are one panel (:func:`panels`)."""
    return {t for t in sub.G_q if t.head != t.tail} <= set(sub.G_tmp)


def panels(sub: EvidenceSubgraph) -> tuple:
    """The steps worth a panel of their own for ``sub``: all of :data:`STEPS`, or, when ``G_tmp`` is ``G_q``
    (:func:`covers_G_q`), the seeds drawn on the components' panel (``"components"``) instead of alone."""
    return tuple(st for st in STEPS if st != "seeds") if covers_G_q(sub) else STEPS


VISIBLE_PRUNING = 3  # drawn pruned triples from which the trees' work is seen, not a lone dashed edge


def teaching_score(view: FocusView) -> tuple:
    """How well one question teaches Algorithm 1 (larger is better), compared in this order: the question's gold
    bridge is drawn with the chain from a seed to it (and is not the only thing drawn); the trees visibly prune (at
    least :data:`VISIBLE_PRUNING` drawn triples pruned); they prune at all; the seeds come from the LLM's entities,
    not the fallback; a component without a seed is drawn; the drawing is legible (no hub with more than six drawn
    neighbours); then the drawn pruned triples, kept triples and seeds, each capped so a mid-sized case wins."""
    sub = view.sub
    g = nx.Graph()
    g.add_edges_from((t.head, t.tail) for t in view.triples)
    hub = max((d for _, d in g.degree()), default=0)
    pruned = len(view.drawn(PRUNED))
    return (bool(view.bridges) and bool(view.bridge_path), pruned >= VISIBLE_PRUNING, bool(pruned),
            not sub.used_fallback, bool(view.drawn(SEEDLESS)), -max(0, hub - 6), min(pruned, 6),
            min(len(view.drawn(KEPT)), 12), min(len(sub.seeds), 3))


def prune_reasons(sub: EvidenceSubgraph) -> dict:
    """Why the trees dropped each pruned triple: ``"parallel"`` (a kept triple joins the same two entities)
    or ``"closes a cycle"`` (the tree already connects its entities through heavier edges, eq. 7)."""
    kept_pairs = {frozenset((t.head, t.tail)) for t in sub.kept}
    return {t: "parallel" if frozenset((t.head, t.tail)) in kept_pairs else "closes a cycle" for t in sub.pruned}


def edge_table(view: FocusView, titles: Optional[dict] = None, gold: Sequence[str] = ()):
    """The drawn triples as a table: verdict (kept / pruned: why / no seed), weight, source passage."""
    import pandas as pd

    reasons = prune_reasons(view.sub)
    verdict: dict[Optional[str], str] = {KEPT: "kept in G_Ans", SEEDLESS: "component without a seed"}
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
              max_edges: int = 25, bridges: Optional[dict] = None) -> tuple:
    """``(dataset, index, note)`` of the worked question: ``qid`` of ``dataset`` when given and sampled,
    else the question of any dataset that teaches Algorithm 1 best (:func:`teaching_score`): a bridge question
    whose seed, gold bridge and MST pruning are all in the drawing.

    ``subs`` and ``qids``: per dataset, the subgraphs and question ids in the same order; ``bridges``: per
    dataset, each question's gold bridges (``Question.gold_bridges``) in that order. ``index`` is ``None`` when
    no question has a seed; ``note`` says how the question was chosen."""
    if qid is not None:
        for name in ([dataset] if dataset else list(subs)):
            if str(qid) in [str(q) for q in qids.get(name, [])]:
                return name, [str(q) for q in qids[name]].index(str(qid)), f"question {qid} of {name}, as asked"
    best = None
    for name, ss in subs.items():
        for i, sub in enumerate(ss):
            if not sub.seeds or not sub.kept:
                continue
            gold = (bridges or {}).get(name, [()] * len(ss))[i]
            key = teaching_score(focus_view(sub, max_edges, bridges=gold))
            if best is None or key > best[0]:
                best = (key, name, i)
    asked = f"question {qid} is not among the sampled questions; " if qid is not None else ""
    if best is None:
        return None, None, asked + "no sampled question has a seed"
    bridge, visible, pruning, own, seedless = best[0][:5]
    pruned = best[0][6]
    shows = [what for what, ok in (("the chain from a seed to its gold bridge entity", bridge),
                                   (f"{pruned}{'+' if pruned >= 6 else ''} triples the trees prune" if visible else
                                    "triples the trees prune", pruning), ("a component without a seed", seedless))
             if ok]
    why = (f"the drawing shows {', '.join(shows)}" if shows else "no sampled question shows the steps at work; "
           "this one shows the most") + ("" if own else " (its seeds come from the NER fallback)")
    if not bridge:
        why += "; no sampled question has its gold bridge in a drawable chain from a seed"
    return best[1], best[2], f"{asked}question {qids[best[1]][best[2]]} of {best[1]}: {why}"
