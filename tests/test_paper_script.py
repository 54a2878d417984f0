"""scripts/paper.sh: the README's paper-scale steps in one command. Fast: it stops on too few questions
before starting a server. Slow: the whole path on the rehearsal profile, with `python -m llama_cpp.server`
standing in for vLLM (2 questions, real LLM calls): data check, server start, wait, main job, server stop."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_DATA
from _probe import probe_notebook

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "paper.sh"
needs_data = pytest.mark.skipif(not (SHARED_DATA / "musique").is_dir(), reason="shared data not present")

PROBE = """
import json
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.llm import ChatRequest
from kgir_lib.notebook.opening import open_notebook
cfg, llm = open_notebook("00_probe", globals())
ds = load_dataset(cfg.datasets[0], cfg.data_path)
qs = sample_questions(ds.questions, cfg.n_questions, cfg.seed)
out = llm.generate([ChatRequest.chat("Answer in a few words.", q.question, max_tokens=16) for q in qs], stage="reader")
cfg.path("probe.json").write_text(json.dumps({"answers": [r.text for r in out], "urls": cfg.llm_base_urls,
                                              "model": llm.model_id, "questions": len(qs)}))
"""


def script(tmp_path: Path, *args: str, timeout: int = 120, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs"),
            "KGIR_PYTHON": sys.executable, "KGIR_NO_DOWNLOAD": "1", "KGIR_DATA_DIR": str(SHARED_DATA), **env}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, env=full, text=True, capture_output=True,
                          timeout=timeout)


def test_the_script_parses_and_reuses_the_shared_server_functions():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    assert 'source "$ROOT/scripts/serve.sh"' in text
    assert "--tensor-parallel-size" in (REPO / "scripts" / "serve.sh").read_text()
    assert 'source "$ROOT/scripts/serve.sh"' in (REPO / "scripts" / "rehearsal.sh").read_text()


@needs_data
def test_too_few_questions_stop_before_any_server_starts(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    out = script(tmp_path, KGIR_PROFILE="paper", TMPDIR=str(temp))
    assert out.returncode == 3, out.stdout + out.stderr
    assert "kgir_lib.data_sources full" in out.stderr and "KGIR_NO_DOWNLOAD=1: stopping" in out.stdout
    assert "starting" not in out.stdout
    assert list(temp.iterdir()) == []  # its log folder is removed (it used to leave an empty one per call)


@needs_data
def test_a_second_extraction_model_without_a_server_or_gpus_for_it_stops_before_starting_anything(tmp_path):
    profile = tmp_path / "two_models.yaml"
    profile.write_text("extends: rehearsal\nkg_llm_model: Qwen2.5-Coder-0.5B-Instruct-Q4_K_M\n"
                       "kg_llm_base_urls: ['http://127.0.0.1:9/v1']\n")
    out = script(tmp_path, KGIR_PROFILE=str(profile), KGIR_SERVER="llamacpp")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "KGIR_KG_LLM_URLS" in out.stdout and "KGIR_KG_TENSOR_PARALLEL" in out.stdout
    assert "starting" not in out.stdout


@needs_data
def test_a_server_url_with_a_user_and_key_is_echoed_masked_and_refused_before_any_network(tmp_path):
    """KGIR_LLM_URLS with ``user:key@`` used to be printed as given; now paper.sh prints it with the credentials
    masked (kgir_lib.redact), and the runner refuses it when it reads its parameters, before any request."""
    fake = "sk-kgirpaper-Q8wX3vN5pL2mZq7R"  # in no environment variable: only the masking can hide it
    urls = f"http://user:{fake}@127.0.0.1:9/v1,user:{fake}@127.0.0.1:10/v1"
    out = script(tmp_path, KGIR_PROFILE="rehearsal", KGIR_LLM_URLS=urls)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "paper.sh: using the running server(s) http://***@127.0.0.1:9/v1,***@127.0.0.1:10/v1" in out.stdout
    assert "holds a user name or password" in out.stderr or "is not an http(s) URL" in out.stderr, out.stderr
    assert fake not in out.stdout + out.stderr
    assert "starting" not in out.stdout and "serves" not in out.stdout  # no server started, none asked


@pytest.mark.slow
@needs_data
def test_the_rehearsal_profile_end_to_end_with_llama_cpp_server_standing_in_for_vllm(tmp_path):
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        pytest.skip("llama-cpp-python's server extra is not installed")
    nbs = probe_notebook(tmp_path / "nbs", PROBE)

    out = script(tmp_path, "--notebooks-dir", str(nbs), timeout=1500, KGIR_PROFILE="rehearsal",
                 KGIR_SERVER="llamacpp", KGIR_SERVER_THREADS="2", KGIR_SERVER_CTX="4096", KGIR_SERVER_TIMEOUT_S="300")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    up = re.search(r"server up: pid (\d+), (http://127\.0\.0\.1:\d+/v1)", out.stdout)
    assert up, out.stdout
    assert "LLM server " + up.group(2) + ": serves Qwen2.5-Coder-1.5B-Instruct-Q4_K_M" in out.stdout
    probe = json.loads((tmp_path / "results" / "rehearsal" / "probe.json").read_text())  # the profile's own dir
    assert probe["urls"] == [up.group(2)] and probe["model"] == "openai:Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert probe["questions"] == 2 and len(probe["answers"]) == 2 and all(a.strip() for a in probe["answers"])
    assert "stopping server main" in out.stdout
    with pytest.raises(ProcessLookupError):  # the server it started is gone
        os.kill(int(up.group(1)), 0)
