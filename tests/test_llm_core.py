"""The batch-first LLM interface: caching, cache keys, usage per stage, order, tolerant JSON parsing."""
from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgir_lib.config import load_config
from kgir_lib.llm import (LLM, ChatRequest, ChatResult, LLMCache, LLMError, ScriptedBackend, Usage, build_backend,
                          build_llm, cache_key, extract_json)


def echo(req: ChatRequest) -> str:
    return f"echo: {req.messages[-1][1]}"


def reqs(n: int, **kw) -> list:
    return [ChatRequest.chat("sys", f"question {i}", **kw) for i in range(n)]


# ---------------------------------------------------------------- cache
def test_second_call_is_all_cache_hits(make_llm):
    llm = make_llm(echo)
    first = llm.generate(reqs(5), stage="s")
    assert [r.text for r in first] == [f"echo: question {i}" for i in range(5)]
    assert not any(r.cached for r in first)
    assert len(llm.backend.seen) == 5
    second = llm.generate(reqs(5), stage="s")
    assert len(llm.backend.seen) == 5  # zero backend calls
    assert all(r.cached for r in second)
    assert [(r.text, r.prompt_tokens, r.completion_tokens) for r in second] == \
        [(r.text, r.prompt_tokens, r.completion_tokens) for r in first]
    u = llm.usage.stages["s"]
    assert (u.calls, u.cache_hits, u.failures) == (10, 5, 0)


def test_cache_persists_across_llm_objects(tmp_path):
    a = LLM(ScriptedBackend(echo), LLMCache(tmp_path / "c.sqlite"), progress=False)
    a.generate(reqs(3))
    b = LLM(ScriptedBackend(lambda r: "different"), LLMCache(tmp_path / "c.sqlite"), progress=False)
    out = b.generate(reqs(4))
    assert [r.text for r in out[:3]] == [f"echo: question {i}" for i in range(3)]
    assert out[3].text == "different" and len(b.backend.seen) == 1
    assert len(LLMCache(tmp_path / "c.sqlite")) == 4


def test_empty_cache_is_still_used(tmp_path):
    cache = LLMCache(tmp_path / "empty.sqlite")
    assert len(cache) == 0 and bool(cache)
    llm = LLM(ScriptedBackend(echo), cache, progress=False)
    llm.generate(reqs(2))
    assert len(cache) == 2


BASE = ChatRequest.chat("sys", "user text")


@pytest.mark.parametrize("changed", [
    ChatRequest.chat("sys", "user text!"),
    ChatRequest.chat("sys2", "user text"),
    ChatRequest.chat(None, "user text"),
    ChatRequest(messages=(("system", "sys"), ("assistant", "user text"))),
    ChatRequest.chat("sys", "user text", max_tokens=191),
    ChatRequest.chat("sys", "user text", temperature=0.7),
    ChatRequest.chat("sys", "user text", stop=("\n",)),
    ChatRequest.chat("sys", "user text", json_schema={"type": "object"}),
    ChatRequest.chat("sys", "user text", seed=1),
])
def test_any_change_misses_the_cache(make_llm, changed):
    llm = make_llm(echo)
    llm.generate([BASE])
    llm.generate([changed])
    assert len(llm.backend.seen) == 2
    assert cache_key("m", changed.payload()) != cache_key("m", BASE.payload())


def test_model_id_is_part_of_the_key(tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite")
    LLM(ScriptedBackend(echo, "model-a"), cache, progress=False).generate([BASE])
    other = LLM(ScriptedBackend(echo, "model-b"), cache, progress=False)
    other.generate([BASE])
    assert len(other.backend.seen) == 1


def test_equivalent_requests_share_a_key():
    a = ChatRequest.chat("s", "u", temperature=0, stop="Question:", max_tokens=10.0)
    b = ChatRequest(messages=[["system", "s"], ["user", "u"]], temperature=0.0, stop=("Question:",), max_tokens=10)
    assert a == b and cache_key("m", a.payload()) == cache_key("m", b.payload())
    assert a.stop == ("Question:",)  # a bare string is one stop sequence, not its characters


def test_bad_requests_are_rejected():
    with pytest.raises(ValueError, match="empty"):
        ChatRequest(messages=())
    with pytest.raises(ValueError, match="pairs"):
        ChatRequest(messages=("just a string",))
    with pytest.raises(ValueError, match="max_tokens"):
        ChatRequest.chat(None, "u", max_tokens=0)


def test_identical_requests_in_one_batch_are_sent_once(make_llm):
    llm = make_llm(echo)
    batch = [BASE, ChatRequest.chat("sys", "other"), BASE, BASE]
    out = llm.generate(batch, stage="dup")
    assert len(llm.backend.seen) == 2
    assert [r.text for r in out] == ["echo: user text", "echo: other", "echo: user text", "echo: user text"]
    assert [r.cached for r in out] == [False, False, True, True]
    assert llm.usage.stages["dup"].cache_hits == 2


def test_without_a_cache_every_call_reaches_the_backend(make_llm):
    llm = make_llm(echo, cache=False)
    llm.generate(reqs(2))
    llm.generate(reqs(2))
    assert len(llm.backend.seen) == 4


# ---------------------------------------------------------------- usage accounting
def test_usage_per_stage(make_llm):
    llm = make_llm(lambda r: "one two three")
    llm.generate([ChatRequest.chat(None, "a b")], stage="extract")             # prompt 2, completion 3
    llm.generate([ChatRequest.chat("x", "a b c"), ChatRequest.chat(None, "a b")], stage="answer")
    ex, ans = llm.usage.stages["extract"], llm.usage.stages["answer"]
    assert (ex.calls, ex.cache_hits, ex.prompt_tokens, ex.completion_tokens) == (1, 0, 2, 3)
    # the second answer request is a cache hit of the extract request: tokens still count
    assert (ans.calls, ans.cache_hits, ans.prompt_tokens, ans.completion_tokens) == (2, 1, 6, 6)
    assert ex.seconds >= 0 and ans.seconds >= 0
    tot = llm.usage.total()
    assert (tot.calls, tot.cache_hits, tot.prompt_tokens, tot.completion_tokens) == (3, 1, 8, 9)
    table = llm.usage.table()
    assert list(table.index) == ["extract", "answer", "total"]
    assert table.loc["total", "calls"] == 3
    assert list(table.columns) == ["calls", "cache_hits", "prompt_tokens", "completion_tokens", "wall seconds",
                                   "failures", "truncated"]


def test_usage_since_snapshot(make_llm):
    llm = make_llm(echo)
    llm.generate(reqs(2), stage="a")
    snap = llm.usage.snapshot()
    llm.generate(reqs(3), stage="a")
    llm.generate(reqs(1), stage="b")
    delta = llm.usage.since(snap)
    assert (delta.stages["a"].calls, delta.stages["a"].cache_hits) == (3, 2)
    assert delta.stages["b"].calls == 1
    assert isinstance(delta, Usage)


def test_failures_are_counted_and_answered_empty(make_llm):
    class Skipping(ScriptedBackend):
        def run(self, requests, on_result):  # gives up on every second request
            for i, req in enumerate(requests):
                if i % 2 == 0:
                    on_result(i, ChatResult(f"ok {i}", 1, 1, 0.0))

    llm = LLM(Skipping(echo), None, progress=False)
    out = llm.generate(reqs(4), stage="f")
    assert [r.text for r in out] == ["ok 0", "", "ok 2", ""]
    assert llm.usage.stages["f"].failures == 2


def test_results_of_a_crashed_batch_are_kept(tmp_path):
    calls = []

    def flaky(req):
        calls.append(req.messages[-1][1])
        if len(calls) == 3:
            raise RuntimeError("backend died")
        return "fine"

    cache = LLMCache(tmp_path / "c.sqlite")
    with pytest.raises(RuntimeError, match="backend died"):
        LLM(ScriptedBackend(flaky), cache, progress=False).generate(reqs(5))
    assert len(cache) == 2
    llm = LLM(ScriptedBackend(echo), cache, progress=False)
    out = llm.generate(reqs(5))
    assert [r.messages[-1][1] for r in llm.backend.seen] == ["question 2", "question 3", "question 4"]
    assert [r.cached for r in out] == [True, True, False, False, False]


# ---------------------------------------------------------------- order with a concurrent backend
class ConcurrentBackend:
    """Answers on a thread pool with random delays, so results arrive out of order."""

    model_id = "concurrent:test"

    def __init__(self):
        self.arrival = []
        self.threads = set()

    def _one(self, req):
        time.sleep(random.Random(req.messages[-1][1]).uniform(0, 0.03))
        self.threads.add(threading.get_ident())
        return ChatResult(echo(req), 1, 1, 0.0)

    def run(self, requests, on_result):
        with ThreadPoolExecutor(max_workers=8) as pool:
            futures = {pool.submit(self._one, r): i for i, r in enumerate(requests)}
            for fut in as_completed(futures):
                self.arrival.append(futures[fut])
                on_result(futures[fut], fut.result())


def test_results_in_request_order_with_a_concurrent_backend(tmp_path):
    backend = ConcurrentBackend()
    llm = LLM(backend, LLMCache(tmp_path / "c.sqlite"), progress=False)
    batch = reqs(40)
    # a few cached ones in between, so backend index != request index
    llm.generate([batch[i] for i in (3, 17, 30)])
    backend.arrival.clear()
    out = llm.generate(batch)
    assert [r.text for r in out] == [f"echo: question {i}" for i in range(40)]
    assert backend.arrival != sorted(backend.arrival)  # they really arrived out of order
    assert len(backend.threads) > 1
    assert [i for i, r in enumerate(out) if r.cached] == [3, 17, 30]


# ---------------------------------------------------------------- building from a config
def test_build_llm_scripted(cfg):
    llm = build_llm(cfg, script=echo, progress=False)
    assert llm.model_id == f"scripted:{cfg.llm_model}"
    assert llm.cache.path == cfg.run_dir / "cache" / "llm.sqlite"
    assert llm.complete([BASE]) == ["echo: user text"]


def test_build_backend_errors(cfg, tmp_path):
    with pytest.raises(LLMError, match="script"):
        build_backend(cfg)
    openai = load_config("paper", results_dir=str(tmp_path), llm_base_urls=["http://127.0.0.1:9/v1"])
    backend = build_backend(openai)
    assert backend.model_id == "openai:Qwen/Qwen2.5-72B-Instruct"
    assert (backend.max_concurrency, backend.json_mode, backend.base_urls) == (64, "vllm", ["http://127.0.0.1:9/v1"])
    backend.close()
    vllm = load_config("paper", results_dir=str(tmp_path), llm_backend="vllm")
    try:
        import vllm as _  # noqa: F401
    except ImportError:
        with pytest.raises(LLMError, match="vllm"):
            build_backend(vllm)


# ---------------------------------------------------------------- tolerant JSON
@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    ('Sure! Here it is:\n```json\n{"triples": [["A", "b", "C"]]}\n```\nDone.', {"triples": [["A", "b", "C"]]}),
    ("{'named_entities': ['Compaq', 'HP']}", {"named_entities": ["Compaq", "HP"]}),
    ('{"a": [1, 2,],}', {"a": [1, 2]}),
    ('prefix [["A", "r", "B"], ["C", "s", "D"]] suffix', [["A", "r", "B"], ["C", "s", "D"]]),
    ('Result: [{"h": "a"}, {"h": "b"}]', [{"h": "a"}, {"h": "b"}]),   # the outer list, not its first item
    ('{"triples": [["A", "r", "B"], ["C", "s"', {"triples": [["A", "r", "B"], ["C", "s"]]}),  # truncated
    ('{"answer": "unterminated', {"answer": "unterminated"}),
    ('text } stray { "k": "v" }', {"k": "v"}),
    ('{"a": "brace } inside string"}', {"a": "brace } inside string"}),
    ('[...] then {"a": 1}', {"a": 1}),        # [...] is not JSON data
    ("no json at all", None),
    ("", None),
    (None, None),
    ("42", None),
    ('"just a string"', None),
])
def test_extract_json_cases(text, expected):
    assert extract_json(text) == expected


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_extract_json_never_raises(text):
    out = extract_json(text)
    assert out is None or isinstance(out, (dict, list))
    if out is not None:
        json.dumps(out)  # always plain JSON data


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="{}[]\"'`"), max_size=40),
       st.dictionaries(st.text(max_size=8), JSON_VALUES, min_size=1, max_size=4),
       st.text(alphabet=st.characters(blacklist_characters="{}[]\"'`"), max_size=40))
def test_extract_json_finds_an_object_wrapped_in_prose(before, value, after):
    assert extract_json(f"{before}{json.dumps(value)}{after}") == value


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="{}[]\"',:\\ab1 \n", max_size=200))
def test_extract_json_on_bracket_soup_never_raises(text):
    extract_json(text)
