"""The embedded llama.cpp backend with SmolLM2-135M-Instruct (slow: loads the real model)."""
from __future__ import annotations

import importlib.util

import pytest

from kgir_lib.config import load_config
from kgir_lib.llm import LLM, ChatRequest, LLMError, LlamaCppBackend, build_backend, extract_json, smollm2_gguf_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                       reason="llama-cpp-python is not installed (pip install llama-cpp-python==0.3.36)"),
]


@pytest.fixture(scope="module")
def smol():
    return LlamaCppBackend("SmolLM2-135M-Instruct-Q4_1", n_ctx=1024, n_threads=2)


def run_all(backend, requests) -> list:
    got = {}
    backend.run(requests, lambda i, r: got.__setitem__(i, r))
    return [got[i] for i in range(len(requests))]


def test_gguf_ships_in_a_package():
    path = smollm2_gguf_path()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000


def test_short_answer_with_token_counts(smol):
    out = run_all(smol, [ChatRequest.chat("Answer in one word.", "What is the capital of France?", max_tokens=8)])
    r = out[0]
    assert isinstance(r.text, str) and r.text.strip()
    assert r.prompt_tokens > 10 and 0 < r.completion_tokens <= 8 and r.seconds > 0
    assert smol.model_id == "llamacpp:SmolLM2-135M-Instruct-Q4_1"


def test_deterministic_at_temperature_zero(smol):
    req = ChatRequest.chat(None, "Name a colour.", max_tokens=6)
    assert run_all(smol, [req])[0].text == run_all(smol, [req])[0].text


def test_json_schema_gives_parseable_json(smol):
    schema = {"type": "object", "properties": {"entities": {"type": "array", "items": {"type": "string"}}},
              "required": ["entities"]}
    req = ChatRequest.chat("Extract the named entities as JSON.", "Paris is the capital of France.",
                           max_tokens=32, json_schema=schema)
    text = run_all(smol, [req])[0].text
    parsed = extract_json(text)
    assert isinstance(parsed, dict) and isinstance(parsed.get("entities"), list), text


def test_stop_sequences(smol):
    req = ChatRequest.chat(None, "Count: 1, 2, 3, 4, 5, 6, 7, 8", max_tokens=24, stop=(",",))
    assert "," not in run_all(smol, [req])[0].text


def test_overlong_prompt_is_trimmed_in_the_middle():
    """A context of 256 tokens: the cut works alike at any size, and llama.cpp's evaluation of the cut prompt is most
    of the test's time (6 s with a 1,024-token context and three times the filler, 1 s with these)."""
    smol = LlamaCppBackend("SmolLM2-135M-Instruct-Q4_1", n_ctx=256, n_threads=2)
    head, tail = "INSTRUCTIONS: answer briefly.", "Question: what is the capital of France?"
    filler = " ".join(f"word{i}" for i in range(1000))
    req = ChatRequest.chat(None, f"{head}\n{filler}\n{tail}", max_tokens=16)
    before = smol.prompts_cut
    smol._fit(ChatRequest.chat(None, f"{head}\n{tail}", max_tokens=16))
    assert smol.prompts_cut == before  # a prompt that fits is not counted
    msgs = smol._fit(req)
    assert smol.prompts_cut == before + 1  # counted: KGIRPipeline.index reports it
    content = msgs[-1]["content"]
    assert content.startswith("INSTRUCTIONS") and content.rstrip().endswith("France?")
    assert "[...]" in content
    assert len(smol._ntok(content)) <= smol.n_ctx - 16 - smol.TEMPLATE_TOKENS
    out = run_all(smol, [req])  # and llama.cpp accepts it
    assert out[0].prompt_tokens <= smol.n_ctx
    smol.close()


def test_max_tokens_larger_than_the_context_is_a_clear_error(smol):
    with pytest.raises(LLMError, match="llm_n_ctx"):
        run_all(smol, [ChatRequest.chat(None, "hi", max_tokens=4000)])


def test_missing_model_file_is_named(tmp_path):
    with pytest.raises(LLMError, match="llm_model_path.*nope.gguf"):
        LlamaCppBackend("x", model_path=str(tmp_path / "nope.gguf"))


def test_build_backend_loads_once(tmp_path):
    cfg = load_config("ci", results_dir=str(tmp_path), llm_n_ctx=1024)
    a, b = build_backend(cfg), build_backend(cfg)
    assert a is b
    llm = LLM(a, None, progress=False)
    assert llm.complete([ChatRequest.chat(None, "Say yes.", max_tokens=4)])[0].strip()


def full_tokens(backend, msgs) -> list:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    llm = backend._llm
    fmt = Jinja2ChatFormatter(template=llm.metadata["tokenizer.chat_template"], eos_token="", bos_token="")
    return llm.tokenize(fmt(messages=msgs).prompt.encode("utf-8"), add_bos=True, special=True)


def test_prefix_is_every_turn_but_the_last(smol):
    msgs = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Capital of France?"},
            {"role": "assistant", "content": "Paris"}, {"role": "user", "content": "Capital of Italy?"}]
    prefix, full = smol.prefix_tokens(msgs), full_tokens(smol, msgs)
    assert 0 < len(prefix) < len(full) and list(prefix) == full[:len(prefix)]
    assert "Italy" not in smol._llm.detokenize(list(prefix)).decode()
    assert "Paris" in smol._llm.detokenize(list(prefix)).decode()
    assert smol.prefix_tokens(msgs[-1:]) == ()  # one turn: nothing fixed to reuse


def test_an_answer_does_not_depend_on_the_request_before_it(smol):
    """The prefix is evaluated alone from an empty context, so reuse gives the same tokens as a fresh start."""
    shots = [("system", "Continue the list with five more items."), ("user", "apple, pear"),
             ("assistant", "plum, fig, lime, kiwi, date")]
    x = ChatRequest(messages=tuple(shots) + (("user", "red, blue"),), max_tokens=12)
    y = ChatRequest(messages=tuple(shots) + (("user", "one, two, three"),), max_tokens=12)
    z = ChatRequest(messages=(("system", "Reply in French."), ("user", "red, blue")), max_tokens=12)
    fresh = LlamaCppBackend("SmolLM2-135M-Instruct-Q4_1", n_ctx=1024, n_threads=2)
    alone = run_all(fresh, [x])[0].text
    hits = fresh.prefix_hits
    mixed = run_all(fresh, [y, x, z, x, x])
    assert [mixed[i].text for i in (1, 3, 4)] == [alone] * 3
    assert fresh.prefix_hits - hits == 3  # y after x, x after y, x after x reused it; z and x after z did not
    fresh.close()


def test_the_dev_null_files_llama_cpp_opens_at_import_are_closed_at_exit():
    """llama-cpp-python opens /dev/null twice at import and never closes it: a process with warnings shown reports
    it at exit (the cause, checked first); imported through the backend's import_llama, nothing is reported."""
    import subprocess
    import sys

    bare = subprocess.run([sys.executable, "-W", "default", "-c", "import llama_cpp"], capture_output=True, text=True,
                          timeout=120)
    assert "ResourceWarning: unclosed file" in bare.stderr and "/dev/null" in bare.stderr
    ours = subprocess.run([sys.executable, "-W", "default", "-c",
                           "from kgir_lib.llm.llamacpp import import_llama; import_llama()"], capture_output=True,
                          text=True, timeout=120)
    assert ours.returncode == 0 and ours.stderr == "", ours.stderr
