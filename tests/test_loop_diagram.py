"""Notebook 04's picture of Algorithm 2: the counts of each step read from traces (kgir_lib.eval.mechanism.loop_tables.loop_counts)
and the diagram that carries them (kgir_lib.notebook.viz.plot_loop)."""
import matplotlib

matplotlib.use("Agg")

from kgir_lib.eval.mechanism.loop_tables import loop_counts  # noqa: E402
from kgir_lib.kgir.rounds import FinalCall, LoopRound, Verdict  # noqa: E402
from kgir_lib.kgir.subgraph import EvidenceSubgraph  # noqa: E402
from kgir_lib.notebook.viz import LOOP_STEPS, loop_box_lines, plot_loop  # noqa: E402


def _round(t, seed=True, malformed=False, new=("p9",), verdict="answer"):
    sub = EvidenceSubgraph(question="q", seeds=["Compaq"] if seed else [])
    refl = {"answer": Verdict(True, "HP", None, ""), "missing": Verdict(False, None, "who", ""),
            "malformed": Verdict(False, None, None, "", malformed=True)}[verdict]
    return LoopRound(iteration=t, query="q", retrieved=[("p1", 0.5)], subgraph=sub, rewrite="q2", rewrite_raw="q2",
                     rewrite_malformed=malformed, new_passages=list(new), reflection_passages=list(new) or ["p1"],
                     reflection=refl, final=FinalCall("HP", "q", "HP", False) if verdict == "answer" else None).to_dict()


def test_loop_counts_follow_each_round_through_the_steps():
    one = {"qid": "a", "answered_by": "reflection", "rounds": [_round(1)]}
    three = {"qid": "b", "answered_by": "forced_reader",
             "rounds": [_round(1, seed=False, verdict="missing"), _round(2, malformed=True, new=(), verdict="malformed"),
                        _round(3, verdict="missing")]}
    c = loop_counts([one, {"trace": three}])
    assert c == {"questions": 2, "rounds": 4, "with seed": 3, "without seed": 1, "rewrite usable": 3,
                 "rewrite malformed": 1, "new passages": 3, "no new passage": 1, "answer": 1, "missing": 2,
                 "no verdict": 1, "next round": 2, "stopped by reflection": 1, "forced at cap": 1,
                 "rounds by number": {1: 2, 2: 1, 3: 1}}


def test_the_diagram_is_legible_when_projected_and_carries_the_counts():
    c = loop_counts([{"qid": "a", "answered_by": "reflection", "rounds": [_round(1)]}])
    lines = loop_box_lines(c)
    assert len(lines) == len(LOOP_STEPS) and lines[0] == ["1 questions"] and "answer: 1" in lines[5]
    fig = plot_loop(c, "loop")
    from kgir_lib import report

    png = report.figure_png(fig)
    assert report.figure_text_px(png) >= report.MIN_TEXT_PX  # shown at its own width: its text as drawn
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("(0×)" in t for t in texts) and any("with a seed: 1" in t for t in texts)
    assert min(t.get_fontsize() for t in fig.axes[0].texts) >= 10
