"""Prompt files as explicit chat turns: every prompt renders the same bytes as before.

``fixtures/prompt_messages.json`` holds the messages the prompt code of commit 713cfc4 produced (few-shot
turns split out of the prompt text by blank lines and a marker), captured before the prompt files
became explicit ``[system]`` / ``[user]`` / ``[assistant]`` turns; the LLM cache is keyed by these
messages, so they must not change. One intended change since: the ``kgir_reflect`` cases were
re-rendered for that prompt's version 5 (a reminder of the two-line reply closes every user turn).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgir_lib.data import Passage
from kgir_lib.kg.extract import extraction_requests
from kgir_lib.kgir.seeds import ner_requests
from kgir_lib.kgir.rewrite import reflection_requests, rewrite_requests
from kgir_lib.llm.prompts import PROMPT_DIR, PromptError, chat, load_prompt, parse_prompt
from kgir_lib.methods.reader import closed_book_request, reader_request

# the reflection's verdict turn: tests/test_kgir_loop.py::test_verdict_request_continues_the_conversation;
# the paper profiles' reflection prompt: test_paper_reflection_prompt_is_figure_5 below
# the bridge rewrite (a study variant): tests/test_study_variants.py
ADDED_LATER = {"kgir_reflect_verdict", "kgir_reflect_paper", "kgir_bridge_rewrite"}
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "prompt_messages.json").read_text(encoding="utf-8"))


def rendered() -> list:
    """The same requests, in the same order, as the script that wrote the fixture."""
    v = FIXTURE["inputs"]
    Q, ODD, CTX, EV, EVP, HIST = v["Q"], v["ODD"], v["CTX"], v["EV"], v["EVP"], v["HIST"]
    out = []

    def add(name, case, req):
        assert req.prompt == name
        out.append({"prompt": name, "case": case, "messages": [list(m) for m in req.messages]})

    for i, q in enumerate([Q, ODD, ""]):
        add("reader", f"q{i}", reader_request(q, CTX))
        add("reader", f"q{i}-ctx-braces", reader_request(q, "{context} {{x}}\n\n"))
        add("closed_book", f"q{i}", closed_book_request(q))
        add("kgir_ner", f"q{i}", ner_requests([q])[0])
        for j, (ev, hist) in enumerate([(EV, []), (EVP, HIST), ("Triples:\n{x}  \n", HIST[:1])]):
            add("kgir_rewrite", f"q{i}-e{j}", rewrite_requests([q], [ev], [hist])[0])
            for fin in (False, True):
                for orig in (None, "Original {q}?"):
                    add("kgir_reflect", f"q{i}-e{j}-final{fin}-orig{orig is not None}",
                        reflection_requests([q], [ev], [hist], [CTX], final=[fin], originals=[orig])[0])
        for name, vals in (("hyde", {"question": q}), ("iter_retgen", {"context": CTX, "question": q}),
                           ("ircot", {"context": CTX, "question": q, "cot": "(none)"}),
                           ("ircot", {"context": CTX, "question": q, "cot": "Step one. Step {two}."}),
                           ("hipporag2_filter", {"question": q, "facts": json.dumps({"fact": [["A", "r", "B {x}"]]})})):
            add(name, f"q{i}-" + "-".join(sorted(vals)), chat(name, vals))
    for i, (title, text) in enumerate([("Compaq", "Compaq was the largest supplier."),
                                       ("Odd", "A text with Passage:\n and\n\nTriples:\n inside, and {braces}.  \n"),
                                       ("T", "")]):
        add("kg_extract", f"p{i}", extraction_requests([Passage(f"p{i}", title, text)])[0])
    return out


def test_every_prompt_renders_the_messages_it_rendered_before():
    now = rendered()
    assert [c["case"] for c in now] == [c["case"] for c in FIXTURE["cases"]]
    for new, old in zip(now, FIXTURE["cases"]):
        assert new["messages"] == old["messages"], (new["prompt"], new["case"])
    # every prompt file covered; those added after the fixture are pinned by their own tests
    assert {c["prompt"] for c in now} | ADDED_LATER == {p.stem for p in PROMPT_DIR.glob("*.txt")}


def test_few_shot_prompts_are_written_as_turns():
    for name, n_examples in (("kgir_ner", 4), ("kgir_rewrite", 1), ("kgir_reflect", 3), ("kg_extract", 2)):
        p = load_prompt(name)
        roles = [r for r, _ in p.turns]
        assert roles == ["system"] + ["user", "assistant"] * n_examples + ["user"], name
        assert len(p.examples) == 2 * n_examples and "{" in p.user


def test_prompt_name_is_not_part_of_the_cache_key():
    a = chat("closed_book", {"question": "q?"})
    b = a.__class__(messages=a.messages, max_tokens=a.max_tokens, stop=a.stop)
    assert a.prompt == "closed_book" and b.prompt is None
    assert a == b and a.payload() == b.payload()


def test_prompt_file_errors():
    good = "# version: 1\n[system]\nSys {{x}}\n[user]\nQ: a\n[assistant]\nA: {{1}}\n\n[user]\nQ: {q}\n"
    p = parse_prompt("t", good)
    assert p.messages({"q": "c\n\nwith a blank line  "}) == (
        ("system", "Sys {x}"), ("user", "Q: a"), ("assistant", "A: {1}"), ("user", "Q: c\n\nwith a blank line  "))
    assert p.messages({"q": "c  "}, rstrip=True)[-1] == ("user", "Q: c")
    with pytest.raises(KeyError, match="'q'"):
        p.messages({})
    with pytest.raises(PromptError, match="version"):
        parse_prompt("t", "[user]\nQ: {q}\n")
    with pytest.raises(PromptError, match="last turn"):
        parse_prompt("t", "# version: 1\n[user]\nQ\n[assistant]\nA\n")
    with pytest.raises(PromptError, match="alternate"):
        parse_prompt("t", "# version: 1\n[user]\nQ\n[user]\nQ: {q}\n")
    with pytest.raises(PromptError, match="example turns"):
        p.render(q="x")
    assert parse_prompt("t", "# version: 1\n[user]\nQ: {q}\nA:\n").render(q="x") == ("", "Q: x\nA:")


def test_paper_reflection_prompt_is_figure_5():
    """The paper profiles' reflection prompt carries Fig. 5's two worked examples, one answered and one
    missing, and none of the small-model wording ("Do not guess", the reply-format reminder)."""
    p = load_prompt("kgir_reflect_paper")
    turns = [role for role, _ in p.turns]
    assert turns == ["system", "user", "assistant", "user", "assistant", "user"]
    replies = [text for role, text in p.turns if role == "assistant"]
    assert replies[0].endswith("Answer: Alabama") and replies[1].endswith("Missing: airports in Alabama")
    text = " ".join(t for _, t in p.turns)
    assert "Do not guess" not in text and "Reply with a" not in text and "To Kill a Mockingbird" in text
