"""A case study in a notebook: each stage of KGIR-RAG shown as Markdown, tables and subgraph drawings."""
from __future__ import annotations

import textwrap

from .bridges import bridge_entities
from .records import CaseStudy


def _show(*objs) -> None:
    import pandas as pd
    from IPython.display import Markdown, display

    from ..display import show

    for o in objs:
        if isinstance(o, pd.DataFrame):
            show(o, digits=3, index=not isinstance(o.index, pd.RangeIndex))
        else:
            display(Markdown(o) if isinstance(o, str) else o)


def repeated_rounds(case: CaseStudy) -> dict:
    """``{round: earlier round}`` for rounds whose query and retrieval repeat an earlier round's.

    When a rewrite is unusable the loop keeps the question, so the next round
    retrieves the same passages and builds the same subgraph; the display says
    so instead of printing the same tables again.
    """
    out: dict = {}
    for i, r in enumerate(case.rounds):
        for prev in case.rounds[:i]:
            if prev.query == r.query and prev.retrieved == r.retrieved and prev.iteration not in out:
                out[r.iteration] = prev.iteration
                break
    return out


def show_retrieval(case: CaseStudy, chars: int = 160) -> None:
    """Each round's query and its dense top-k passages (eq. 2), gold passages marked."""
    same = repeated_rounds(case)
    for r in case.rounds:
        if r.iteration in same:
            _show(f"**Round {r.iteration}** — the same query and passages as round {same[r.iteration]}")
            continue
        _show(f"**Round {r.iteration}** — query: *{r.query}*", case.passages_frame(r.iteration, chars=chars))


def show_ner(case: CaseStudy) -> None:
    """Each round's raw NER reply (eq. 4), the entities kept, and their matches in ``G_q`` (eq. 5)."""
    same = repeated_rounds(case)
    for r in case.rounds:
        if r.subgraph is None:
            _show(f"**Round {r.iteration}**: no subgraph stage (ablation variant)")
            continue
        if r.iteration in same:
            _show(f"**Round {r.iteration}** — the same NER, matches and seeds as round {same[r.iteration]}")
            continue
        fb = f" — fallback used ({r.fallback_reason})" if r.used_fallback else ""
        _show(f"**Round {r.iteration}** — |G_q| = {len(r.G_q)} triples; NER reply: `{(r.ner_raw or '').strip()}`{fb}; "
              f"seeds: {', '.join(r.seeds) or '(none)'}", case.matches_frame(r.iteration))


def draw_case(case: CaseStudy):
    """The Fig. 6 drawing of ``case`` (:func:`kgir_lib.notebook.case.bridge_viz.bridge_view`): the chain from a seed to
    the bridge entity and the next hop, with at most 30 triples, at projection size
    (:data:`kgir_lib.notebook.graph_draw.FIGSIZE`); ``None`` when there is nothing to draw (the view's note says
    why)."""
    import matplotlib.pyplot as plt

    from ..graph_draw import FIGSIZE
    from .bridge_viz import bridge_view, draw_bridge

    view = bridge_view(case)
    if not view.triples:
        return None
    fig = plt.figure(figsize=FIGSIZE, dpi=100)
    ax = fig.add_axes((0.01, 0.02, 0.6, 0.88))  # the legend beside it stays inside the figure's width
    draw_bridge(ax, view, title=textwrap.fill(f"{case.question}", 90))
    return fig


def show_subgraphs(case: CaseStudy, max_rows: int = 15) -> None:
    """Each round's ``G_Ans`` triples with their weights (eq. 7), the ``max_rows`` heaviest."""
    same = repeated_rounds(case)
    for r in case.rounds:
        if r.iteration in same:
            _show(f"**Round {r.iteration}** — the same G_tmp and G_Ans as round {same[r.iteration]}")
        elif r.subgraph is not None:
            if not r.G_Ans:
                _show(f"**Round {r.iteration}** — G_tmp {len(r.G_tmp)} triples, G_Ans is empty (no seed).")
                continue
            table = case.triples_frame(r.iteration, "G_Ans").sort_values("weight", ascending=False, kind="stable")
            table = table.reset_index(drop=True)
            table.insert(0, "by weight", range(1, len(table) + 1))  # the rank, not the extraction order
            more = f" (the {max_rows} heaviest shown)" if len(table) > max_rows else ""
            _show(f"**Round {r.iteration}** — G_tmp {len(r.G_tmp)} triples, {len(r.subgraph.components)} "
                  f"component(s) with a seed, G_Ans {len(r.G_Ans)} triples{more}:", table.head(max_rows))


def show_rewrites(case: CaseStudy) -> None:
    """Each rewrite (eq. 8): the question before, the raw reply, the parsed rewrite, the bridge entities."""
    for r in case.rounds:
        if r.rewrite_raw is None:
            continue
        bridges = bridge_entities(case.question, r.rewrite, r.G_Ans)
        bad = " (malformed: the previous question was kept)" if r.rewrite_malformed else ""
        _show(f"**Round {r.iteration}** — *{r.query}* → **{r.rewrite}**{bad}  \n"
              f"raw reply: `{(r.rewrite_raw or '').strip()}`  \n"
              f"entities of G_Ans the rewrite introduces: {', '.join(bridges) or '(none)'}")
        if r.new_passages:
            _show("passages the rewrite retrieved that round's first retrieval had not:",
                  case.passages_frame(r.iteration, "new"))


def show_reflections(case: CaseStudy) -> None:
    """Each reflection verdict (Fig. 5) with its reasoning, what the reflection and the shared reader read, side
    by side (:meth:`CaseStudy.reading_frame`), and the reader call that words the answer."""
    for r in case.rounds:
        if r.reflection:
            v = r.reflection
            what = f"answer **{v.answer}**" if v.answerable else (
                f"missing: *{v.missing}*" if v.missing else "no verdict (malformed reply)")
            _show(f"**Round {r.iteration}**{' (last round)' if v.final else ''} — reflection: {what}  \n"
                  f"reasoning: {v.reasoning or '(none)'}  \nraw reply: `{(v.raw or '').strip()}`")
        if r.reflection or r.final:
            _show(case.reading_note(r.iteration), case.reading_frame(r.iteration))
        if r.final:
            role = "forced at the round cap" if r.final.forced else "words the answer"
            mine = f" (the reflection said *{r.reflection.answer}*)" if r.reflection and r.reflection.answer else ""
            _show(f"**Round {r.iteration}** — shared reader ({role}):"
                  f" question *{r.final.question}* → **{r.final.answer}**{mine}")


def display_case(case: CaseStudy, draw: bool = True, cfg=None, name=None):
    """Every stage of ``case`` in order. The bridge figure is shown as the suite stores figures
    (:func:`kgir_lib.notebook.display.show_figure`), saved as ``figures/<profile>/<name>.png`` when ``cfg`` and
    ``name`` are given; returns the figure (closed; ``None`` when there is nothing to draw)."""
    _show(f"### {case.question}", case.steps_frame())
    _show("#### Retrieval (eq. 2)")
    show_retrieval(case)
    _show("#### NER and its matches in G_q (eq. 4-5)")
    show_ner(case)
    fig = None
    if draw:
        _show("#### G_Ans and the bridge (eq. 5-7, Fig. 6)")
        from ..display import show_figure
        from .bridge_viz import bridge_view

        _show(bridge_view(case).note)
        fig = draw_case(case)
        if fig is not None:
            show_figure(fig, cfg, name if cfg is not None else None)
    show_subgraphs(case)
    _show("#### Rewrites (eq. 8)")
    show_rewrites(case)
    _show("#### Reflection (Fig. 5)")
    show_reflections(case)
    _show("#### Result", case.result_frame())
    return fig
