"""Few-shot examples come from training data; none is an evaluation question or answer.

Every prompt file's worked examples (its example turns, and the blocks of a user turn before the final
one) are collected: their questions
("Question:", "Q:" lines) and answers ("Answer:", "So the answer is:", the answer inside a reply).
No example question may occur in any evaluation set the suite loads -- the musique and hotpotqa dev
samples, the full HotpotQA dev question list (HippoRAG's NER file, 7,405 questions), the shipped
musique_train questions (the sample profile evaluates them too) -- nor be a known MuSiQue dev question
(the paper's Fig. 6 case, ``2hop__14095_15463``, is one). No example's (question, answer) may be an
evaluation question with that gold answer.
"""
from __future__ import annotations

import csv
import re

import pytest

from kgir_lib.data import load_dataset
from kgir_lib.eval.metrics import normalize_answer
from kgir_lib.llm.prompts import PROMPT_DIR, load_prompt

from conftest import SHARED_DATA

EVAL_SETS = ("musique", "hotpotqa", "musique_train")
KNOWN_DEV = ("Which company merged in 2002 with the top PC maker of 1994?",)  # MuSiQue dev 2hop__14095_15463
_Q = re.compile(r"^(?:Question|Q)\s*:\s*(.+\?)\s*$", re.M)
_A = re.compile(r"(?:^Answer\s*:|answer is\s*:)\s*([^\n]+?)\.?\s*$", re.M | re.I)

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "musique").exists(), reason="shared data not present")


def example_blocks(name: str) -> list:
    """The worked-example text of a prompt: its example turns (each user turn with the assistant's reply),
    and what its final user turn holds before its templated block (examples inside one user message)."""
    prompt = load_prompt(name)
    turns = prompt.examples
    blocks = [f"{u}\n{a}" for (_, u), (_, a) in zip(turns[::2], turns[1::2])]
    user = prompt.user
    slot = re.search(r"(?<!\{)\{\w+\}(?!\})", user)  # the first placeholder (not a doubled literal brace)
    last = user.rfind("\n\n", 0, slot.start() if slot else len(user))
    return (["\n\n".join(blocks)] if blocks else []) + ([user[:last]] if last > 0 else [])


def few_shot_items() -> list:
    """(prompt, question, [answers]) of every worked example of every prompt file."""
    items = []
    for path in sorted(PROMPT_DIR.glob("*.txt")):
        for block in example_blocks(path.stem):
            for chunk in re.split(r"\n\n(?=Passages?:|Question:|Triples:|Q:)", block):
                qs = _Q.findall(chunk)
                answers = [a.strip() for a in _A.findall(chunk)]
                for q in qs:
                    items.append((path.stem, q.strip(), answers))
    return items


def eval_questions() -> dict:
    """Normalised evaluation question -> its normalised gold answers."""
    out: dict = {}
    for name in EVAL_SETS:
        for q in load_dataset(name, SHARED_DATA).questions:
            out[normalize_answer(q.question)] = {normalize_answer(a) for a in q.answers}
    tsv = SHARED_DATA / "hotpotqa" / "hotpotqa_queries.named_entity_output.tsv"
    with open(tsv, encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            out.setdefault(normalize_answer(row["query"]), set())
    for q in KNOWN_DEV:
        out.setdefault(normalize_answer(q), set())
    return out


def test_the_collector_finds_the_examples():
    items = few_shot_items()
    prompts = {p for p, _, _ in items}
    assert {"ircot", "iter_retgen", "hyde", "hipporag2_filter", "kgir_ner", "kgir_rewrite", "kgir_reflect"} <= prompts
    assert any(q == "When was Neville A. Stanton's employer founded?" and "1862" in a for _, q, a in items)


def leaks(items, evals: dict) -> list:
    """``(prompt, question, why)`` for every few-shot item whose question is, or overlaps, an evaluation question."""
    found = []
    for prompt, q, _answers in items:
        nq = normalize_answer(q)
        if nq in evals:
            found.append((prompt, q, "question is an evaluation question"))
        for e in evals:
            if nq and (nq in e or e in nq) and len(min(nq, e, key=len)) > 30:
                found.append((prompt, q, f"overlaps evaluation question {e!r}"))
                break
    return found


def test_no_few_shot_question_or_answer_is_an_evaluation_item():
    evals = eval_questions()
    assert len(evals) > 7000  # the full HotpotQA dev list is part of the check
    assert leaks(few_shot_items(), evals) == []


def test_the_check_catches_the_old_fig6_examples():
    """The old ircot/iter_retgen/hyde/hipporag2 prompts used the Fig. 6 dev question; the check flags it, and a
    reworded copy of it too."""
    evals = eval_questions()
    old = [("ircot", KNOWN_DEV[0], ["Hewlett-Packard"])]
    assert [why.split(" ")[0] for _, _, why in leaks(old, evals)] == ["question", "overlaps"]  # same, and contained
    reworded = [("hyde", "Tell me: " + KNOWN_DEV[0].rstrip("?") + ", please?", ["HP"])]
    assert [why.split(" ")[0] for _, _, why in leaks(reworded, evals)] == ["overlaps"]
    assert leaks([("x", "Who wrote it?", ["me"])], evals) == []
