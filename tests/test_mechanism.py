"""The driver (kgir_lib.eval.mechanism.tables): every table from a run directory of hand-made traces and a tiny
dataset."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from kgir_lib.data import passage_id
from kgir_lib.eval.mechanism.tables import TABLES, mechanism_tables
from kgir_lib.traces import trace_filename, write_jsonl

from _mech_traces import QUESTION, REWRITE, record, rnd

PARAS = [("Compaq", "Compaq was the largest supplier of personal computers in 1994."),
         ("Hewlett-Packard", "In 2002 Hewlett-Packard merged with Compaq."),
         ("IBM", "IBM sold its PC business to Lenovo in 2005.")]
P = {t: passage_id(t, x) for t, x in PARAS}


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data" / "tinymq"
    d.mkdir(parents=True)
    rec = {"id": "q1", "question": QUESTION, "answer": "Hewlett-Packard", "answer_aliases": ["HP"],
           "paragraphs": [{"idx": i, "title": t, "paragraph_text": x, "is_supporting": i < 2}
                          for i, (t, x) in enumerate(PARAS)],
           "question_decomposition": [
               {"question": "top PC maker of 1994", "answer": "Compaq", "paragraph_support_idx": 0},
               {"question": "Which company merged with #1 in 2002?", "answer": "Hewlett-Packard",
                "paragraph_support_idx": 1}]}
    (d / "tinymq.json").write_text(json.dumps([rec]))
    (d / "tinymq_corpus.json").write_text(json.dumps([{"title": t, "text": x} for t, x in PARAS]))
    return tmp_path / "data"


def _round(t, answer="HP", verdict="answer", **kw):
    gans = [("Compaq", "was top PC maker of", "1994", P["Compaq"], 0.9)]
    return rnd(t=t, retrieved=[P["Compaq"], P["IBM"]], gans=gans, rewrite=REWRITE,
               rewrite_retrieved=[P["Hewlett-Packard"], P["Compaq"]], verdict=verdict, answer=answer, **kw)


@pytest.fixture
def run_dir(tmp_path):
    gold = (P["Compaq"], P["Hewlett-Packard"])
    full = record("q1", rounds=[_round(1)], gold_pids=gold, answer="HP",
                  ranked_pids=[P["Compaq"], P["Hewlett-Packard"], P["IBM"]])
    no_rw = record("q1", rounds=[rnd(retrieved=[P["Compaq"], P["IBM"]], rewrite=None, verdict=None,
                                     gans=[("Compaq", "was top PC maker of", "1994", P["Compaq"], 0.9)])],
                   gold_pids=gold, answer="IBM", variant="no_rewrite", answered_by="reader")
    forced = record("q1", rounds=[_round(1, verdict="missing"), _round(2)], gold_pids=gold, answer="HP",
                    round_answers=["IBM", "HP"])
    ircot = {"qid": "q1", "answer": "HP", "trace": {"cot": ["The top PC maker of 1994 was Compaq."],
                                                    "retrievals": [{"query": QUESTION, "hits": [[P["Compaq"], 1.0]]},
                                                                   {"query": "c", "hits": [[P["IBM"], 1.0]]}]}}
    for key, recs in {"kgir": [full], "kgir_no_rewrite": [no_rw], "kgir_forced": [forced], "ircot": [ircot]}.items():
        write_jsonl(recs, tmp_path / "run" / "traces" / key / trace_filename("tinymq"))
    return tmp_path / "run"


def test_every_table_from_a_run(run_dir, data_dir):
    t = mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir)
    assert tuple(t) == TABLES
    src = t["sources"].set_index("method")
    assert src.loc["kgir", "read"] and not src.loc["hyde", "read"]
    assert src.loc["kgir", "current rule = stored ranked_pids"] == 1
    f = t["funnel"]
    f = f[f["bridge match"] == "equal"]   # "Compaq" is the bridge's own name: both matches agree here
    assert len(t["funnel"]) == 2 * len(f)
    anyk = f[(f["method"] == "kgir") & (f["round"] == "any")]
    assert list(anyk["n"]) == [1, 1, 1, 1, 1, 1]
    forced_any = f[(f["method"] == "kgir_forced") & (f["round"] == "1")]
    assert list(forced_any["n"]) == [1, 1, 1, 1, 1, 0]                      # round 1's answer (IBM) is wrong
    assert list(t["bridge_naming"]["method"]) == ["kgir", "ircot"]
    assert list(t["bridge_naming"]["% names bridge"]) == [100.0, 100.0]
    assert list(t["bridge_naming"]["% finds next hop"]) == [100.0, 0.0]
    assert list(t["bridge_naming"]["EM"]) == [100.0, 100.0]         # gold answers from the dataset
    assert list(t["forced_rounds"]["EM"]) == [0.0, 100.0]
    assert t["oracle_stop"].iloc[0][["EM reflection stop", "EM oracle stop"]].tolist() == [100.0, 100.0]
    cal = t["calibration"].set_index(["method", "round"])
    assert cal.loc[("kgir", "1"), "P(correct | answer) %"] == 100.0
    assert cal.loc[("kgir_forced", "1"), "P(gold present | missing) %"] == 100.0
    assert set(t["rewrite_retrieval"]["method"]) == {"kgir", "kgir_forced"}
    rules = t["ranked_list_rules"].set_index(["rule", "k"])
    assert len(rules) == 8 and rules.loc[("current", 2), "KGIR-RAG"] == 100.0
    ctx = t["reader_context"].set_index("method")
    assert list(ctx.index) == ["kgir", "kgir_no_rewrite"]           # the Table 7 variants with traces
    # no final.context_pids in these traces: answer_context's fallbacks (P_1 for the full method, none w/o rewrite)
    assert ctx["n"].tolist() == [1, 1] and ctx["questions with gold"].tolist() == [1, 0]
    assert ctx.loc["kgir_no_rewrite", ["more gold", "fewer gold"]].tolist() == [0, 1]


def test_missing_traces_give_empty_tables(run_dir, data_dir):
    t = mechanism_tables(run_dir, ["other"], data_dir=data_dir)
    assert not t["sources"]["read"].any()
    assert all(t[k].empty for k in TABLES if k != "sources")


def test_a_run_without_a_kgir_trace_gives_an_empty_funnel_and_a_note(run_dir, data_dir):
    """Notebook 05 with methods [naive_rag] and no KGIR-RAG trace used to die in weakest_step (KeyError 'round')."""
    from kgir_lib.eval.mechanism import funnel
    from kgir_lib.eval.mechanism.tables import empty_note

    for key in ("kgir", "kgir_no_rewrite", "kgir_forced"):
        (run_dir / "traces" / key / trace_filename("tinymq")).unlink()
    t = mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir)
    assert t["funnel"].empty and {"method", funnel.MATCH, "round", "step", "n"} <= set(t["funnel"].columns)
    weakest = funnel.weakest_step(t["funnel"])
    assert weakest.empty and list(weakest.columns) == ["method", funnel.MATCH, "dataset", *funnel.WEAKEST_COLUMNS]
    assert funnel.weakest_step(pd.DataFrame()).empty
    note = empty_note(t, "funnel")
    assert "no rows" in note and "kgir, kgir_forced" in note and "traces of ircot only" in note
    assert funnel.match_rules_table(t["funnel"]).empty


def test_the_funnel_is_reported_under_both_matches_of_step_2(run_dir, data_dir):
    from kgir_lib.eval.mechanism import funnel

    t = mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir)
    assert set(t["funnel"][funnel.MATCH]) == {"equal", "contains"}
    only = mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir, modes=["equal"])
    assert set(only["funnel"][funnel.MATCH]) == {"equal"}
    side = funnel.match_rules_table(t["funnel"]).set_index(["dataset", "step"])
    assert list(side.columns) == ["n (equal)", "% of previous step (equal)", "n (contains)",
                                  "% of previous step (contains)"]
    from kgir_lib.eval.mechanism.tables import empty_note
    assert empty_note(t, "funnel") == ""


@pytest.mark.parametrize("modes", ["equal", [], ["fuzzy"]])
def test_bad_modes_are_refused(run_dir, data_dir, modes):
    with pytest.raises(ValueError, match="modes"):
        mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir, modes=modes)


@pytest.mark.parametrize("datasets", ["tinymq", [], ()])
def test_datasets_must_be_a_list_of_names(run_dir, data_dir, datasets):
    """A bare string would be read letter by letter into empty tables; say so instead."""
    with pytest.raises(ValueError, match="parameter 'datasets'"):
        mechanism_tables(run_dir, datasets, data_dir=data_dir)


def test_a_mistyped_run_directory_is_an_error_naming_it(tmp_path, data_dir):
    with pytest.raises(ValueError, match=r"parameter 'run_dir': .*typo is not a run directory"):
        mechanism_tables(tmp_path / "typo", ["tinymq"], data_dir=data_dir)


def test_a_trace_with_malformed_rounds_is_an_error_naming_the_file(run_dir, data_dir):
    path = run_dir / "traces" / "kgir" / trace_filename("tinymq")
    write_jsonl([{"qid": "q9", "trace": {"rounds": ["not a round"]}}], path)
    with pytest.raises(ValueError, match=r"kgir/tinymq.*record 1 \(qid 'q9'\): 'trace.rounds' must be a list"):
        mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir)


def test_the_tables_asked_for_are_computed_alone_each_as_in_the_full_result(run_dir, data_dir):
    full = mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir)
    for name in TABLES:
        one = mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir, tables=[name])
        assert list(one) == (["sources"] if name == "sources" else ["sources", name])
        pd.testing.assert_frame_equal(one[name], full[name])
        pd.testing.assert_frame_equal(one["sources"], full["sources"])
    assert list(mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir, tables=[])) == ["sources"]
    for bad in ("funnel", ["funnels"]):
        with pytest.raises(ValueError, match="parameter 'tables'"):
            mechanism_tables(run_dir, ["tinymq"], data_dir=data_dir, tables=bad)
