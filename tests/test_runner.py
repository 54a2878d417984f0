"""The main-job runner: validation, exit codes, papermill parameters, outputs in the run directory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kgir_lib import runner

REPO = Path(__file__).resolve().parents[1]


def run(*args, tmp_path: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs")}
    env.pop("KGIR_PROFILE", None)
    return subprocess.run([sys.executable, "-m", "kgir_lib.runner", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=timeout)


def test_validate_only_ci(tmp_path):
    out = run("--profile", "ci", "--validate-only", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "profile ci:" in out.stdout
    assert "musique: 84 questions, 1471 passages" in out.stdout
    assert "hotpotqa: 84 questions, 840 passages" in out.stdout
    assert "musique_train: 100 questions, 1890 passages" in out.stdout
    assert not (tmp_path / "results" / "ci" / "notebooks").exists()


def test_bad_profile_exits_2_naming_it(tmp_path):
    out = run("--profile", "no_such_profile", tmp_path=tmp_path)
    assert out.returncode == 2
    assert "no_such_profile" in out.stderr and "Traceback" not in out.stderr


def test_bad_parameter_exits_2_naming_it(tmp_path):
    out = run("--profile", "ci", "-p", "top_k", "0", "--validate-only", tmp_path=tmp_path)
    assert out.returncode == 2 and "'top_k'" in out.stderr
    out = run("--profile", "ci", "-p", "no_field", "1", "--validate-only", tmp_path=tmp_path)
    assert out.returncode == 2 and "'no_field'" in out.stderr


def test_bad_data_dir_exits_2(tmp_path, monkeypatch):
    monkeypatch.setenv("KGIR_DATA_DIR", str(tmp_path / "nowhere"))
    out = run("--profile", "ci", "--validate-only", tmp_path=tmp_path)
    assert out.returncode == 2 and "nowhere" in out.stderr


def test_empty_notebooks_dir_runs_nothing(tmp_path):
    (tmp_path / "nbs").mkdir()
    out = run("--profile", "ci", "--notebooks-dir", str(tmp_path / "nbs"), tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "nothing to run" in out.stdout


def test_only_without_a_match_is_an_error(tmp_path):
    out = run("--profile", "ci", "--only", "99", tmp_path=tmp_path)
    assert out.returncode == 2 and "--only 99" in out.stderr


def _notebook(path: Path, body: str) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("profile = None\ntop_k = None")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# probe"), params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


PROBE = """
import json
from kgir_lib.config import load_config, start_run
cfg = load_config(profile, top_k=top_k)
start_run(cfg, "00_probe")
cfg.path("probe.json").write_text(json.dumps({"profile": cfg.profile, "top_k": cfg.top_k}))
"""


def test_runs_notebooks_in_order_with_parameters(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(nbs / "00_probe.ipynb", PROBE)
    _notebook(nbs / "01_fail.ipynb", "raise ValueError('scripted failure')")
    _notebook(nbs / "02_never.ipynb", "open('never_ran', 'w')")
    out = run("--profile", "ci", "-p", "top_k", "4", "--notebooks-dir", str(nbs), tmp_path=tmp_path)
    assert out.returncode == 1
    assert "01_fail.ipynb failed" in out.stderr and "scripted failure" in out.stderr
    run_dir = tmp_path / "results" / "ci"
    assert json.loads((run_dir / "probe.json").read_text()) == {"profile": "ci", "top_k": 4}
    assert (run_dir / "config" / "00_probe.yaml").exists()
    assert (run_dir / "notebooks" / "00_probe.ipynb").exists()   # executed copies, not the sources
    assert (run_dir / "notebooks" / "01_fail.ipynb").exists()    # partial output kept
    assert not (run_dir / "notebooks" / "02_never.ipynb").exists()
    assert not (nbs / "never_ran").exists()
    executed = nbformat.read(str(run_dir / "notebooks" / "00_probe.ipynb"), as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)

    (nbs / "01_fail.ipynb").unlink()
    (nbs / "02_never.ipynb").unlink()
    out = run("--profile", "ci", "--notebooks-dir", str(nbs), "--only", "00", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "done: 1 notebooks" in out.stdout
    assert (run_dir / "timings.tsv").read_text().startswith("00_probe.ipynb\t")


def test_notebook_discovery(tmp_path):
    for name in ("02_b.ipynb", "01_a.ipynb", "notes.ipynb", "1_bad.ipynb"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in runner.notebooks(folder=tmp_path)] == ["01_a.ipynb", "02_b.ipynb"]
    assert [p.name for p in runner.notebooks(["02"], tmp_path)] == ["02_b.ipynb"]


def test_validate_in_process():
    lines = runner.validate("ci", {"datasets": ["hotpotqa"]})
    assert lines[0].startswith("profile ci:") and lines[-1] == "  hotpotqa: 84 questions, 840 passages"
    with pytest.raises(Exception, match="'datasets'"):
        runner.validate("ci", {"datasets": 5})
