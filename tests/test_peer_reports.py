"""The KG²RAG and FlashRAG cross-check reports rebuilt, whole, from their committed files (no model, no work folder,
no peer environment), and kg2rag_code's expansion on musique_train against the authors' code's recorded lists."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from conftest import SHARED_DATA
from _scripts import load_peer
from kgir_lib.eval.kg2rag_agreement import padded_recall_from, seed_agreement

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
BENCH = ROOT / "results" / "benchmarks"
needs_musique_train = pytest.mark.skipif(not (SHARED_DATA / "musique_train").is_dir(),
                                         reason="no musique_train data (python -m kgir_lib.data_sources fetch)")


# ---------------------------------------------------------------------------- KG²RAG
def test_kg2rag_report_rebuilds_whole_from_its_committed_files():
    """Every per-question measure recomputed from the committed input columns equals the committed CSV, and the
    report rendered from the three committed files equals the committed report, byte for byte."""
    report = load_peer("kg2rag_report")
    text, rows = report.rebuild(BENCH)
    assert rows.to_csv(index=False) == (BENCH / "peers_kg2rag.csv").read_text(encoding="utf-8")
    assert text == (BENCH / "peers_kg2rag.md").read_text(encoding="utf-8")


def test_kg2rag_committed_counts_the_report_states():
    """The figures the issue of the report turned on, from the committed rows: the expansion agrees as a set on
    every question and in order on fewer; the most frequent list's share is above the pairs' agreement."""
    _, rows = load_peer("kg2rag_report").rebuild(BENCH)
    n = len(rows)
    assert n == 184
    assert int(rows["code_expanded_same_set"].sum()) == 184 and int(rows["code_expanded_same_list"].sum()) == 133
    assert set(rows["upstream_hash_seeds"]) == {40}
    assert round(100 * rows["upstream_modal_share"].mean(), 1) == 78.6
    assert round(100 * rows["upstream_seed_pair_share"].mean(), 1) == 73.6
    assert int(rows["code_final_in_seeds"].sum()) == 176 and int(rows["code_final_modal"].sum()) == 133


def test_kg2rag_score_drift_between_two_runs_is_counted_and_said():
    """The runs on the cleaned and uncleaned triples each computed their seed scores: a score moved in its last bits
    on one question is counted there alone, with its size, and said; equal scores are said to be equal."""
    report = load_peer("kg2rag_report")
    _, rows = report.rebuild(BENCH)
    assert report.score_drift(rows, rows.copy()) == (0, 184, 0.0)
    other = rows.copy()
    pid, score = other.loc[other.index[0], "seeds"].split()[0].rsplit(":", 1)
    other.loc[other.index[0], "seeds"] = other.loc[other.index[0], "seeds"].replace(
        f"{pid}:{score}", f"{pid}:{float(score) + 2.5e-7!r}", 1)
    moved, of, largest = report.score_drift(rows, other)
    assert (moved, of) == (1, 184) and abs(largest - 2.5e-7) < 1e-12
    assert "on 1 of 184 questions (at most 2.5e-07)" in report._drift_words(moved, of, largest)
    assert report._drift_words(0, 184, 0.0).endswith("the same scores on every question.")


def test_kg2rag_uncleaned_table_counts_agreement_and_changes():
    """The cleaned-against-uncleaned table: each side's agreement in both runs and the questions whose list changed,
    from the committed rows with one question's upstream final list changed in the second run; runs over different
    questions are refused."""
    report = load_peer("kg2rag_report")
    _, rows = report.rebuild(BENCH)
    other = rows.copy()
    i = other.index[0]
    other.loc[i, "up_final"] = "x"
    other.loc[i, "code_final_same_list"] = not bool(rows.loc[i, "code_final_same_list"])
    table = report.uncleaned_table(rows, other)
    line = table[(table["dataset"] == rows.loc[i, "dataset"]) & (table["stage"] == "final")].iloc[0]
    assert list(table["compared as"][:4]) == ["set", "list (order)", "list", "list"]
    same = int(rows[rows["dataset"] == rows.loc[i, "dataset"]]["code_final_same_list"].sum())
    assert line["code: same, cleaned"] == same
    assert line["code: same, uncleaned"] == same + (-1 if rows.loc[i, "code_final_same_list"] else 1)
    assert line["changed: the code untouched"] == 1 and line["changed: kg2rag_code"] == 0
    assert int(table["changed: the code untouched"].sum()) == 1
    with pytest.raises(SystemExit, match="different questions"):
        report.uncleaned_table(rows, other.iloc[1:])


def test_kg2rag_uncleaned_triples_change_no_list_on_the_same_scores():
    """The committed run on the uncleaned triples, recomputed from its CSV's input columns, against the run on the
    cleaned triples (the same encoder cache, so the same seed scores on every question): the same 184 questions, the
    self-loops and repeats the loader drops counted, and no list of any side changed at any stage, so on these inputs
    the cleaning changes nothing the cross-check compares; the report says the scores were the same."""
    report = load_peer("kg2rag_report")
    text, rows = report.rebuild(BENCH)
    _, _, main_head = report.read_committed(BENCH)
    unclean, head = report.read_uncleaned(BENCH, int(main_head["context_passages"]))
    assert len(unclean) == 184 and head["read"]["musique_train"] == {"head_equals_tail": 20, "duplicate": 30,
                                                                      "triples": 17234}
    assert head["read"]["hotpotqa"] == {"head_equals_tail": 1, "duplicate": 66, "triples": 2836}
    table = report.uncleaned_table(rows, unclean)
    changed = [c for c in table if c.startswith("changed:")]
    assert len(changed) == 4 and int(table[changed].to_numpy().sum()) == 0
    assert (table["code: same, cleaned"] == table["code: same, uncleaned"]).all()
    assert (table["paper: same, cleaned"] == table["paper: same, uncleaned"]).all()
    assert int(unclean["code_final_same_list"].sum()) == int(rows["code_final_same_list"].sum()) == 133
    assert report.score_drift(rows, unclean) == (0, 184, 0.0)
    assert "The two runs' seed chunks carry the same scores on every question." in text


def test_seed_agreement_the_modal_share_bounds_a_fixed_reading():
    """Three seeds of four give list A: a reading that always gives A matches 3/4 of the runs, above the pairs'
    agreement (3 of 6 pairs equal), so the pairs' agreement is no ceiling; the most frequent share is."""
    got = seed_agreement("A", ["A", "A", "B", "A"])
    assert got == {"code_final_in_seeds": True, "code_final_seed_share": 0.75, "upstream_seed_pair_share": 0.5,
                   "upstream_modal_share": 0.75, "upstream_modal_lists": 1, "code_final_modal": True}
    tie = seed_agreement("C", ["A", "B", "A", "B"])
    assert (tie["upstream_modal_lists"], tie["code_final_modal"], tie["code_final_in_seeds"]) == (2, False, False)
    with pytest.raises(ValueError, match="seed_finals"):
        seed_agreement("A", [])


def test_padded_recall_differs_only_where_the_padding_brings_a_gold_passage():
    assert padded_recall_from(["a", "b"], ["c", "a", "g"], ["g"]) == 4.0   # padded: a b c g
    assert pd.isna(padded_recall_from(["a", "b"], ["c"], ["g"]))
    assert pd.isna(padded_recall_from(["a"], ["g"], []))
    assert pd.isna(padded_recall_from(["a", "b"], ["c", "g"], ["g"], k_max=3))      # g only at 4
    assert padded_recall_from(["g", "b"], ["c", "h"], ["g", "h"]) == 4.0


@needs_musique_train
def test_kg2rag_code_expansion_matches_the_authors_recorded_lists_on_musique_train():
    """kg2rag_code's expansion (no model: the committed seeds and scores, the published OpenIE graph) against the
    chunks the authors' code added in its untouched run, as the committed CSV records them."""
    from kgir_lib.baselines.kg2rag_code_chunks import ChunkIndex, expand_by_titles
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.kg.openie import import_openie
    from kgir_lib.kg.store import openie_file

    report = load_peer("kg2rag_report")
    rows = pd.read_csv(BENCH / "peers_kg2rag.csv", dtype=str, keep_default_na=False)
    rows = rows[rows["dataset"] == "musique_train"]
    cfg = load_config("local", data_dir=str(SHARED_DATA))
    ds = load_dataset("musique_train", cfg.data_path)
    kg, drops = import_openie(openie_file(cfg, "musique_train"), ds.corpus)
    index = ChunkIndex(ds.corpus.passages, kg, "musique")
    same_set = same_list = 0
    for r in rows.to_dict("records"):
        added = [p for p, _ in expand_by_titles(index, report._seeds(r["seeds"])).added]
        same_set += set(added) == set(r["up_expanded"].split())
        same_list += added == r["up_expanded"].split()
        assert added == r["code_expanded"].split(), r["qid"]
    assert (len(rows), same_set, same_list) == (100, 100, 49)
    # the loader's cleaning the report lists as an input difference, counted on the same file
    head = (BENCH / "peers_kg2rag.json").read_text(encoding="utf-8")
    assert f'"duplicate": {drops["duplicate"]}' in head and f'"head_equals_tail": {drops["head_equals_tail"]}' in head
    assert (drops["head_equals_tail"], drops["duplicate"]) == (20, 30)


# ---------------------------------------------------------------------------- FlashRAG
def test_flashrag_report_rebuilds_whole_from_its_committed_files():
    """The report rendered from the committed CSV, FlashRAG's records, the re-read's settings and the header with
    the suite's IRCoT retrievals equals the committed report, byte for byte: every test, table and sentence."""
    text = load_peer("flashrag_report").rebuild(BENCH)
    assert text == (BENCH / "peers_flashrag.md").read_text(encoding="utf-8")


def test_flashrag_committed_figures_the_report_states():
    """The figures docs/results.md quotes, from the committed rows: IRCoT's Recall@5 as FlashRAG ranks and best
    first, and ITER-RETGEN's split with its interval."""
    from kgir_lib.eval.peer_iterative import paired_tests, reading_split

    rows = pd.read_csv(BENCH / "peers_flashrag.csv", dtype={"qid": str})
    ircot = rows[rows["method"] == "ircot"]
    assert round(float(ircot["R@5_flashrag"].mean()), 1) == 27.0
    assert round(float(ircot["R@5_flashrag_best_first"].mean()), 1) == 66.2
    _, test = reading_split(rows)
    assert (test["re-read − as run"], test["95% CI"]) == (3.0, "[-2.1, 8.3]")
    tests = paired_tests(rows).set_index(["method", "metric"])
    assert tests.loc[("ITER-RETGEN", "F1"), "p (Holm)"] == 0.0298


def test_flashrag_shim_row_figures_docs_results_states():
    """The shim row's figures docs/results.md states beside FlashRAG's as-run IRCoT: the thoughts that reach FlashRAG's
    answer marker, the parsed answers' length, F1 and EM of both FlashRAG runs, the F1 test and Recall@5."""
    from kgir_lib.eval.peer_iterative import paired_tests

    rows = pd.read_csv(BENCH / "peers_flashrag.csv", dtype={"qid": str})
    kept = pd.read_csv(BENCH / "peers_flashrag_ircot_kept.csv", dtype={"qid": str})
    ircot = rows[rows["method"] == "ircot"]
    assert len(kept) == len(ircot) == 100 and set(kept["qid"]) == set(ircot["qid"])
    assert (int(kept["flashrag_answer_marked"].sum()), int(ircot["flashrag_answer_marked"].sum())) == (100, 56)
    words = [round(float(t["answer_words_flashrag"].mean()), 1) for t in (ircot, kept)]
    assert words == [26.6, 4.9]
    f1 = [round(float(t["F1_flashrag"].mean()), 1) for t in (ircot, kept)]
    assert f1 == [9.9, 14.7] and round(float(kept["F1_suite"].mean()), 1) == 15.5
    assert round(float(kept["F1_flashrag"].mean() - ircot["F1_flashrag"].mean()), 1) == 4.8
    assert [float(t["EM_flashrag"].mean()) for t in (ircot, kept)] == [3.0, 5.0]
    assert [round(float(t["R@5_flashrag"].mean()), 1) for t in (ircot, kept)] == [27.0, 27.0]
    tests = paired_tests(kept).set_index(["method", "metric"])
    [(method, _)] = [k for k in tests.index if k[1] == "F1"]
    assert round(float(tests.loc[(method, "F1"), "p"]), 2) == 0.84


# ---------------------------------------------------------------------------- the recorded mutations
def test_the_recorded_mutations_still_apply_and_each_names_its_catching_test():
    """results/benchmarks/mutation_peers.md (``benchmarks/peers/mutations.py``): every mutated line is still in its
    file exactly once (the list can be run again), the test that caught it exists, and the record lists it caught."""
    mutations = load_peer("mutations")
    record = (BENCH / "mutation_peers.md").read_text(encoding="utf-8")
    assert record.startswith("## Peers\n")
    for what, rel, old, new, tests in mutations.MUTATIONS:
        assert (ROOT / rel).read_text(encoding="utf-8").split("\n").count(old) == 1, what
        assert old != new, what
        path, name = tests.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), name
        assert f"| {what} | `{rel}` | `{name}` | caught |" in record, what
    assert f"{len(mutations.MUTATIONS)} of {len(mutations.MUTATIONS)} caught." in record
