"""Known answers of the table helpers and run files behind the committed numbers.

Which side of 0 a bootstrap interval lies on (never a verdict), the n in table headers, the response log's seconds,
which trace files a run directory holds, how a damaged trace file is read, and which passage a HotpotQA supporting
title resolves to when the question's own paragraph is not in the corpus.
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from kgir_lib import traces
from kgir_lib.data import load_dataset, passage_id
from kgir_lib.eval import evaluate as ev
from kgir_lib.eval.ablation import STUDY_TRACE_DIR
from kgir_lib.eval.bootstrap import ABOVE, BELOW, CONTAINS, SIDE_COLUMN, bootstrap_table
from kgir_lib.llm import LLMCache
from kgir_lib.llm.response_log import export_log, import_log


# ---------------------------------------------------------------- bootstrap verdicts (05_bootstrap_ci)
def frame(per_method: dict) -> pd.DataFrame:
    """Scores of two questions a method on one dataset: {method: [EM of q1, EM of q2]}."""
    return pd.DataFrame([{"dataset": "d", "method": m, "qid": f"q{i}", "EM": v}
                         for m, vals in per_method.items() for i, v in enumerate(vals)])


def test_bootstrap_sides_of_zero_for_intervals_above_below_straddling_and_touching_zero():
    """Reference R scores 90 and 50 on the two questions. Minus `Above` (80, 40): the constant difference +10,
    interval [10, 10]; minus `Below` (100, 60): [-10, -10]. Minus `Straddle` (40, 100): differences +50 and
    -50, resampled means -50, 0, 50, interval [-50, 50]. Minus `Touch` (90, 0): differences 0 and 50,
    interval [0, 50], which does not exclude 0."""
    scores = frame({"R": [90.0, 50.0], "Above": [80.0, 40.0], "Below": [100.0, 60.0], "Straddle": [40.0, 100.0],
                    "Touch": [90.0, 0.0]})
    bt = bootstrap_table(scores, reference="R", metrics=("EM",), n_boot=2000, seed=0).set_index("baseline")
    got = {b: (bt.loc[b, "CI lo"], bt.loc[b, "CI hi"], bt.loc[b, SIDE_COLUMN]) for b in bt.index}
    assert got == {"Above": (10.0, 10.0, ABOVE), "Below": (-10.0, -10.0, BELOW),
                   "Straddle": (-50.0, 50.0, CONTAINS), "Touch": (0.0, 50.0, CONTAINS)}
    assert (ABOVE, BELOW, CONTAINS) == ("above 0", "below 0", "contains 0")  # no word of a verdict
    assert list(bt["n"]) == [2, 2, 2, 2]


# ---------------------------------------------------------------- table headers: n questions a dataset
def test_questions_per_dataset_counts_distinct_questions_not_method_rows():
    def rows(per_dataset: dict, methods=("A", "B", "C")) -> pd.DataFrame:
        return pd.DataFrame([{"dataset": d, "method": m, "qid": f"q{i}"}
                             for d, n in per_dataset.items() for m in methods for i in range(n)])
    assert ev.questions_per_dataset(rows({"musique_train": 2, "hotpotqa": 2})) == "2"
    assert ev.questions_per_dataset(rows({"musique_train": 3, "hotpotqa": 2})) == "musique_train 3, hotpotqa 2"
    assert ev.questions_per_dataset(rows({"hotpotqa": 10}, methods=[f"m{i}" for i in range(11)])) == "10"


# ---------------------------------------------------------------- the response log keeps seconds to 1e-3
def test_response_log_keeps_seconds_to_the_millisecond_through_export_and_import(tmp_path):
    cache = LLMCache(tmp_path / "a.sqlite")
    stored = {"a" * 64: 0.837, "b" * 64: 12.0458, "c" * 64: 0.0004}
    for key, secs in stored.items():
        cache.put(key, "scripted:x", {}, f"text {key[0]}", 3, 1, secs)
    log = tmp_path / "llm_responses.jsonl.gz"
    assert export_log(cache, log) == 3
    fresh = LLMCache(tmp_path / "fresh.sqlite")
    assert import_log(fresh, log) == 3
    assert {k: fresh.get(k)["seconds"] for k in stored} == {"a" * 64: 0.837, "b" * 64: 12.046, "c" * 64: 0.0}
    again = tmp_path / "again.jsonl.gz"
    export_log(fresh, again)
    assert again.read_bytes() == log.read_bytes()  # an imported log exports to the same bytes


# ---------------------------------------------------------------- which trace files a run holds
def test_trace_files_are_the_method_folders_only_not_the_study_folders(cfg):
    root = cfg.run_dir / "traces"
    method = root / "naive_rag" / traces.trace_filename("hotpotqa")
    study = root / STUDY_TRACE_DIR / "kg2rag-m=0" / traces.trace_filename("hotpotqa")
    beside = root / "naive_rag" / "rerun" / traces.trace_filename("hotpotqa")
    for path in (method, study, beside):
        traces.write_traces([{"qid": "q1", "answer": "x"}], path)
    assert traces.trace_files(cfg) == [method]


# ---------------------------------------------------------------- reading a damaged trace file
def lines(n: int) -> list:
    return [json.dumps({"qid": f"q{i}", "answer": f"a{i}"}) for i in range(n)]


def test_a_bad_middle_line_is_an_error_even_without_a_final_newline(tmp_path):
    path = tmp_path / "d.trace.jsonl"
    body = lines(3)
    body[1] = body[1][:12]
    path.write_text("\n".join(body))  # no final newline
    with pytest.raises(traces.TraceError, match=r"d\.trace\.jsonl.*line 2"):
        traces.read_traces(path)


def test_only_a_torn_last_line_is_dropped_with_a_warning(tmp_path):
    path = tmp_path / "d.trace.jsonl"
    body = lines(3)
    path.write_text("\n".join(body[:2] + [body[2][:12]]))  # killed while the last line was written
    with pytest.warns(UserWarning, match=r"d\.trace\.jsonl"):
        recs = traces.read_traces(path)
    assert [r["qid"] for r in recs] == ["q0", "q1"]
    path.write_text("\n".join(body))  # complete records, only the final newline missing: nothing dropped
    assert [r["qid"] for r in traces.read_traces(path)] == ["q0", "q1", "q2"]


# ---------------------------------------------------------------- HotpotQA: supporting title fallback
def test_hotpot_title_fallback_takes_the_first_corpus_passage_of_that_title(tmp_path):
    """The question's own paragraph for title T is not in the corpus (its text differs); the corpus holds
    two passages titled T: the gold passage is the first of them, in corpus order."""
    folder = tmp_path / "hp"
    folder.mkdir()
    corpus = [{"title": "T", "text": "first body"}, {"title": "Other", "text": "noise"},
              {"title": "T", "text": "second body"}]
    rec = {"_id": "h1", "question": "q?", "answer": "yes", "supporting_facts": [["T", 0], ["Other", 0]],
           "context": [["T", ["a text that is ", "not in the corpus"]], ["Other", ["noise"]]]}
    (folder / "hp.json").write_text(json.dumps([rec]))
    (folder / "hp_corpus.json").write_text(json.dumps(corpus))
    ds = load_dataset("hp", tmp_path)
    assert ds.questions[0].gold_pids == (passage_id("T", "first body"), passage_id("Other", "noise"))
