"""Parameters reach every notebook's config: open_notebook in process, and two notebooks through the runner."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from kgir_lib import report
from kgir_lib.config import ConfigError, load_config
from kgir_lib.notebook.opening import config_params, open_notebook

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def env_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGIR_FIGURES_DIR", str(tmp_path / "figures"))
    return tmp_path


def test_config_params_reads_every_field_and_the_overrides_dict():
    ns = {"profile": "ci", "top_k": 5, "datasets": None, "n_boot": 3, "pd": object(),
          "config_overrides": {"llm_model": "X", "ngram_threshold": None}}
    assert config_params(ns) == {"top_k": 5, "llm_model": "X"}
    with pytest.raises(ConfigError, match="'top_k' given twice"):
        config_params({"top_k": 5, "config_overrides": {"top_k": 6}})
    with pytest.raises(ConfigError, match="config_overrides"):
        config_params({"config_overrides": ["top_k"]})


def test_open_notebook_applies_any_field_writes_the_config_and_names_the_model(env_dirs, capsys):
    # as papermill leaves it: the parameters cell's names, plus an injected field it does not declare
    ns = {"profile": "ci", "config_overrides": {"llm_max_retries": 1}, "datasets": None, "top_k": 5,
          "llm_model": "Some-Model-7B", "kg2rag_budget": 4}
    cfg, llm = open_notebook("05_eval", ns, llm=False)
    assert llm is None
    assert (cfg.top_k, cfg.llm_model, cfg.kg2rag_budget, cfg.llm_max_retries) == (5, "Some-Model-7B", 4, 1)
    written = yaml.safe_load((env_dirs / "results" / "ci" / "config" / "05_eval.yaml").read_text())
    assert written["top_k"] == 5 and written["llm_model"] == "Some-Model-7B" and written["kg2rag_budget"] == 4
    assert written["datasets"] == load_config("ci").datasets  # None keeps the profile's value
    out = capsys.readouterr().out
    assert "profile 'ci'" in out and "05_eval.yaml" in out


def test_open_notebook_builds_the_llm_and_prints_its_caveat(env_dirs, capsys):
    cfg, llm = open_notebook("07_case_study", {"profile": "ci"}, llm_backend="openai",
                             llm_base_urls=["http://127.0.0.1:9/v1"], llm_model="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M")
    assert llm is not None and "Qwen2.5-Coder-1.5B" in llm.model_id
    out = capsys.readouterr().out
    assert "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M" in out and "1.5 B-parameter" in out
    assert "not a reproduction of the paper" in out and "SmolLM2" not in out


@pytest.mark.parametrize("model, backend, expect, absent", [
    ("Qwen2.5-Coder-0.5B-Instruct-Q4_K_M", "llamacpp", "0.5 B-parameter", "SmolLM2"),
    ("SmolLM2-135M-Instruct-Q4_1", "llamacpp", "135 M-parameter", "Qwen2.5-Coder"),
    ("Qwen/Qwen2.5-72B-Instruct", "openai", "paper's reader for Table 4", "small model"),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "openai", "paper's reader for Table 5", "small model"),
    ("my-own-model", "openai", "my-own-model", "SmolLM2"),
])
def test_model_note_names_the_configured_model(model, backend, expect, absent):
    extra = {"llm_base_urls": ["http://127.0.0.1:9/v1"]} if backend == "openai" else {}
    cfg = load_config("ci", llm_model=model, llm_backend=backend, **extra)
    note = report.model_note(cfg)
    assert model in note and expect in note and absent not in note
    assert model in report.model_note(cfg, short=True)


def _opening_only(src: Path, dest: Path) -> None:
    """The notebook up to and including its opening call (parameters cell kept): cheap to execute."""
    nb = nbformat.read(src, as_version=4)
    end = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "open_notebook(" in c.source)
    nb.cells = nb.cells[:end + 1]
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    nbformat.write(nb, dest / src.name)


@pytest.mark.notebooks
def test_runner_parameters_reach_every_notebook_config(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    for name in ("02_index", "05_eval"):
        _opening_only(REPO / "notebooks" / f"{name}.ipynb", nbs)
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs"),
           "MPLBACKEND": "Agg"}
    env.pop("KGIR_PROFILE", None)
    out = subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs),
                          "--no-server-check",  # the openai URL below is never called: no server to check
                          "-p", "top_k", "5", "-p", "llm_model", "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M",
                          "-p", "llm_backend", "openai", "-p", "llm_base_urls", "[http://127.0.0.1:9/v1]",
                          "-p", "kg2rag_budget", "4", "-p", "methods", "[naive_rag, kgir]"],
                         cwd=REPO, env=env, text=True, capture_output=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    run_dir = Path(next(x for x in out.stdout.splitlines() if x.startswith("results: "))[len("results: "):])
    assert run_dir.parent == tmp_path / "results" and run_dir.name.startswith("ci-")  # a scratch run
    for name in ("02_index", "05_eval"):
        written = yaml.safe_load((run_dir / "config" / f"{name}.yaml").read_text())
        assert written["top_k"] == 5, name
        assert written["llm_model"] == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", name
        assert written["llm_backend"] == "openai" and written["kg2rag_budget"] == 4, name
        assert written["profile"] == "ci" and written["n_questions"] == load_config("ci").n_questions
    executed = nbformat.read(run_dir / "notebooks" / "05_eval.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M" in text and "SmolLM2" not in text
    assert "methods (2): Naive RAG, KGIR-RAG" in text  # a notebook-only parameter reaches it too
