"""Entity matching for KGIR-RAG's evidence subgraph (paper §2.2 eqs. 4-5, Algorithm 1 steps 3-4).

``E_q = NER(q)`` (:func:`ner_requests`, :func:`parse_entities`, :func:`ground_entities`,
fallback :func:`entities_in_question`), then the question entities matched to the entities of ``G_q``
(:func:`match_entities`, :func:`ngram_similarity`; :func:`triple_matches` for descriptions), whose
matches are the seeds (:func:`seeds_of`). :mod:`kgir_lib.kgir.subgraph` builds ``G_tmp`` and ``G_Ans`` from them.

Choices the paper leaves open:

- **The matching rule** (``cfg.match_method``, threshold ``cfg.ngram_threshold``; :data:`SIMILARITIES`,
  :func:`ngram_similarity`, :func:`match_entities`). Eq. 5 is to judge "whether the question entity and
  the triple's entity are the same entity". Rules: ``"dice"`` and ``"overlap"`` (Dice / overlap coefficient
  of the character n-gram sets, n = ``cfg.ngram_n`` = 3, of the normalised names -- lower case, accents
  and punctuation removed, padded with one space each side); ``"containment"`` (overlap coefficient of the
  content-word sets); ``"overlap_len"`` (overlap, and the shorter name at least :data:`LENGTH_RATIO` of the
  longer's length); ``"overlap_best"`` / ``"dice_best"`` (only each question entity's best graph entities);
  ``"tokens"`` (the content-word sets, made singular, are equal or one adds at most :data:`MAX_EXTRA_WORDS`
  word; similarity = their Jaccard). **Default: ``"tokens"`` at 0.7** (:data:`DEFAULT_MATCH_METHOD`,
  :data:`DEFAULT_NGRAM_THRESHOLD`): equal content words, or a name of three or more content words inside
  one with a single word more. Chosen by measurement on hand-labelled pairs from the local reference run
  (``tests/fixtures/matching_pairs.tsv``, ``benchmarks/bench_matching.py``,
  ``results/benchmarks/matching.md``): the highest recall among the rules with precision >= 90 %. The
  overlap coefficient at 0.8, used before, accepts *containment*, not sameness ("state" / "United States",
  "Paris" / "Paris Hilton", a sentence that contains the name): about a fifth of its matches on those pairs
  are right. Nothing downstream repairs a wrong match: a spanning tree keeps every node of its component,
  so the MST of eq. 7 cannot drop a wrong seed. The price of the strict rule is a short name inside a much
  longer one ("Compaq" / "Compaq Computer Corporation"), which it misses; whole-triple matching and the
  fallback below still give such questions a seed. A question entity matches every graph entity the rule
  accepts (best-only rules: the best ones).
- **Whole-triple matching** (:func:`triple_matches`): a question entity that matches no entity name (an
  LLM NER that returns a description, "PC maker of 1994") is matched against whole triples: if all its
  content words occur in ``head relation tail``, that triple's head and tail become seeds (eq. 5 "judge
  whether the question's entities and the passage triples are the same entity").
- **NER guard** (:func:`ground_entities`): entities the LLM returns that do not
  occur in the question (a tiny model copies its few-shot examples) are dropped.
  If nothing is left, or nothing left matches an entity of ``G_q``, the graph
  entities that occur in the question are used instead
  (:func:`entities_in_question`), and ``used_fallback`` records it.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Optional, Sequence

from ..kg import Triple
from ..llm import extract_json
from ..llm.parsing import trim

# ---------------------------------------------------------------- step 3: E_q = NER(q) (eq. 4)
NER_MAX_TOKENS = 48
NER_SCHEMA = {"type": "object", "required": ["named_entities"],
              "properties": {"named_entities": {"type": "array", "items": {"type": "string"}, "maxItems": 6}}}


def ner_requests(questions: Sequence[str], max_tokens: int = NER_MAX_TOKENS) -> list:
    """One NER chat request per question (prompt ``kgir_ner``, eq. 4); send them in ONE ``generate`` call.

    The reply is asked for as ``{"named_entities": [...]}`` (HippoRAG's question
    NER format), constrained by a JSON schema where the backend supports it;
    the prompt's examples are earlier chat turns.
    """
    from ..llm.prompts import chat

    return [chat("kgir_ner", {"question": q}, rstrip=True, max_tokens=max_tokens, json_schema=NER_SCHEMA)
            for q in questions]


# _clean_entity trims the parts (whitespace patterns around the separators made the split quadratic)
_SPLIT = re.compile(r";|\||\n|,\s|\t")
_LABEL = re.compile(r"^\s*(?:named\s+)?entit(?:y|ies)\s*[:：]\s*", re.I)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_NONE = {"", "none", "n/a", "na", "null", "no entities", "nothing", "unknown"}


_PREFIX = re.compile(r"^.*?\b(?:answer|entities|entity)\s*(?:is|are)?\s*[:：]\s*", re.I)


def _clean_entity(s: str) -> str:
    s = _BULLET.sub("", _PREFIX.sub("", str(s)))
    s = trim(s, "\"'`[(", "\"'`]).?!")
    return " ".join(s.split())


def parse_entities(text: Optional[str]) -> list:
    """Entity names in an NER reply (eq. 4), tolerant of format; never raises.

    Accepted: ``{"named_entities": [...]}`` (an empty list is no entity; a single string is one entity)
    or any JSON list of strings, or an ``Entities: A; B`` line (``;``, ``|``, ``, `` or newlines separate names).
    Duplicates (case-insensitive) and placeholders like "none" are dropped.
    """
    if not text or not isinstance(text, str):
        return []
    raw: list = []
    answered = False  # the reply is JSON that lists entities (possibly none): no line parsing then
    data = extract_json(text)
    if isinstance(data, dict):
        vals = data.get("named_entities", data.get("entities"))
        if isinstance(vals, str):
            vals = [vals]
        if isinstance(vals, list):
            raw, answered = [v for v in vals if isinstance(v, (str, int, float))], True
    elif isinstance(data, list):
        raw, answered = [v for v in data if isinstance(v, (str, int, float))], True
    if not raw and not answered:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        labelled = [ln for ln in lines if _LABEL.match(ln)]
        body = _LABEL.sub("", labelled[0]) if labelled else (lines[0] if lines else "")
        raw = _SPLIT.split(body)
    out, seen = [], set()
    for r in raw:
        e = _clean_entity(str(r))
        if e.lower() in _NONE or e.lower() in seen or len(e) > 120:
            continue
        seen.add(e.lower())
        out.append(e)
    return out


def ner_usable(text: Optional[str], question: str) -> bool:
    """An NER reply parsed as intended: a JSON list of names (``{"named_entities": [...]}``
    or a bare list) with at least one name that occurs in ``question`` (:func:`ground_entities`)."""
    data = extract_json(text) if text else None
    vals = data.get("named_entities", data.get("entities")) if isinstance(data, dict) else data
    if not isinstance(vals, list):
        return False
    names = [str(v) for v in vals if isinstance(v, (str, int, float)) and str(v).strip()]
    return bool(ground_entities(names, question))


def normalize_name(s: str) -> str:
    """Lower case, accents folded, punctuation to spaces, white space folded."""
    s = unicodedata.normalize("NFKD", str(s))
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    s = re.sub(r"[^\w\s]", " ", s)
    return " ".join(s.split())


STOP_WORDS = {"the", "a", "an", "of", "in", "on", "at", "to", "for", "and", "or", "by", "with", "from", "is", "was",
              "what", "who", "which", "when", "where", "how", "why", "did", "does", "do"}


def ground_entities(entities: Sequence[str], question: str) -> list:
    """Keep the LLM entities that occur in ``question``: more than half of their content words do.

    Guards against a small model copying its few-shot examples (KGIR-RAG §2.1:
    malformed output is dropped, not trusted).
    """
    q_words = set(normalize_name(question).split())
    kept = []
    for e in entities:
        words = [w for w in normalize_name(e).split() if w not in STOP_WORDS] or normalize_name(e).split()
        if words and sum(w in q_words for w in words) * 2 > len(words):
            kept.append(e)
    return kept


def entities_in_question(question: str, graph_entities: Iterable[str], min_chars: int = 3) -> list:
    """Fallback E_q: graph entities whose normalised name occurs in the question as whole words.

    Longest first; a name contained in an already chosen longer one is skipped;
    names shorter than ``min_chars`` or made of stop words only are ignored.
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


# ---------------------------------------------------------------- step 4: n-gram matching (eq. 5)
def char_ngrams(s: str, n: int = 3) -> set:
    """Set of character n-grams of the normalised name padded with one space each side.

    A name shorter than ``n`` (after padding) gives itself as its only gram.
    """
    if n < 1:
        raise ValueError(f"parameter 'ngram_n': must be >= 1, got {n}")
    norm = normalize_name(s)
    if not norm:
        return set()
    padded = f" {norm} "
    if len(padded) <= n:
        return {padded}
    return {padded[i:i + n] for i in range(len(padded) - n + 1)}


def _dice(a: frozenset, b: frozenset) -> float:
    return 2.0 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


def _overlap(a: frozenset, b: frozenset) -> float:
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def content_tokens(s: str) -> set:
    """Words of the normalised name without stop words (all words if they are all stop words)."""
    words = normalize_name(s).split()
    return {w for w in words if w not in STOP_WORDS} or set(words)


# ρ of "overlap_len": the shorter normalised name must be at least this share of the longer one's length
# (measured in results/benchmarks/matching.md, benchmarks/bench_matching.py).
LENGTH_RATIO = 0.8
# "tokens": the longer name may add at most this many content words to the shorter one's
MAX_EXTRA_WORDS = 1


def singular(word: str) -> str:
    """A crude English singular, so that "monsters" / "monster" and "treaties" / "treaty" compare equal
    in the ``"tokens"`` rule: -ies -> -y, else one final -s dropped (not -ss, not words of 3 letters or fewer)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@dataclass(frozen=True)
class NameFeatures:
    """What every eq. 5 rule compares: character n-grams, content words and length of the normalised name."""

    grams: frozenset
    words: frozenset
    length: int
    singular_words: frozenset  # the content words made :func:`singular` (the ``"tokens"`` rule)


@lru_cache(maxsize=1 << 16)
def name_features(s: str, n: int = 3) -> NameFeatures:
    """:class:`NameFeatures` of one name (:func:`char_ngrams`, :func:`content_tokens`, :func:`normalize_name`);
    cached, as a graph's entity names recur in every question that retrieves their passages."""
    words = frozenset(content_tokens(s))
    return NameFeatures(frozenset(char_ngrams(s, n)), words, len(normalize_name(s)),
                        frozenset(singular(w) for w in words))


def _length_ok(a: NameFeatures, b: NameFeatures) -> bool:
    return bool(a.length and b.length) and min(a.length, b.length) >= LENGTH_RATIO * max(a.length, b.length)


def _token_score(a: NameFeatures, b: NameFeatures) -> float:
    """Jaccard of the content-word sets (words made :func:`singular`) when one set contains the other and
    the larger adds at most :data:`MAX_EXTRA_WORDS` words; else 0."""
    small, large = sorted((a.singular_words, b.singular_words), key=len)
    if not small or not small <= large or len(large) - len(small) > MAX_EXTRA_WORDS:
        return 0.0
    return len(small) / len(large)


_SCORES = {
    "dice": lambda a, b: _dice(a.grams, b.grams),
    "overlap": lambda a, b: _overlap(a.grams, b.grams),
    "containment": lambda a, b: _overlap(a.words, b.words),
    "overlap_len": lambda a, b: _overlap(a.grams, b.grams) if _length_ok(a, b) else 0.0,
    "overlap_best": lambda a, b: _overlap(a.grams, b.grams),
    "dice_best": lambda a, b: _dice(a.grams, b.grams),
    "tokens": _token_score,
}
SIMILARITIES = tuple(_SCORES)  # the rules implemented: the values the config allows (config.fields.MATCH_METHODS)
BEST_ONLY = ("overlap_best", "dice_best")  # rules that keep only each question entity's best graph entities

# The eq. 5 rule chosen by measurement (results/benchmarks/matching.md); the defaults of every function here.
DEFAULT_MATCH_METHOD = "tokens"
DEFAULT_NGRAM_THRESHOLD = 0.7


def _score_fn(method: str):
    if method not in _SCORES:
        raise ValueError(f"unknown matching method {method!r} (choose from {SIMILARITIES})")
    return _SCORES[method]


def ngram_similarity(a: str, b: str, n: int = 3, method: str = DEFAULT_MATCH_METHOD) -> float:
    """Similarity of two entity names (eq. 5) under one of the rules :data:`SIMILARITIES`:

    - ``"dice"``: 2|A∩B| / (|A|+|B|) of the character n-gram sets A, B;
    - ``"overlap"``: |A∩B| / min(|A|, |B|) of the character n-gram sets (overlap coefficient);
    - ``"containment"``: |W_a∩W_b| / min(|W_a|, |W_b|) of the content-word sets (token containment);
    - ``"overlap_len"``: the overlap coefficient when the shorter normalised name is at least
      :data:`LENGTH_RATIO` of the longer one's length, else 0;
    - ``"overlap_best"`` / ``"dice_best"``: the overlap coefficient / Dice; :func:`match_entities` then keeps
      only each question entity's best graph entities;
    - ``"tokens"``: |W_a| / |W_b| for content-word sets W_a ⊆ W_b where W_b adds at most
      :data:`MAX_EXTRA_WORDS` words (1 for equal sets), else 0.
    """
    return _score_fn(method)(name_features(a, n), name_features(b, n))


def match_entities(E_q: Sequence[str], entities: Iterable[str], n: int = 3,
                   threshold: float = DEFAULT_NGRAM_THRESHOLD, method: str = DEFAULT_MATCH_METHOD) -> dict:
    """For each question entity, the graph entities it is judged the same entity as (eq. 5).

    A graph entity matches when its :func:`ngram_similarity` under ``method`` is >= ``threshold`` (and > 0);
    the rules of :data:`BEST_ONLY` keep, of those, only the ones with the highest similarity (ties: the
    highest Dice, then all that tie). Returns ``{question_entity: [(graph_entity, similarity), ...]}``,
    best first, ties by name; a question entity without any match maps to ``[]``.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"parameter 'ngram_threshold': must be in [0, 1], got {threshold}")
    score = _score_fn(method)
    ents = sorted(set(entities))
    feats = {e: name_features(e, n) for e in ents}
    out: dict = {}
    for q in E_q:
        fq = name_features(q, n)
        found = [(e, round(s, 6)) for e in ents if (s := score(fq, feats[e])) >= threshold and s > 0]
        if method in BEST_ONLY and found:
            rank = {e: (s, round(_dice(fq.grams, feats[e].grams), 6)) for e, s in found}
            top = max(rank.values())
            found = [(e, s) for e, s in found if rank[e] == top]
        out[q] = sorted(found, key=lambda x: (-x[1], x[0]))
    return out


def seeds_of(matches: dict) -> list:
    """Seed entities: every matched graph entity, in order of the question entities, deduplicated."""
    return list(dict.fromkeys(e for found in matches.values() for e, _ in found))


def triple_text(t: Triple) -> str:
    """What a triple's weight is computed from: ``head relation tail``."""
    return f"{t.head} {t.relation} {t.tail}"


def triple_matches(E_q: Sequence[str], triples: Sequence[Triple], matches: dict) -> dict:
    """Eq. 5 against whole triples, for question entities that matched no entity name.

    A question entity whose content words all occur in a triple's ``head relation
    tail`` text (e.g. the description "PC maker of 1994" in ``(Compaq, was top PC
    maker of, 1994)``) is matched to that triple's head and tail (similarity 1.0).
    Returns a copy of ``matches`` with those entries filled; entities already
    matched are left alone.
    """
    out = {k: list(v) for k, v in matches.items()}
    words = [(t, set(normalize_name(triple_text(t)).split())) for t in dict.fromkeys(triples)]
    for e in E_q:
        if out.get(e):
            continue
        need = content_tokens(e)
        found: dict = {}
        for t, w in words:
            if need and need <= w:
                found.setdefault(t.head, 1.0)
                found.setdefault(t.tail, 1.0)
        out[e] = sorted(found.items(), key=lambda x: (-x[1], x[0]))
    return out


@dataclass
class QuestionMatch:
    """Steps 3-4 of Algorithm 1 for one question: the question entities used and their matches."""

    E_q: list
    matches: dict                          # {question entity: [(graph entity, similarity)]}
    used_fallback: bool = False
    fallback_reason: Optional[str] = None  # "no_entities" | "no_match"
    matched_by_triple: list = field(default_factory=list)  # question entities matched via whole triples

    @property
    def seeds(self) -> list:
        return seeds_of(self.matches)


def match_question(question: str, llm_entities: Sequence[str], G_q: Sequence[Triple], n: int = 3,
                   threshold: float = DEFAULT_NGRAM_THRESHOLD, method: str = DEFAULT_MATCH_METHOD,
                   fallback_on_no_match: bool = True, match_triples: bool = True, ground: bool = True) -> QuestionMatch:
    """E_q and its matches in ``G_q`` (eqs. 4-5): the NER entities grounded in the question
    (:func:`ground_entities`) matched by name (:func:`match_entities`), then -- if ``match_triples`` --
    against whole triples (:func:`triple_matches`); with no grounded entity, or (if ``fallback_on_no_match``)
    no seed, the graph entities written in the question (:func:`entities_in_question`) instead.
    ``ground=False`` takes ``llm_entities`` as given (gold entities of the oracle study variants, which the
    rewritten query of a later round need not name)."""
    graph_entities = {e for t in G_q for e in (t.head, t.tail)}
    E_q = ground_entities(llm_entities, question) if ground else list(llm_entities)
    matches = match_entities(E_q, graph_entities, n, threshold, method) if E_q else {}
    by_triple: list = []
    if E_q and match_triples:
        by_name = matches
        matches = triple_matches(E_q, G_q, matches)
        by_triple = [e for e in E_q if matches.get(e) and not by_name.get(e)]
    if not E_q or (fallback_on_no_match and not seeds_of(matches)):
        reason = "no_entities" if not E_q else "no_match"
        E_q = entities_in_question(question, graph_entities)
        return QuestionMatch(list(E_q), match_entities(E_q, graph_entities, n, threshold, method), True, reason,
                             by_triple)
    return QuestionMatch(list(E_q), matches, False, None, by_triple)
