"""Reruns never clobber the committed reference results: a run with -p parameters writes a scratch run
directory <profile>-<hash> (git-ignored) that starts from the profile's committed response log."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kgir_lib import runner
from kgir_lib.llm import LLMCache
from kgir_lib.llm.response_log import LOG_NAME, export_log, read_log

from _probe import probe_notebook

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import json
import pandas as pd
from kgir_lib import report
from kgir_lib.config import load_config, start_run
from kgir_lib.llm import LLMCache
from kgir_lib.llm.response_log import import_once
from kgir_lib.notebook.opening import config_params
cfg = load_config(profile, **config_params(globals()))
start_run(cfg, "00_probe")
cache = LLMCache(cfg.path("cache", "llm.sqlite"))
import_once(cfg, cache)
logged = cache.get("a" * 64)
cache.put("b" * 64, "scripted:m", {}, f"new answer for top_k {cfg.top_k}", 2, 2, 0.1)
report.save_table(pd.DataFrame({"top_k": [cfg.top_k]}), cfg, "00_probe")
cfg.path("probe.json").write_text(json.dumps({"logged": logged and logged["text"], "run_dir": str(cfg.run_dir),
                                              "fig_dir": str(cfg.fig_dir), "qid": globals().get("qid")}))
"""


def probe_dir(tmp_path: Path) -> Path:
    return probe_notebook(tmp_path / "nbs", PROBE, "profile = None\nqid = None")


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs")}
    env.pop("KGIR_PROFILE", None)
    return subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci",
                           "--notebooks-dir", str(tmp_path / "nbs"), *args],
                          cwd=REPO, env=env, text=True, capture_output=True, timeout=300)


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_a_run_with_parameters_writes_a_scratch_directory_from_the_committed_log(tmp_path):
    reference = tmp_path / "results" / "ci"
    seed = LLMCache(tmp_path / "seed.sqlite")
    seed.put("a" * 64, "scripted:m", {}, "the committed answer", 5, 3, 0.2)
    export_log(seed, reference / LOG_NAME)
    (reference / "tables").mkdir()
    (reference / "tables" / "00_probe.csv").write_text("top_k\n10\n")
    (reference / "runtime").mkdir()
    (reference / "runtime" / "timings.tsv").write_text("00_probe.ipynb\t1.0\n")
    (tmp_path / "figs" / "ci").mkdir(parents=True)
    before, before_figs = snapshot(reference), snapshot(tmp_path / "figs")
    probe_dir(tmp_path)

    out = run(tmp_path, "-p", "top_k", "5", "-p", "qid", "q-new")
    assert out.returncode == 0, out.stderr
    name = runner.scratch_name("ci", {"top_k": 5, "qid": "q-new"})
    scratch = tmp_path / "results" / name
    assert f"results: {scratch}" in out.stdout and "scratch run (parameters qid, top_k given)" in out.stdout
    probe = json.loads((scratch / "probe.json").read_text())
    assert probe == {"logged": "the committed answer", "run_dir": str(scratch),
                     "fig_dir": str(tmp_path / "figs" / name), "qid": "q-new"}
    assert (scratch / "tables" / "00_probe.csv").read_text().splitlines()[1].split(",")[-1] == "5"
    assert {r[0] for r in read_log(scratch / LOG_NAME)} == {"a" * 64, "b" * 64}
    assert snapshot(reference) == before and snapshot(tmp_path / "figs") == before_figs  # untouched

    again = run(tmp_path, "-p", "qid", "q-new", "-p", "top_k", "5")  # the same parameters: the same scratch run
    assert again.returncode == 0 and f"results: {scratch}" in again.stdout
    assert len((scratch / "runtime" / "timings.tsv").read_text().splitlines()) == 2


def test_write_reference_and_location_only_parameters_write_the_profiles_own_directory(tmp_path):
    probe_dir(tmp_path)
    out = run(tmp_path, "--write-reference", "-p", "top_k", "5")
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "results" / "ci" / "probe.json").read_text())["run_dir"].endswith("/ci")
    assert runner.scratch_name("ci", {"llm_base_urls": ["http://h:1/v1"], "llm_timeout_s": 5}) is None
    assert runner.scratch_name("ci", {"top_k": 5}) == runner.scratch_name("ci", {"top_k": 5})
    assert runner.scratch_name("ci", {"top_k": 5}) != runner.scratch_name("ci", {"top_k": 6})
    with pytest.raises(runner.ConfigError, match="'run_name': set by the runner"):
        runner.scratch_name("ci", {"run_name": "mine"})


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_scratch_runs_and_profile_files_are_git_ignored_the_reference_results_are_not():
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0

    name = runner.scratch_name("sample", {"qid": "5a8b57f25542995d1e6f1371"})
    assert ignored(f"results/{name}/tables/07_case_steps_x.csv") and ignored(f"figures/{name}/07_case_x.png")
    assert ignored("results/mine-0a1b2c3d/llm_responses.jsonl.gz")
    assert not ignored("results/sample/tables/05_table6_recall.csv") and not ignored("figures/sample/x.png")
