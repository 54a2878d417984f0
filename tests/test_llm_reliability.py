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
