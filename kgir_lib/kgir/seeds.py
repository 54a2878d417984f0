"""Algorithm 1 steps 3-4 for one question (paper §2.2, eqs. 4-5): the question entities
``E_q = NER(q)`` (:func:`ner_requests`, :func:`parse_entities`), grounded in the question
(:func:`ground_entities`; fallback :func:`entities_in_question`), and their matches in ``G_q``,
the seeds (:func:`match_question`; the eq. 5 rules are :mod:`kgir_lib.kgir.entity_matching`).

Choices the paper leaves open:

- **NER guard** (:func:`ground_entities`): entities the LLM returns that do not occur in the
  question (a tiny model copies its few-shot examples) are dropped. If nothing is left, or nothing
  left matches an entity of ``G_q``, the graph entities that occur in the question are used
  instead (:func:`entities_in_question`), and ``used_fallback`` records it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from ..kg import Triple
from ..llm import extract_json
from ..llm.parsing import trim
from .entity_matching import (DEFAULT_MATCH_METHOD, DEFAULT_NGRAM_THRESHOLD, STOP_WORDS,
                              match_entities, normalize_name, seeds_of, triple_matches)

# ---------------------------------------------------------------- step 3: E_q = NER(q) (eq. 4)
NER_MAX_TOKENS = 48
NER_SCHEMA = {"type": "object", "required": ["named_entities"],
              "properties": {"named_entities": {"type": "array", "items": {"type": "string"},
                                                "maxItems": 6}}}


def ner_requests(questions: Sequence[str], max_tokens: int = NER_MAX_TOKENS) -> list:
    """One NER chat request per question (prompt ``kgir_ner``, eq. 4); send them in ONE
    ``generate`` call.

    The reply is asked for as ``{"named_entities": [...]}`` (HippoRAG's question NER format),
    constrained by a JSON schema where the backend supports it; the prompt's examples are earlier
    chat turns.
    """
    from ..llm.prompts import chat

    return [chat("kgir_ner", {"question": q}, rstrip=True, max_tokens=max_tokens,
                 json_schema=NER_SCHEMA)
            for q in questions]


# _clean_entity trims the parts (whitespace patterns around the separators made the split
# quadratic)
_SPLIT = re.compile(r";|\||\n|,\s|\t")
_LABEL = re.compile(r"^\s*(?:named\s+)?entit(?:y|ies)\s*[:：]\s*", re.I)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_NONE = {"", "none", "n/a", "na", "null", "no entities", "nothing", "unknown"}
_PREFIX = re.compile(r"^.*?\b(?:answer|entities|entity)\s*(?:is|are)?\s*[:：]\s*", re.I)


def _clean_entity(s: str) -> str:
    s = _BULLET.sub("", _PREFIX.sub("", str(s)))
    s = trim(s, "\"'`[(", "\"'`]).?!")
    return " ".join(s.split())


def _listed(data: Any) -> Optional[list]:
    """The names a JSON reply lists (``{"named_entities": [...]}``, a single string in it, or a bare
    list), or ``None`` when the reply is no such JSON."""
    vals = data.get("named_entities", data.get("entities")) if isinstance(data, dict) else data
    if isinstance(data, dict) and isinstance(vals, str):
        vals = [vals]
    if not isinstance(vals, list):
        return None
    return [v for v in vals if isinstance(v, (str, int, float))]


def parse_entities(text: Optional[str]) -> list:
    """Entity names in an NER reply (eq. 4), tolerant of format; never raises.

    Accepted: ``{"named_entities": [...]}`` (an empty list is no entity; a single string is one
    entity) or any JSON list of strings, or an ``Entities: A; B`` line (``;``, ``|``, ``, `` or
    newlines separate names). Duplicates (case-insensitive) and placeholders like "none" are
    dropped.
    """
    if not text or not isinstance(text, str):
        return []
    raw = _listed(extract_json(text))  # a JSON list of entities (possibly none): no line parsing
    if raw is None:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        labelled = [ln for ln in lines if _LABEL.match(ln)]
        body = _LABEL.sub("", labelled[0]) if labelled else (lines[0] if lines else "")
        raw = _SPLIT.split(body)
    out = []
    seen = set()
    for r in raw:
        e = _clean_entity(str(r))
        if e.lower() in _NONE or e.lower() in seen or len(e) > 120:
            continue
        seen.add(e.lower())
        out.append(e)
    return out


def ner_usable(text: Optional[str], question: str) -> bool:
    """An NER reply parsed as intended: a JSON list of names (``{"named_entities": [...]}`` or a
    bare list) with at least one name that occurs in ``question`` (:func:`ground_entities`)."""
    data = extract_json(text) if text else None
    vals = data.get("named_entities", data.get("entities")) if isinstance(data, dict) else data
    if not isinstance(vals, list):
        return False
    names = [str(v) for v in vals if isinstance(v, (str, int, float)) and str(v).strip()]
    return bool(ground_entities(names, question))


def ground_entities(entities: Sequence[str], question: str) -> list:
    """Keep the LLM entities that occur in ``question``: more than half of their content words do.

    Guards against a small model copying its few-shot examples (KGIR-RAG §2.1: malformed output
    is dropped, not trusted).
    """
    q_words = set(normalize_name(question).split())
    kept = []
    for e in entities:
        names = normalize_name(e).split()
        words = [w for w in names if w not in STOP_WORDS] or names
        if words and sum(w in q_words for w in words) * 2 > len(words):
            kept.append(e)
    return kept


def entities_in_question(question: str, graph_entities: Iterable[str], min_chars: int = 3) -> list:
    """Fallback E_q: graph entities whose normalised name occurs in the question as whole words.

    Longest first; a name contained in an already chosen longer one is skipped; names shorter
    than ``min_chars`` or made of stop words only are ignored.
    """
    q = f" {normalize_name(question)} "
    cands = {}
    for e in graph_entities:
        n = normalize_name(e)
        if len(n) < min_chars or all(w in STOP_WORDS for w in n.split()):
            continue
        if f" {n} " in q and n not in cands:
            cands[n] = e
    chosen: list = []
    for n in sorted(cands, key=lambda x: (-len(x), x)):
        if not any(f" {n} " in f" {c} " for c in chosen):
            chosen.append(n)
    return [cands[n] for n in chosen]


# ---------------------------------------------------------------- steps 3-4 for one question
@dataclass
class QuestionMatch:
    """Steps 3-4 of Algorithm 1 for one question: the question entities used and their
    matches."""

    E_q: list
    matches: dict                          # {question entity: [(graph entity, similarity)]}
    used_fallback: bool = False
    fallback_reason: Optional[str] = None  # "no_entities" | "no_match"
    matched_by_triple: list = field(default_factory=list)  # matched via whole triples

    @property
    def seeds(self) -> list:
        return seeds_of(self.matches)


def match_question(question: str, llm_entities: Sequence[str], G_q: Sequence[Triple], n: int = 3,
                   *, threshold: float = DEFAULT_NGRAM_THRESHOLD,
                   method: str = DEFAULT_MATCH_METHOD, fallback_on_no_match: bool = True,
                   match_triples: bool = True, ground: bool = True) -> QuestionMatch:
    """E_q and its matches in ``G_q`` (eqs. 4-5): the NER entities grounded in the question
    (:func:`ground_entities`) matched by name (:func:`match_entities`), then -- if
    ``match_triples`` -- against whole triples (:func:`triple_matches`); with no grounded entity,
    or (if ``fallback_on_no_match``) no seed, the graph entities written in the question
    (:func:`entities_in_question`) instead. ``ground=False`` takes ``llm_entities`` as given
    (entities a composition hands in place of NER, which the query of a later round need not
    name)."""
    graph_entities = {e for t in G_q for e in (t.head, t.tail)}
    E_q = ground_entities(llm_entities, question) if ground else list(llm_entities)
    matches = match_entities(E_q, graph_entities, n, threshold, method=method) if E_q else {}
    by_triple: list = []
    if E_q and match_triples:
        by_name = matches
        matches = triple_matches(E_q, G_q, matches)
        by_triple = [e for e in E_q if matches.get(e) and not by_name.get(e)]
    if not E_q or (fallback_on_no_match and not seeds_of(matches)):
        reason = "no_entities" if not E_q else "no_match"
        E_q = entities_in_question(question, graph_entities)
        fallback = match_entities(E_q, graph_entities, n, threshold, method=method)
        return QuestionMatch(list(E_q), fallback, True, reason, by_triple)
    return QuestionMatch(list(E_q), matches, False, None, by_triple)
