"""Where the gold passages missing from KGIR-RAG's final reader prompt were (kgir_lib.eval.mechanism.missing_gold),
the rewrite's form (kgir_lib.eval.mechanism.rewrite_form), and the split, two-order loss decomposition
(kgir_lib.eval.mechanism.loss_orders): exact values on hand-made traces, the declared family, and the committed
sample tables rebuilt from the committed traces."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kgir_lib.eval.mechanism import loss_decomposition as ld
from kgir_lib.eval.mechanism import loss_orders as lo
from kgir_lib.eval.mechanism import missing_gold as mg
from kgir_lib.eval.mechanism import rewrite_form as rwf
from kgir_lib.gold import Bridge

REPO = Path(__file__).resolve().parents[1]


def rnd(query, retrieved, rewrite=None, rewrite_retrieved=(), context=None, shown=(), malformed=False):
    out = {"query": query, "retrieved": [[p, 0.5] for p in retrieved], "evidence_source": "subgraph",
           "evidence": "Triples:\n(A, r, B)", "evidence_shown": [list(r) for r in shown]}
    if rewrite is not None:
        out["rewrite"] = {"question": None if malformed else rewrite, "malformed": malformed}
        out["rewrite_retrieved"] = [[p, 0.5] for p in rewrite_retrieved]
    if context is not None:
        out["final"] = {"answer": "x", "context_pids": list(context)}
    return out


def record(qid, gold, rounds, question="q?", answers=("x",)):
    return {"qid": qid, "answer": "x", "trace": {"qid": qid, "question": question, "gold_pids": list(gold),
                                                 "gold_answers": list(answers), "rounds": rounds}}


# one question, two rounds: g1 in D_1 (rank 2), g2 only in round 1's D'_1, g3 nowhere, g4 shown
TWO_ROUNDS = record("q1", ["g1", "g2", "g3", "g4"], [
    rnd("q?", ["x1", "g1", "x2", "x3", "x4", "x5", "g4"], "q2?", ["g2", "x6"]),
    rnd("q2?", ["g2", "x6"], "q2?", ["x7"], context=["x6", "g4", "x7"]),
])


def test_where_missing_counts_each_missing_gold_passage_by_where_it_was():
    assert mg.retrieved(TWO_ROUNDS) == ["x1", "g1", "x2", "x3", "x4", "x5", "g4", "g2", "x6", "x7"]
    assert mg.where_missing(TWO_ROUNDS) == {"g1": mg.IN_D1, "g2": mg.IN_LATER, "g3": mg.NEVER}
    assert (mg.d1_rank(TWO_ROUNDS, "g1"), mg.d1_rank(TWO_ROUNDS, "g2")) == (2, 0)
    no_reader = record("q2", ["g1"], [rnd("q?", ["g1"], "q?", ["x1"])])
    assert mg.where_missing(no_reader) == {} and mg.where_missing(record("q3", [], TWO_ROUNDS["trace"]["rounds"])) == {}


def test_the_table_and_its_sentence():
    late = record("q4", ["g5", "g6"], [rnd("q?", ["x1", "x2", "x3", "x4", "x5", "x6", "g5"], "r?", ["g6"],
                                           context=["g6"])])
    shown = record("q5", ["g7"], [rnd("q?", ["g7"], "r?", ["g7"], context=["g7"])])
    table = mg.missing_gold_table([TWO_ROUNDS, late, shown, record("q6", [], [])], "ds", n=5)
    row = table.iloc[0].to_dict()
    assert row == {"dataset": "ds", "questions": 3, "gold passages": 7, "in the prompt": 3, "missing": 4,
                   mg.IN_D1: 2, "of which in D_1's top n": 1, mg.IN_LATER: 1, mg.NEVER: 1,
                   "questions missing gold": 2, "questions: every missing passage retrieved": 1,
                   "questions: a missing passage never retrieved": 1, "top k": 7, "n": 5}
    assert mg.missing_gold_sentence(table, "ds") == (
        "ds: of the 4 gold passages missing from KGIR-RAG's final reader prompt (2 of 3 questions), 2 were in the "
        "first retrieval D_1's top 7 (1 in its top 5), 1 only in a later round's D'_t, and 1 in no retrieval; on 1 "
        "of the 2 questions every missing passage had been retrieved.")


# ---------------------------------------------------------------------------- the rewrite's form
BRIDGE = Bridge("Compaq", ("compaq",), ("p2",))


@pytest.mark.parametrize("query, rewrite, malformed, shown, form", [
    ("Who founded the top PC maker?", "who founded the top PC maker", False, (), rwf.IDENTICAL),
    ("Which consitutional court?", "Which constitutional court?", False, (), rwf.SURFACE),
    ("Which court ruled in 1994?", "Which court ruled?", False, (), rwf.SURFACE),
    ("Who founded the top PC maker?", "Who founded Compaq?", False, (), rwf.BRIDGE),
    ("Who founded the top PC maker?", "Who founded Dell?", False, (("Dell", "is", "PC maker"),), rwf.ENTITY),
    ("Who founded the top PC maker?", "Which person started the biggest computer firm?", False, (), rwf.OTHER),
    ("Who founded the top PC maker?", "", True, (), rwf.MALFORMED),
])
def test_each_form(query, rewrite, malformed, shown, form):
    r = rnd(query, ["p1"], rewrite, ["p2"], shown=shown, malformed=malformed)
    assert rwf.rewrite_form(r, (BRIDGE,)) == form


def test_word_edits_and_what_the_rewrite_changed():
    assert rwf.word_edits("Which consitutional court?", "which constitutional court") == [
        ("replaced", "consitutional", "constitutional")]
    assert rwf.word_edits("a b c", "a c d") == [("dropped", "b", ""), ("added", "", "d")]
    assert rwf.word_edits("A b", "a b!") == []
    change = {form: rwf.rewrite_change(rnd(q, ["p1"], rw, ["p2"], shown=shown, malformed=bad), (BRIDGE,))
              for q, rw, bad, shown, form in [
                  ("Who founded the top PC maker?", "who founded the top PC maker", False, (), rwf.IDENTICAL),
                  ("Which consitutional court?", "Which constitutional court?", False, (), rwf.SURFACE),
                  ("Who founded the top PC maker?", "Who founded Compaq?", False, (), rwf.BRIDGE),
                  ("Who founded the top PC maker?", "Who founded Dell?", False, (("Dell", "is", "PC maker"),),
                   rwf.ENTITY),
                  ("Who founded the top PC maker?", "Which person started the biggest computer firm?", False, (),
                   rwf.OTHER),
                  ("Who founded the top PC maker?", "", True, (), rwf.MALFORMED)]}
    assert change == {
        rwf.IDENTICAL: "left the question as it was (case, punctuation and spacing aside)",
        rwf.SURFACE: "made a surface edit naming no gold bridge or G_Ans entity the question lacked: replaced "
                     "'consitutional' with 'constitutional'",
        rwf.BRIDGE: "named the gold bridge 'Compaq', which the question lacked (replaced 'the top pc maker' with "
                    "'compaq')",
        rwf.ENTITY: "named the G_Ans entity 'Dell', which the question lacked (replaced 'the top pc maker' with "
                    "'dell')",
        rwf.OTHER: "reworded the question naming no gold bridge or G_Ans entity it lacked: replaced 'who founded' "
                   "with 'which person started' and replaced 'top pc maker' with 'biggest computer firm'",
        rwf.MALFORMED: "the rewrite reply held no question, so the loop kept the question as it was"}
    assert rwf.rewrite_change(rnd("q?", ["p"])) == ""  # no rewrite call


def test_token_edits_and_normalise():
    assert rwf.normalise(" Who's  THE maker?! ") == "who s the maker"
    assert rwf.token_edits("a b c d", "a x c") == 2 and rwf.token_edits("a b", "a b") == 0
    assert rwf.token_edits("", "a b") == 2
    assert rwf.rewrite_form(rnd("q?", ["p"])) == ""  # no rewrite call


def test_the_form_table_counts_per_round_and_over_every_round():
    records = [
        record("q1", ["g"], [rnd("Who founded the top PC maker?", ["p"], "Who founded Compaq?", ["p2"]),
                             rnd("Who founded Compaq?", ["p2"], "who founded compaq", ["p3"], context=["p3"])]),
        record("q2", ["g"], [rnd("Which consitutional court?", ["p"], "Which constitutional court?", ["p"],
                                 context=["p"])]),
    ]
    table = rwf.form_table(records, {"q1": (BRIDGE,), "q2": ()}, "ds")
    any_row = table[table["round"] == "any"].iloc[0]
    assert [int(any_row[c]) for c in ("rewrites", *rwf.FORMS)] == [3, 0, 1, 1, 0, 1, 0]
    assert (int(any_row[rwf.NAMES_ENTITY]), int(any_row[rwf.BRIDGE_ROUNDS]), int(any_row[rwf.NAMES_BRIDGE])) == \
        (0, 2, 1)
    assert list(table["round"]) == ["1", "2", "any"] and list(table["rewrites"]) == [2, 1, 3]
    assert rwf.form_sentence(table, "ds") == (
        "ds: of the 3 rewrites, 1 left the question identical (case, punctuation and spacing aside), 1 made a "
        "surface edit of at most 2 words naming nothing new, 0 reworded it naming nothing new, 0 named a G_Ans "
        "entity it lacked and 1 the gold bridge (0 malformed).")


# ---------------------------------------------------------------------------- the split and the two orders
def test_restore_withheld_keeps_b_positions_for_the_retrieved_gold_only():
    pids = ["a", "b", "c", "d", "e"]
    assert ld.swap_in_gold(pids, ["b", "x", "y"]) == ["a", "b", "c", "x", "y"]
    assert lo.restore_withheld(pids, ["b", "x", "y"], found={"a", "b", "c", "d", "e", "y"}) == ["a", "b", "c", "d", "y"]
    assert lo.restore_withheld(pids, ["b", "x", "y"], found={"x"}) == ["a", "b", "c", "x", "e"]
    assert lo.restore_withheld(["a"], ["x", "y"], found={"y"}) == ["a", "y"]  # (b) appended it: kept when found
    assert lo.restore_withheld(["a"], ["x", "y"], found=set()) == ["a"]


def test_the_ten_conditions_of_one_question():
    prompt = ld.ReaderPrompt("q1", "q?", "Triples", ("x6", "g4", "x7"), 400)
    found = set(mg.retrieved(TWO_ROUNDS))
    c = lo.order_conditions(prompt, ["g1", "g2", "g3", "g4"], found)
    assert tuple(c) == lo.ALL and len(lo.ALL) == 10 and lo.NEW == (
        "withheld_restored", "as_run_uncut", "uncut_no_triples", "uncut_gold_in_prompt", "uncut_plus_never_retrieved")
    assert c["retrieval_fixed"].pids == ("g1", "g4", "g2", "g3")
    assert c["withheld_restored"].pids == ("g1", "g4", "g2")  # g3 was never retrieved: not added
    assert (c["as_run_uncut"].cut, c["as_run_uncut"].triples, c["as_run_uncut"].pids) == (None, "Triples",
                                                                                           prompt.pids)
    assert (c["uncut_no_triples"].triples, c["uncut_no_triples"].pids) == ("", prompt.pids)
    assert c["uncut_gold_in_prompt"].pids == ("g4",) and c["uncut_plus_never_retrieved"].pids == ("g3", "g4")
    assert c["gold_uncut"].pids == ("g1", "g2", "g3", "g4") and c["gold_uncut"].cut is None


def test_the_family_is_declared_with_both_orders_and_the_reader_tests():
    fam = lo.family(["small", "large"])
    assert len(fam) == lo.family_size(["small", "large"]) == 30 and len(set(fam)) == 30
    assert ("small", "forward", "withheld_restored", "previous") in fam
    assert ("large", "reverse", "gold_uncut", "previous") in fam and ("large", "", "as_run_uncut", "small") in fam
    assert lo.family_size(["one"]) == 10
    assert lo.STEPS["forward"]["withheld_restored"] == lo.CONTEXT_RULE == lo.STEPS["reverse"]["gold_uncut"]
    assert lo.STEPS["reverse"]["as_run_uncut"] == lo.CUT == lo.STEPS["forward"]["gold_uncut"]


def scored_answers(em: dict) -> pd.DataFrame:
    """``{condition: [EM of q1, q2, ...]}`` as score_answers' rows."""
    rows = [{"qid": f"q{i}", "condition": c, "answer": "", "EM": 100.0 * v, "F1": 100.0 * v}
            for c, vs in em.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_the_table_the_fix_effects_and_the_sentence():
    base = [0, 0, 0, 0]
    em = {c: base for c in lo.ALL}
    em.update({"withheld_restored": [1, 1, 0, 0], "retrieval_fixed": [1, 1, 1, 0], "gold_with_triples": [1, 1, 1, 0],
               "gold_only": [1, 1, 1, 0], "gold_uncut": [1, 1, 1, 1], "as_run_uncut": [0, 0, 0, 1],
               "uncut_no_triples": [0, 0, 0, 1], "uncut_gold_in_prompt": [0, 0, 0, 1],
               "uncut_plus_never_retrieved": [0, 0, 1, 1]})
    table = lo.orders_table({"r": scored_answers(em)}, "ds")
    assert len(table) == 12
    fwd = table[table["order"] == "forward"].set_index("condition")
    assert list(fwd["ΔEM"].fillna(0)) == [0, 50, 25, 0, 0, 25] and fwd.loc["withheld_restored", "EM b/c"] == "2/0"
    assert fwd.loc["withheld_restored", "p"] == pytest.approx(0.5)
    ps = [p for p in table["p"] if pd.notna(p)]
    from kgir_lib.eval.stats import holm

    assert list(table["p (Holm)"].dropna()) == pytest.approx(list(holm(ps)))
    effects = lo.fix_effects(table, "ds", "r").set_index("fix")
    assert effects.loc[lo.CONTEXT_RULE, ["forward", "reverse"]].tolist() == [50.0, 50.0]
    assert effects.loc[lo.CUT, ["forward", "reverse"]].tolist() == [25.0, 25.0]
    assert effects.loc[lo.RETRIEVAL, ["forward", "reverse", "low", "high"]].tolist() == [25.0, 25.0, 25.0, 25.0]
    assert lo.orders_sentence(table, "ds", "r").startswith(
        "ds (n = 4, r): from KGIR-RAG's own prompt (0.0) to the uncut gold passages (100.0): restoring the withheld "
        "gold (the context rule) adds +50.0 in this order, +50.0 in the reverse; adding the never-retrieved gold "
        "(retrieval) adds +25.0")
    from kgir_lib.eval.claims import ALPHA, POWER
    from kgir_lib.eval.stats import mde_mcnemar

    # 4 questions, 2 discordant, level ALPHA / 10 (one reader's family): no difference is detectable
    assert fwd.loc["withheld_restored", lo.MDE_COLUMN] == 100 * mde_mcnemar(4, 0.5, ALPHA / 10, POWER) == np.inf
    assert np.isnan(fwd.loc["as_run", lo.MDE_COLUMN])


# ---------------------------------------------------------------------------- the committed tables
def committed_tables(profile: str) -> tuple:
    from kgir_lib import report
    from kgir_lib.config import load_config
    from kgir_lib.eval.mechanism.bridges import load_bridges
    from kgir_lib.eval.mechanism.tables import read_run

    cfg = load_config(profile)
    names = report.panel_order(cfg.datasets)
    runs = read_run(REPO / "results" / profile, names, methods=("kgir", "kgir_forced"))
    if len(runs) < 2 * len(names):
        pytest.skip(f"the {profile} traces are not on disk (rebuilt by --regenerate)")
    where = pd.concat([mg.missing_gold_table(runs[("kgir", d)], d, cfg.context_passages) for d in names],
                      ignore_index=True)
    forms = pd.concat([rwf.form_table(runs[(m, d)], load_bridges(d, cfg.data_path), d, m)
                       for m in ("kgir", "kgir_forced") for d in names], ignore_index=True)
    return where, forms


@pytest.mark.parametrize("profile", ["sample", "local"])
def test_the_committed_tables_are_the_traces_counts(profile):
    """The committed 04_missing_gold_where and 04_rewrite_form, cell by cell, from the run's traces (the sample's
    are committed; the local run's are rebuilt from its committed response log by --regenerate)."""
    tables = REPO / "results" / profile / "tables"
    where, forms = committed_tables(profile)
    pd.testing.assert_frame_equal(pd.read_csv(tables / "04_missing_gold_where.csv"), where, check_dtype=False)
    pd.testing.assert_frame_equal(pd.read_csv(tables / "04_rewrite_form.csv", dtype={"round": str}), forms,
                                  check_dtype=False)


@pytest.mark.parametrize("profile", ["sample", "local"])
def test_the_committed_tables_add_up(profile):
    """Without the traces: each table's own arithmetic (the missing passages are split by where they were; the
    forms add up to the rewrites; the 'any' row is the sum of the rounds)."""
    tables = REPO / "results" / profile / "tables"
    if not (tables / "04_missing_gold_where.csv").exists():
        pytest.skip(f"no committed 04_missing_gold_where for {profile}")
    where = pd.read_csv(tables / "04_missing_gold_where.csv")
    assert (where["missing"] == where[list(mg.WHERE)].sum(axis=1)).all()
    assert (where["gold passages"] == where["missing"] + where["in the prompt"]).all()
    assert (where[mg.TOP_N] <= where[mg.IN_D1]).all()
    assert (where["questions missing gold"] == where["questions: every missing passage retrieved"]
            + where["questions: a missing passage never retrieved"]).all()
    forms = pd.read_csv(tables / "04_rewrite_form.csv", dtype={"round": str})
    assert (forms["rewrites"] == forms[list(rwf.FORMS)].sum(axis=1)).all()
    for _, g in forms.groupby(["method", "dataset"]):
        rounds, total = g[g["round"] != "any"], g[g["round"] == "any"].iloc[0]
        assert (rounds.drop(columns=["method", "dataset", "round"]).sum() == total.drop(
            ["method", "dataset", "round"])).all()


def test_the_swap_split_by_where_the_missing_gold_was():
    records = [TWO_ROUNDS,  # g3 never retrieved
               record("q4", ["g5", "g6"], [rnd("q?", ["g5", "x"], "r?", ["g6"], context=["g6"])]),  # g5 withheld
               record("q5", ["g7"], [rnd("q?", ["g7"], "r?", ["g7"], context=["g7"])])]  # nothing missing
    assert [mg.question_class(r) for r in records] == [mg.SOME_NEVER, mg.ALL_RETRIEVED, mg.NOTHING]
    em = {"as_run": [0, 100, 100], "retrieval_fixed": [100, 0, 100]}
    scored = pd.DataFrame([{"qid": q, "condition": c, "EM": v[i]} for c, v in em.items()
                           for i, q in enumerate(["q1", "q4", "q5"])])
    table = mg.swap_by_class(records, {"r": scored}, "ds")
    assert table.drop(columns=["dataset", "reader"]).values.tolist() == [
        [mg.ALL_RETRIEVED, 1, 0, 1, pytest.approx(-100 / 3)], [mg.SOME_NEVER, 1, 1, 0, pytest.approx(100 / 3)],
        [mg.NOTHING, 1, 0, 0, 0.0]]
    assert mg.swap_sentence(table, "ds", "r") == (
        "ds (r): swapping the missing gold in turns 0 answers right and 1 wrong on the 1 questions whose every "
        "missing gold passage had been retrieved (-33.3 EM), and 1 right and 0 wrong on the 1 with a gold passage "
        "no retrieval found (+33.3 EM).")


@pytest.mark.parametrize("profile", ["sample", "local"])
def test_the_committed_swap_adds_up_to_the_decompositions_step(profile):
    """The split (a) -> (b) flips, summed over the classes, are the committed decomposition's own b / c."""
    tables = REPO / "results" / profile / "tables"
    swap = pd.read_csv(tables / "04_missing_gold_swap.csv")
    dec = pd.read_csv(tables / "04_loss_decomposition.csv")
    dec = dec[dec["condition"] == "retrieval_fixed"].set_index(["dataset", "reader"])
    for (d, r), g in swap.groupby(["dataset", "reader"]):
        assert f"{g['wrong -> right'].sum()}/{g['right -> wrong'].sum()}" == dec.loc[(d, r), "EM b/c"]
        assert g["ΔEM points"].sum() == pytest.approx(dec.loc[(d, r), "ΔEM"], abs=1e-3)
        assert g["questions"].sum() == dec.loc[(d, r), "n"]
        assert g.loc[g["class"] == mg.NOTHING, ["wrong -> right", "right -> wrong"]].sum().sum() == 0
    where = pd.read_csv(tables / "04_missing_gold_where.csv").set_index("dataset")
    for d, g in swap.groupby("dataset"):
        counts = g.drop_duplicates("class").set_index("class")["questions"]
        assert counts[mg.ALL_RETRIEVED] == where.loc[d, "questions: every missing passage retrieved"]
        assert counts[mg.SOME_NEVER] == where.loc[d, "questions: a missing passage never retrieved"]


def test_form_sentences_name_the_run():
    table = pd.read_csv(REPO / "results" / "sample" / "tables" / "04_rewrite_form.csv", dtype={"round": str})
    lines = rwf.form_sentences(table)
    assert len(lines) == 4 and lines[0].endswith("; KGIR-RAG as run.") and lines[-1].endswith("; every round forced.")


def test_the_words_around_the_local_counts_hold():
    """The results page says 'most of those passages had been retrieved' and that none was found only by a later
    round's D'_t: both from the committed local table."""
    where = pd.read_csv(REPO / "results" / "local" / "tables" / "04_missing_gold_where.csv")
    assert ((where[mg.IN_D1] + where[mg.IN_LATER]) * 2 > where["missing"]).all()
    assert (where[mg.IN_LATER] == 0).all()
    text = " ".join((REPO / "docs" / "results.md").read_text(encoding="utf-8").split())
    assert "most of those passages had been retrieved" in text
    assert "retrieval accounts for" not in text and "the loss is retrieval's" not in text
    assert (where[mg.IN_D1] * 2 > where["missing"]).all()  # the README names the first retrieval alone
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "On this run most gold passages missing from its final prompt had been found by the first retrieval" in readme


def test_the_results_page_words_on_the_sample_orders_hold():
    """'its 30 tests a dataset declared' and 'every Holm p is 1 on ten questions', from the profile and the table."""
    from kgir_lib.config import load_config

    text = " ".join((REPO / "docs" / "results.md").read_text(encoding="utf-8").split())
    sample = load_config("sample")
    assert sample.decomposition_orders and load_config("local").decomposition_orders
    assert f"its {lo.family_size(sample.decomposition_readers)} tests a dataset declared" in text
    table = pd.read_csv(REPO / "results" / "sample" / "tables" / "04_loss_orders.csv")
    assert "every Holm p is 1 on ten questions" in text and (table["n"] == 10).all()
    held = table[["p (Holm)", "p vs first reader (Holm)"]].to_numpy().ravel()
    assert (held[~np.isnan(held)] == 1.0).all() and (~np.isnan(held)).sum() == 60
    fam = table.dropna(subset=["p"]).groupby("dataset").size() + table.dropna(
        subset=["p vs first reader"]).groupby("dataset").size()
    assert (fam == lo.family_size(sample.decomposition_readers)).all()  # every declared test was made
