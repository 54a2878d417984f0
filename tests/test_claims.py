"""kgir_lib.claims: the reading of the paper's claims from paired bootstrap intervals."""
import numpy as np
import pandas as pd
import pytest

from kgir_lib.bootstrap import paired_bootstrap
from kgir_lib.claims import (CANNOT_TELL, CONTRADICTS, NOT_RUN, PAPER_CLAIMS, PAPER_COLUMN, SUPPORTS, Claim,
                             claims_summary, claims_table, drop_questions, reading, tuned_questions)
from kgir_lib.config import default_data_dir, load_config
from kgir_lib.data import TUNED_ON, load_dataset, sample_questions, tuning_questions


def _scores(per_method: dict, dataset: str = "musique_train") -> pd.DataFrame:
    rows = []
    for method, values in per_method.items():
        for i, v in enumerate(values):
            rows.append({"method": method, "dataset": dataset, "qid": f"q{i}", "EM": v, "F1": v,
                         "R@2": v, "R@5": v})
    return pd.DataFrame(rows)


def test_reading_is_decided_by_the_interval_alone():
    assert reading(0.1, 5.0) == SUPPORTS
    assert reading(-5.0, -0.1) == CONTRADICTS
    assert reading(-1.0, 1.0) == CANNOT_TELL
    assert reading(0.0, 0.0) == CANNOT_TELL  # every difference 0
    assert reading(0.0, 10.0) == CANNOT_TELL  # an interval touching 0 contains it


def test_kgir_better_on_every_question_supports_the_claim():
    scores = _scores({"KGIR-RAG": [100.0] * 8, "IRCoT": [0.0] * 8})
    claim = Claim("ahead of IRCoT", "IRCoT", ("EM",))
    t = claims_table(scores, [claim])
    assert t[["claim", "dataset", "metric", "n", "diff", "CI lo", "CI hi", "reading"]].to_dict("records") == [
        {"claim": "ahead of IRCoT", "dataset": "musique_train", "metric": "EM", "n": 8, "diff": 100.0,
         "CI lo": 100.0, "CI hi": 100.0, "reading": SUPPORTS}]


def test_worse_kgir_contradicts_and_mixed_results_cannot_tell():
    scores = pd.concat([
        _scores({"KGIR-RAG": [0.0] * 6, "HippoRAG 2": [100.0] * 6}, "hotpotqa"),
        _scores({"KGIR-RAG": [100.0, 0.0] * 3, "HippoRAG 2": [0.0, 100.0] * 3}, "musique_train"),
    ])
    t = claims_table(scores, [Claim("ahead of HippoRAG 2", "HippoRAG 2", ("F1",))]).set_index("dataset")
    assert t.loc["hotpotqa", "reading"] == CONTRADICTS
    assert t.loc["musique_train", "reading"] == CANNOT_TELL
    assert t.loc["all", "n"] == 12  # pooled over (dataset, question) pairs


def test_interval_is_the_paired_bootstrap_of_the_paired_questions():
    ref = [100.0, 0.0, 100.0, 100.0, 0.0, 100.0, 0.0, 100.0]
    oth = [0.0, 0.0, 100.0, 0.0, 100.0, 0.0, 0.0, 100.0]
    scores = _scores({"KGIR-RAG": ref, "IRCoT": oth})
    row = claims_table(scores, [Claim("c", "IRCoT", ("EM",))], n_boot=500, seed=3).iloc[0]
    assert (row["diff"], row["CI lo"], row["CI hi"]) == paired_bootstrap(ref, oth, n_boot=500, seed=3)
    assert row["KGIR-RAG"] == pytest.approx(62.5) and row["other"] == pytest.approx(37.5)


def test_a_method_that_did_not_run_is_said_so():
    t = claims_table(_scores({"KGIR-RAG": [1.0, 0.0]}), [Claim("ahead of KG²RAG", "KG²RAG", ("EM", "F1"))])
    assert list(t["reading"]) == [NOT_RUN, NOT_RUN] and list(t["n"]) == [0, 0]


def test_questions_without_a_metric_are_left_out_of_the_pairing():
    scores = _scores({"KGIR-RAG": [100.0, 100.0, 100.0], "KGIR-RAG w/o rewrite": [0.0, 0.0, 0.0]})
    scores.loc[scores["qid"] == "q1", "R@2"] = np.nan  # a question without gold passages
    t = claims_table(scores, [Claim("rewrite raises recall", "KGIR-RAG w/o rewrite", ("R@2", "R@5"))])
    assert list(t["n"]) == [2, 3]


def test_paper_claims_carry_table_7_as_kgir_minus_the_variant():
    by_other = {c.other: c for c in PAPER_CLAIMS}
    assert set(by_other) >= {"KGIR-RAG w/o subgraph", "KGIR-RAG w/o reflection", "KGIR-RAG w/o rewrite",
                             "IRCoT", "KG²RAG", "HippoRAG 2"}
    assert by_other["KGIR-RAG w/o subgraph"].paper == {"EM": 4.2, "F1": 4.8}
    assert by_other["KGIR-RAG w/o reflection"].paper == {"EM": 9.4, "F1": 8.9}
    assert by_other["IRCoT"].paper == {}
    recall = [c for c in PAPER_CLAIMS if c.metrics == ("R@2", "R@5")]
    assert [c.other for c in recall] == ["KGIR-RAG w/o rewrite"]
    t = claims_table(_scores({"KGIR-RAG": [1.0], "KGIR-RAG w/o reflection": [0.0]}))
    row = t[(t["compared with"] == "KGIR-RAG w/o reflection") & (t["metric"] == "F1")].iloc[0]
    assert row[PAPER_COLUMN] == 8.9


def test_table_7_stands_beside_musique_rows_only():
    scores = pd.concat([_scores({"KGIR-RAG": [1.0, 0.0], "KGIR-RAG w/o subgraph": [0.0, 0.0]}, d)
                        for d in ("musique", "musique_train", "hotpotqa")])
    t = claims_table(scores, claims=[c for c in PAPER_CLAIMS if c.other == "KGIR-RAG w/o subgraph"])
    paper = t.set_index(["dataset", "metric"])[PAPER_COLUMN]
    assert paper[("musique", "EM")] == 4.2 and paper[("musique_train", "F1")] == 4.8
    assert np.isnan(paper[("hotpotqa", "EM")])  # the paper has no HotpotQA ablation
    assert np.isnan(paper[("all", "F1")])  # nor a pooled one
    assert claims_summary(t).endswith("Paper (MuSiQue, Qwen2.5-72B): EM +4.2, F1 +4.8.")


def test_drop_questions_removes_only_that_datasets_questions():
    scores = pd.concat([_scores({"KGIR-RAG": [1.0, 1.0, 1.0]}, "musique_train"),
                        _scores({"KGIR-RAG": [1.0, 1.0, 1.0]}, "hotpotqa")])
    kept = drop_questions(scores, {"musique_train": ["q0", "q2"]})
    assert sorted(zip(kept["dataset"], kept["qid"])) == [("hotpotqa", "q0"), ("hotpotqa", "q1"),
                                                         ("hotpotqa", "q2"), ("musique_train", "q1")]


def test_summary_names_each_claim_once_with_its_numbers():
    scores = _scores({"KGIR-RAG": [100.0] * 4 + [0.0] * 4, "KGIR-RAG w/o subgraph": [0.0] * 8})
    text = claims_summary(claims_table(scores))
    lines = text.splitlines()
    assert len(lines) == len(PAPER_CLAIMS)
    sub = next(line for line in lines if "evidence subgraph" in line)
    assert "musique_train: EM supports (+50.0 [" in sub and "n=8" in sub
    assert sub.endswith("Paper (MuSiQue, Qwen2.5-72B): EM +4.2, F1 +4.8.")
    assert "EM not run" in next(line for line in lines if "IRCoT" in line)


@pytest.mark.skipif(not (default_data_dir() / "musique_train").is_dir(), reason="no shared data")
def test_tuned_questions_are_the_tuning_set_of_the_profiles_datasets():
    cfg = load_config("local")
    tuned = tuned_questions(cfg)
    questions = load_dataset("musique_train", cfg.data_path).questions
    assert tuned == {"musique_train": [q.qid for q in tuning_questions(questions, TUNED_ON, seed=cfg.seed)]}
    assert len(tuned["musique_train"]) == 30
    sampled = {q.qid for q in sample_questions(questions, cfg.n_questions, seed=cfg.seed)}
    assert set(tuned["musique_train"]) <= sampled  # local evaluates all 100: the reading without them matters
    assert tuned_questions(load_config("local", datasets=["hotpotqa"])) == {}
