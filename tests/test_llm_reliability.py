"""The openai backend under partial failure: what arrives is kept, what a server sends is checked, and no
secret from the environment reaches an error message (tests/fake_server.py stands in for the server)."""
from __future__ import annotations

import pytest

from fake_server import make_fake  # noqa: F401  (fixture)
from kgir_lib.llm import LLM, ChatRequest, LLMCache, LLMError, OpenAIBackend


def backend(urls, **kw) -> OpenAIBackend:
    kw.setdefault("max_concurrency", 4)
    kw.setdefault("timeout_s", 30)
    kw.setdefault("max_retries", 0)
    kw.setdefault("json_mode", "none")
    kw.setdefault("backoff_s", 0.01)
    return OpenAIBackend("m", urls, **kw)


def reqs(n: int) -> list:
    return [ChatRequest.chat("sys", f"q{i}", max_tokens=8) for i in range(n)]


def test_a_failed_request_does_not_lose_the_completions_in_flight(make_fake, tmp_path):
    """One request of a concurrent batch is refused at once while three are still being answered (the last of
    the four to reach the server gets the 400, so all four are in flight): the three answers that arrive
    afterwards are cached before the error propagates, and the error counts them."""
    server = make_fake(plan=["timeout", "timeout", "timeout", 400], slow_s=1.0)
    llm = LLM(backend([server.url]), LLMCache(tmp_path / "c.sqlite"), progress=False)
    with pytest.raises(LLMError, match=r"HTTP 400.*3 of 4 completions of this batch arrived and were kept"):
        llm.generate(reqs(4), stage="batch")
    assert len(llm.cache) == 3
    texts = {row[2] for row in llm.cache.rows()}
    assert len(texts) == 3 and all(t.startswith("fake: q") for t in texts)
    again = llm.generate(reqs(4), stage="batch")  # the rerun asks only for the one that failed
    assert [r.text for r in again] == [f"fake: q{i}" for i in range(4)]
    assert len(server.seen) == 5 and sum(r.cached for r in again) == 3


@pytest.mark.parametrize("value", ["Infinity", "1e400", "-3", "2.5", '"many"'])
def test_a_token_count_that_is_not_a_finite_whole_number_is_a_clear_error(make_fake, tmp_path, value):
    server = make_fake(plan=[("tokens", value)])
    llm = LLM(backend([server.url], max_concurrency=1), LLMCache(tmp_path / "c.sqlite"), progress=False)
    with pytest.raises(LLMError, match=r"not a chat completion.*token count"):
        llm.generate(reqs(1))
    assert len(llm.cache) == 0


def test_a_whole_token_count_written_as_a_float_is_accepted(make_fake):
    server = make_fake(plan=[("tokens", "12.0")])
    got = {}
    backend([server.url]).run(reqs(1), lambda i, r: got.__setitem__(i, r))
    assert got[0].prompt_tokens == 12


# ---------------------------------------------------------------- no secret in any message
FAKE_KEY = "sk-kgirtest-Zq7RQ8wX3vN5pL2m"


def test_a_server_echoing_the_authorization_header_never_puts_the_key_in_the_error(make_fake, monkeypatch):
    monkeypatch.setenv("KGIR_TEST_KEY", FAKE_KEY)
    server = make_fake(plan=["echo401"])
    with pytest.raises(LLMError) as exc:
        backend([server.url], api_key_env="KGIR_TEST_KEY").run(reqs(1), lambda i, r: None)
    headers = {k.lower(): v for k, v in server.seen[0][0].items()}
    assert headers["authorization"] == f"Bearer {FAKE_KEY}"  # the key was sent, and echoed by the server
    message = str(exc.value)
    assert "HTTP 401" in message and "$KGIR_TEST_KEY" in message and "request_headers" in message
    assert FAKE_KEY not in message and "Zq7RQ8" not in message


def test_a_url_with_credentials_is_refused_without_echoing_them():
    with pytest.raises(LLMError, match="user name or password") as exc:
        backend([f"http://user:{FAKE_KEY}@127.0.0.1:9/v1"])
    assert FAKE_KEY not in str(exc.value)


@pytest.mark.parametrize("text, secret", [
    ("Authorization: Bearer abcdEFGH1234", "abcdEFGH1234"),
    ('{"authorization": "Basic dXNlcjpwYXNz"}', "dXNlcjpwYXNz"),
    ("GET http://bob:hunter22@host:8000/v1/models", "hunter22"),
    ("?api_key=abcd1234&model=m", "abcd1234"),
    ('"x-api-key": "abcd1234"', "abcd1234"),
    (f"plain text quoting {FAKE_KEY}", FAKE_KEY),
])
def test_redact_removes_keys_headers_and_url_credentials(text, secret):
    from kgir_lib.redact import redact

    out = redact(text, [FAKE_KEY])
    assert secret not in out and "***" in out
    assert redact('{"prompt_tokens": 431, "max_tokens": 12}') == '{"prompt_tokens": 431, "max_tokens": 12}'
