"""What the teaching notebooks promise a lecturer, read from their committed outputs and tables.

* Notebook 07 shows the whole Fig. 6 chain once: its chain table (``07_case_chain``) has a round on which every step
  holds (seed, bridge in ``G_Ans``, the rewrite names it, ``D'_t`` finds the next hop, the answer is right); for the
  headline run, in the model's own run; the readers' copy highlights it.
* Notebook 04 shows the loop going round: a round 2 (or later), labelled natural or forced, whose rewrite retrieved a
  next-hop passage, with both retrievals side by side.
* Every abbreviation a table shows is defined where it is shown: "McNemar b/c", "p vs ...", and the MDE before any
  "MDE ∞".
* The iteration and chain helpers behind them, on hand-made traces.
"""
from __future__ import annotations

import json
import re

import nbformat
import pandas as pd
import pytest

from kgir_lib.config import PROJECT_ROOT
from kgir_lib.eval.mechanism import rewrite_form
from kgir_lib.eval.mechanism.bridges import Bridge
from kgir_lib.eval.mechanism.funnel import STEPS
from kgir_lib.notebook import iteration
from kgir_lib.notebook.case.choice import WHOLE, chain_marks
from kgir_lib.report import HEADLINE_PROFILE

from _mech_traces import record, rnd  # noqa: E402

NATURAL = "KGIR-RAG as the model runs it"


def _chain(profile: str) -> pd.DataFrame:
    return pd.read_csv(PROJECT_ROOT / "results" / profile / "tables" / "07_case_chain.csv")


def _whole(t: pd.DataFrame) -> pd.DataFrame:
    return t[t[list(STEPS[1:])].astype(bool).all(axis=1)]


def test_the_headline_run_completes_the_whole_chain_on_one_question_by_itself():
    t = _chain(HEADLINE_PROFILE)
    rows = _whole(t)
    assert len(rows), "no round of 07_case_chain takes every step"
    assert (rows["run"] == NATURAL).any(), "the every-step round is not the model's own run"
    assert (rows["breaks at"] == WHOLE).all()
    row = rows[rows["run"] == NATURAL].iloc[0]
    nb = nbformat.read(PROJECT_ROOT / "notebooks" / "07_case_study.ipynb", as_version=4)
    text = json.dumps([c.get("outputs", []) for c in nb.cells], ensure_ascii=False)
    assert row["qid"] in text and "every step holds" in text  # the copy shows that question, highlighted


def test_every_committed_run_says_who_completed_the_chain_or_that_none_did():
    """The model's own run is always in the chain table; a study variant beside it is labelled so; a run where neither
    completes the chain (the sample's 0.5B on 10 questions a dataset) says so in its notebook, in the model's own
    trace count and for every study variant searched."""
    for profile in ("sample", HEADLINE_PROFILE):
        t = _chain(profile)
        assert NATURAL in set(t["run"])
        assert set(t["run"]) <= {NATURAL} | {r for r in t["run"] if r.endswith("(study variant)")}
        if len(_whole(t)):
            continue
        nb = nbformat.read(PROJECT_ROOT / "results" / profile / "notebooks" / "07_case_study.ipynb", as_version=4)
        text = json.dumps([c.get("outputs", []) for c in nb.cells], ensure_ascii=False)
        assert "NO trace completes the chain" in text and "No study variant of this run" in text, profile


def test_notebook_04_shows_a_round_after_the_first_with_what_its_rewrite_changed():
    nb = nbformat.read(PROJECT_ROOT / "notebooks" / "04_iterative_rewrite.ipynb", as_version=4)
    text = json.dumps([c.get("outputs", []) for c in nb.cells], ensure_ascii=False)
    # the round's rewrite is labelled with its form; a form of no more than a surface edit is said to be the best
    # the run has (kgir_lib.notebook.iteration; its choice and sentence are tested on traces in test_iteration.py)
    m = re.search(r"Round (\d+)'s rewrite \(([a-zA-Z_ ]+)\) ", text)
    assert m and int(m.group(1)) >= 2, "no round after the first with its rewrite's form"
    assert m.group(2) in rewrite_form.FORMS
    said = "changed the question by more than a surface edit; below is the best it has" in text
    assert said == (m.group(2) not in rewrite_form.MORE_THAN_SURFACE)
    assert ("A forced round" in text) != ("A natural round" in text)  # labelled, one way
    assert "before: D_" in text and "after: D'_" in text and "next hop" in text


def _order(nb) -> str:
    """Everything a reader reads, in order: each cell's markdown source, then its outputs."""
    parts = []
    for c in nb.cells:
        parts.append(c.source if c.cell_type == "markdown" else "")
        parts.append(json.dumps(c.get("outputs", []), ensure_ascii=False))
    return "\n".join(parts)


@pytest.mark.parametrize("name", ["04_iterative_rewrite", "05_eval", "06_ablation", "07_case_study"])
def test_every_abbreviation_is_defined_where_a_table_shows_it(name):
    nb = nbformat.read(PROJECT_ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    bad = []
    for i, c in enumerate(nb.cells):
        outs = c.get("outputs", [])
        heads = {h for o in outs for h in re.findall(r"<th[^>]*>([^<]*(?:McNemar [bc]|p vs [\w ]+)[^<]*)</th>",
                                                      str(o.get("data", {}).get("text/html", "")))}
        notes = " ".join(str(o.get("data", {}).get("text/markdown", "")) for o in outs)
        bad += [f"cell {i}: {h!r}" for h in heads if f"*{h}*:" not in notes]
    assert not bad, f"{name}: table headers without a note under the table:\n" + "\n".join(bad)


def test_the_mde_is_defined_before_any_mde_infinity():
    nb = nbformat.read(PROJECT_ROOT / "notebooks" / "05_eval.ipynb", as_version=4)
    text = _order(nb)
    first = min(i for i in (text.find("MDE ∞"), text.find("MDE \\u221e")) if i >= 0) if "MDE" in text else -1
    defined = text.find("minimum detectable effect")
    assert 0 <= defined and (first < 0 or defined < first)


def test_the_headings_say_what_the_sections_do():
    src05 = (PROJECT_ROOT / "notebooks" / "src" / "05_eval.py").read_text(encoding="utf-8")
    assert "Which differences can this sample support? Paired bootstrap" not in src05  # the tests decide, not it
    src07 = (PROJECT_ROOT / "notebooks" / "src" / "07_case_study.py").read_text(encoding="utf-8")
    assert "`D_q`, the top-k passages" not in src07  # a round's retrieval is D_t; D_q is round 1's, the paper's name
    assert "datasets=[dataset] if dataset else None" in src07  # the first output names the dataset asked for


# --------------------------------------------------------------------------- the helpers, on hand-made traces
HOP = Bridge("Hewlett-Packard", ("hewlett packard",), ("pHP",))


def _forced(question="Which company merged in 2002 with the top PC maker of 1994?"):
    r1 = rnd(t=1, retrieved=("pCompaq", "pX"), rewrite_retrieved=("pCompaq", "pY"), answer="IBM")
    r2 = rnd(t=2, retrieved=("pCompaq", "pY"), rewrite_retrieved=("pHP", "pCompaq"), answer="Hewlett-Packard",
             rewrite="Which company did Hewlett-Packard merge with?")
    rec = record("q1", rounds=[r1, r2], answer="Hewlett-Packard")
    rec["trace"]["round_answers"] = ["IBM", "Hewlett-Packard"]
    rec["trace"]["question"] = question
    return rec


def test_find_iteration_prefers_a_natural_round_and_labels_a_forced_one():
    forced = _forced()
    runs = {("kgir_forced", "d"): [forced], ("kgir", "d"): [record("q1", rounds=[rnd(t=1)], answer="IBM")]}
    it = iteration.find_iteration(runs, {"d": {"q1": (HOP,)}})
    assert (it.method, it.round, it.next_pids) == ("kgir_forced", 2, ("pHP",)) and it.forced
    assert it.natural is not None and "stopped after round 1" in iteration.iteration_sentence(it, str)
    natural = _forced()
    natural["trace"].pop("round_answers")
    it = iteration.find_iteration({("kgir", "d"): [natural], ("kgir_forced", "d"): [forced]}, {"d": {"q1": (HOP,)}})
    assert it.method == "kgir" and not it.forced and "A natural round" in iteration.iteration_sentence(it, str)
    assert iteration.find_iteration({("kgir", "d"): [forced]}, {"d": {}}) is None  # no gold bridge: nothing to find


def test_a_next_hop_an_earlier_retrieval_held_is_not_new():
    rec = _forced()
    rec["trace"]["rounds"][0]["rewrite_retrieved"] = [["pHP", 0.5]]
    assert iteration.new_next_hop(rec, (HOP,), 2) == ()
    table = iteration.before_after(iteration.Iteration("kgir_forced", "d", "q1", 2, _forced(), ("pHP",)), str)
    assert list(table.columns) == ["rank", "before: D_2, retrieved with the round's query",
                                   "after: D'_2, retrieved with round 2's rewrite"]
    assert table.iloc[0, 2] == "pHP [next hop, gold, new]"


def test_chain_marks_say_where_every_step_holds():
    t = pd.DataFrame([{"round": 1, **{s: True for s in STEPS[1:]}, "breaks at": WHOLE,
                       "next hop already in D_t": False},
                      {"round": 2, **{s: s != STEPS[3] for s in STEPS[1:]}, "breaks at": STEPS[3],
                       "next hop already in D_t": False}])
    marks = chain_marks(t)
    assert marks["the whole chain"].tolist() == ["✓ every step holds", f"breaks at {STEPS[3]}"]
    assert marks.loc[1, STEPS[3]] == "✗" and marks.loc[0, STEPS[1]] == "✓"


def test_notebook_04_defines_p_holm_where_it_first_uses_it():
    """04's study-variant sentences give "p(Holm)" before notebook 05 explains it: the first "p(Holm)" a reader meets
    in 04 is its definition, in the markdown of that section."""
    nb = nbformat.read(PROJECT_ROOT / "notebooks" / "04_iterative_rewrite.ipynb", as_version=4)
    text = _order(nb)
    first = text.find("p(Holm)")
    assert first >= 0 and text[first - 2:first + 9] == "**p(Holm)**"
    assert "exact McNemar test" in text[first:first + 200] and "Holm's procedure" in text[first:first + 400]
