"""Before a run: the data must hold the questions the profile asks, and each openai server must serve the
configured model. The paper profile on the shared samples used to validate (84 musique questions for the
1000 it asks) and start on the wrong data without a word."""
from __future__ import annotations

import pytest

from fake_server import make_fake  # noqa: F401  (fixture)
from kgir_lib import runner
from kgir_lib.config import load_config
from kgir_lib.preflight import QuestionShortfall, ServerError, check_servers

from conftest import SHARED_DATA

needs_data = pytest.mark.skipif(not (SHARED_DATA / "musique").is_dir(), reason="shared data not present")


def main(capsys, *args) -> tuple:
    code = runner.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@needs_data
def test_the_paper_profile_on_the_samples_is_refused_naming_the_download(capsys):
    code, _, err = main(capsys, "--profile", "paper", "--validate-only", "--no-server-check")
    assert code == 3, err
    assert "musique holds 84" in err and "asks n_questions 1000" in err and "hotpotqa holds 84" in err
    assert "python -m kgir_lib.data_sources full --target data hotpotqa musique" in err
    assert "allow_fewer_questions" in err
    with pytest.raises(QuestionShortfall, match="study_n_questions 500"):
        runner.validate("ci", {"study_n_questions": 500, "allow_fewer_questions": False})


@needs_data
@pytest.mark.parametrize("profile", ["sample", "ci", "local", "rehearsal"])
def test_the_cpu_profiles_validate_on_the_samples(capsys, profile):
    code, out, err = main(capsys, "--profile", profile, "--validate-only", "--no-server-check")
    assert code == 0, err
    cfg = load_config(profile)
    assert ("fewer questions than asked" in out) == (profile == "local")  # local: 84 of 100 on hotpotqa, said
    assert cfg.allow_fewer_questions == (profile == "local")


@needs_data
def test_allow_fewer_questions_lets_a_run_use_what_is_there(capsys):
    code, out, err = main(capsys, "--profile", "ci", "--validate-only", "-p", "n_questions", "500",
                          "-p", "allow_fewer_questions", "true")
    assert code == 0, err
    assert "fewer questions than asked (allow_fewer_questions): hotpotqa 84 of 500, musique_train 100 of 500" in out


def test_a_server_that_serves_the_model_passes(make_fake, monkeypatch):
    server = make_fake(models=["Qwen/Qwen2.5-72B-Instruct", "other"])
    cfg = load_config("paper", llm_base_urls=[server.url])
    monkeypatch.setenv(cfg.llm_api_key_env, "sk-test-value")
    assert check_servers(cfg) == [f"LLM server {server.url}: serves Qwen/Qwen2.5-72B-Instruct"]
    assert server.gets[0][1] == "/v1/models"
    monkeypatch.delenv(cfg.llm_api_key_env)
    assert check_servers(cfg)[-1].startswith(f"note: ${cfg.llm_api_key_env} (llm_api_key_env) is not set: requests "
                                             f"go out without an API key")


def test_a_server_with_another_model_or_none_is_a_clear_error(make_fake):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = make_fake(models=["meta-llama/Meta-Llama-3-8B-Instruct"])
    with pytest.raises(ServerError, match=r"serves \['meta-llama/Meta-Llama-3-8B-Instruct'\], not llm_model "
                                          r"'Qwen/Qwen2.5-72B-Instruct'"):
        check_servers(load_config("paper", llm_base_urls=[server.url]))
    dead = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ServerError, match=f"LLM server {dead}: GET {dead}/models failed.*--no-server-check"):
        check_servers(load_config("paper", llm_base_urls=[dead]), timeout_s=2)
    assert check_servers(load_config("ci")) == []  # llama.cpp in process: no server


@needs_data
def test_the_runner_checks_servers_even_for_validate_only(capsys, make_fake, monkeypatch):
    server = make_fake(models=["another-model"])
    args = ("--profile", "rehearsal", "--validate-only", "-p", "llm_base_urls", f"[{server.url}]")
    code, _, err = main(capsys, *args)
    assert code == 2 and "not llm_model 'Qwen2.5-Coder-1.5B-Instruct-Q4_K_M'" in err
    code, out, err = main(capsys, *args, "--no-server-check")
    assert code == 0, err
    monkeypatch.setenv("KGIR_LLM_CACHE_ONLY", "")  # (restored afterwards: --regenerate sets it in this process)
    code, out, err = main(capsys, *args, "--regenerate")  # cache only: no server is called, none is checked
    assert code == 0, err


def test_a_second_extraction_model_needs_its_own_server_to_serve_it(make_fake, monkeypatch):
    monkeypatch.setenv("KGIR_LLM_API_KEY", "sk-test-value")
    reader, extractor = make_fake(models=["meta-llama/Meta-Llama-3-8B-Instruct"]), make_fake(models=["other"])
    cfg = load_config("paper_llama3", llm_base_urls=[reader.url], kg_llm_base_urls=[extractor.url])
    with pytest.raises(ServerError, match=r"not kg_llm_model 'Qwen/Qwen2.5-72B-Instruct'"):
        check_servers(cfg)
    extractor.models.append("Qwen/Qwen2.5-72B-Instruct")
    assert check_servers(cfg) == [f"LLM server {reader.url}: serves meta-llama/Meta-Llama-3-8B-Instruct",
                                  f"LLM server {extractor.url}: serves Qwen/Qwen2.5-72B-Instruct"]
