"""No secret is written anywhere a run writes: a recognisable fake key, set in the environment variable the
config names, is grepped for in every file of the run and in the runner's output, on each path that used to
leak it (a 401 echoing the Authorization header, a URL with user:key@host, a -p value that is not YAML)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from _warm_child import WarmPython
from fake_server import make_fake  # noqa: F401  (fixture)
from _probe import probe_notebook
from kgir_lib.config import ConfigError, load_config, start_run

REPO = Path(__file__).resolve().parents[1]
FAKE_KEY = "sk-kgirtest-Zq7RQ8wX3vN5pL2m"
OTHER_KEY = "sk-kgirother-Hn4Kd9Wq2Lp6Rt3Y"  # set in no variable: only URL masking hides it
MODEL = "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"  # the ci profile's llm_model, listed by the fake server

PROBE = """
from kgir_lib.llm import ChatRequest
from kgir_lib.notebook.opening import open_notebook
cfg, llm = open_notebook("00_probe", globals())
llm.complete([ChatRequest.chat(None, "Say hi.", max_tokens=4)])
"""


def run(tmp_path: Path, *args: str, warm: Optional[WarmPython] = None) -> subprocess.CompletedProcess:
    """``python -m kgir_lib.runner --profile ci ARGS`` with the fake key in the environment: a subprocess, or a
    child forked from ``warm`` (the same process boundary: all it writes on stdout and stderr is seen)."""
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs"),
           "KGIR_TEST_KEY": FAKE_KEY, "KGIR_LLM_API_KEY": FAKE_KEY}
    env.pop("KGIR_PROFILE", None)
    if warm is not None:
        return warm.run("kgir_lib.runner", ["--profile", "ci", *args], env, REPO)
    return subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", *args],
                          cwd=REPO, env=env, text=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def warm():
    """The runner's refusals, each in a child of one Python that imported what validation imports (about 0.5 s of
    CPU a run otherwise)."""
    python = WarmPython("kgir_lib.config", "kgir_lib.data", "kgir_lib.data_sources", "kgir_lib.registry")
    yield python
    python.close()


def leaks(tmp_path: Path, out: subprocess.CompletedProcess) -> list:
    """Every file under ``tmp_path`` (results, figures, notebooks, logs) and the runner's output holding the key."""
    found = [str(p) for p in tmp_path.rglob("*") if p.is_file() and FAKE_KEY.encode() in p.read_bytes()]
    return found + [name for name, text in (("stdout", out.stdout), ("stderr", out.stderr)) if FAKE_KEY in text]


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_a_401_that_echoes_the_authorization_header_leaks_nowhere(make_fake, tmp_path):
    server = make_fake(plan=["echo401"], models=[MODEL])
    nbs = probe_notebook(tmp_path / "nbs", PROBE)
    out = run(tmp_path, "--notebooks-dir", str(nbs), "-p", "llm_backend", "openai", "-p", "llm_base_urls",
              f"[{server.url}]", "-p", "llm_api_key_env", "KGIR_TEST_KEY", "-p", "llm_json_mode", "none",
              "-p", "llm_max_retries", "0")
    assert out.returncode == 1, out.stdout + out.stderr
    assert any(h.get("Authorization") == f"Bearer {FAKE_KEY}" for h, _, _ in server.seen)  # sent, and echoed
    assert "HTTP 401" in out.stderr and "check the API key in $KGIR_TEST_KEY" in out.stderr
    # a failed notebook's output is its partial copy; the last good output (none here) is left as it was
    notebook = next((tmp_path / "results").rglob("00_probe.partial.ipynb"))
    assert "HTTP 401" in notebook.read_text() and "***" in notebook.read_text()
    assert leaks(tmp_path, out) == []


@pytest.mark.parametrize("args", [
    ["-p", "llm_backend", "openai", "-p", "llm_base_urls", f"[http://user:{FAKE_KEY}@127.0.0.1:9/v1]"],
    ["-p", "llm_base_urls", f"http://{FAKE_KEY}@127.0.0.1:9/v1"],
    ["-p", "llm_base_urls", f"[user:{OTHER_KEY}@127.0.0.1:9/v1]"],   # no scheme, a key in no variable
    ["-p", "llm_base_urls", f"[http://user:{OTHER_KEY}@127.0.0.1:9/v1]"],
    ["-p", "llm_api_key", "{" + FAKE_KEY],          # not YAML, and not a field
    ["-p", "api_token", "[" + FAKE_KEY],
    ["-p", "llm_api_key_env", "{" + FAKE_KEY],
    ["-p", "llm_api_key_env", f"[{FAKE_KEY}]"],     # YAML, but not a variable name
    ["-p", "llm_api_key_env", "SKRELFOURUPPER0123456789"],   # a key in capitals: a valid name, but a key
])
def test_refused_parameters_never_echo_the_secret(tmp_path, args, warm):
    out = run(tmp_path, "--validate-only", *args, warm=warm)
    assert out.returncode == 2, out.stdout
    assert "error: parameter" in out.stderr and "Traceback" not in out.stderr
    assert leaks(tmp_path, out) == []
    assert "SKRELFOURUPPER0123456789" not in out.stdout + out.stderr
    assert OTHER_KEY not in out.stdout + out.stderr
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and OTHER_KEY.encode() in p.read_bytes()]


def test_a_key_pasted_as_the_variable_name_reaches_no_config_or_notebook(tmp_path, warm):
    """``-p llm_api_key_env SKRELFOURUPPER0123456789`` used to validate, be written to config/*.yaml and the output
    notebook, and run with no key and no warning; now the run stops before any notebook, naming the parameter."""
    secret = "SKRELFOURUPPER0123456789"
    nbs = probe_notebook(tmp_path / "nbs", "print('ran')")
    out = run(tmp_path, "--notebooks-dir", str(nbs), "-p", "llm_api_key_env", secret, warm=warm)
    assert out.returncode == 2 and "parameter 'llm_api_key_env'" in out.stderr and "looks like a key" in out.stderr
    assert [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()] == []
    assert secret not in out.stdout + out.stderr and not list((tmp_path / "results").rglob("*.ipynb"))


def test_a_url_with_credentials_never_reaches_a_config_dump(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="'llm_base_urls'.*user name or password") as exc:
        load_config("paper", llm_base_urls=[f"http://admin:{FAKE_KEY}@gpu-server:8000/v1"],
                    results_dir=str(tmp_path))
    assert FAKE_KEY not in str(exc.value)
    cfg = load_config("paper", llm_base_urls=["http://gpu-server:8000/v1"], results_dir=str(tmp_path))
    monkeypatch.setenv("KGIR_LLM_API_KEY", FAKE_KEY)
    assert FAKE_KEY not in start_run(cfg, "00_probe").read_text()
