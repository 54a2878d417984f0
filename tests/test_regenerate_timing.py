"""``benchmarks/regenerate_timing.py``: what it runs and what its record says (its timings come from a run, not
from here: no test asserts a time)."""
from __future__ import annotations

import importlib.util

import pytest

from kgir_lib.config import PROJECT_ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("regenerate_timing", PROJECT_ROOT / "benchmarks" /
                                                  "regenerate_timing.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_notebooks_are_every_numbered_notebook_in_order_or_those_asked(bench):
    assert bench.notebook_ids(None) == ["01", "02", "03", "04", "05", "06", "07"]
    assert bench.notebook_ids(["05", "03"]) == ["03", "05"]
    with pytest.raises(SystemExit, match="--only 09: no such notebook"):
        bench.notebook_ids(["03", "09"])
    with pytest.raises(SystemExit, match="no such notebook"):
        bench.main(["--only", "3"])


def test_the_record_sums_the_notebooks_and_says_whether_the_run_changed_committed_files(bench):
    rows = [{"notebook": "03_subgraph_mst", "seconds": 100.4, "cpu": 80.2, "rc": 0, "load": (1.5, 2.0),
             "encoded": (12, 3400)},
            {"notebook": "04_iterative_rewrite", "seconds": 50.0, "cpu": 40.0, "rc": 0, "load": (2.0, 1.0),
             "encoded": (0, 0)}]
    text = bench.markdown("local", rows, [], "cmd", "in a fresh clone")
    assert "| 03_subgraph_mst | 100 | 80 | 0 | 1.50 → 2.00 | 3,400 (12) |" in text
    assert "| **all** | **150** (2.5 min) | **120** (2.0 min) | | | 3,400 (12) |" in text
    uncounted = bench.markdown("local", [{k: v for k, v in r.items() if k != "encoded"} for r in rows], [], "c", "x")
    assert "| 03_subgraph_mst | 100 | 80 | 0 | 1.50 → 2.00 |\n" in uncounted and "encoder" not in uncounted
    assert "**unchanged**" in text and "Command: `cmd`" in text and "profile `local`" in text
    dirty = bench.markdown("local", rows, [" M results/local/config/03_subgraph_mst.yaml"], "cmd", "x")
    assert "**1 changed**: `M results/local/config/03_subgraph_mst.yaml`" in dirty
    assert "Committed files" not in bench.markdown("local", rows, None, "cmd", "in place")


def test_cpu_time_counts_the_processes_the_command_waited_for(bench, tmp_path):
    import os
    import sys

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    res = bench.timed([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                                             f"{burn!r}])"], tmp_path, dict(os.environ), 60)
    assert res["rc"] == 0 and res["cpu"] >= 0.3 and res["seconds"] >= 0.3 and len(res["load"]) == 2


def test_keep_refuses_a_folder_that_exists(bench, tmp_path):
    with pytest.raises(SystemExit, match="--keep .*already exists"):
        bench.main(["--only", "03", "--keep", str(tmp_path)])


def test_the_readme_states_the_recorded_time():
    """The README's regenerate time is the committed record's total (minutes of wall time, seconds of CPU), and
    the record says the run left every committed file as it was."""
    import re

    record = (PROJECT_ROOT / "results" / "benchmarks" / "regenerate.md").read_text(encoding="utf-8")
    total = re.search(r"\| \*\*all\*\* \| \*\*(\d+)\*\* \(([\d.]+) min\) \| \*\*(\d+)\*\*", record)
    wall, minutes, cpu = total.groups()
    notebooks = re.findall(r"^\| (\d\d)_\w+ \|", record, flags=re.MULTILINE)
    readme = " ".join((PROJECT_ROOT / "README.md").read_text(encoding="utf-8").split())
    span = f"{notebooks[0]}-{notebooks[-1]}" if len(notebooks) < 7 else "01-07"
    assert f"notebooks {span} took {minutes} minutes ({cpu} s of CPU time)" in readme, (span, minutes, cpu)
    assert "Committed files after the run: **unchanged**" in record and int(wall) > 0
    rows = re.findall(r"^\| (\d\d)_\w+ \| \d+ \| (\d+) \| \d+ \| ([\d.]+) → ([\d.]+) \|", record, flags=re.MULTILINE)
    loads = [float(x) for r in rows for x in r[2:]]
    share = round(100 * sum(int(r[1]) for r in rows if r[0] == "05") / int(cpu))
    assert f"(load {min(loads):.1f}-{max(loads):.1f}), {share} % of the CPU time in notebook 05" in readme


def test_the_encoder_calls_a_notebook_computed_are_counted_from_the_runs_store(bench, tmp_path):
    """What the record's last column reads: the calls the run's encoder-calls store holds and the texts the encoder
    computed, so the difference around a notebook is what it computed (nothing before the store exists)."""
    from conftest import BagOfWordsEncoder
    from kgir_lib.encoder_calls import CALLS_FILE, RememberedCalls

    assert bench.encoder_calls(tmp_path, "local") == (0, 0)
    store = RememberedCalls(BagOfWordsEncoder(), tmp_path / "results" / "local" / "cache" / "embeddings" / CALLS_FILE)
    store.encode(["Compaq", "HP", "Dell"])
    store.encode(["IBM"])
    store.encode(["IBM"])  # answered from the store: nothing more computed
    assert bench.encoder_calls(tmp_path, "local") == (2, 4)
    store.encode(["Dell", "Acer", "IBM"])  # a new call: one text computed, two held
    assert bench.encoder_calls(tmp_path, "local") == (3, 5)


def test_before_the_store_exists_its_seed_counts_as_held_not_computed(bench, tmp_path):
    """A fresh clone's first notebook seeds the store from the committed packed calls: those are counted before it
    runs, with no text computed, so its row counts only the calls and texts it computed."""
    from conftest import BagOfWordsEncoder
    from kgir_lib.embedding_seed import pack_calls
    from kgir_lib.encoder_calls import CALLS_FILE, RememberedCalls

    made = tmp_path / "made" / CALLS_FILE
    store = RememberedCalls(BagOfWordsEncoder(), made)
    store.encode(["Compaq", "HP", "Dell"])
    store.encode(["IBM"])
    clone = tmp_path / "clone"
    (clone / "results" / "local" / "embeddings").mkdir(parents=True)
    assert pack_calls(made, clone / "results" / "local" / "embeddings" / "calls.sqlite.xz") == 2
    assert bench.encoder_calls(clone, "local") == (2, 0)
