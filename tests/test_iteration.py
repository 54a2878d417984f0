"""The round notebook 04 §2 shows going round (kgir_lib.notebook.iteration): a rewrite that changes the question by
more than a surface edit first, a natural round before a forced one, a new next-hop passage next; when no round
does more than a surface edit, the sentence says so and names the form. Hand-made traces and the committed sample
traces, exact values."""
from __future__ import annotations

from pathlib import Path

from _mech_traces import COMPAQ, QUESTION, record, rnd

from kgir_lib.data import load_dataset
from kgir_lib.eval.mechanism import rewrite_form as rwf
from kgir_lib.eval.mechanism.bridges import load_bridges
from kgir_lib.eval.mechanism.tables import read_run
from kgir_lib.notebook import iteration

REPO = Path(__file__).resolve().parents[1]
TYPO = QUESTION.replace("company", "compnay")


def two_rounds(qid: str, query: str, rewrite: str, rewrite_retrieved: tuple, **top) -> dict:
    """Round 1 holds no next-hop passage; round 2 rewrites ``query`` into ``rewrite`` and retrieves
    ``rewrite_retrieved`` (``pHP``: the next hop)."""
    return record(qid, [rnd(1, rewrite=query, rewrite_retrieved=("pCompaq", "pApple"), verdict="missing"),
                        rnd(2, query=query, retrieved=("pIBM", "pDell"), rewrite=rewrite,
                            rewrite_retrieved=rewrite_retrieved)], **top)


BRIDGE_NO_HOP = two_rounds("bridge", QUESTION, "Which company merged with Compaq in 2002?", ("pApple", "pIBM"))
TYPO_HOP = two_rounds("typo", TYPO, QUESTION, ("pHP", "pApple"))
SAME = two_rounds("same", QUESTION, QUESTION, ("pApple",))
BRIDGE_HOP = two_rounds("bridge_hop", QUESTION, "Which company merged with Compaq in 2002?", ("pHP", "pIBM"))
GOLD = {"ds": {q: (COMPAQ,) for q in ("bridge", "typo", "same", "bridge_hop")}}


def test_more_than_a_surface_edit_wins_over_a_new_next_hop():
    it = iteration.find_iteration({("kgir", "ds"): [TYPO_HOP, BRIDGE_NO_HOP]}, GOLD)
    assert (it.qid, it.round, it.form, it.next_pids, it.more_than_surface) == ("bridge", 2, rwf.BRIDGE, (), True)
    assert it.change == ("named the gold bridge 'Compaq', which the question lacked (added 'with compaq' and dropped "
                         "'with the top pc maker of 1994')")
    assert iteration.iteration_sentence(it, str) == (
        "A natural round: the reflection found something missing and sent the question round again. Round 2's "
        "rewrite (names the gold bridge) named the gold bridge 'Compaq', which the question lacked (added 'with "
        "compaq' and dropped 'with the top pc maker of 1994'). Its retrieval D'_2 brought no passage of "
        "the question's next hop that an earlier retrieval of the question had not held. The answer after round 2: "
        "'Hewlett-Packard' (right; gold: Hewlett-Packard | HP).")


def test_a_natural_round_wins_over_a_forced_one_then_the_next_hop():
    runs = {("kgir", "ds"): [BRIDGE_NO_HOP], ("kgir_forced", "ds"): [BRIDGE_HOP]}
    assert iteration.find_iteration(runs, GOLD).qid == "bridge"
    runs = {("kgir", "ds"): [TYPO_HOP], ("kgir_forced", "ds"): [BRIDGE_HOP]}
    it = iteration.find_iteration(runs, GOLD)
    assert (it.method, it.qid, it.next_pids, it.forced) == ("kgir_forced", "bridge_hop", ("pHP",), True)
    assert "It retrieves 'pHP' (rank 1 of D'_2): a passage of the question's next hop" in \
        iteration.iteration_sentence(it, str)
    assert iteration.find_iteration({("kgir", "ds"): [BRIDGE_NO_HOP, BRIDGE_HOP]}, GOLD).qid == "bridge_hop"


def test_without_more_than_a_surface_edit_the_sentence_says_so_and_names_the_form():
    it = iteration.find_iteration({("kgir", "ds"): [SAME, TYPO_HOP]}, GOLD)
    assert (it.qid, it.form, it.next_pids, it.more_than_surface) == ("typo", rwf.SURFACE, ("pHP",), False)
    assert iteration.iteration_sentence(it, str).startswith(
        "No round after the first of this run, natural or forced, changed the question by more than a surface edit; "
        "below is the best it has. A natural round: the reflection found something missing and sent the question "
        "round again. Round 2's rewrite (surface edit) made a surface edit naming no gold bridge or G_Ans entity "
        "the question lacked: replaced 'compnay' with 'company'. It retrieves 'pHP' (rank 1 of D'_2)")
    assert iteration.find_iteration({("kgir", "ds"): [SAME]}, GOLD).form == rwf.IDENTICAL
    assert iteration.find_iteration({("kgir", "ds"): [record("one")]}, GOLD) is None  # no round 2
    assert iteration.find_iteration({("kgir", "ds"): [TYPO_HOP]}, {"ds": {}}) is None  # no gold bridge


def test_the_committed_sample_traces():
    ds = ["hotpotqa", "musique_train"]
    runs = read_run(REPO / "results" / "sample", ds, methods=tuple(iteration.RUN_LABELS))
    gold = {d: load_bridges(d) for d in ds}
    it = iteration.find_iteration(runs, gold)
    assert (it.method, it.dataset, it.qid, it.round, it.form, it.next_pids) == (
        "kgir", "musique_train", "3hop1__155787_497059_42188", 2, rwf.OTHER, ())
    title = {p.pid: p.title for p in load_dataset("musique_train").corpus.passages}.get
    assert iteration.iteration_sentence(it, title) == (
        "A natural round: the reflection found something missing and sent the question round again. Round 2's "
        "rewrite (other rewrite) reworded the question naming no gold bridge or G_Ans entity it lacked: dropped 'is "
        "the' and replaced 'of the river which the tekeze river turns into' with 'did germany have imperial "
        "interests'. Its retrieval D'_2 brought no passage of the question's next hop that an earlier retrieval of "
        "the question had not held. The answer after round 2: 'Germany had imperial interests in Africa and the "
        "South Pacific' (wrong; gold: South Pacific).")
    forced = iteration.find_iteration(runs, gold, methods=("kgir_forced",))
    assert (forced.dataset, forced.qid, forced.round, forced.form, forced.next_pids) == (
        "hotpotqa", "5ab55e015542992aa134a2d3", 2, rwf.OTHER, ())
    assert "KGIR-RAG as the model runs it stopped after round 1 with the answer 'Shau Kei Wan'" in \
        iteration.iteration_sentence(forced, str)
    # the natural run's rounds restricted to an identical rewrite and a surface edit: the best is the surface edit
    keep = {("kgir", "musique_train"): [r for r in runs[("kgir", "musique_train")]
                                        if r["qid"] in ("2hop__272543_126102", "2hop__102960_54210")]}
    best = iteration.find_iteration(keep, gold)
    assert (best.qid, best.form) == ("2hop__272543_126102", rwf.SURFACE)
    assert iteration.iteration_sentence(best, title).startswith(
        "No round after the first of this run, natural or forced, changed the question by more than a surface edit; "
        "below is the best it has. A natural round: the reflection found something missing and sent the question "
        "round again. Round 2's rewrite (surface edit) made a surface edit naming no gold bridge or G_Ans entity "
        "the question lacked: replaced 'hawiye' with 'ceelmakoile'.")
