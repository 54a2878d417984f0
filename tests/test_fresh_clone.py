"""The README's main command on a stranger's machine, end to end (the slow tier's one run of the main job).

A clone of this checkout's last commit in a temporary folder, with no ``../shared`` beside it and no ``KGIR_*``
variable set; the data's public hosts are stood in for by a server on 127.0.0.1 that serves each host's files in
its own layout, built from the samples (``tests/data_server.py``; the base URLs come from the environment, the only
thing a stranger's shell would not have). ``bash scripts/main.sh`` must then

- fetch, derive and verify the three samples into the clone's ``data/samples/``;
- execute every notebook (rc 0, "done: 7 notebooks"), answering every LLM request from the committed response log;
- leave the clone as it found it: ``git status --porcelain`` empty. Every committed table, figure, trace and
  output notebook is rewritten by the run, so an empty status says each of them came out byte for byte as
  committed -- the committed numbers regenerated from the response log, and nothing (wall time, a timestamp, a
  machine path) that would make a rerun dirty the checkout.

A few runs' traces are removed first (:data:`RUN_AGAIN`), as a run that does not commit its traces (the local
one) has none in a fresh clone: the main job runs those from the response log and reads the others back, and the
only files it may then change are those runs' own (their meta's wall time, timestamp and run id). So notebooks 05
and 06 print nothing that depends on which runs an execution made and which it read back.

The cache-only switch (``KGIR_LLM_CACHE_ONLY=1``, what ``--regenerate`` sets) turns a request the log does not hold
into an error naming its stage, instead of an hour of CPU with the model: that a committed number needs a call
the log lacks is then the failure, at once. Set-up is not repeated: the clone's ``.venv`` is a link to this
checkout's environment (the same pinned installs; the test stops first if that environment is stale, rather than
let the clone's set-up reinstall it), and ``PYTHONPATH`` makes the clone's own ``kgir_lib`` the one every kernel
imports.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kgir_lib.config import PROJECT_ROOT, default_data_dir

pytestmark = pytest.mark.slow


# One run of notebook 05 (a method on both datasets) and one of notebook 06's studies (a KG²RAG sweep point): their
# trace folders under results/sample/traces/. (A study run made again costs its notebook the encoder's load, about
# 6 s of CPU, since no committed execution encoded its texts; one a notebook is enough to show either notebook's
# output the same.)
RUN_AGAIN = ("naive_rag", "06_ablation/kg2rag-k=5")


def fresh_clone(tmp_path: Path) -> Path:
    """A clone of the last commit in ``tmp_path/repo``; nothing beside it. Its objects are hard links to this
    checkout's where the file system allows (git's default for a local clone: an object file is never rewritten), its
    working tree its own."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(PROJECT_ROOT), str(repo)], check=True)
    (repo / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    return repo


def clone_env(repo: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGIR_")}  # a stranger's shell: none set
    return {**env, "PYTHONPATH": str(repo), "MPLBACKEND": "Agg", **extra}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, text=True, capture_output=True, check=True).stdout


def changed(repo: Path) -> str:
    """What the run changed: the status, and the first lines of the diff of each changed text file."""
    status = git(repo, "status", "--porcelain")
    if not status:
        return ""
    text = git(repo, "diff", "--no-color", "-U0", "--", "*.csv", "*.md", "*.yaml", "*.jsonl")
    return f"{status}\n{text[:6000]}"


@pytest.mark.skipif(not (PROJECT_ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.skipif(not default_data_dir().is_dir(), reason="no samples to build the stand-in hosts from")
def test_a_fresh_clone_with_no_data_beside_it_runs_the_main_job_and_reproduces_every_committed_file(tmp_path):
    from data_server import serve, upstream_tree

    repo = fresh_clone(tmp_path)
    assert not (tmp_path / "shared").exists() and not (repo / "data" / "samples").exists()
    traces = repo / "results" / "sample" / "traces"
    again = sorted(p.relative_to(repo).as_posix() for run in RUN_AGAIN for p in (traces / run).iterdir())
    assert len(again) >= 2 * len(RUN_AGAIN)  # a trace file and its meta a run (and dataset)
    for run in RUN_AGAIN:
        shutil.rmtree(traces / run)
    # The clone shares this checkout's environment: were its set-up to install, it would install the clone's
    # kgir_lib (editable) over this checkout's. ``scripts/test.sh`` sets up first, so this only stops a stale one.
    check = subprocess.run(["bash", "scripts/setup.sh", "--check"], cwd=repo, env=clone_env(repo), text=True,
                           capture_output=True)
    if check.returncode != 0:
        pytest.fail(f"run `bash scripts/setup.sh` first: {check.stderr.strip()}")
    with serve(upstream_tree(default_data_dir())) as server:
        env = clone_env(repo, KGIR_LLM_CACHE_ONLY="1", **server.env())
        proc = subprocess.run(["bash", "scripts/main.sh"], cwd=repo, env=env, text=True, capture_output=True,
                              timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "done: 7 notebooks" in proc.stdout
    assert (repo / "data" / "samples" / "musique_train" / "musique_train.json").is_file()
    assert (repo / "results" / "sample" / "runtime" / "timings.tsv").is_file(), "wall time goes to runtime/"
    assert all((repo / path).is_file() for path in again), "the removed runs were made again"
    for path in again:  # a run made again: its own files may differ, and only they
        git(repo, "checkout", "--", path)
    diff = changed(repo)
    assert not diff, "the main job changed committed files:\n" + diff


@pytest.mark.skipif(not (PROJECT_ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.skipif(not default_data_dir().is_dir(), reason="no samples beside the checkout")
def test_rerunning_one_notebook_on_a_fresh_clone_leaves_every_committed_file_as_it_was(tmp_path):
    """Notebook 04 alone, from the committed response log (``--regenerate``), on a clone that holds only what is
    committed: no graph (the workspace builds notebook 01's, so every method run's fingerprint is the committed
    trace's and the trace is read back, not rerun), no cache. ``git status`` stays empty: the traces, their meta
    files (scores, on-demand passages, timings) and ``usage/04_iterative_rewrite.csv`` (the usage of every run the
    notebook makes or reads back) come out byte for byte. Then notebook 03 alone, on the graph notebook 04 has grown
    (as when the main job runs a second time in one checkout): it reads the graph as a fresh run does
    (``pipeline.fresh_view``), so its output notebook too comes out byte for byte."""
    repo = fresh_clone(tmp_path)
    env = clone_env(repo, KGIR_DATA_DIR=str(default_data_dir()))
    base = repo / "results" / "sample" / "kg" / "hotpotqa" / "base.json"
    for notebook in ("04", "03"):
        proc = subprocess.run([str(repo / ".venv" / "bin" / "python"), "-m", "kgir_lib.runner", "--profile",
                               "sample", "--only", notebook, "--regenerate"], cwd=repo, env=env, text=True,
                              capture_output=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "done: 1 notebooks" in proc.stdout
        assert base.is_file()  # notebook 01's graph, built by the first
        diff = changed(repo)
        assert not diff, f"rerunning notebook {notebook} changed committed files:\n" + diff
        if notebook == "04":  # the stored graph holds more than notebook 01's: notebook 04's runs' passages
            extracted = json.loads((base.parent / "extracted.json").read_text(encoding="utf-8"))
            assert len(extracted) > len(json.loads(base.read_text(encoding="utf-8")))
