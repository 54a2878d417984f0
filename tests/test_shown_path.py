"""Paths in stored notebook outputs are shown relative to the project or to a KGIR_*_DIR, never absolute."""
from __future__ import annotations

from pathlib import Path

from kgir_lib.config import PROJECT_ROOT
from kgir_lib.report import ShownPath, shown


def test_paths_inside_the_project_are_relative(monkeypatch):
    monkeypatch.delenv("KGIR_RESULTS_DIR", raising=False)
    p = PROJECT_ROOT / "results" / "sample" / "tables" / "x.csv"
    assert shown(p) == "results/sample/tables/x.csv"
    assert repr(ShownPath(p)) == "results/sample/tables/x.csv"
    assert ShownPath(p).name == "x.csv" and ShownPath(p) == p  # still a path


def test_paths_under_a_results_dir_or_home_name_it_not_the_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "res"))
    assert shown(tmp_path / "res" / "sample" / "config" / "03.yaml") == "$KGIR_RESULTS_DIR/sample/config/03.yaml"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert shown(tmp_path / "home" / ".cache" / "kgir") == "~/.cache/kgir"
    assert shown("/elsewhere/x") == str(Path("/elsewhere/x"))
