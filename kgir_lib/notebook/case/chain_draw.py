"""The whole Fig. 6 chain of one question, drawn as its five steps (notebook 07).

Fig. 6 (paper §3.5) is a chain: a **seed** matches the question's entity, the evidence subgraph holds the **bridge
entity** the question does not name, the **rewrite names it**, the rewritten question's retrieval ``D'_t`` brings the
**next hop**'s passage, and the **answer** is right. :func:`chain_steps` reads those five steps off one round of a
case, each with what it holds (the seed, the triples from the seed to the bridge, the rewrite, the next-hop passage
with the words that answer, the answer beside the gold) and whether it holds there, judged as notebook 04's funnel
judges it (:func:`kgir_lib.eval.mechanism.funnel.funnel_steps`); :func:`draw_chain` draws them top to bottom, a step
that holds in green, one that does not in red, so the chain reads at a glance on a projected page.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["ChainStep", "bridge_path", "chain_steps", "draw_chain", "passage_snippet"]

FONT, LABEL_FONT, TITLE_FONT = 11.0, 11.5, 12.5
COLORS = {True: ("#e5f5e0", "#238b45"), False: ("#fde0dd", "#cb181d")}  # (face, edge) of a step that holds / not


@dataclass
class ChainStep:
    """One step of the chain: its number and name, whether it holds in the round, and what it holds."""

    number: int
    name: str
    holds: bool
    text: str


def passage_snippet(text: str, answers: Sequence[str], width: int = 150) -> str:
    """The sentence of a passage that names the first gold answer it holds (the words that answer the next hop), cut
    to about ``width`` characters at word boundaries; else the passage's opening."""
    low = text.lower()
    found = next(((low.find(a.lower()), len(a)) for a in answers if a and a.lower() in low), None)
    if found is None:
        start, end = 0, width
    else:
        at, n = found
        start = text.rfind(". ", 0, at) + 2 if text.rfind(". ", 0, at) >= 0 else 0
        start = max(start, at + n - width)  # the answer's last word stays in
        stop = text.find(". ", at + n)
        end = max(at + n, min(len(text), (stop + 1) if stop >= 0 else len(text), start + width))
    if start > 0 and text[start - 1] != " " and text[start - 2:start] != ". ":
        start = text.find(" ", start) + 1  # a whole first word
    if end < len(text) and text[end] != " " and text[end - 1] not in ". " and text.rfind(" ", start, end) > start:
        end = text.rfind(" ", start, end)  # a whole last word
    return ("… " if start else "") + text[start:end].strip() + (" …" if end < len(text) else "")


def bridge_path(rnd, bridges: Sequence) -> tuple:
    """``(bridge, in_gans, path)`` of one round (a :class:`~kgir_lib.kgir.rounds.LoopRound`): the entities of its
    ``G_Ans`` that are a gold bridge of ``bridges`` (the funnel's step 2 rule,
    :func:`kgir_lib.eval.mechanism.bridges.entity_matches`), the first of them (else the first gold bridge's name,
    else ``""``), and a shortest chain of ``G_Ans`` triples from a seed to it (``[]`` when it is not in ``G_Ans``)."""
    from ...eval.mechanism.bridges import entity_matches
    from .bridge_viz import shortest_chain

    in_gans = [e for t in rnd.G_Ans for e in (t.head, t.tail) if any(entity_matches(e, b) for b in bridges)]
    bridge = in_gans[0] if in_gans else (bridges[0].name if bridges else "")
    path = shortest_chain(rnd.G_Ans, [x for x in rnd.seeds if x != bridge], bridge) if in_gans else []
    return bridge, in_gans, path


def chain_steps(case, round_no: int, bridges: Optional[Sequence] = None) -> list:
    """The five steps of the chain in round ``round_no`` of ``case`` (module docstring). ``bridges``: the gold bridges
    (default: the question's own, ``Question.gold_bridges``)."""
    from ...eval.mechanism.funnel import funnel_steps
    from .build import find_question

    golds = list(bridges) if bridges is not None else list(find_question(case.ws.dataset, case.qid).gold_bridges)
    trace = dict(case.output.trace or {})
    trace.setdefault("gold_answers", list(case.gold_answers))
    record = {"qid": case.qid, "answer": case.answer, "trace": trace}
    s = funnel_steps(record, golds, round_no)
    r = case.round(round_no)
    seeds = list(r.seeds)
    bridge, in_gans, path = bridge_path(r, golds)
    step1 = ("seeds: " + ", ".join(seeds[:3]) + (" …" if len(seeds) > 3 else "") +
             f"  (the question's entities: {', '.join(r.E_q[:3])})") if seeds else "no seed matched an entity of G_q"
    step2 = (f"{bridge}, by " + "; ".join(f"({t.head}, {t.relation}, {t.tail})" for t in path[:2])
             if path else f"{bridge} is in G_Ans" if in_gans else f"the gold bridge {bridge} is not in G_Ans")
    step3 = f"\"{r.rewrite}\""
    dt = [p for p, _ in r.retrieved]
    after = [p for p, _ in r.rewrite_retrieved]
    hops = [p for p in after if p not in set(dt) and any(p in b.next_pids for b in golds)]
    corpus = case.ws.dataset.corpus
    if hops:
        p = hops[0]
        step4 = (f"\"{corpus[p].title}\" (rank {after.index(p) + 1} of D'_{round_no}, not in D_{round_no}): "
                 + passage_snippet(corpus[p].text, case.gold_answers))
    else:
        held = [p for p in dt if any(p in b.next_pids for b in golds)]
        step4 = (f"the next hop \"{corpus[held[0]].title}\" was already in D_{round_no}" if held else
                 f"D'_{round_no} brings no next-hop passage")
    from ...eval.mechanism import round_facts as rf

    # as the funnel judges step 5: the answer after this round in a forced-rounds run, else the method's answer
    forced = isinstance(trace.get("round_answers"), list)
    answer = rf.round_answer(record, round_no) if forced else case.answer
    when = "" if forced or round_no == len(case.rounds) else f" (the final answer, after round {len(case.rounds)})"
    step5 = f"{answer or '(no answer)'}{when}   (gold: {' | '.join(case.gold_answers[:2])})"
    right = bool(s["correct"])
    return [ChainStep(1, "seed matched", bool(s["seed"]), step1),
            ChainStep(2, "bridge in G_Ans", bool(s["in_gans"]), step2),
            ChainStep(3, "rewrite names it", bool(s["named"]), step3),
            ChainStep(4, f"D'_{round_no} finds next hop", bool(s["finds"]), step4),
            ChainStep(5, "answer correct", right, step5)]


def draw_chain(steps: Sequence[ChainStep], title: str = "", width: float = 9.5):
    """The chain top to bottom (module docstring): each step a box with its number, name and a tick or a cross on the
    left, what it holds on the right, arrows between. ``width`` inches (shown at its own size on a 1280-px page at the
    suite's 120 dpi). Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    wrap = 78
    bodies = [textwrap.wrap(s.text, wrap) or [""] for s in steps]
    heights = [0.3 + 0.23 * len(b) for b in bodies]
    gap = 0.32
    head = 0.55 if title else 0.1
    total = head + sum(heights) + gap * (len(steps) - 1) + 0.1
    fig = plt.figure(figsize=(width, total))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, total)
    ax.set_axis_off()
    if title:
        ax.text(0.1, total - 0.1, title, ha="left", va="top", fontsize=TITLE_FONT, weight="bold")
    y = total - head
    label_w = 2.3
    for i, (s, body, h) in enumerate(zip(steps, bodies, heights)):
        face, edge = COLORS[bool(s.holds)]
        ax.add_patch(FancyBboxPatch((0.1, y - h), width - 0.2, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                    fc=face, ec=edge, lw=1.8))
        mark = "✓" if s.holds else "✗"
        ax.text(0.22, y - h / 2, f"{mark}  {s.number}. {s.name}", ha="left", va="center", fontsize=LABEL_FONT,
                weight="bold", color=edge)
        ax.text(0.1 + label_w + 0.15, y - h / 2, "\n".join(body), ha="left", va="center", fontsize=FONT,
                linespacing=1.25)
        if i < len(steps) - 1:
            ax.annotate("", xy=(0.1 + label_w / 2, y - h - gap + 0.02), xytext=(0.1 + label_w / 2, y - h - 0.02),
                        arrowprops=dict(arrowstyle="-|>", color="#444444", lw=1.6, mutation_scale=14))
        y -= h + gap
    return fig
