"""Tolerant extraction of structured output from LLM text.

Small models wrap JSON in prose or code fences, use single quotes, leave
trailing commas or stop mid-object. :func:`extract_json` returns the first JSON
value it can recover, or ``None``; it never raises.
"""
from __future__ import annotations

import ast
import json
import re
from typing import Any, Optional

_FENCE = re.compile(r"```(?:json|python)?\s*(.*?)```", re.S | re.I)


def _candidates(text: str):
    for m in _FENCE.finditer(text):
        yield m.group(1)
    for opener, closer in (("{", "}"), ("[", "]")):
        start = text.find(opener)
        while start != -1:
            depth, in_str, esc = 0, None, False
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
                elif ch == opener:
                    depth += 1
                elif ch == closer:
                    depth -= 1
                    if depth == 0:
                        yield text[start:j + 1]
                        break
            else:
                yield text[start:] + closer * max(depth, 1)  # truncated output: try to close it
            start = text.find(opener, start + 1)
    yield text


def _loads(s: str) -> Any:
    s = s.strip()
    try:
        return json.loads(s)
    except (json.JSONDecodeError, ValueError, RecursionError):
        pass
    s2 = re.sub(r",\s*([}\]])", r"\1", s)
    try:
        return json.loads(s2)
    except (json.JSONDecodeError, ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(s2)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def extract_json(text: Optional[str]) -> Any:
    """First JSON (or Python-literal) dict or list found in ``text``; ``None`` if there is none."""
    if not text or not isinstance(text, str):
        return None
    for cand in _candidates(text):
        val = _loads(cand)
        if isinstance(val, (dict, list)):
            return val
    return None
