"""The shared reader: every method answers through the same prompt and parser.

Using one reader keeps the comparison about what each method puts in the
context, not about prompt wording (the paper runs all baselines with the same
LLM; KGIR-RAG §3.3.1).
"""
from __future__ import annotations

import re
from typing import Iterable, Optional, Sequence

from ..data import Passage
from ..llm import ChatRequest
from ..llm.parsing import trim
from ..llm.prompts import chat

_ANSWER = re.compile(r"answer\s*(?:is)?\s*[:：]\s*(.+)", re.I)
_BARE_MARKER = re.compile(r"answer\s*(?:is)?\s*[:：]\s*$", re.I)  # "So the answer is:" and nothing after it


def format_passages(passages: Iterable[Passage], max_chars: Optional[int] = None) -> str:
    """Passages as 'title\\ntext' blocks, each cut to ``max_chars`` characters of text."""
    blocks = []
    for p in passages:
        text = p.text if not max_chars or len(p.text) <= max_chars else p.text[:max_chars].rsplit(" ", 1)[0] + " ..."
        blocks.append(f"{p.title}\n{text}")
    return "\n\n".join(blocks) if blocks else "(none)"


def reader_request(question: str, context: str, max_tokens: int = 32, prompt: str = "reader") -> ChatRequest:
    return chat(prompt, {"question": question, "context": context}, max_tokens=max_tokens,
                stop=("\n\n", "\nQuestion:", "\nPassages:"))


def closed_book_request(question: str, max_tokens: int = 32) -> ChatRequest:
    return chat("closed_book", {"question": question}, max_tokens=max_tokens, stop=("\n\n", "\nQuestion:"))


def parse_answer(text: str) -> str:
    """The short answer in a reader reply: after the last 'Answer:', first line, trimmed.

    A reply with no 'Answer:' marker is taken whole (first non-empty line): the
    prompt ends with 'Answer:', so the completion usually starts with the answer. A reply
    that ends with a marker and nothing after it gave no answer: ``""`` (not usable).
    """
    text = (text or "").strip()
    matches = list(_ANSWER.finditer(text))
    if matches:
        text = matches[-1].group(1)
    elif _BARE_MARKER.search(text):
        return ""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = trim(line, "\"'*", "\"'*.")
    return line


MAX_ANSWER_WORDS = 12


def answer_usable(text: str) -> bool:
    """A reader reply parsed as intended: a non-empty short answer (at most
    ``MAX_ANSWER_WORDS`` words), not a sentence or an empty reply."""
    answer = parse_answer(text)
    return bool(answer) and len(answer.split()) <= MAX_ANSWER_WORDS


def answer_batch(llm, questions: Sequence[str], contexts: Sequence[str], stage: str = "reader",
                 max_tokens: int = 32) -> list:
    """Read every (question, context) pair in one batched LLM call; returns (answer, ChatResult) pairs."""
    reqs = [reader_request(q, c, max_tokens) for q, c in zip(questions, contexts)]
    results = llm.generate(reqs, stage=stage)
    return [(parse_answer(r.text), r) for r in results]
