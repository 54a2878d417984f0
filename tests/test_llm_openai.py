"""The OpenAI-compatible backend: against a real ``python -m llama_cpp.server`` started here, and a small
local fake server (stdlib ``http.server``) for retries, API key, replicas, concurrency and error paths."""
from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kgir_lib.config import load_config, start_run
from fake_server import fake, make_fake  # noqa: F401  (fixtures)
from kgir_lib.llm import LLM, ChatRequest, LLMCache, LLMError, OpenAIBackend, build_backend, build_llm, extract_json

SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- the real llama.cpp server
@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """``python -m llama_cpp.server`` with the embedded SmolLM2 GGUF on a free port; stopped at the end."""
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama-cpp-python's server extra is not installed (missing {missing}): "
                    f"pip install 'llama-cpp-python[server]==0.3.36'")
    from kgir_lib.llm import smollm2_gguf_path

    try:
        model = smollm2_gguf_path()
    except LLMError as exc:
        pytest.skip(str(exc))
    port = free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "2", "--verbose", "False"]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"llama_cpp.server did not answer /v1/models within 180 s:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def backend(urls, **kw) -> OpenAIBackend:
    kw.setdefault("max_concurrency", 1)
    kw.setdefault("timeout_s", 120)
    kw.setdefault("max_retries", 1)
    kw.setdefault("json_mode", "llamacpp")
    kw.setdefault("backoff_s", 0.01)
    return OpenAIBackend("SmolLM2-135M-Instruct", urls, **kw)


QA = [ChatRequest.chat("Answer in a few words.", q, max_tokens=12)
      for q in ("What is the capital of France?", "Who wrote Hamlet?", "What colour is the sky?")]


@pytest.mark.slow
def test_real_server_batch_texts_and_tokens(llama_server, tmp_path):
    llm = LLM(backend([llama_server]), LLMCache(tmp_path / "c.sqlite"), progress=False)
    out = llm.generate(QA, stage="qa")
    assert len(out) == 3
    for r in out:
        assert isinstance(r.text, str) and r.text.strip()
        assert r.prompt_tokens > 10 and 0 < r.completion_tokens <= 12
        assert not r.cached and r.seconds > 0
    again = llm.generate(QA, stage="qa")
    assert all(r.cached for r in again) and [r.text for r in again] == [r.text for r in out]
    u = llm.usage.stages["qa"]
    assert (u.calls, u.cache_hits, u.failures) == (6, 3, 0)
    assert u.prompt_tokens == 2 * sum(r.prompt_tokens for r in out)


@pytest.mark.slow
def test_real_server_json_mode(llama_server):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    req = ChatRequest.chat("Reply in JSON.", "What is the capital of France?", max_tokens=24, json_schema=schema)
    got = []
    backend([llama_server]).run([req], lambda i, r: got.append(r))
    parsed = extract_json(got[0].text)
    assert isinstance(parsed, dict) and isinstance(parsed.get("answer"), str), got[0].text


@pytest.mark.slow
def test_real_server_through_build_llm(llama_server, tmp_path):
    cfg = load_config("ci", llm_backend="openai", llm_base_urls=[llama_server], llm_json_mode="llamacpp",
                      results_dir=str(tmp_path), max_new_tokens=8)
    llm = build_llm(cfg, progress=False)
    assert llm.model_id == f"openai:{cfg.llm_model}"
    texts = llm.complete([ChatRequest.chat(None, "Say hello.", max_tokens=cfg.max_new_tokens)])
    assert texts[0].strip()


@pytest.mark.slow
def test_round_robin_over_a_real_and_a_fake_replica(llama_server, fake):
    b = backend([llama_server, fake.url])
    got = {}
    b.run(QA + [ChatRequest.chat(None, "Say hi.", max_tokens=4)], lambda i, r: got.__setitem__(i, r))
    assert len(fake.seen) == 2  # requests 1 and 3 went to the second base URL
    assert got[1].text.startswith("fake:") and got[3].text.startswith("fake:")
    assert not got[0].text.startswith("fake:") and not got[2].text.startswith("fake:")


# ---------------------------------------------------------------- the fake OpenAI-compatible server (tests/fake_server.py)
def run_all(b: OpenAIBackend, requests) -> list:
    got = {}
    b.run(requests, lambda i, r: got.__setitem__(i, r))
    return [got.get(i) for i in range(len(requests))]


def reqs(n: int, **kw) -> list:
    return [ChatRequest.chat("sys", f"q{i}", **kw) for i in range(n)]


def test_fake_server_roundtrip_and_request_body(fake):
    out = run_all(backend([fake.url + "/"], json_mode="none"), [ChatRequest.chat("s", "hello", max_tokens=5,
                                                                                 stop=("\n",), seed=3)])
    assert (out[0].text, out[0].prompt_tokens, out[0].completion_tokens) == ("fake: hello", 7, 3)
    headers, body, path = fake.seen[0]
    assert path == "/v1/chat/completions"
    assert body == {"model": "SmolLM2-135M-Instruct", "max_tokens": 5, "temperature": 0.0, "seed": 3,
                    "stop": ["\n"], "messages": [{"role": "system", "content": "s"},
                                                  {"role": "user", "content": "hello"}]}


SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


@pytest.mark.parametrize("mode, field, value", [
    ("llamacpp", "response_format", {"type": "json_object", "schema": SCHEMA}),
    ("vllm", "structured_outputs", {"json": SCHEMA}),
    ("openai", "response_format", {"type": "json_schema", "json_schema": {"name": "output", "schema": SCHEMA}}),
])
def test_json_mode_request_forms(fake, mode, field, value):
    run_all(backend([fake.url], json_mode=mode), [ChatRequest.chat(None, "x", json_schema=SCHEMA)])
    body = fake.seen[0][1]
    assert body[field] == value
    assert not {"guided_json", "response_format", "structured_outputs"} - {field} & set(body)


def test_json_mode_none_sends_no_schema(fake):
    run_all(backend([fake.url], json_mode="none"), [ChatRequest.chat(None, "x", json_schema=SCHEMA)])
    assert not {"guided_json", "response_format", "structured_outputs"} & set(fake.seen[0][1])


class FakeClock:
    """The backend's ``time`` in a test: a sleep is recorded and moves the clock on instead of waiting, so
    retry tests check the waits the backend asks for, not how long the machine took."""

    def __init__(self):
        self.offset, self.sleeps = 0.0, []

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def time(self) -> float:
        return time.time() + self.offset

    def perf_counter(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.offset += seconds


@pytest.fixture
def clock(monkeypatch):
    from kgir_lib.llm import backends, deadline

    c = FakeClock()
    monkeypatch.setattr(backends, "time", c)
    monkeypatch.setattr(deadline, "time", c)  # the per-request deadline reads the same clock
    return c


def test_retries_503_then_success(make_fake, clock):
    server = make_fake(plan=[503, 503])
    out = run_all(backend([server.url], max_retries=3, backoff_s=0.05), [ChatRequest.chat(None, "x")])
    assert out[0].text == "fake: x"
    assert len(server.seen) == 3
    # exponential backoff with up to +50 % jitter: 0.05, then 0.1
    assert len(clock.sleeps) == 2
    assert 0.05 <= clock.sleeps[0] <= 0.075 and 0.1 <= clock.sleeps[1] <= 0.15


def test_retries_on_timeout(make_fake):
    server = make_fake(plan=["timeout"])
    out = run_all(backend([server.url], max_retries=2, timeout_s=0.5), [ChatRequest.chat(None, "x")])
    assert out[0].text == "fake: x" and len(server.seen) == 2


def test_gives_up_after_max_retries(make_fake):
    server = make_fake(plan=[502] * 10)
    with pytest.raises(LLMError, match=r"after 3 attempts.*HTTP 502") as exc:
        run_all(backend([server.url], max_retries=2), [ChatRequest.chat(None, "x")])
    assert server.url in str(exc.value)
    assert len(server.seen) == 3


@pytest.mark.parametrize("status, hint", [(400, "refused"), (401, "KGIR_TEST_KEY"), (404, "/v1")])
def test_client_errors_are_not_retried(make_fake, status, hint):
    server = make_fake(plan=[status])
    with pytest.raises(LLMError, match=hint):
        run_all(backend([server.url], max_retries=3, api_key_env="KGIR_TEST_KEY"), [ChatRequest.chat(None, "x")])
    assert len(server.seen) == 1


def test_malformed_response_is_a_clear_error(make_fake):
    server = make_fake(plan=["garbage"])
    with pytest.raises(LLMError, match="not a chat completion.*proxy error"):
        run_all(backend([server.url]), [ChatRequest.chat(None, "x")])


def test_unreachable_server_fails_clearly_after_its_retries(clock):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with pytest.raises(LLMError) as exc:
        run_all(backend([url], max_retries=2, timeout_s=2), [ChatRequest.chat(None, "x")])
    msg = str(exc.value)
    assert "unreachable" in msg and url in msg and "llm_base_urls" in msg
    assert "after 3 attempts" in msg and "cannot connect" in msg
    assert len(clock.sleeps) == 2  # one backoff wait between each of the three attempts


def test_unreachable_through_llm_caches_nothing(make_fake, tmp_path):
    """A replica set where every URL is down: the error propagates out of LLM.generate, nothing is cached."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    llm = LLM(backend([url], max_retries=0), LLMCache(tmp_path / "c.sqlite"), progress=False)
    with pytest.raises(LLMError, match="unreachable"):
        llm.generate(reqs(3))
    assert len(llm.cache) == 0


def test_a_failing_server_keeps_the_answers_finished_before_it(make_fake, tmp_path):
    """Two answers arrive, then the server fails for good: the two are cached, the rerun asks only for the rest."""
    server = make_fake(plan=["ok", "ok"] + [503] * 20)
    llm = LLM(backend([server.url], max_retries=0, max_concurrency=1), LLMCache(tmp_path / "c.sqlite"),
              progress=False)
    with pytest.raises(LLMError, match="HTTP 503"):
        llm.generate(reqs(4))
    assert len(llm.cache) == 2
    fresh = make_fake()
    llm2 = LLM(backend([fresh.url]), LLMCache(tmp_path / "c.sqlite"), progress=False)
    assert [r.text for r in llm2.generate(reqs(4))] == [f"fake: q{i}" for i in range(4)]
    assert sorted(b["messages"][-1]["content"] for _, b, _ in fresh.seen) == ["q2", "q3"]


def test_replicas_share_the_load(make_fake):
    a, b = make_fake(), make_fake()
    out = run_all(backend([a.url, b.url], max_concurrency=4), reqs(10))
    assert [r.text for r in out] == [f"fake: q{i}" for i in range(10)]
    assert len(a.seen) == len(b.seen) == 5


def test_a_dead_replica_is_skipped_by_the_retry(make_fake):
    live = make_fake()
    dead = f"http://127.0.0.1:{free_port()}/v1"
    out = run_all(backend([dead, live.url], max_retries=1), reqs(4))
    assert [r.text for r in out] == [f"fake: q{i}" for i in range(4)]


def test_api_key_from_the_environment_only(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("KGIR_TEST_KEY", "sk-test-123")
    cfg = load_config("paper", llm_base_urls=[fake.url], llm_api_key_env="KGIR_TEST_KEY",
                      results_dir=str(tmp_path))
    b = build_backend(cfg)
    run_all(b, [ChatRequest.chat(None, "x")])
    headers = {k.lower(): v for k, v in fake.seen[0][0].items()}
    assert headers["authorization"] == "Bearer sk-test-123"
    assert "sk-test-123" not in json.dumps(cfg.to_dict())
    assert "sk-test-123" not in start_run(cfg, "00_key").read_text()
    assert "sk-test-123" not in json.dumps(vars(b), default=str)  # not kept on the backend object itself


def test_no_key_no_authorization_header(fake, monkeypatch):
    monkeypatch.delenv("KGIR_TEST_KEY", raising=False)
    run_all(backend([fake.url], api_key_env="KGIR_TEST_KEY"), [ChatRequest.chat(None, "x")])
    assert "authorization" not in {k.lower() for k in fake.seen[0][0]}


@pytest.mark.parametrize("limit", [1, 4])
def test_max_concurrency_requests_in_flight(make_fake, limit):
    server = make_fake(delay=0.25)
    out = run_all(backend([server.url], max_concurrency=limit), reqs(3 * limit))
    assert [r.text for r in out] == [f"fake: q{i}" for i in range(3 * limit)]
    assert server.max_in_flight == limit


def test_llm_generate_keeps_order_with_concurrency(make_fake, tmp_path):
    server = make_fake(delay=0.05)
    llm = LLM(backend([server.url], max_concurrency=6), LLMCache(tmp_path / "c.sqlite"), progress=False)
    out = llm.generate(reqs(18), stage="par")
    assert [r.text for r in out] == [f"fake: q{i}" for i in range(18)]
    assert len(llm.cache) == 18
    llm.generate(reqs(18), stage="par")
    assert len(server.seen) == 18


def test_needs_a_base_url():
    with pytest.raises(LLMError, match="llm_base_urls"):
        OpenAIBackend("m", [])


# ---------------------------------------------------------------- a misbehaving server
def test_500_is_retried(make_fake):
    server = make_fake(plan=[500, 500])
    out = run_all(backend([server.url], max_retries=3), [ChatRequest.chat(None, "x")])
    assert out[0].text == "fake: x" and len(server.seen) == 3


def test_429_retry_after_is_honoured(make_fake, clock):
    server = make_fake(plan=[("429", 1)])
    out = run_all(backend([server.url], max_retries=2, retry_window_s=10), [ChatRequest.chat(None, "x")])
    assert out[0].text == "fake: x" and len(server.seen) == 2
    assert clock.sleeps == [1.0]  # the server's Retry-After, not the backoff (~0.01 s)


def test_retry_after_beyond_the_window_gives_up_at_once(make_fake, clock):
    server = make_fake(plan=[("429", 120)])
    with pytest.raises(LLMError, match=r"HTTP 429.*|retry window") as exc:
        run_all(backend([server.url], max_retries=5, retry_window_s=5), [ChatRequest.chat(None, "x")])
    assert clock.sleeps == []  # no wait at all
    assert "llm_retry_window_s=5" in str(exc.value) and "HTTP 429" in str(exc.value)
    assert len(server.seen) == 1


def test_retry_window_bounds_the_retries(make_fake, clock):
    server = make_fake(plan=[503] * 50)
    with pytest.raises(LLMError, match="retry window llm_retry_window_s=1"):
        run_all(backend([server.url], max_retries=50, backoff_s=0.1, retry_window_s=1.0),
                [ChatRequest.chat(None, "x")])
    # waits of 0.1, 0.2, 0.4 (each + up to 50 % jitter) may fit in the window; the fourth (>= 0.8) never does
    assert 2 <= len(clock.sleeps) <= 3 and sum(clock.sleeps) <= 1.0
    assert len(server.seen) == len(clock.sleeps) + 1


def test_backoff_is_exponential_with_bounded_jitter():
    b = backend(["http://127.0.0.1:9/v1"], backoff_s=0.5)
    for n in range(1, 12):
        base = min(b.MAX_BACKOFF_S, 0.5 * 2 ** (n - 1))
        waits = [b._backoff(n) for _ in range(50)]
        assert all(base <= w <= 1.5 * base for w in waits)
        assert len(set(waits)) > 1  # jittered
    assert b._backoff(1, retry_after=7.0) == 7.0


def test_dropped_connection_is_retried(make_fake):
    server = make_fake(plan=["drop"])
    out = run_all(backend([server.url], max_retries=2), [ChatRequest.chat(None, "x")])
    assert out[0].text == "fake: x" and len(server.seen) == 2


def test_a_trickling_server_cannot_hold_past_the_deadline(make_fake):
    """Old behaviour: the timeout was per read, so one byte every 0.1 s held a 0.5 s timeout for the whole
    ~200-byte answer (~20 s). Now each attempt ends at its total deadline."""
    server = make_fake(plan=["trickle", "trickle"], trickle_s=0.1)
    with pytest.raises(LLMError, match="deadline"):
        run_all(backend([server.url], max_retries=1, timeout_s=0.5), [ChatRequest.chat(None, "x")])
    assert len(server.seen) == 2
    # each attempt hung up after about 0.5 s of 0.1 s bytes, far from the whole answer
    assert len(server.trickled) >= 1 and max(server.trickled) < server.trickle_total // 4


def test_a_slow_but_steady_server_is_waited_for_within_the_deadline(make_fake):
    server = make_fake(plan=["timeout"], slow_s=0.5)
    out = run_all(backend([server.url], max_retries=0, timeout_s=3.0), [ChatRequest.chat(None, "x")])
    assert out[0].text == "fake: x"


@pytest.mark.parametrize("step", ["null", "empty"])
def test_null_or_empty_content_is_a_failed_call_retried_then_reported_never_cached(make_fake, tmp_path, step):
    server = make_fake(plan=[step, "ok"])
    llm = LLM(backend([server.url], max_retries=2), LLMCache(tmp_path / "c.sqlite"), progress=False)
    assert llm.complete([ChatRequest.chat(None, "x")]) == ["fake: x"] and len(server.seen) == 2
    server = make_fake(plan=[step] * 3)
    llm = LLM(backend([server.url], max_retries=2), LLMCache(tmp_path / "d.sqlite"), progress=False)
    with pytest.raises(LLMError, match=f"empty completion.*content {step}"):
        llm.complete([ChatRequest.chat(None, "x")])
    assert len(server.seen) == 3 and len(llm.cache) == 0


def test_content_as_a_list_is_a_clear_error_and_never_cached(make_fake, tmp_path):
    server = make_fake(plan=["list"])
    llm = LLM(backend([server.url], max_retries=3), LLMCache(tmp_path / "c.sqlite"), progress=False)
    with pytest.raises(LLMError, match="content of type list, not text"):
        llm.complete([ChatRequest.chat(None, "x")])
    assert len(server.seen) == 1 and len(llm.cache) == 0


def test_a_lone_surrogate_in_a_reply_is_replaced_and_counted(make_fake, tmp_path):
    from kgir_lib.traces import REPLACED

    server = make_fake(plan=["surrogate"])
    llm = LLM(backend([server.url]), LLMCache(tmp_path / "c.sqlite"), progress=False)
    before = REPLACED["llm"]
    assert llm.complete([ChatRequest.chat(None, "x")]) == ["bad \ufffd char"]
    assert REPLACED["llm"] == before + 1
    assert llm.complete([ChatRequest.chat(None, "x")]) == ["bad \ufffd char"]  # from the cache
    assert len(server.seen) == 1
