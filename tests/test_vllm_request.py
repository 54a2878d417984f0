"""The exact request each JSON mode sends, checked against vLLM 0.33.0's own definitions.

Read from ``pip download --no-deps vllm==0.33.0``:

- ``vllm/entrypoints/openai/chat_completion/protocol.py`` ``ChatCompletionRequest``: ``model``,
  ``messages``, ``max_tokens`` (deprecated alias of ``max_completion_tokens``, still honoured),
  ``temperature``, ``seed``, ``stop``, ``response_format`` and ``structured_outputs``
  (``StructuredOutputsParams``: ``json`` may be a dict);
- ``vllm/entrypoints/serve/engine/protocol.py``: ``guided_json`` & co. are *removed* fields, accepted as
  extras and ignored with a warning ("output will NOT be constrained");
- ``vllm/entrypoints/generate/base/protocol.py``: ``response_format`` ``json_schema`` becomes
  ``StructuredOutputsParams(json=...)`` (the schema under the alias ``schema``), ``json_object`` becomes
  ``json_object=True`` (a ``schema`` key next to it is an ignored extra);
- ``vllm/sampling_params.py``: ``SamplingParams(max_tokens, temperature, stop, seed, structured_outputs)``.
"""
from __future__ import annotations

import sys
import types

import pytest

from kgir_lib.llm.backends import OpenAIBackend, VLLMBackend
from kgir_lib.llm.core import ChatRequest, ChatResult

SCHEMA = {"type": "object", "properties": {"named_entities": {"type": "array", "items": {"type": "string"}}},
          "required": ["named_entities"]}
REQ = ChatRequest.chat("You extract entities.", "Which company merged with Compaq?", max_tokens=64,
                       stop=("\n\n",), json_schema=SCHEMA, seed=7)
BASE = {"model": "Qwen/Qwen2.5-72B-Instruct",
        "messages": [{"role": "system", "content": "You extract entities."},
                     {"role": "user", "content": "Which company merged with Compaq?"}],
        "max_tokens": 64, "temperature": 0.0, "seed": 7, "stop": ["\n\n"]}


def body(mode: str, req: ChatRequest = REQ) -> dict:
    backend = OpenAIBackend("Qwen/Qwen2.5-72B-Instruct", ["http://127.0.0.1:9/v1"], json_mode=mode)
    try:
        return backend._body(req)
    finally:
        backend.close()


def test_vllm_mode_sends_structured_outputs_json():
    assert body("vllm") == {**BASE, "structured_outputs": {"json": SCHEMA}}
    assert "guided_json" not in body("vllm")  # removed in vLLM: ignored, output unconstrained


def test_llamacpp_mode_sends_json_object_with_the_schema():
    assert body("llamacpp") == {**BASE, "response_format": {"type": "json_object", "schema": SCHEMA}}


def test_openai_mode_sends_json_schema():
    assert body("openai") == {**BASE, "response_format": {"type": "json_schema",
                                                          "json_schema": {"name": "output", "schema": SCHEMA}}}


def test_none_mode_and_requests_without_schema_send_no_constraint():
    assert body("none") == BASE
    plain = ChatRequest.chat(None, "Hi", max_tokens=5)
    for mode in ("vllm", "llamacpp", "openai", "none"):
        b = body(mode, plain)
        assert b == {"model": "Qwen/Qwen2.5-72B-Instruct", "messages": [{"role": "user", "content": "Hi"}],
                     "max_tokens": 5, "temperature": 0.0, "seed": 0}  # no empty "stop" list either


def test_every_field_is_one_vllm_0_33_knows():
    fields = {"model", "messages", "max_tokens", "temperature", "seed", "stop", "response_format",
              "structured_outputs"}  # ChatCompletionRequest fields (vLLM 0.33.0)
    for mode in ("vllm", "llamacpp", "openai", "none"):
        assert set(body(mode)) <= fields


# ---------------------------------------------------------------------------- offline engine
class FakeStructuredOutputsParams:
    def __init__(self, json=None):
        self.json = json

    def __eq__(self, other):
        return isinstance(other, FakeStructuredOutputsParams) and other.json == self.json


class FakeSamplingParams:
    def __init__(self, **kw):
        self.kw = kw


@pytest.fixture
def fake_vllm(monkeypatch):
    """A stand-in ``vllm`` package with 0.33.0's names (LLM.chat, SamplingParams, StructuredOutputsParams)."""
    calls = {}

    class FakeLLM:
        def __init__(self, model, **kw):
            calls["engine"] = (model, kw)

        def chat(self, conversations, params, use_tqdm=True):
            calls["chat"] = (conversations, params)
            out = types.SimpleNamespace(text='{"named_entities": ["Compaq"]}', token_ids=[1, 2, 3],
                                        finish_reason="stop")
            return [types.SimpleNamespace(outputs=[out], prompt_token_ids=[9] * 11) for _ in conversations]

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = FakeLLM, FakeSamplingParams
    sp = types.ModuleType("vllm.sampling_params")
    sp.StructuredOutputsParams = FakeStructuredOutputsParams
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    return calls


def test_offline_engine_gets_sampling_params_with_structured_outputs(fake_vllm):
    backend = VLLMBackend("Qwen/Qwen2.5-72B-Instruct", json_mode="vllm", tensor_parallel_size=8)
    got = {}
    plain = ChatRequest.chat(None, "Hi", max_tokens=5)
    backend.run([REQ, plain], lambda i, r: got.setdefault(i, r))
    assert fake_vllm["engine"] == ("Qwen/Qwen2.5-72B-Instruct", {"tensor_parallel_size": 8})
    convs, params = fake_vllm["chat"]
    assert convs == [REQ.message_dicts(), plain.message_dicts()]
    assert params[0].kw == {"max_tokens": 64, "temperature": 0.0, "stop": ["\n\n"], "seed": 7,
                            "structured_outputs": FakeStructuredOutputsParams(json=SCHEMA)}
    assert params[1].kw == {"max_tokens": 5, "temperature": 0.0, "stop": None, "seed": 0}
    assert isinstance(got[0], ChatResult) and got[0].prompt_tokens == 11 and got[0].completion_tokens == 3
    assert got[0].finish_reason == "stop"


def test_offline_engine_without_json_mode_sends_no_constraint(fake_vllm):
    backend = VLLMBackend("m", json_mode="none")
    backend.run([REQ], lambda i, r: None)
    assert "structured_outputs" not in fake_vllm["chat"][1][0].kw
