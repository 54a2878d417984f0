"""The eq. 5 matching rules on hand-made names, and their measurement on the labelled fixture
(kgir_lib.kgir.entity_matching, kgir_lib.eval.matching_eval, results/benchmarks/matching.md)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kgir_lib.eval.matching_eval import (RATIOS, THRESHOLDS, MatchRound, choose_rule, fixture_table, length_ratio,
                                         loose_candidates, match_kind, pair_weights, ratio_sweep,
                                         read_pairs, read_population, reproduced, seed_rates, trace_rounds_of_run)
from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.kg.store import save_kg
from kgir_lib.kgir.entity_matching import (DEFAULT_MATCH_METHOD, DEFAULT_NGRAM_THRESHOLD, LENGTH_RATIO, SIMILARITIES,
                                           match_entities, ngram_similarity)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "matching_pairs.tsv"
REPORT = ROOT / "results" / "benchmarks" / "matching.md"
ENTS = ["state", "United States", "States", "Publix", "Publix Super Markets", "Compaq", "Compaq Computer",
        "Compaq Computer Corporation", "Paris Hilton", "Paris, France", "The Beatles"]


def names(method: str, q: str, threshold: float = 0.5) -> list:
    return [e for e, _ in match_entities([q], ENTS, 3, threshold, method=method)[q]]


# ---------------------------------------------------------------- the rules on hand-made names
def test_overlap_len_needs_comparable_lengths():
    assert LENGTH_RATIO == 0.8  # measured: test_length_ratio_constant_is_the_measured_one
    # "compaq" (6 characters) vs "compaq computer" (15): ratio 0.4; vs "compaq computer corporation" (27): 0.22
    assert length_ratio("Compaq", "Compaq Computer") == pytest.approx(0.4)
    assert names("overlap", "Compaq") == ["Compaq", "Compaq Computer", "Compaq Computer Corporation"]
    assert names("overlap_len", "Compaq") == ["Compaq"]
    # "state" (5) vs "states" (6): 0.83 and overlap 0.8; vs "united states" (13): 0.38
    assert names("overlap_len", "state", 0.8) == ["state", "States"]
    assert ngram_similarity("Paris", "Paris Hilton", method="overlap") == 1.0
    assert ngram_similarity("Paris", "Paris Hilton", method="overlap_len") == 0.0  # 5 / 12 characters


def test_best_only_rules_keep_the_best_graph_entities():
    assert names("overlap", "state", 0.8) == ["state", "States", "United States"]
    assert names("overlap_best", "state", 0.8) == ["state"]
    assert names("dice_best", "state", 0.5) == ["state"]
    # "Publix" and "Publix stores" both have overlap 1.0 with nothing; of the two Publix names the shorter
    # is the best by overlap (1.0 vs 0.54), and by Dice
    assert names("overlap_best", "Publix stores") == ["Publix"]
    assert names("dice_best", "Publix stores") == ["Publix"]
    # a tie on overlap (1.0) is broken by Dice: "Compaq" itself
    assert names("overlap_best", "Compaq") == ["Compaq"]
    # an exact tie keeps both
    assert names("overlap_best", "Paris") == ["Paris Hilton", "Paris, France"]
    assert names("dice_best", "Paris") == ["Paris Hilton", "Paris, France"]
    assert names("dice_best", "Paris", 0.6) == []


def test_token_rule_allows_at_most_one_added_content_word():
    assert ngram_similarity("The Beatles", "Beatles", method="tokens") == 1.0      # stop words aside
    assert ngram_similarity("Hewlett-Packard", "Hewlett Packard", method="tokens") == 1.0
    assert ngram_similarity("Compaq", "Compaq Computer", method="tokens") == 0.5
    assert ngram_similarity("Compaq Computer", "Compaq", method="tokens") == 0.5  # either side may be longer
    assert ngram_similarity("Compaq", "Compaq Computer Corporation", method="tokens") == 0.0  # two more words
    # words are made singular: "States" is "state", and "United States" adds one word to it
    assert ngram_similarity("state", "States", method="tokens") == 1.0
    assert ngram_similarity("state", "United States", method="tokens") == 0.5
    assert ngram_similarity("Gila monsters", "Gila monster", method="tokens") == 1.0
    assert ngram_similarity("treaty", "Treaties", method="tokens") == 1.0
    assert ngram_similarity("Congress", "congres", method="tokens") == 0.0  # -ss is not a plural
    assert ngram_similarity("Paris", "Hilton", method="tokens") == 0.0
    assert names("tokens", "Compaq") == ["Compaq", "Compaq Computer"]
    assert names("tokens", "Compaq", 1.0) == ["Compaq"]
    assert names("tokens", "Beatles", 1.0) == ["The Beatles"]
    assert names("tokens", "state", 0.7) == ["States", "state"]  # tied at 1.0: by name


def test_every_rule_is_a_config_value_and_unknown_ones_fail():
    assert {"dice", "overlap", "containment", "overlap_len", "overlap_best", "dice_best", "tokens"} == set(SIMILARITIES)
    with pytest.raises(ValueError, match="matching method 'jaccard'"):
        match_entities(["a"], ["a"], method="jaccard")


def test_match_kind_and_loose_candidates():
    assert match_kind("The State", "the state") == "equal"
    assert match_kind("state", "United States") == "other"      # "states" is not the word "state"
    assert match_kind("Compaq", "Compaq Computer") == "contains"
    assert match_kind("Compaq Computer", "Compaq") == "contained"
    # "Computer" shares 3 of the 6 trigrams of " compaq " (overlap 0.5); "IBM" and "Lenovo" share nothing
    assert loose_candidates("Compaq", ["IBM", "Compaq Computer Corporation", "compaq", "Computer", "Lenovo"]) == [
        "Compaq Computer Corporation", "Computer", "compaq"]
    assert loose_candidates("PC maker", ["maker of PCs", "Lenovo"]) == ["maker of PCs"]  # shared word "maker"


# ---------------------------------------------------------------- seed-match rates from rounds
def _round(question, llm_entities, triples, dataset="d"):
    return MatchRound(dataset, "q1", question, llm_entities, [Triple(h, "r", t, "p") for h, t in triples])


def test_seed_rates_count_rounds_fallbacks_and_kinds():
    rounds = [
        _round("Where is the state capital?", ["state"], [("United States", "Washington"), ("state", "capital")]),
        _round("Who founded Compaq?", ["Compaq"], [("Compaq Computer Corporation", "Rod Canion")]),
        _round("Who is Rod Canion?", ["Hilton"], [("Rod Canion", "Compaq")]),  # no match: fallback to "Rod Canion"
    ]
    before = seed_rates(rounds, "overlap", 0.8)[0]
    assert before["rounds"] == 3 and before["seeded by name %"] == pytest.approx(200 / 3)
    assert before["fallback %"] == pytest.approx(100 / 3) and before["seeded %"] == 100.0
    assert before["name matches"] == 3 and before["equal %"] == pytest.approx(100 / 3)
    assert before["contains %"] == pytest.approx(100 / 3)  # Compaq in Compaq Computer Corporation
    after = seed_rates(rounds, "overlap_best", 0.8)[0]
    assert after["name matches"] == 2 and after["equal %"] == 50.0


def test_trace_rounds_of_run_reads_rounds_and_G_q(tmp_path):
    kg = KnowledgeGraph([Triple("Compaq", "merged with", "HP", "p1"), Triple("HP", "based in", "Palo Alto", "p2")],
                        extracted=["p1", "p2"])
    save_kg(kg, tmp_path / "kg" / "hotpotqa")
    (tmp_path / "traces" / "kgir").mkdir(parents=True)
    (tmp_path / "traces" / "naive_rag").mkdir(parents=True)
    rnd = {"iteration": 1, "query": "Who merged with Compaq?", "retrieved": [["p1", 0.9]],
           "subgraph": {"question": "Who merged with Compaq?", "retrieved": [["p1", 0.9]], "llm_entities": ["Compaq"]}}
    rec = {"qid": "q7", "trace": {"qid": "q7", "rounds": [rnd, {"iteration": 2, "query": "x", "retrieved": []}]}}
    (tmp_path / "traces" / "kgir" / "hotpotqa.trace.jsonl").write_text(json.dumps(rec) + "\n")
    (tmp_path / "traces" / "naive_rag" / "hotpotqa.trace.jsonl").write_text(json.dumps(rec) + "\n")
    rounds = trace_rounds_of_run(tmp_path)
    assert len(rounds) == 1  # the round without a subgraph and the non-KGIR method are skipped
    r = rounds[0]
    assert (r.dataset, r.qid, r.E_q, r.graph_entities) == ("hotpotqa", "q7", ["Compaq"], ["Compaq", "HP"])
    assert reproduced(rounds, "overlap", 0.8) == 0  # the trace recorded no seeds and no |G_q|
    rnd["subgraph"].update(seeds=["Compaq"], n_G_q=1)
    (tmp_path / "traces" / "kgir" / "hotpotqa.trace.jsonl").write_text(json.dumps(rec) + "\n")
    assert reproduced(trace_rounds_of_run(tmp_path), "overlap", 0.8) == 1
    with pytest.raises(FileNotFoundError, match="trace"):
        trace_rounds_of_run(tmp_path / "nothing")


# ---------------------------------------------------------------- the labelled fixture and the report
def test_read_pairs_names_a_bad_label(tmp_path):
    bad = tmp_path / "p.tsv"
    bad.write_text("\t".join(("qid", "dataset", "question", "question_entity", "graph_entity", "label", "stratum",
                              "rivals")) + "\nq\td\tQ?\ta\tb\tmaybe\ts\t\n")
    with pytest.raises(ValueError, match=r"p\.tsv: data line 2: field 'label'"):
        read_pairs(bad)


def test_pair_weights_are_inverse_sampling_rates(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("# population\td\ta\t10\n# population\td\tb\t3\n" + "\t".join(
        ("qid", "dataset", "question", "question_entity", "graph_entity", "label", "stratum", "rivals")) + "\n"
        + "".join(f"q\td\tQ?\tx{i}\ty\tsame\t{st}\t\n" for i, st in enumerate("aab")))
    pairs = read_pairs(path)
    assert read_population(path) == {("d", "a"): 10, ("d", "b"): 3}
    assert pair_weights(pairs, read_population(path)) == [5.0, 5.0, 3.0]
    with pytest.raises(ValueError, match="population"):
        pair_weights(pairs, {("d", "a"): 10})


def test_fixture_covers_both_datasets_and_labels():
    pairs = read_pairs(FIXTURE)
    assert len(pairs) >= 100
    assert {p.dataset for p in pairs} == {"musique_train", "hotpotqa"}
    for ds in ("musique_train", "hotpotqa"):
        assert {p.label for p in pairs if p.dataset == ds} == {"same", "different"}
    assert "/work" not in FIXTURE.read_text(encoding="utf-8")


def _report_row(method: str, threshold: float) -> list:
    """The cells of section 1's row for (method, threshold) in results/benchmarks/matching.md."""
    text = REPORT.read_text(encoding="utf-8").split("## 2.")[0]
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and cells[0] == method and cells[1] in (repr(threshold), str(threshold)):
            return cells
    raise AssertionError(f"no row {method} {threshold} in {REPORT.name}")


def test_the_chosen_rule_is_the_default_and_its_report_row_matches_the_fixture():
    pairs = read_pairs(FIXTURE)
    rows = fixture_table(pairs, SIMILARITIES, THRESHOLDS)
    best = choose_rule(rows)
    assert (best["method"], best["threshold"]) == (DEFAULT_MATCH_METHOD, DEFAULT_NGRAM_THRESHOLD)
    s = best  # its counts, precision, recall and F1 over all pairs
    cells = _report_row(DEFAULT_MATCH_METHOD, DEFAULT_NGRAM_THRESHOLD)
    assert cells[2:8] == [str(s["tp"]), str(s["fp"]), str(s["fn"]), f"{s['precision %']:.1f}",
                          f"{s['recall %']:.1f}", f"{s['F1 %']:.1f}"]
    chosen = re.search(r"\*\*Chosen rule\*\*.*?`(\w+)` at threshold ([\d.]+) -- precision ([\d.]+) %, "
                       r"recall ([\d.]+) %", REPORT.read_text(encoding="utf-8"), re.S)
    assert chosen.groups() == (DEFAULT_MATCH_METHOD, repr(DEFAULT_NGRAM_THRESHOLD), f"{s['precision %']:.1f}",
                               f"{s['recall %']:.1f}")


def test_length_ratio_constant_is_the_measured_one():
    sweep = ratio_sweep(read_pairs(FIXTURE), THRESHOLDS, RATIOS)
    assert choose_rule(sweep)["ratio"] == LENGTH_RATIO
