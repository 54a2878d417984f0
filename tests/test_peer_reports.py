"""The KG²RAG and FlashRAG cross-check reports rebuilt, whole, from their committed files (no model, no work folder,
no peer environment), and kg2rag_code's expansion on musique_train against the authors' code's recorded lists."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import SHARED_DATA
from kgir_lib.eval.kg2rag_agreement import padded_recall_from, seed_agreement

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
BENCH = ROOT / "results" / "benchmarks"
needs_musique_train = pytest.mark.skipif(not (SHARED_DATA / "musique_train").is_dir(),
                                         reason="no musique_train data (python -m kgir_lib.data_sources fetch)")


def _load(name: str):
    sys.path.insert(0, str(PEERS))
    spec = importlib.util.spec_from_file_location(name, PEERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------- KG²RAG
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


# ---------------------------------------------------------------------------- FlashRAG
def test_flashrag_report_rebuilds_whole_from_its_committed_files():
    """The report rendered from the committed CSV, FlashRAG's records, the re-read's settings and the header with
    the suite's IRCoT retrievals equals the committed report, byte for byte: every test, table and sentence."""
    text = _load("flashrag_report").rebuild(BENCH)
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
