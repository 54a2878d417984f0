"""Tolerant extraction of structured output from LLM text.

Small models wrap JSON in prose or code fences, use single quotes, leave
trailing commas or stop mid-object. :func:`extract_json` returns the first JSON
value it can recover, or ``None``; it never raises.
"""
from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any, Optional

_FENCE = re.compile(r"```(?:json|python)?\s*(.*?)```", re.S | re.I)


def trim(text: str, leading: str = "", trailing: str = "") -> str:
    r"""``text`` without its leading run of whitespace and ``leading`` characters and its trailing run of
    whitespace and ``trailing`` characters: ``re.sub(r"^[\s<leading>]+|[\s<trailing>]+$", "", text)`` in
    linear time (the regex is quadratic on a long run that stops short of the end, which a looping small
    model can write)."""
    i, j = 0, len(text)
    while i < j and (text[i].isspace() or text[i] in leading):
        i += 1
    while j > i and (text[j - 1].isspace() or text[j - 1] in trailing):
        j -= 1
    return text[i:j]


_CLOSE = {"{": "}", "[": "]"}


def _balanced_from(text: str, start: int) -> str:
    """The bracketed value opening at ``text[start]``; a truncated one is closed (strings and brackets)."""
    stack, in_str, esc = [], None, False
    for j in range(start, len(text)):
        ch = text[j]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == in_str:
                in_str = None
        elif ch in "\"'":
            in_str = ch
        elif ch in _CLOSE:
            stack.append(_CLOSE[ch])
        elif ch in "}]":
            if not stack or ch != stack[-1]:
                return text[start:j + 1]  # mismatched: let the parsers reject it
            stack.pop()
            if not stack:
                return text[start:j + 1]
    # truncated output (the model stopped mid-value): close what is open
    tail = text[start:]
    if esc:
        tail = tail[:-1]
    return tail + (in_str or "") + "".join(reversed(stack))


def _candidates(text: str, limit: int = 64):
    """Fenced blocks first, then bracketed values in order of their opening bracket, then the whole text."""
    for m in _FENCE.finditer(text):
        yield m.group(1)
    tried = 0
    for j, ch in enumerate(text):
        if ch in _CLOSE:
            yield _balanced_from(text, j)
            tried += 1
            if tried >= limit:  # bound the work on long, bracket-heavy text
                break
    yield text


def _loads(s: str) -> Any:
    """JSON, JSON without trailing commas, or a Python literal that is valid JSON data; else ``None``."""
    s = s.strip()
    try:
        return json.loads(s)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        pass
    s2 = re.sub(r",\s*([}\]])", r"\1", s)
    try:
        return json.loads(s2)
    except (ValueError, RecursionError):
        pass
    try:
        with warnings.catch_warnings():  # e.g. "invalid escape sequence" from the literal parser
            warnings.simplefilter("ignore")
            val = ast.literal_eval(s2)
        json.dumps(val)  # only JSON data: no sets, bytes, Ellipsis, complex numbers
        return val
    except Exception:  # literal_eval raises many kinds on arbitrary text; this function never raises
        return None


def extract_json(text: Optional[str]) -> Any:
    """First JSON (or Python-literal) dict or list found in ``text``; ``None`` if there is none.

    Tried in order: fenced code blocks, then each bracketed value by the position of
    its opening bracket (a value cut off at the end of the text is closed first),
    then the whole text. Trailing commas and single quotes are tolerated. Never raises.
    """
    if not text or not isinstance(text, str):
        return None
    try:
        for cand in _candidates(text):
            val = _loads(cand)
            if isinstance(val, (dict, list)):
                return val
    except Exception:  # pragma: no cover - defensive: malformed output is skipped, never a crash
        return None
    return None
