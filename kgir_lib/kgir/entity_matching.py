"""Entity matching for KGIR-RAG's evidence subgraph (paper §2.2 eqs. 4-5, Algorithm 1 steps 3-4).

The question entities (``E_q = NER(q)``: :mod:`kgir_lib.kgir.seeds`) matched to the entities of
``G_q`` (:func:`match_entities`, :func:`ngram_similarity`; :func:`triple_matches` for
descriptions), whose matches are the seeds (:func:`seeds_of`). :mod:`kgir_lib.kgir.subgraph`
builds ``G_tmp`` and ``G_Ans`` from them.

Choices the paper leaves open:

- **The matching rule** (``cfg.match_method``, threshold ``cfg.ngram_threshold``;
  :data:`SIMILARITIES`, :func:`ngram_similarity`, :func:`match_entities`). Eq. 5 is to judge
  "whether the question entity and the triple's entity are the same entity". Rules: ``"dice"``
  and ``"overlap"`` (Dice / overlap coefficient of the character n-gram sets, n =
  ``cfg.ngram_n`` = 3, of the normalised names -- lower case, accents and punctuation removed,
  padded with one space each side); ``"containment"`` (overlap coefficient of the content-word
  sets); ``"overlap_len"`` (overlap, and the shorter name at least :data:`LENGTH_RATIO` of the
  longer's length); ``"overlap_best"`` / ``"dice_best"`` (only each question entity's best graph
  entities); ``"tokens"`` (the content-word sets, made singular, are equal or one adds at most
  :data:`MAX_EXTRA_WORDS` word; similarity = their Jaccard). **Default: ``"tokens"`` at 0.7**
  (:data:`DEFAULT_MATCH_METHOD`, :data:`DEFAULT_NGRAM_THRESHOLD`): equal content words, or a name
  of three or more content words inside one with a single word more. Chosen by measurement on
  hand-labelled pairs from the local reference run (``tests/fixtures/matching_pairs.tsv``,
  ``benchmarks/bench_matching.py``, ``results/benchmarks/matching.md``): the highest recall among
  the rules with precision >= 90 %. The overlap coefficient at 0.8, used before, accepts
  *containment*, not sameness ("state" / "United States", "Paris" / "Paris Hilton", a sentence
  that contains the name): about a fifth of its matches on those pairs are right. Nothing
  downstream repairs a wrong match: a spanning tree keeps every node of its component, so the MST
  of eq. 7 cannot drop a wrong seed. The price of the strict rule is a short name inside a much
  longer one ("Compaq" / "Compaq Computer Corporation"), which it misses; whole-triple matching
  and the fallback of :mod:`kgir_lib.kgir.seeds` still give such questions a seed. A question
  entity matches every graph entity the rule accepts (best-only rules: the best ones).
- **Whole-triple matching** (:func:`triple_matches`): a question entity that matches no entity
  name (an LLM NER that returns a description, "PC maker of 1994") is matched against whole
  triples: if all its content words occur in ``head relation tail``, that triple's head and tail
  become seeds (eq. 5 "judge whether the question's entities and the passage triples are the
  same entity").
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from ..kg import Triple


@lru_cache(maxsize=1 << 17, typed=True)
def normalize_name(s: str) -> str:
    """Lower case, accents folded, punctuation to spaces, white space folded (remembered: the same
    names and triple texts are normalised for every question, rebuild and method of a run)."""
    s = unicodedata.normalize("NFKD", str(s))
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    s = re.sub(r"[^\w\s]", " ", s)
    return " ".join(s.split())


STOP_WORDS = {"the", "a", "an", "of", "in", "on", "at", "to", "for", "and", "or", "by", "with",
              "from", "is", "was", "what", "who", "which", "when", "where", "how", "why", "did",
              "does", "do"}


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


# ρ of "overlap_len": the shorter normalised name must be at least this share of the longer one's
# length (measured in results/benchmarks/matching.md, benchmarks/bench_matching.py).
LENGTH_RATIO = 0.8
# "tokens": the longer name may add at most this many content words to the shorter one's
MAX_EXTRA_WORDS = 1


def singular(word: str) -> str:
    """A crude English singular, so that "monsters" / "monster" and "treaties" / "treaty" compare
    equal in the ``"tokens"`` rule: -ies -> -y, else one final -s dropped (not -ss, not words of 3
    letters or fewer)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@dataclass(frozen=True)
class NameFeatures:
    """What every eq. 5 rule compares: character n-grams, content words and length of the
    normalised name."""

    grams: frozenset
    words: frozenset
    length: int
    singular_words: frozenset  # the content words made :func:`singular` (the ``"tokens"`` rule)


@lru_cache(maxsize=1 << 16)
def name_features(s: str, n: int = 3) -> NameFeatures:
    """:class:`NameFeatures` of one name (:func:`char_ngrams`, :func:`content_tokens`,
    :func:`normalize_name`); cached, as a graph's entity names recur in every question that
    retrieves their passages."""
    words = frozenset(content_tokens(s))
    return NameFeatures(frozenset(char_ngrams(s, n)), words, len(normalize_name(s)),
                        frozenset(singular(w) for w in words))


def _length_ok(a: NameFeatures, b: NameFeatures) -> bool:
    shorter = min(a.length, b.length)
    return bool(a.length and b.length) and shorter >= LENGTH_RATIO * max(a.length, b.length)


def _token_score(a: NameFeatures, b: NameFeatures) -> float:
    """Jaccard of the content-word sets (words made :func:`singular`) when one set contains the
    other and the larger adds at most :data:`MAX_EXTRA_WORDS` words; else 0."""
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
# the rules implemented: the values the config allows (config.fields.MATCH_METHODS)
SIMILARITIES = tuple(_SCORES)
# rules that keep only each question entity's best graph entities
BEST_ONLY = ("overlap_best", "dice_best")

# The eq. 5 rule chosen by measurement (results/benchmarks/matching.md); the defaults of every
# function here.
DEFAULT_MATCH_METHOD = "tokens"
DEFAULT_NGRAM_THRESHOLD = 0.7


def _score_fn(method: str) -> Callable[[NameFeatures, NameFeatures], float]:
    if method not in _SCORES:
        raise ValueError(f"unknown matching method {method!r} (choose from {SIMILARITIES})")
    return _SCORES[method]


def ngram_similarity(a: str, b: str, n: int = 3, method: str = DEFAULT_MATCH_METHOD) -> float:
    """Similarity of two entity names (eq. 5) under one of the rules :data:`SIMILARITIES`:

    - ``"dice"``: 2|A∩B| / (|A|+|B|) of the character n-gram sets A, B;
    - ``"overlap"``: |A∩B| / min(|A|, |B|) of the character n-gram sets (overlap coefficient);
    - ``"containment"``: |W_a∩W_b| / min(|W_a|, |W_b|) of the content-word sets (token
      containment);
    - ``"overlap_len"``: the overlap coefficient when the shorter normalised name is at least
      :data:`LENGTH_RATIO` of the longer one's length, else 0;
    - ``"overlap_best"`` / ``"dice_best"``: the overlap coefficient / Dice; :func:`match_entities`
      then keeps only each question entity's best graph entities;
    - ``"tokens"``: |W_a| / |W_b| for content-word sets W_a ⊆ W_b where W_b adds at most
      :data:`MAX_EXTRA_WORDS` words (1 for equal sets), else 0.
    """
    return _score_fn(method)(name_features(a, n), name_features(b, n))


def match_entities(E_q: Sequence[str], entities: Iterable[str], n: int = 3,
                   threshold: float = DEFAULT_NGRAM_THRESHOLD, *,
                   method: str = DEFAULT_MATCH_METHOD) -> dict:
    """For each question entity, the graph entities it is judged the same entity as (eq. 5).

    A graph entity matches when its :func:`ngram_similarity` under ``method`` is >= ``threshold``
    (and > 0); the rules of :data:`BEST_ONLY` keep, of those, only the ones with the highest
    similarity (ties: the highest Dice, then all that tie). Returns ``{question_entity:
    [(graph_entity, similarity), ...]}``, best first, ties by name; a question entity without any
    match maps to ``[]``.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"parameter 'ngram_threshold': must be in [0, 1], got {threshold}")
    score = _score_fn(method)
    ents = sorted(set(entities))
    feats = {e: name_features(e, n) for e in ents}
    out: dict = {}
    for q in E_q:
        fq = name_features(q, n)
        scores = ((e, score(fq, feats[e])) for e in ents)
        found = [(e, round(s, 6)) for e, s in scores if s >= threshold and s > 0]
        if method in BEST_ONLY and found:
            rank = {e: (s, round(_dice(fq.grams, feats[e].grams), 6)) for e, s in found}
            top = max(rank.values())
            found = [(e, s) for e, s in found if rank[e] == top]
        out[q] = sorted(found, key=lambda x: (-x[1], x[0]))
    return out


def seeds_of(matches: dict) -> list:
    """Seed entities: every matched graph entity, in order of the question entities,
    deduplicated."""
    return list(dict.fromkeys(e for found in matches.values() for e, _ in found))


def triple_text(t: Triple) -> str:
    """What a triple's weight is computed from: ``head relation tail``."""
    return f"{t.head} {t.relation} {t.tail}"


def triple_matches(E_q: Sequence[str], triples: Sequence[Triple], matches: dict) -> dict:
    """Eq. 5 against whole triples, for question entities that matched no entity name.

    A question entity whose content words all occur in a triple's ``head relation tail`` text
    (e.g. the description "PC maker of 1994" in ``(Compaq, was top PC maker of, 1994)``) is
    matched to that triple's head and tail (similarity 1.0). Returns a copy of ``matches`` with
    those entries filled; entities already matched are left alone.
    """
    out = {k: list(v) for k, v in matches.items()}
    if all(out.get(e) for e in E_q):  # every question entity matched a name: no triple text is read
        return out
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
