"""KGIR-RAG iterative query rewrite (paper §2.3, eq. 8, Fig. 4) and reflection (§2.4, Fig. 5).

- ``q' = Rewrite(q, q_history, G_Ans)``: :func:`rewrite_requests` / :func:`parse_rewrite`
  (prompt ``kgir_rewrite``): the LLM replaces the multi-hop part of the question with facts from
  the evidence triples without changing its meaning.
- ``Reflection(q', G_Ans, q_history, P_t)``: :func:`reflection_requests` /
  :func:`parse_reflection` (prompt ``kgir_reflect``): chain of thought, then either
  ``Answer: ...`` or ``Missing: ...``. ``P_t`` ("Retrieved passages") are, under the rule
  ``"new"``, the passages of the rewritten question's retrieval ``D'_t`` that ``D_t`` did not
  hold (the top of ``D'_t`` when none is new), under ``"all"`` the top of ``D'_t``
  (:func:`kgir_lib.kgir.state.reflection_passages`). In the last allowed round the prompt tells
  the model it must answer (``final=True``); a question it still leaves open is stopped by the
  round cap and answered by the shared reader.
- A reflection reply with no verdict line gets one more turn, :func:`verdict_request` (prompt
  ``kgir_reflect_verdict``, not in the paper): the reply stays in the conversation and the model
  is asked for the verdict line alone; :func:`with_verdict` combines the two replies.

Parsing is tolerant and never raises: a reply without a usable line is *malformed*, counted by
the caller, and handled conservatively (a malformed rewrite keeps the previous question; a
malformed reflection counts as "not answerable").
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

from ..llm import ChatRequest
from ..llm.parsing import trim
from ..llm.prompts import chat

REWRITE_MAX_TOKENS = 48
REFLECT_MAX_TOKENS = 96
VERDICT_MAX_TOKENS = 32
FINAL_NOTE = "This is the last round: give your best answer now (write \"Answer: ...\").\n"

_REWRITE = re.compile(r"^\s*(?:rewritten|new|simpler)?\s*question\s*[:：]\s*(.*)$", re.I)
_ANSWER = re.compile(r"^\s*(?:(?:so|thus|therefore|the|final|short)[\s,]+){0,3}"
                     r"answer\s*(?:is)?\s*[:：]\s*(.*)$", re.I)
_MISSING = re.compile(r"^\s*(?:(?:the|still)\s+)?"
                      r"(?:missing(?:\s+information)?|information\s+missing|needed|need)"
                      r"\s*[:：]\s*(.*)$", re.I)
_QWORDS = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are",
           "was", "were", "do", "does", "did", "in", "on", "at", "from", "for", "of", "by", "can",
           "has", "have", "had", "name"}
_REASON = re.compile(r"^\s*reasoning\s*[:：]\s*(.*)$", re.I)
_NO_ANSWER = re.compile(r"^(?:unknown|none|n/?a|"
                        r"not (?:enough|sure|known|given|mentioned|available)|"
                        r"cannot (?:be )?(?:answer|determine)|can't|insufficient|"
                        r"no (?:answer|information))\b", re.I)
_MARKED_REWRITE = re.compile(r"^\s*rewritten\s+question\s*[:：]\s*(.*)$", re.I)


def format_history(history: Sequence[dict], original: Optional[str] = None) -> str:
    """The rewrite history ``q_history`` as prompt lines (empty string when there is none).

    Each entry is ``{"rewrite": str, "missing": str | None}``; ``original`` (the user's question,
    shown to Reflection, which sees the rewritten one) comes first.
    """
    lines = [f"Original question: {original}"] if original else []
    for i, h in enumerate(history, 1):
        lines.append(f"Earlier rewrite {i}: {h.get('rewrite', '')}")
        if h.get("missing"):
            lines.append(f"Still missing after it: {h['missing']}")
    return "\n".join(lines) + "\n" if lines else ""


def evidence_block(triples_text: Optional[str] = None, passages_text: Optional[str] = None) -> str:
    """The evidence shown to Rewrite and Reflection: ``Triples:`` (G_Ans) or ``Passages:`` (w/o
    subgraph)."""
    if triples_text is not None:
        return f"Triples:\n{triples_text}"
    return f"Passages:\n{passages_text if passages_text is not None else '(none)'}"


# ---------------------------------------------------------------- rewrite (eq. 8, Fig. 4)
def rewrite_requests(questions: Sequence[str], evidences: Sequence[str],
                     histories: Sequence[Sequence[dict]], max_tokens: int = REWRITE_MAX_TOKENS,
                     ) -> list:
    """One Rewrite request per question: original ``q``, its history and the evidence text (eq. 8).

    ``evidences`` are evidence blocks from :func:`evidence_block`: the ``G_Ans`` triples, or
    (without the subgraph module) the most similar passages.
    """
    if not len(questions) == len(evidences) == len(histories):
        raise ValueError("rewrite_requests: questions, evidences and histories differ in length")
    return [chat("kgir_rewrite", {"question": q, "evidence": ev, "history": format_history(hist)},
                 rstrip=True, max_tokens=max_tokens, stop=("\n\n", "\nTriples:"))
            for q, ev, hist in zip(questions, evidences, histories)]


def strip_marks(s: str) -> str:
    """``s`` without the quotes, asterisks and backticks a small model wraps a line in."""
    return trim(s, "\"'*`", "\"'*`")


def degenerate(text: str, n: int = 3, max_repeats: int = 2) -> bool:
    """True when some word ``n``-gram occurs more than ``max_repeats`` times (a small model
    looping)."""
    words = re.findall(r"\w+", text.lower())
    seen: dict = {}
    for i in range(len(words) - n + 1):
        key = tuple(words[i:i + n])
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > max_repeats:
            return True
    return False


def _is_question(line: str) -> bool:
    """A usable rewrite: 3-300 characters, not a copied triple, not looping, and a question."""
    if not 3 <= len(line) <= 300 or line.startswith("("):
        return False
    if not re.search(r"\w", line) or degenerate(line):
        return False
    first = re.split(r"\W+", line.lower(), maxsplit=1)[0]
    return line.endswith("?") or first in _QWORDS


def parse_rewrite(text: Optional[str]) -> Optional[str]:
    """The rewritten question in a Rewrite reply, or ``None`` if the reply is unusable.

    The prompt ends with ``Rewritten question:``, so the completion starts with the rewrite.
    Taken, in this order: the first line marked ``Rewritten question:``; else the first line that
    is a question (a ``Question:`` marker is removed). A copied triple ``(h, r, t)``, a statement
    or a looping text (:func:`degenerate`) is not a rewrite. A '?' is appended when missing.
    """
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    marked = [m.group(1) for m in (_MARKED_REWRITE.match(ln) for ln in lines) if m]
    candidates = [strip_marks(x) for x in marked]
    for ln in lines:
        m = _REWRITE.match(ln)
        candidates.append(strip_marks(m.group(1) if m else ln))
    for c in candidates:
        if _is_question(c):
            return c if c.endswith("?") else c.rstrip(".") + "?"
    return None


# ---------------------------------------------------------------- reflection (Fig. 5)
@dataclass
class Reflection:
    """A parsed reflection: either an answer or the missing information, with the reasoning."""

    answerable: bool
    answer: Optional[str]
    missing: Optional[str]
    reasoning: str
    malformed: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def reflection_requests(questions: Sequence[str], evidences: Sequence[str],
                        histories: Sequence[Sequence[dict]], passages: Sequence[str], *,
                        final: Sequence[bool], originals: Optional[Sequence[str]] = None,
                        max_tokens: int = REFLECT_MAX_TOKENS, prompt: str = "kgir_reflect") -> list:
    """One Reflection request per (rewritten) question: evidence, history and the round's passages
    ``P_t``.

    ``final[i]`` marks the last allowed round: the prompt then says the model must answer.
    ``originals[i]``, when it differs from ``questions[i]``, is shown as the original question.
    ``prompt`` is the prompt file (``cfg.reflect_prompt``: ``kgir_reflect``, worded for small
    models, or ``kgir_reflect_paper``, Fig. 5 as published).
    """
    n = len(questions)
    originals = list(originals) if originals is not None else [None] * n
    if not (len(evidences) == len(histories) == len(passages) == len(final) == len(originals) == n):
        raise ValueError("reflection_requests: the argument lists differ in length")
    out = []
    for q, ev, hist, ps, fin, orig in zip(questions, evidences, histories, passages, final,
                                          originals):
        hist_text = format_history(hist, orig if orig and orig != q else None)
        values = {"question": q, "evidence": ev, "passages": ps, "history": hist_text,
                  "final_note": FINAL_NOTE if fin else ""}
        out.append(chat(prompt, values, rstrip=True, max_tokens=max_tokens,
                        stop=("\nTriples:", "\nQuestion:", "\nRetrieved passages:")))
    return out


def clean_answer(s: str) -> str:
    """The first line of ``s`` without wrapping marks and a final full stop."""
    s = strip_marks(s.splitlines()[0] if s else "")
    return trim(s, "", ".")


def parse_reflection(text: Optional[str]) -> Reflection:
    """Parse a Reflection reply; never raises.

    The verdict is the *first* ``Answer:`` or ``Missing:`` line (a small model may ramble on). An
    empty answer or one that says it cannot answer ("unknown", "not enough ...") counts as not
    answerable, with that text as the missing information. A reply with neither line is
    malformed: not answerable, and the missing information is unknown (``None``). The reasoning
    is the text before the verdict (the prompt ends with ``Reasoning:``).
    """
    text = (text or "").strip()
    lines = text.splitlines()
    reasoning = []
    verdict = None
    for ln in lines:
        ma = _ANSWER.match(ln)
        if ma is not None:
            verdict = ("answer", ma.group(1))
            break
        mm = _MISSING.match(ln)
        if mm is not None:
            verdict = ("missing", mm.group(1))
            break
        mr = _REASON.match(ln)
        reasoning.append(mr.group(1) if mr else ln)
    reason = " ".join(r.strip() for r in reasoning if r.strip())
    if verdict is None:
        return Reflection(False, None, None, reason, malformed=True)
    kind, body = verdict
    body = clean_answer(body)
    if kind == "answer":
        if body and not _NO_ANSWER.match(body):
            return Reflection(True, body, None, reason)
        return Reflection(False, None, body or None, reason)
    return Reflection(False, None, body or None, reason)


def verdict_request(request: ChatRequest, reply: str, final: bool = False,
                    max_tokens: int = VERDICT_MAX_TOKENS) -> ChatRequest:
    """The verdict turn after a reflection reply without a verdict line (format repair, not in
    §2.4).

    The conversation is ``request``'s messages, then ``reply`` as the assistant turn, then the
    ``kgir_reflect_verdict`` user turn asking for one ``Answer:`` or ``Missing:`` line (in the
    last round, with the note that the model must answer).
    """
    ask = chat("kgir_reflect_verdict", {"final_note": FINAL_NOTE if final else ""}, rstrip=True)
    said = ("assistant", (reply or "").strip() or "(no reply)")
    messages = request.messages + (said,) + ask.messages
    return ChatRequest(messages=messages, max_tokens=max_tokens, temperature=request.temperature,
                       stop=("\n\n",), seed=request.seed, prompt="kgir_reflect_verdict")


def with_verdict(first: Reflection, verdict_text: Optional[str]) -> Reflection:
    """``first`` (a malformed reflection) completed by the verdict turn's reply: the verdict comes
    from ``verdict_text`` and the reasoning from ``first``. Still malformed if the verdict turn has
    no verdict line either."""
    second = parse_reflection(verdict_text)
    if second.malformed:
        return first
    return Reflection(second.answerable, second.answer, second.missing, first.reasoning)
