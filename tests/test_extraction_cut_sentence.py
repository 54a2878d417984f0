"""Extraction replies cut at the token limit, as docs/results.md says them: the sentence's known answers (the median
passage's reply fits when fewer than half were cut), and each committed run's counts rebuilt from its committed
response log and the data (no model): every hotpotqa passage's extraction request looked up in the log, its
completion's length against the budget of the run's config record."""
from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pandas as pd
import pytest
import yaml

from kgir_lib.config import PROJECT_ROOT, default_data_dir, load_config
from kgir_lib.eval.cost import extraction_cut_sentence

DATA = default_data_dir()
RUNS = ("local", "sample")


def _table(found: int, cut: int, source: str = "llm (llamacpp:m)") -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "d", "source": source, "extract_calls_found": found, "extract_at_budget": cut}])


def test_the_sentence_says_the_count_and_whether_the_median_reply_fits():
    four = extraction_cut_sentence(_table(10, 4), "d", 160)
    assert four.startswith("d: 4 of the 10 extraction replies (40.0 %) reached the 160-token limit")
    assert "fewer than half, so the median passage's reply ended before the limit and its triples fit" in four
    assert "is not measured" in four
    five = extraction_cut_sentence(_table(10, 5), "d", 160)  # 10 replies, 5 cut: the middle pair holds a cut one
    assert "half or more, so the median passage's reply was cut too" in five and "fit." not in five
    assert "fewer than half" in extraction_cut_sentence(_table(11, 5), "d", 160)  # the 6th of 11 is not cut
    pool = extraction_cut_sentence(_table(10, 4), "d", 160, (3, 6))
    assert "(3 of the 6 replies of notebook 01's pool, Table 3; the others extracted on demand)" in pool
    imported = extraction_cut_sentence(_table(0, 0, "openie (published GPT-3.5 OpenIE, imported)"), "d", 160)
    assert imported == "d: no extraction reply (its graph: published GPT-3.5 OpenIE, imported), so none was cut."


def _log(run: str) -> dict:
    with gzip.open(PROJECT_ROOT / "results" / run / "llm_responses.jsonl.gz", "rt", encoding="utf-8") as f:
        return {r["key"]: r for r in map(json.loads, f)}


def _extraction_replies(run: str, dataset: str) -> tuple:
    """``(budget, every extraction reply the run's log holds for dataset's passages)``: the log's records."""
    from kgir_lib.data import load_dataset
    from kgir_lib.kg.extract import extraction_requests
    from kgir_lib.llm.cache import cache_key

    record = PROJECT_ROOT / "results" / run / "config" / "05_eval.yaml"
    budget = int(yaml.safe_load(record.read_text(encoding="utf-8"))["max_tokens_extract"])
    cfg = load_config(run, data_dir=str(DATA))
    model = f"{cfg.llm_backend}:{cfg.llm_model}"
    log = _log(run)
    reqs = extraction_requests(list(load_dataset(dataset, cfg.data_path).corpus.passages), max_tokens=budget)
    keys = (cache_key(model, r.payload()) for r in reqs)
    return budget, [log[k] for k in keys if k in log]


def _extraction_lengths(run: str, dataset: str) -> tuple:
    """``(budget, completion tokens of each of those replies)``."""
    budget, replies = _extraction_replies(run, dataset)
    return budget, [int(r["completion_tokens"]) for r in replies]


@pytest.mark.skipif(not DATA.is_dir(), reason=f"no shared data at {DATA} (set KGIR_DATA_DIR)")
@pytest.mark.parametrize("run", RUNS)
def test_each_runs_cut_replies_are_its_logs_and_the_median_reply_ends_before_the_limit(run):
    """The committed 05_indexing_cost's extraction replies, their tokens and the replies at the budget are the log's,
    counted again; the median reply's length, which the log records, is below the budget, as the rendered sentence
    says."""
    table = pd.read_csv(PROJECT_ROOT / "results" / run / "tables" / "05_indexing_cost.csv").set_index("dataset")
    budget, replies = _extraction_replies(run, "hotpotqa")
    lengths = [int(r["completion_tokens"]) for r in replies]
    row = table.loc["hotpotqa"]
    assert len(lengths) == int(row["extract_calls_found"]) > 0
    assert sum(lengths) == int(row["extract_completion_tokens"])
    assert sum(int(r["prompt_tokens"]) for r in replies) == int(row["extract_prompt_tokens"])
    assert sum(n >= budget for n in lengths) == int(row["extract_at_budget"])
    assert statistics.median(lengths) < budget
    assert "fewer than half" in extraction_cut_sentence(table.reset_index(), "hotpotqa", budget)
    assert int(table.loc["musique_train", "extract_calls_found"]) == 0  # the published graph, imported


def test_the_results_pages_extraction_cost_is_the_local_tables():
    """docs/results.md's hand-written extraction cost of the local run (passages, tokens, seconds, triples) is its
    05_indexing_cost row, with notebook 01's pool from Table 3."""
    tables = PROJECT_ROOT / "results" / "local" / "tables"
    r = pd.read_csv(tables / "05_indexing_cost.csv").set_index("dataset").loc["hotpotqa"]
    t3 = pd.read_csv(tables / "table3_kg_stats.csv")
    pool = int(t3.loc[t3["graph"].str.startswith("hotpotqa ("), "passages"].iloc[0])
    found, seconds = int(r["extract_calls_found"]), float(r["extract_seconds"])
    text = " ".join((PROJECT_ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    said = (f"{found} of the {int(r['passages_in_corpus'])} corpus passages: the {pool}-passage pool of notebook 01 "
            f"and {found - pool} more on demand (passages the methods retrieved). {int(r['extract_prompt_tokens']):,} "
            f"prompt + {int(r['extract_completion_tokens']):,} completion tokens, {seconds:,.0f} s of LLM time on 2 "
            f"cores ({seconds / found:.1f} s a passage); {int(r['triples']):,} triples over {int(r['entities']):,} "
            f"entities (`05_indexing_cost`)")
    assert said in text


@pytest.mark.skipif(not DATA.is_dir(), reason=f"no shared data at {DATA} (set KGIR_DATA_DIR)")
def test_the_results_pages_figures_of_the_local_extraction_are_the_logs():
    """docs/results.md's hand-written figures on the local extraction (the deviations' share of replies cut, the
    median reply's length) against the log."""
    budget, lengths = _extraction_lengths("local", "hotpotqa")
    text = (PROJECT_ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    cut = sum(n >= budget for n in lengths)
    assert f"with a {budget}-token budget that cut {round(100 * cut / len(lengths))} % of the replies" in text
    assert f"the median hotpotqa extraction reply is {statistics.median(lengths):g} completion tokens" in text
