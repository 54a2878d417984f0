"""The ``rehearsal`` profile is ``paper`` with only the model, the embedder, the reranker and
the number of questions changed, plus its documented CPU narrowing; it validates (no model is loaded)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kgir_lib.config import default_data_dir, load_config
from kgir_lib.runner import validate

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = default_data_dir()  # $KGIR_DATA_DIR, else ../shared/data beside the project, else data/samples

# what a rehearsal may change from the paper profile: model (and the servers/JSON mode that serve it), embedder, reranker, questions
ALLOWED = {"description", "llm_model", "llm_base_urls", "llm_json_mode", "embed_model", "embed_max_length",
           "reranker_model", "n_questions"}
# the CPU narrowing stated in the profile's comments
NARROWED = {"datasets": ["musique_train"], "extract_datasets": ["hotpotqa"], "extract_max_passages": 4,
            "lightrag_index": "suite_graph"}
URLS = ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for var in ("KGIR_PROFILE", "KGIR_DATA_DIR", "KGIR_FIGURES_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "results"))


def _diff(a, b) -> dict:
    da, db = a.to_dict(), b.to_dict()
    return {k: (da[k], db[k]) for k in da if k != "profile" and da[k] != db[k]}


def test_rehearsal_differs_from_paper_only_where_allowed():
    paper, reh = load_config("paper"), load_config("rehearsal")
    diff = _diff(paper, reh)
    assert set(diff) == ALLOWED | set(NARROWED), sorted(diff)
    assert reh.llm_model == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert (reh.llm_json_mode, reh.llm_base_urls) == ("llamacpp", URLS)
    assert (reh.embed_model, reh.reranker_model, reh.n_questions) == ("all-MiniLM-L6-v2", None, 2)
    for name, value in NARROWED.items():
        assert getattr(reh, name) == value, name


def test_rehearsal_keeps_the_paper_serving_and_budgets():
    paper, reh = load_config("paper"), load_config("rehearsal")
    assert reh.llm_backend == paper.llm_backend == "openai"
    for name in ("llm_max_concurrency", "llm_timeout_s", "llm_max_retries", "llm_retry_window_s",
                 "max_new_tokens", "top_k", "context_passages", "passage_chars", "max_iterations",
                 "ircot_max_steps", "iter_retgen_rounds"):
        assert getattr(reh, name) == getattr(paper, name), name
    budgets = [f for f in paper.to_dict() if f.startswith("max_tokens_")]
    assert budgets and all(reh.max_tokens(f[len("max_tokens_"):]) == paper.max_tokens(f[len("max_tokens_"):])
                           for f in budgets)
    assert reh.llm_max_concurrency == 64


def test_every_difference_is_stated_in_the_profile_comments():
    text = (ROOT / "kgir_lib" / "profiles" / "rehearsal.yaml").read_text()
    comments = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
    for name in (ALLOWED - {"description", "llm_base_urls"}) | set(NARROWED):
        assert name in comments, name


@pytest.mark.skipif(not (SHARED_DATA / "musique_train").is_dir(), reason="shared data not present")
def test_rehearsal_validates_with_run_time_urls(monkeypatch):
    monkeypatch.setenv("KGIR_DATA_DIR", str(SHARED_DATA))  # the samples the skip condition found (a fresh clone has
    # no ../shared beside it: its samples are named by KGIR_DATA_DIR, which the fixture above clears)
    params = {"llm_base_urls": ["http://127.0.0.1:40001/v1", "http://127.0.0.1:40002/v1"],
              "datasets": ["musique_train", "hotpotqa"]}  # as scripts/rehearsal.sh passes them to notebook 01
    lines = validate("rehearsal", params)
    assert any("musique_train" in line for line in lines) and any("hotpotqa" in line for line in lines)
    assert validate("rehearsal")[0].startswith("profile rehearsal")


def test_rehearsal_script_parses():
    script = ROOT / "scripts" / "rehearsal.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "--profile rehearsal" in text and "trap cleanup EXIT" in text
    assert 'source "$ROOT/scripts/serve.sh"' in text  # the servers are started by the shared functions ...
    assert "--host 127.0.0.1" in (ROOT / "scripts" / "serve.sh").read_text()  # ... on the loopback only
