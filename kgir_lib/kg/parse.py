"""Tolerant parsing of LLM triple output (KGIR-RAG §2.1).

Real extractors emit malformed output: GPT-3.5's published OpenIE has triples
with two or five parts, SmolLM2 wraps lines in prose or numbering. This module
turns whatever came back into clean ``(head, relation, tail)`` tuples and counts
every fragment it could not keep, by reason. It never raises.

Accepted shapes (mixed freely, nested to any depth):

- JSON or Python literals: ``[["h", "r", "t"], ...]``, ``{"triples": [...]}``,
  ``[{"head": ..., "relation": ..., "tail": ...}]`` (also subject/predicate/object);
- lines ``h ## r ## t`` (KG²RAG / our prompt's format) or ``h | r | t``;
- lines ``(h, r, t)`` / ``[h, r, t]``, quoted or not, optionally numbered or bulleted.

Drop reasons (keys of the returned :class:`collections.Counter`):

- ``wrong_arity``: a triple-shaped fragment without exactly three parts;
- ``empty_part``: one of the three parts is empty after trimming;
- ``head_equals_tail``: head and tail are the same entity (case and spacing folded);
- ``duplicate``: the same triple again in the same output (case and spacing folded);
- ``unparseable``: a non-empty output (or a fragment of it) with no triple shape at all.
"""
from __future__ import annotations

import ast
import json
import re
from collections import Counter
from typing import Any, Iterator

from ..llm.parsing import extract_json

TripleTuple = tuple  # (head, relation, tail), all non-empty str

DROP_REASONS = ("wrong_arity", "empty_part", "head_equals_tail", "duplicate", "unparseable")
# An extraction reply cut at its token budget (finish_reason "length"): counted once a reply beside the parser's
# drops; the triples it would have written after the cut are lost and cannot be counted (not in drops_total).
CUT_REPLY = "reply_cut_at_token_limit"

_MAX_DEPTH = 50  # deeper nesting than any real output; deeper fragments count as unparseable
_MAX_PART = 500  # characters kept of one part (a runaway generation is truncated, not kept whole)
_HEAD_KEYS = ("head", "subject", "h", "s", "source")
_REL_KEYS = ("relation", "predicate", "r", "p", "rel", "relationship")
_TAIL_KEYS = ("tail", "object", "t", "o", "target")
_LIST_KEYS = ("triples", "extracted_triples", "triplets", "relations", "facts", "edges")
_SEP = re.compile(r"\s*(?:##|\|)\s*")
_BULLET = re.compile(r"^\s*(?:[-*•]+\s*|\d+[.)]\s+|\(\d+\)\s+)")
_QUOTES = "\"'`“”‘’"


def clean_part(value: Any) -> str:
    """One triple part as text: ``None`` → ``""``; spacing folded; surrounding quotes trimmed."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    while len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    return text[:_MAX_PART]


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def _is_scalar(x: Any) -> bool:
    return x is None or isinstance(x, (str, int, float, bool))


# ---------------------------------------------------------------------------- candidate fragments
def _line_candidate(line: str) -> Any:
    """A triple-shaped fragment from one text line, or ``None`` if the line has no triple shape."""
    line = _BULLET.sub("", line).strip()
    if not line:
        return None
    if "##" in line or line.count("|") >= 1:
        return _SEP.split(line.strip("|# ").strip())
    if line[0] in "([" and line.rstrip(".,;")[-1:] in ")]":
        body = line.rstrip(".,;")
        val = _literal(body)
        if isinstance(val, (list, tuple)):
            return list(val)
        return body[1:-1].split(",")
    return None


def _literal(text: str) -> Any:
    """``text`` as JSON, else as a Python literal, else ``None``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _text_candidates(text: str, drops: Counter) -> Iterator[Any]:
    """Fragments of an LLM output string: line formats first, else the first JSON value."""
    found = False
    for line in text.splitlines():
        cand = _line_candidate(line)
        if cand is not None:
            found = True
            yield cand
    if found:
        return
    obj = extract_json(text)
    if isinstance(obj, (list, dict)):
        yield obj
    elif text.strip():
        drops["unparseable"] += 1


def _walk(obj: Any, drops: Counter, depth: int = 0) -> Iterator[list]:
    """Flat lists of scalars (triple candidates) found anywhere in ``obj``."""
    if depth > _MAX_DEPTH:
        drops["unparseable"] += 1
        return
    if isinstance(obj, str):
        for cand in _text_candidates(obj, drops):
            if isinstance(cand, list) and all(_is_scalar(x) for x in cand):
                yield cand
            else:
                yield from _walk(cand, drops, depth + 1)
    elif isinstance(obj, dict):
        if not obj:
            return
        keys = {str(k).casefold(): v for k, v in obj.items()}
        triple_keys = [next((k for k in names if k in keys), None) for names in (_HEAD_KEYS, _REL_KEYS, _TAIL_KEYS)]
        if all(triple_keys):
            yield [keys[k] for k in triple_keys if k]  # (all three found)
            return
        lists = [keys[k] for k in _LIST_KEYS if k in keys]
        if lists:
            for value in lists:
                yield from _walk(value, drops, depth + 1)
        elif any(triple_keys):
            yield [keys[k] for k in triple_keys if k]  # a partial triple object: wrong arity
        else:
            drops["unparseable"] += 1
    elif isinstance(obj, (list, tuple)):
        if obj and all(_is_scalar(x) for x in obj) and not all(isinstance(x, str) and _has_shape(x) for x in obj):
            yield list(obj)
        else:
            for item in obj:
                yield from _walk(item, drops, depth + 1)
    elif obj is not None:
        drops["unparseable"] += 1


def _has_shape(text: str) -> bool:
    """A string that is itself a whole triple line (so a list of them is a list of triples)."""
    return "##" in text or "|" in text or (text.strip()[:1] in "([" and text.strip()[-1:] in ")]")


# ---------------------------------------------------------------------------- public API
def validate(parts: list, drops: Counter, seen: set, clean: bool = True) -> TripleTuple | None:
    """The cleaned triple, or ``None`` after counting why it was dropped.

    ``clean=False`` keeps a triple whose head equals its tail up to case and a repeat of a triple up to case (the
    two rules that only clean the graph: the KG²RAG cross-check's run on the triples as extracted); a triple
    without three non-empty parts is still dropped."""
    if len(parts) != 3:
        drops["wrong_arity"] += 1
        return None
    head, rel, tail = (clean_part(p) for p in parts)
    if not head or not rel or not tail:
        drops["empty_part"] += 1
        return None
    if not clean:
        return (head, rel, tail)
    if _fold(head) == _fold(tail):
        drops["head_equals_tail"] += 1
        return None
    key = (_fold(head), _fold(rel), _fold(tail))
    if key in seen:
        drops["duplicate"] += 1
        return None
    seen.add(key)
    return (head, rel, tail)


def parse_triples(raw: Any, clean: bool = True) -> tuple:
    """Parse one extraction output into ``(kept triples, drops by reason)``; never raises.

    ``raw`` is the LLM's text (any format in the module docstring) or an already
    parsed object (e.g. one ``extracted_triples`` list of HippoRAG's OpenIE file).
    Kept triples are ``(head, relation, tail)`` with three non-empty parts,
    ``head != tail``, no duplicates, in output order; ``clean=False``: self-loops and repeats kept
    (:func:`validate`).
    """
    drops: Counter = Counter()
    kept: list = []
    seen: set = set()
    try:
        if isinstance(raw, (bytes, bytearray)):
            raw = raw.decode("utf-8", "replace")
        for parts in _walk(raw, drops):
            triple = validate(parts, drops, seen, clean)
            if triple is not None:
                kept.append(triple)
    except Exception:  # noqa: BLE001 - the contract is "never raises": count and keep what we have
        drops["unparseable"] += 1
    return kept, drops


def format_triples(triples: list) -> str:
    """Triples as ``h ## r ## t`` lines (the prompt's output format)."""
    return "\n".join(" ## ".join(t[:3]) for t in triples)


def to_json(triples: list) -> str:
    return json.dumps([list(t[:3]) for t in triples], ensure_ascii=False)
