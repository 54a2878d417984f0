"""kgir_lib.eval.claims: the paper's claims read from exact paired tests, Holm-adjusted within each claim."""
import numpy as np
import pandas as pd
import pytest

from kgir_lib.config import default_data_dir, load_config
from kgir_lib.data import TUNED_ON, load_dataset, sample_questions, tuning_questions
from kgir_lib.eval.bootstrap import paired_bootstrap
from kgir_lib.eval.claims import (CANNOT_TELL, CONTRADICTS, NOT_RUN, PAPER_CLAIMS, PAPER_COLUMN, SUPPORTS, Claim,
                                  claims_headline, claims_table, drop_questions, mde_column,
                                  mde_condition, mde_label, table_mde_condition, tuned_questions, verdict)
from kgir_lib.eval.stats import mde_mcnemar


def _scores(per_method: dict, dataset: str = "musique_train") -> pd.DataFrame:
    rows = []
    for method, values in per_method.items():
        for i, v in enumerate(values):
            rows.append({"method": method, "dataset": dataset, "qid": f"q{i}", "EM": v, "F1": v,
                         "R@2": v, "R@5": v})
    return pd.DataFrame(rows)


def test_verdict_is_decided_by_the_adjusted_p_and_the_sign():
    assert verdict(3.0, 0.01) == SUPPORTS
    assert verdict(-3.0, 0.049) == CONTRADICTS
    assert verdict(3.0, 0.05) == CANNOT_TELL  # not below alpha
    assert verdict(0.0, 0.0) == CANNOT_TELL
    assert verdict(3.0, float("nan")) == CANNOT_TELL


def test_kgir_better_on_every_question_supports_the_claim():
    scores = _scores({"KGIR-RAG": [100.0] * 8, "IRCoT": [0.0] * 8})
    claim = Claim("ahead of IRCoT", "IRCoT", ("EM",))
    t = claims_table(scores, [claim])
    cols = ["claim", "dataset", "metric", "n", "diff", "CI lo", "CI hi", "test", "discordant", "p", "p (Holm)",
            "reading"]
    # McNemar: 8 discordant questions, all for KGIR-RAG: p = 2 / 2^8; a family of one test
    assert t[cols].to_dict("records") == [
        {"claim": "ahead of IRCoT", "dataset": "musique_train", "metric": "EM", "n": 8, "diff": 100.0,
         "CI lo": 100.0, "CI hi": 100.0, "test": "McNemar", "discordant": "8/0", "p": 2 / 256,
         "p (Holm)": 2 / 256, "reading": SUPPORTS}]
    # MDE at 100 % discordance and alpha / 1: the smallest multiple of 1/8 with 80 % power
    assert t["MDE (α = 0.05, power 0.8)"].iloc[0] == pytest.approx(100 * mde_mcnemar(8, 1.0, 0.05, 0.8))


def test_holm_adjusts_within_a_claims_family():
    """Three tests in one family (hotpotqa, musique_train, pooled): the smallest p is multiplied by 3."""
    scores = pd.concat([
        _scores({"KGIR-RAG": [0.0] * 8, "HippoRAG 2": [60.0] * 8}, "hotpotqa"),
        _scores({"KGIR-RAG": [100.0, 0.0] * 3, "HippoRAG 2": [0.0, 100.0] * 3}, "musique_train"),
    ])
    t = claims_table(scores, [Claim("ahead of HippoRAG 2", "HippoRAG 2", ("F1",))]).set_index("dataset")
    assert t.loc["hotpotqa", "test"] == "sign-flip" and t.loc["hotpotqa", "p"] == pytest.approx(2 / 256)
    assert t.loc["musique_train", "p"] == pytest.approx(1.0)  # +100 -100 three times: |sum| = 0 always reached
    assert t.loc["hotpotqa", "p (Holm)"] == pytest.approx(3 * min(t["p"]))
    assert t.loc["hotpotqa", "reading"] == CONTRADICTS
    assert t.loc["musique_train", "reading"] == CANNOT_TELL
    assert t.loc["all", "n"] == 14  # pooled over (dataset, question) pairs
    six = _scores({"KGIR-RAG": [0.0] * 6, "HippoRAG 2": [60.0] * 6}, "hotpotqa")
    both = pd.concat([six, _scores({"KGIR-RAG": [0.0] * 6, "HippoRAG 2": [0.0] * 6}, "musique_train")])
    t6 = claims_table(both, [Claim("c", "HippoRAG 2", ("F1",))]).set_index("dataset")
    # alone, 6 questions all one way give p = 2/64 < 0.05; in a family of 3 that is not enough
    assert t6.loc["hotpotqa", "p"] == pytest.approx(2 / 64) and t6.loc["hotpotqa", "reading"] == CANNOT_TELL


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


def test_kg2rag_claim_reads_both_kg2rags_in_one_family():
    """The claim against KG²RAG is declared against the paper-following KG²RAG and the authors' code as one family:
    on one dataset, 2 methods x 2 metrics = 4 tests, Holm over all of them; each method gets its own rows in the
    headline and the summary."""
    claim = next(c for c in PAPER_CLAIMS if c.other == "KG²RAG")
    assert claim.others == ("KG²RAG", "KG²RAG (authors' code)")
    scores = _scores({"KGIR-RAG": [100.0] * 8, "KG²RAG": [0.0] * 8, "KG²RAG (authors' code)": [100.0] * 7 + [0.0]})
    t = claims_table(scores, [claim])
    assert list(t["compared with"]) == ["KG²RAG"] * 2 + ["KG²RAG (authors' code)"] * 2
    em = t[(t["compared with"] == "KG²RAG") & (t["metric"] == "EM") & (t["dataset"] == "musique_train")].iloc[0]
    # Holm over the family's four p (2/256 twice, 2/128 twice): the smallest times 4
    assert em["p"] == pytest.approx(2 / 256) and em["p (Holm)"] == pytest.approx(4 * 2 / 256)
    assert mde_column(t) == "MDE (α = 0.05/4, power 0.8)"
    head = claims_headline(t, ["musique_train"], [claim]).splitlines()
    assert head[2].startswith("| KGIR-RAG ahead of KG²RAG, EM / F1 |")
    assert head[3].startswith("| KGIR-RAG ahead of KG²RAG: against KG²RAG (authors' code), EM / F1 |")


def test_table_7_stands_beside_musique_rows_only():
    scores = pd.concat([_scores({"KGIR-RAG": [1.0, 0.0], "KGIR-RAG w/o subgraph": [0.0, 0.0]}, d)
                        for d in ("musique", "musique_train", "hotpotqa")])
    t = claims_table(scores, claims=[c for c in PAPER_CLAIMS if c.other == "KGIR-RAG w/o subgraph"])
    paper = t.set_index(["dataset", "metric"])[PAPER_COLUMN]
    assert paper[("musique", "EM")] == 4.2 and paper[("musique_train", "F1")] == 4.8
    assert np.isnan(paper[("hotpotqa", "EM")])  # the paper has no HotpotQA ablation
    assert np.isnan(paper[("all", "F1")])  # nor a pooled one


def test_drop_questions_removes_only_that_datasets_questions():
    scores = pd.concat([_scores({"KGIR-RAG": [1.0, 1.0, 1.0]}, "musique_train"),
                        _scores({"KGIR-RAG": [1.0, 1.0, 1.0]}, "hotpotqa")])
    kept = drop_questions(scores, {"musique_train": ["q0", "q2"]})
    assert sorted(zip(kept["dataset"], kept["qid"])) == [("hotpotqa", "q0"), ("hotpotqa", "q1"),
                                                         ("hotpotqa", "q2"), ("musique_train", "q1")]


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


def test_headline_renders_differences_adjusted_p_mde_and_only_decided_verdicts():
    scores = pd.concat([
        _scores({"KGIR-RAG": [100.0] * 8, "IRCoT": [0.0] * 8}, "musique_train"),
        _scores({"KGIR-RAG": [100.0, 0.0] * 3, "IRCoT": [0.0, 100.0] * 3}, "hotpotqa"),
    ])
    claim = Claim("KGIR-RAG ahead of IRCoT", "IRCoT", ("EM", "F1"), {"EM": 2.0, "F1": 3.5}, ("musique_train",))
    table = claims_table(scores, [claim], pooled=False)
    lines = claims_headline(table, ["musique_train", "hotpotqa"], [claim]).splitlines()
    assert lines[:2] == ["| paper claim | musique_train (n = 8) | hotpotqa (n = 6) |", "|---|---|---|"]
    # four tests in the family: 2/256 * 4 = 0.031 for both musique_train rows (the F1 sign-flip p is also 2/256);
    # MDE at alpha / 4: on musique_train EM needs all 8 questions discordant (100 points) and F1, whose
    # differences have no spread, is infinite by definition; on hotpotqa even all 6 questions one way give
    # p 2/64 > 0.0125 (EM: infinite), and F1's differences (+-100, sd 109.5) need 149.3 points
    assert lines[2] == ("| KGIR-RAG ahead of IRCoT, EM / F1 (Table 7: +2.0 / +3.5) | "
                        "**+100.0 / +100.0 (p 0.031 / 0.031; MDE 100.0 / ∞): EM supports, F1 supports** | "
                        "+0.0 / +0.0 (p 1.0 / 1.0; MDE ∞ / 149.3) |")
    assert len(lines) == 3
    assert mde_column(table) == "MDE (α = 0.05/4, power 0.8)" == f"MDE ({table_mde_condition(table)})"
    assert claims_headline(table, None, [claim]) == claims_headline(table, ["musique_train", "hotpotqa"], [claim])
    with pytest.raises(ValueError, match=r"no rows for \['musique'\]"):
        claims_headline(table, ["musique"])


def test_the_mde_column_says_its_level_and_power():
    """The MDE is computed at alpha / (tests in the claim's family), the first Holm level, with 80 % power: the
    header says so, from the parameters the table was computed with (not alpha = 0.05 as it once implied)."""
    assert mde_condition(0.05, 0.8, [6, 6, 6]) == "α = 0.05/6, power 0.8"
    assert mde_condition(0.05, 0.8, [1]) == "α = 0.05, power 0.8"
    assert mde_condition(0.01, 0.9, [6, 4, 0]) == "α = 0.01/tests in its family, power 0.9"
    assert mde_label(0.05, 0.8, [6]) == "MDE (α = 0.05/6, power 0.8)"
    scores = pd.concat([_scores({"KGIR-RAG": [100.0, 0.0] * 4, "IRCoT": [0.0] * 8}, d) for d in ("a", "b")])
    table = claims_table(scores, [Claim("c", "IRCoT", ("EM", "F1"))], alpha=0.01)
    col = mde_column(table)
    assert col == "MDE (α = 0.01/6, power 0.8)"  # 2 metrics x (a, b, pooled)
    row = table[(table["dataset"] == "a") & (table["metric"] == "EM")].iloc[0]
    assert row[col] == pytest.approx(100 * mde_mcnemar(8, 0.5, 0.01 / 6, 0.8))
    old = table.rename(columns={col: "MDE"})  # a table written before the header said it
    assert mde_column(old) == "MDE" and table_mde_condition(old) == "α = 0.05/6, power 0.8"
    with pytest.raises(ValueError, match="one MDE column"):
        mde_column(table.drop(columns=col))


def test_readme_claims_intro_states_the_mde_level_of_the_table_it_renders():
    """The README's claims table is rendered from the committed table its marker names (tests/test_rendered.py);
    the sentence above it must state the level that table's MDE was computed at."""
    import re

    from kgir_lib.config import PROJECT_ROOT

    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- claims table: kgir_lib\.eval\.claims\.claims_headline of (\S+) -->\n", readme)
    assert found, "README: no claims table marker"
    table = pd.read_csv(PROJECT_ROOT / found.group(1))
    intro = " ".join(readme[:found.start()].rstrip().rsplit("\n\n", 1)[-1].split())
    assert f"MDE at {table_mde_condition(table)}" in intro, "README: the claims intro must state the MDE's level"


def test_scoreboard_ranks_methods_by_em_then_f1_and_carries_the_claims_verdicts():
    from kgir_lib.eval.claims import SCOREBOARD_CLAIM, SCOREBOARD_VERDICT, scoreboard, scoreboard_sentence

    def rows(method, em, f1, dataset):
        return [{"method": method, "dataset": dataset, "qid": f"q{i}", "EM": e, "F1": f, "R@2": e, "R@5": e}
                for i, (e, f) in enumerate(zip(em, f1))]

    scores = pd.DataFrame(rows("KGIR-RAG", [100.0] * 8, [100.0] * 8, "musique_train")
                          + rows("IRCoT", [0.0] * 8, [50.0] * 8, "musique_train")
                          + rows("Naive RAG", [0.0] * 8, [60.0] * 8, "musique_train"))
    claim = Claim("KGIR-RAG ahead of IRCoT", "IRCoT", ("EM", "F1"))
    table = claims_table(scores, [claim], pooled=False)
    board = scoreboard(scores, table)
    assert board.index.names == ["method", SCOREBOARD_CLAIM]
    assert list(board.index) == [("KGIR-RAG", "the method every claim is about"), ("Naive RAG", "none"),
                                 ("IRCoT", "KGIR-RAG ahead of IRCoT (EM / F1)")]  # EM ties broken by F1
    assert board[("musique_train", "rank")].tolist() == [1, 2, 3]
    assert board.loc[("IRCoT", "KGIR-RAG ahead of IRCoT (EM / F1)"), ("musique_train", "F1")] == 50.0
    assert board.loc[("Naive RAG", "none"), (SCOREBOARD_VERDICT, "")] == ""
    # 8/0 discordant on EM, every F1 difference +50: both exact p 2/256, Holm over 2 tests: 0.016
    assert board[(SCOREBOARD_VERDICT, "")].iloc[2] == (
        "musique_train: EM supports (+100.0, p 0.016); F1 supports (+50.0, p 0.016)")
    said = scoreboard_sentence(board, table)
    assert said.startswith("KGIR-RAG ranks 1 of 3 on musique_train (EM 100.0, F1 100.0) by EM. Of the 2 tests of "
                           "the paper's 1 claim, the verdict is 'supports' on 2, 'contradicts' on 0 and 'cannot tell' on 0.")


def test_sign_flip_counts_every_question_whose_scores_differ_either_way():
    """F1 of four questions, KGIR-RAG against IRCoT: 100 / 0 (ahead), 0 / 100 (behind), 50 / 50 (tie), 20 / 30
    (behind): three questions differ, one of them in KGIR-RAG's favour; the sign-flip test counts all three."""
    scores = _scores({"KGIR-RAG": [100.0, 0.0, 50.0, 20.0], "IRCoT": [0.0, 100.0, 50.0, 30.0]})
    row = claims_table(scores, [Claim("c", "IRCoT", ("F1",))], pooled=False).iloc[0]
    assert (row["test"], row["discordant"]) == ("sign-flip", "3")


def test_headline_n_is_the_largest_n_of_the_dataset_s_rows():
    """Recall is NaN for a question without gold passages, so a dataset's recall rows can pair fewer questions
    than its EM rows: the column header names the questions of the dataset, the largest n (3, not 2)."""
    scores = _scores({"KGIR-RAG": [100.0, 100.0, 0.0], "KGIR-RAG w/o rewrite": [0.0, 0.0, 0.0]})
    scores.loc[scores["qid"] == "q1", "R@2"] = np.nan
    claim = Claim("rewrite raises recall", "KGIR-RAG w/o rewrite", ("R@2", "R@5"))
    table = claims_table(scores, [claim], pooled=False)
    assert list(table["n"]) == [2, 3]
    assert claims_headline(table, None, [claim]).splitlines()[0] == "| paper claim | musique_train (n = 3) |"


def test_ablation_claims_carry_the_paper_s_drops_as_kgir_minus_the_variant():
    """Table 7's w/o subgraph row, in the suite's one sign (full minus variant, report.TABLE7_SIGN): EM +4.2, F1 +4.8;
    the claim (KGIR-RAG minus the variant) holds the same numbers, and so does notebook 06's table."""
    from kgir_lib.eval.claims.family import _ablation

    assert _ablation("w/o subgraph", "evidence subgraph") == Claim(
        "the evidence subgraph adds accuracy (Table 7)", "KGIR-RAG w/o subgraph", ("EM", "F1"), {"EM": 4.2, "F1": 4.8},
        ("musique", "musique_train"))
    from kgir_lib.eval import ablation

    means = pd.DataFrame([{"dataset": "musique", "variant": "full", "EM": 1.0, "F1": 1.0},
                          {"dataset": "musique", "variant": "no_subgraph", "EM": 0.0, "F1": 0.0}])
    row = ablation.ablation_table(means).set_index("variant").loc["w/o subgraph"]
    assert (row["ΔEM (paper, Qwen2.5-72B)"], row["ΔF1 (paper, Qwen2.5-72B)"]) == (4.2, 4.8)
    assert row["ΔEM (ours)"] == 1.0  # full minus variant, like the claim's KGIR-RAG minus the variant


def test_drop_questions_of_two_datasets_drops_both():
    scores = pd.concat([_scores({"KGIR-RAG": [1.0, 1.0]}, "musique_train"), _scores({"KGIR-RAG": [1.0, 1.0]}, "hotpotqa")])
    kept = drop_questions(scores, {"musique_train": ["q0"], "hotpotqa": ["q1"]})
    assert sorted(zip(kept["dataset"], kept["qid"])) == [("hotpotqa", "q0"), ("musique_train", "q1")]


@pytest.mark.skipif(not (default_data_dir() / "musique_train").is_dir(), reason="no shared data")
def test_tuned_questions_follow_the_config_s_seed_and_data_folder(monkeypatch):
    """Seed 1 shuffles other questions than seed 0; the data come from the config's folder, not the default one."""
    questions = load_dataset("musique_train", default_data_dir()).questions
    cfg = load_config("local", seed=1, data_dir=str(default_data_dir()))
    monkeypatch.setenv("KGIR_DATA_DIR", "/nonexistent")
    tuned = tuned_questions(cfg)["musique_train"]
    assert tuned == [q.qid for q in tuning_questions(questions, TUNED_ON, seed=1)]
    assert tuned != [q.qid for q in tuning_questions(questions, TUNED_ON, seed=0)]


def test_headline_numbers_render_nan_infinity_small_p_and_a_p_of_one():
    from kgir_lib.eval.claims.headline import _number

    assert (_number(float("nan"), ".1f"), _number(float("inf"), ".1f")) == ("–", "∞")
    assert _number(1.5e-05, ".2g") == "1.5e-05" and _number(0.999, ".2g") == "1.0" and _number(2.5, "+.1f") == "+2.5"


def test_headline_of_claims_not_run_and_in_table_order():
    scores = _scores({"KGIR-RAG": [100.0, 0.0], "IRCoT": [0.0, 0.0]})
    claims = [Claim("b: ahead of IRCoT", "IRCoT", ("EM",)), Claim("a: ahead of KG²RAG", "KG²RAG", ("EM",))]
    lines = claims_headline(claims_table(scores, claims, pooled=False, n_boot=50), None, claims).splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| b: ahead of IRCoT, EM", "| a: ahead of KG²RAG, EM"]
    assert lines[3] == "| a: ahead of KG²RAG, EM | not run |"


def test_verdict_of_a_small_positive_difference_supports():
    assert verdict(0.5, 0.01) == SUPPORTS and verdict(-0.5, 0.01) == CONTRADICTS


def test_claims_table_refuses_scores_without_their_keys_and_reads_alpha():
    with pytest.raises(ValueError, match=r"claims_table: scores lack columns \['qid'\]"):
        claims_table(pd.DataFrame({"method": [], "dataset": []}))
    scores = _scores({"KGIR-RAG": [100.0] * 8, "IRCoT": [0.0] * 8})  # exact p 2/256 = 0.0078
    claim = [Claim("c", "IRCoT", ("EM",))]
    assert claims_table(scores, claim, pooled=False)["reading"].tolist() == [SUPPORTS]
    assert claims_table(scores, claim, pooled=False, alpha=0.005)["reading"].tolist() == [CANNOT_TELL]


def test_claims_table_defaults_are_2000_resamples_seed_0_and_its_n_boot_is_used():
    rng = np.random.default_rng(4)
    ref, oth = list(rng.uniform(0, 100, 12)), list(rng.uniform(0, 100, 12))
    scores = _scores({"KGIR-RAG": ref, "IRCoT": oth})
    claim = [Claim("c", "IRCoT", ("F1",))]
    row = claims_table(scores, claim, pooled=False).iloc[0]
    assert (row["diff"], row["CI lo"], row["CI hi"]) == paired_bootstrap(ref, oth, n_boot=2000, seed=0)
    row = claims_table(scores, claim, pooled=False, n_boot=300, seed=2).iloc[0]
    assert (row["diff"], row["CI lo"], row["CI hi"]) == paired_bootstrap(ref, oth, n_boot=300, seed=2)
    assert paired_bootstrap(ref, oth, n_boot=300, seed=2) != paired_bootstrap(ref, oth, n_boot=2000, seed=0)


def test_not_run_rows_have_empty_test_fields_and_mde_needs_two_questions():
    t = claims_table(_scores({"KGIR-RAG": [1.0]}), [Claim("c", "KG²RAG", ("EM",), {"F1": 1.0}, ("musique_train",))],
                     pooled=False)
    assert (t.loc[0, "test"], t.loc[0, "discordant"]) == ("", "")
    assert isinstance(t.loc[0, PAPER_COLUMN], float) and np.isnan(t.loc[0, PAPER_COLUMN])  # the paper has no EM
    two = claims_table(_scores({"KGIR-RAG": [100.0, 50.0], "IRCoT": [0.0, 0.0]}), [Claim("c", "IRCoT", ("F1",))],
                       pooled=False)
    assert np.isfinite(two.loc[0, mde_column(two)])  # differences 100 and 50: a spread from two questions
def _board_scores() -> pd.DataFrame:
    """Two datasets in the run's order (musique_train, then hotpotqa), four methods; HippoRAG 2 not run on
    hotpotqa, Naive RAG and HippoRAG 2 alike on musique_train."""
    def rows(method, em, f1, dataset):
        return [{"method": method, "dataset": dataset, "qid": f"q{i}", "EM": e, "F1": f, "R@2": e, "R@5": e}
                for i, (e, f) in enumerate(zip(em, f1))]

    half = [100.0] * 6 + [0.0] * 6
    return pd.DataFrame(
        rows("KGIR-RAG", [100.0] * 12, [80.0] * 12, "musique_train")
        + rows("IRCoT", [0.0] * 12, [100.0] * 12, "musique_train")
        + rows("Naive RAG", half, [60.0] * 12, "musique_train") + rows("HippoRAG 2", half, [60.0] * 12, "musique_train")
        + rows("KGIR-RAG", [100.0] * 2, [100.0] * 2, "hotpotqa") + rows("IRCoT", [100.0] * 2, [100.0] * 2, "hotpotqa")
        + rows("Naive RAG", [0.0] * 2, [0.0] * 2, "hotpotqa"))


def test_scoreboard_known_answer_with_ties_a_method_not_run_pooled_rows_and_two_claims_on_one_method():
    """Ranks share the best place on a tie (min rank) and put a method without a score last; rows by mean rank,
    a tie in the run's order; each dataset's verdict lines in the run's order, ``pooled`` last, a dataset the
    claim was not run on said so without hiding the next; two claims on one method one line each, in the table's
    order (not sorted by name)."""
    from kgir_lib.eval.claims import (SCOREBOARD_CLAIM, SCOREBOARD_VERDICT, identical_scores_note, scoreboard,
                                      scoreboard_sentence)

    scores = _board_scores()
    claims = [Claim("ahead of IRCoT", "IRCoT", ("EM", "F1")), Claim("F1 over IRCoT", "IRCoT", ("F1",)),
              Claim("ahead of HippoRAG 2", "HippoRAG 2", ("EM",))]
    table = claims_table(scores, claims, pooled=True)
    board = scoreboard(scores, table)
    # one row a claim: IRCoT's two claims are two rows, in the table's order, each with its method's scores
    assert list(board.index) == [("KGIR-RAG", "the method every claim is about"),
                                 ("IRCoT", "ahead of IRCoT (EM / F1)"), ("IRCoT", "F1 over IRCoT (F1)"),
                                 ("Naive RAG", "none"), ("HippoRAG 2", "ahead of HippoRAG 2 (EM)")]  # mean ranks 1, 2.5, 2.5, 3
    assert board.columns.names == ["dataset", ""] and board.index.names == ["method", SCOREBOARD_CLAIM]
    assert board[("musique_train", "rank")].tolist() == [1, 4, 4, 2, 2]
    assert board[("hotpotqa", "rank")].tolist() == [1, 1, 1, 3, 4]  # HippoRAG 2 has no score there
    verdicts = board[(SCOREBOARD_VERDICT, "")].tolist()
    assert verdicts[0] == verdicts[3] == ""
    assert verdicts[1] == ("musique_train: EM supports (+100.0, p 0.0029); F1 contradicts (-20.0, p 0.0029)\n"
                           "hotpotqa: EM cannot tell (+0.0, p 1.0); F1 cannot tell (+0.0, p 1.0)\n"
                           "pooled: EM supports (+85.7, p 0.0029); F1 contradicts (-17.1, p 0.0029)")
    assert verdicts[2] == ("musique_train: F1 contradicts (-20.0, p 0.0015)\nhotpotqa: F1 cannot tell (+0.0, p 1.0)\n"
                           "pooled: F1 contradicts (-17.1, p 0.0015)")
    assert verdicts[4] == ("musique_train: EM cannot tell (+50.0, p 0.062)\nhotpotqa: not run\n"
                           "pooled: EM cannot tell (+50.0, p 0.062)")
    # Naive RAG and HippoRAG 2 tie on musique_train but not on hotpotqa (HippoRAG 2 not run there): no note
    assert identical_scores_note(board) == ""
    # the MDE range is over the datasets' EM rows only (91.7 on musique_train; hotpotqa's two questions: ∞)
    assert scoreboard_sentence(board, table) == (
        "KGIR-RAG ranks 1 of 4 on musique_train (EM 100.0, F1 80.0); 1 of 4 on hotpotqa (EM 100.0, F1 100.0) by EM. "
        "Of the 11 tests of the paper's 3 claims, the verdict is 'supports' on 2, 'contradicts' on 4 and "
        "'cannot tell' on 5. Differences in EM smaller than 92-92 points cannot be detected with these questions "
        "(MDE, 80 % power), so 'cannot tell' is no evidence against the paper.")


def test_scoreboard_of_one_claim_row_other_metrics_and_the_sentence_without_a_finite_or_any_em_mde():
    from kgir_lib.eval.claims import SCOREBOARD_VERDICT, scoreboard, scoreboard_sentence

    hot = _board_scores().query("dataset == 'hotpotqa'")
    em_only = claims_table(hot, [Claim("c", "IRCoT", ("EM",))], pooled=False)  # a claim of one row
    board = scoreboard(hot, em_only, metrics=("EM", "R@5"))
    assert [c for c in board.columns if c[0] == "hotpotqa"] == [("hotpotqa", "rank"), ("hotpotqa", "EM"),
                                                                ("hotpotqa", "R@5")]
    start = ("KGIR-RAG ranks 1 of 3 on hotpotqa (EM 100.0, F1 100.0) by EM. Of the 1 tests of the paper's 1 claim, "
             "the verdict is 'supports' on 0, 'contradicts' on 0 and 'cannot tell' on 1.")
    assert scoreboard_sentence(scoreboard(hot, em_only), em_only) == start + (
        " With these questions no EM difference, however large, could reach significance (MDE ∞), so 'cannot tell' "
        "is no evidence against the paper.")
    f1_only = claims_table(hot, [Claim("c", "IRCoT", ("F1",))], pooled=False)
    assert scoreboard_sentence(scoreboard(hot, f1_only), f1_only) == start  # no EM test: nothing said of the MDE
    # a p below 1e-4 is written with a lower-case exponent, as the claims table's other cells
    many = _scores({"KGIR-RAG": [100.0] * 20, "IRCoT": [0.0] * 20})
    tiny_p = claims_table(many, [Claim("c", "IRCoT", ("EM",))], pooled=False)
    assert scoreboard(many, tiny_p)[(SCOREBOARD_VERDICT, "")].iloc[1] == (
        "musique_train: EM supports (+100.0, p 1.9e-06)")


def test_identical_scores_note_explains_methods_that_hand_the_reader_naive_rags_passages():
    """Naive RAG, Dense, KG²RAG w/o organisation and LightRAG's naive mode score alike on every dataset: the note
    names them and says why; two other methods that tie are said to tie on these questions; a lone method, none."""
    from kgir_lib.eval.claims import identical_scores_note, scoreboard

    same = [100.0, 0.0, 0.0, 100.0]
    scores = _scores({"KGIR-RAG": [100.0] * 4, "Naive RAG": same, "Dense": same, "KG²RAG w/o organisation": same,
                      "LightRAG (naive; suite graph; shared reader)": same, "KG²RAG (authors' code)": same,
                      "BM25": [0.0] * 4, "IRCoT": [0.0] * 4})
    table = claims_table(scores, [Claim("c", "IRCoT", ("EM",))], pooled=False)
    assert identical_scores_note(scoreboard(scores, table)) == (
        "Naive RAG, Dense, KG²RAG w/o organisation and LightRAG (naive; suite graph; shared reader) score identically "
        "because they hand the shared reader the same passages in the same order, so it gives the same answers: "
        "Naive RAG, the encoder's most similar passages, read by the shared reader; Dense, the same ranked list "
        "(Naive RAG is Dense plus the reader); KG²RAG w/o organisation, its seed passages in similarity order, which "
        "are Naive RAG's; LightRAG (naive; suite graph; shared reader), its naive mode's vector search over the same "
        "encoder, the same passages and reader prompts. KG²RAG (authors' code) scores the same on these questions. "
        "BM25 and IRCoT score identically on these questions.")
    alone = _scores({"KGIR-RAG": [100.0] * 4, "IRCoT": [0.0] * 4})
    assert identical_scores_note(scoreboard(alone, claims_table(alone, [Claim("c", "IRCoT", ("EM",))],
                                                                pooled=False))) == ""


def test_identical_scores_note_says_from_the_reader_contexts_why_another_method_ties_with_naive_rag():
    """Given the run's reader contexts, a method tied with Naive RAG's group without a declared reason is said to
    have read Naive RAG's passages on so many questions, and how the others scored; without its contexts, the
    plain sentence."""
    from kgir_lib.eval.claims import claims_table, identical_scores_note, scoreboard

    naive = [100.0, 0.0, 0.0, 100.0]
    code = "KG²RAG (authors' code)"

    def note(code_scores, code_contexts):
        scores = _scores({"KGIR-RAG": [100.0] * 4, "Naive RAG": naive, "Dense": naive, code: code_scores})
        contexts = pd.DataFrame(
            [{"dataset": "musique_train", "method": m, "qid": f"q{i}", "context": ctx, "EM": s, "F1": s}
             for m, ctxs, ss in (("Naive RAG", [("a", "b"), ("c",), ("d", "e"), ("f",)], naive),
                                 ("Dense", [("a", "b"), ("c",), ("d", "e"), ("f",)], naive),
                                 (code, code_contexts, code_scores))
             for i, (ctx, s) in enumerate(zip(ctxs, ss))])
        board = scoreboard(scores, claims_table(scores, [Claim("c", "IRCoT", ("EM",))], pooled=False))
        return identical_scores_note(board, contexts).split("read by the shared reader; Dense, the same ranked list "
                                                            "(Naive RAG is Dense plus the reader). ")[1]

    same = [("a", "b"), ("c",), ("d", "e"), ("f",)]
    assert note(naive, same) == (f"{code} scores the same: it handed the shared reader Naive RAG's passages in Naive "
                                 "RAG's order on every one of the 4 questions.")
    assert note(naive, [("a", "b"), ("c",), ("e", "d"), ("f",)]) == (
        f"{code} scores the same: it handed the shared reader Naive RAG's passages in Naive RAG's order on 3 of the 4 "
        "questions, and on the other 1 its answer scored what Naive RAG's did (EM and F1).")
    assert note([100.0, 100.0, 0.0, 0.0], [("a", "b"), ("x",), ("d", "e"), ("y",)]) == (
        f"{code} scores the same: it handed the shared reader Naive RAG's passages in Naive RAG's order on 2 of the 4 "
        "questions; the other 2 score differently, and their differences cancel in the means.")
    assert note(naive, [None] * 4) == f"{code} scores the same on these questions."


@pytest.mark.skipif(not default_data_dir().is_dir(), reason="no data samples (python -m kgir_lib.data_sources fetch)")
def test_the_sample_runs_tie_of_kg2rags_authors_code_with_naive_rag_is_read_from_its_traces():
    """The sample run's KG²RAG (authors' code) ties with Naive RAG (notebook 05's note under its first table): its
    committed traces say why, it handed the shared reader Naive RAG's passages in Naive RAG's order on all but one
    question, and on that one both answers score nothing."""
    from kgir_lib.config import PROJECT_ROOT
    from kgir_lib.eval.claims import claims_table, identical_scores_note, scoreboard
    from kgir_lib.eval.evaluate.scoring import reader_contexts, score
    from kgir_lib.methods.base import MethodOutput
    from kgir_lib.traces import read_traces, trace_file

    cfg, code = load_config("sample"), "KG²RAG (authors' code)"
    labels = {"kgir": "KGIR-RAG", "naive_rag": "Naive RAG", "dense": "Dense", "kg2rag_code": code}
    scores, contexts = [], []
    for name in cfg.datasets:
        questions = {q.qid: q for q in load_dataset(name, cfg.data_path).questions}
        for key, label in labels.items():
            path = trace_file(PROJECT_ROOT / "results" / "sample", key, name)  # the committed run's traces
            outs = [MethodOutput.from_json(r) for r in read_traces(path)]
            df = score(outs, [questions[o.qid] for o in outs]).assign(method=label, dataset=name)
            scores.append(df)
            contexts.append(reader_contexts(outs).assign(dataset=name, method=label, EM=df["EM"].to_numpy(),
                                                         F1=df["F1"].to_numpy()))
    scores = pd.concat(scores, ignore_index=True)
    board = scoreboard(scores, claims_table(scores, [Claim("c", "Naive RAG", ("EM",))], pooled=False))
    n = len(scores[scores["method"] == code])
    assert identical_scores_note(board, pd.concat(contexts, ignore_index=True)).endswith(
        f"{code} scores the same: it handed the shared reader Naive RAG's passages in Naive RAG's order on {n - 1} "
        f"of the {n} questions, and on the other 1 its answer scored what Naive RAG's did (EM and F1).")


def test_old_table_mde_condition_counts_the_tested_rows_of_each_claim():
    """A table written before the MDE header: the family of a claim is its rows with questions (n > 0), so a
    one-question pair counts and a claim not run does not."""
    scores = _scores({"KGIR-RAG": [100.0], "IRCoT": [0.0]})
    claims = [Claim("c1", "IRCoT", ("EM", "F1")), Claim("c2", "HippoRAG 2", ("EM",))]
    table = claims_table(scores, claims, pooled=False, n_boot=50)
    assert table["n"].tolist() == [1, 1, 0]
    old = table.rename(columns={mde_column(table): "MDE"})
    assert table_mde_condition(old) == "α = 0.05/2, power 0.8"


def test_the_claims_mde_reads_discordance_in_both_directions():
    """The EM MDE of a claim row comes from the share of questions on which the two disagree, whichever got it
    right: 30 disagreements split 15/15 or 30/0 give the same MDE (at n = 100, α = 0.05 / 2, power 0.8), and it is
    the MDE of a 30 % discordance, not of the 15 % a one-way count would read."""
    ref = [100.0] * 30 + [0.0] * 70
    both_ways = [0.0] * 15 + [100.0] * 15 + [100.0] * 15 + [0.0] * 55  # 15 lost, 15 gained
    one_way = [0.0] * 30 + [0.0] * 70  # 30 lost
    scores = pd.concat([_scores({"KGIR-RAG": ref, "IRCoT": both_ways}, "musique_train"),
                        _scores({"KGIR-RAG": ref, "IRCoT": one_way}, "hotpotqa")])
    claim = Claim("ahead of IRCoT", "IRCoT", ("EM",))
    t = claims_table(scores, [claim], n_boot=10, pooled=False).set_index("dataset")
    assert t.loc["musique_train", "discordant"] == "15/15" and t.loc["hotpotqa", "discordant"] == "30/0"
    col = mde_column(t.reset_index())
    expect = 100.0 * mde_mcnemar(100, 0.3, 0.05 / 2, 0.8)
    assert t.loc["musique_train", col] == t.loc["hotpotqa", col] == expect
    assert expect != 100.0 * mde_mcnemar(100, 0.15, 0.05 / 2, 0.8)


def test_one_reading_rule_and_one_table_7_sign_in_every_place_that_reads_them():
    """The rule (the exact tests with Holm decide; intervals are unadjusted effect sizes) and Table 7's sign are
    each stated once, in the library: notebooks 05 and 06 print them, the README and the results page render them
    (kgir_lib.rendered keeps those blocks equal to the constants)."""
    from kgir_lib.config import PROJECT_ROOT
    from kgir_lib.eval.claims import READING_RULE
    from kgir_lib.report import TABLE7_SIGN

    src = PROJECT_ROOT / "notebooks" / "src"
    assert "cl.READING_RULE" in (src / "05_eval.py").read_text(encoding="utf-8")
    six = (src / "06_ablation.py").read_text(encoding="utf-8")
    assert "cl.READING_RULE" in six and "report.TABLE7_SIGN" in six
    for doc in ("README.md", "docs/results.md"):
        text = (PROJECT_ROOT / doc).read_text(encoding="utf-8")
        assert text.count(READING_RULE) == 1 and text.count(TABLE7_SIGN) == 1, doc
    assert "never a verdict" in READING_RULE and "full method minus the variant" in TABLE7_SIGN
