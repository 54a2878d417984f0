"""The KG²RAG cross-check's report reads a stated number of hash seeds, the same on every dataset."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "peers"))
from kg2rag_report import seed_runs  # noqa: E402


def _touch(folder: Path, *seeds: int) -> None:
    for s in seeds:
        (folder / f"upstream_seed{s}.jsonl").write_text("")


def test_a_stated_count_reads_exactly_those_seeds_and_leaves_a_further_one(tmp_path):
    _touch(tmp_path, 0, 1, 2, 3)  # seed 3 finished on this dataset only: a run stopped part-way
    assert [p.name for p in seed_runs(tmp_path, 3)] == [f"upstream_seed{i}.jsonl" for i in range(3)]


def test_no_count_reads_every_seed_up_to_the_first_gap(tmp_path):
    _touch(tmp_path, 0, 1, 3)
    assert [p.name for p in seed_runs(tmp_path)] == ["upstream_seed0.jsonl", "upstream_seed1.jsonl"]


def test_a_missing_seed_is_named(tmp_path):
    _touch(tmp_path, 0, 2)
    with pytest.raises(SystemExit, match=r"1 of the 3 hash seeds.*upstream_seed1\.jsonl"):
        seed_runs(tmp_path, 3)
