"""The public API keeps its own cache, outside the repository: what a user indexes never reaches a tracked file.

The probe that found it: ``KGIRPipeline("sample").index([...a private memo...])`` wrote its calls into
``results/sample/cache/``, and the runner's next export (``--only 02 --regenerate``) put the memo's triple into the
committed ``results/sample/llm_responses.jsonl.gz``. Here a marker passage is indexed through the API with a scripted
backend (no model), then the profile's export path runs, and every tracked file is searched for the marker."""
from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import kgir_lib.llm as llm_module
from kgir_lib import KGIRPipeline
from kgir_lib.config import PROJECT_ROOT, load_config
from kgir_lib.config.fields import api_cache_dir
from kgir_lib.llm import ScriptedBackend
from kgir_lib.llm.response_log import LOG_NAME, export_run_cache, sync_run_cache

from conftest import SHARED_DATA, BagOfWordsEncoder

MARKER = "Blueheron" + "secret"  # built, so that this file, itself tracked, does not hold it
MEMO = [("Memo", f"{MARKER} Memo: the merger code is kept in the blue drawer.")]


def extract(req) -> str:
    return f"{MARKER} Memo | is | the merger code" if req.prompt == "kg_extract" else "unknown"


def tracked(folder: str) -> list:
    """The files git tracks under ``folder`` of the project, relative to the project."""
    out = subprocess.run(["git", "ls-files", "-z", folder], cwd=PROJECT_ROOT, capture_output=True, check=True)
    return [name for name in out.stdout.decode().split("\0") if name]


def holds_marker(path: Path) -> bool:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    return MARKER.encode() in data


@pytest.fixture
def scripted_profile(monkeypatch):
    """The profile's own LLM replaced by a scripted backend (the API builds it with build_llm, as a user's does)."""
    monkeypatch.setattr(llm_module, "build_backend", lambda cfg, script=None: ScriptedBackend(extract, cfg.llm_model))


def copy_of_the_profile_run(tmp_path: Path, profile: str = "sample") -> tuple:
    """A results folder holding a copy of every tracked file of ``results/<profile>/``; its files and bytes."""
    names = [n for n in tracked(f"results/{profile}")]
    assert f"results/{profile}/{LOG_NAME}" in names
    results = tmp_path / "results"
    for name in names:
        dst = tmp_path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PROJECT_ROOT / name, dst)
    return results, {name: (tmp_path / name).read_bytes() for name in names}


def test_an_indexed_passage_reaches_no_tracked_file_through_the_export_path(tmp_path, monkeypatch, scripted_profile):
    results, before = copy_of_the_profile_run(tmp_path)
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(results))
    monkeypatch.setenv("KGIR_CACHE_DIR", str(tmp_path / "api"))
    rag = KGIRPipeline("sample", encoder=BagOfWordsEncoder()).index(MEMO)
    assert any(MARKER in t.head for t in rag.workspace.kg.triples)
    assert rag.cfg.run_dir == tmp_path / "api" / "sample"
    own = tmp_path / "api" / "sample" / "cache" / "llm.sqlite"
    with sqlite3.connect(own) as con:  # the pipeline's own cache holds the call, and the committed log's rows
        texts = [row[0] for row in con.execute("SELECT text FROM calls")]
    assert sum(MARKER in t for t in texts) == 1 and len(texts) > 1000
    cfg = load_config("sample")  # what the runner does around every notebook of the profile
    sync_run_cache(cfg)
    export_run_cache(cfg)
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert [p for p in results.rglob("*") if p.is_file() and holds_marker(p)] == []


def test_only_use_profile_cache_writes_into_the_profile_run_and_then_the_export_carries_it(tmp_path, monkeypatch,
                                                                                        scripted_profile):
    """The check above can fail: asked explicitly, the pipeline writes into the profile's cache, and the export
    carries the marker into the response log."""
    results, _ = copy_of_the_profile_run(tmp_path)
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(results))
    monkeypatch.setenv("KGIR_CACHE_DIR", str(tmp_path / "api"))
    KGIRPipeline("sample", encoder=BagOfWordsEncoder(), use_profile_cache=True).index(MEMO)
    export_run_cache(load_config("sample"))
    assert holds_marker(results / "sample" / LOG_NAME) and not (tmp_path / "api").exists()


def test_the_cache_folder_is_the_parameter_else_the_environment_else_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("KGIR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert api_cache_dir() == tmp_path / "xdg" / "kgir" / "api"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert api_cache_dir() == tmp_path / "home" / ".cache" / "kgir" / "api"
    monkeypatch.setenv("KGIR_CACHE_DIR", str(tmp_path / "env"))
    assert api_cache_dir() == tmp_path / "env" and api_cache_dir(tmp_path / "given") == tmp_path / "given"
    rag = KGIRPipeline("sample", cache_dir=tmp_path / "given", llm=object())
    assert rag.cfg.run_dir == tmp_path / "given" / "sample"
    with pytest.raises(ValueError, match=r"parameter 'cache_dir': .*results is the results folder"):
        KGIRPipeline("sample", cache_dir=PROJECT_ROOT / "results")


SCRIPT = f"""
import sys
sys.path.insert(0, "tests")
from conftest import BagOfWordsEncoder  # no encoder model: the memo's embeddings are the test's own
import kgir_lib.llm as llm_module
from kgir_lib import KGIRPipeline
from kgir_lib.llm import ScriptedBackend

def extract(req):
    return {MARKER!r} + " Memo | is | the merger code" if req.prompt == "kg_extract" else "unknown"

llm_module.build_backend = lambda cfg, script=None: ScriptedBackend(extract, cfg.llm_model)
rag = KGIRPipeline("sample", encoder=BagOfWordsEncoder()).index({MEMO!r})
print(sum({MARKER!r} in t.head for t in rag.workspace.kg.triples))
"""


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "musique").is_dir(), reason="shared data not present")
def test_a_clean_copy_indexes_through_the_api_then_regenerates_and_no_tracked_file_holds_the_marker(tmp_path):
    """The probe as a user runs it: in a copy of the tracked tree, the API indexes the memo with the profile's
    defaults, then ``runner --profile sample --only 02 --regenerate`` runs; the committed log is unchanged and the
    marker is in no tracked file."""
    repo = tmp_path / "repo"
    for name in tracked("."):
        if (PROJECT_ROOT / name).is_file():
            dst = repo / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / name, dst)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "copy"], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("KGIR_RESULTS_DIR", "KGIR_FIGURES_DIR", "KGIR_PROFILE")}
    env.update(PYTHONPATH=str(repo), KGIR_DATA_DIR=str(SHARED_DATA), KGIR_CACHE_DIR=str(tmp_path / "api"))
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and done.stdout.split()[-1] == "1", done.stderr[-3000:]
    run = subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "sample", "--only", "02",
                          "--regenerate"], cwd=repo, env=env, capture_output=True, text=True, timeout=3000)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    status = subprocess.run([*git, "status", "--porcelain", "--", f"results/sample/{LOG_NAME}"], capture_output=True,
                            text=True, check=True)
    assert status.stdout == ""
    names = subprocess.run([*git, "ls-files", "-z"], capture_output=True, check=True).stdout.decode().split("\0")
    assert [n for n in names if n and (repo / n).is_file() and holds_marker(repo / n)] == []
