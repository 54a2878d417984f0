"""Gold bridge entities of multi-hop questions, and how an entity name is said to be one.

The gold chain of every question -- its hops, bridges and next-hop passages, MuSiQue's and HotpotQA's rules,
the normalisation (:func:`norm`), the aliases (:func:`bridge_aliases`) and whole-word naming (:func:`names`) --
is derived once, in :mod:`kgir_lib.gold`, and stored on each question by :mod:`kgir_lib.data`
(``Question.gold_bridges``); this module reads it for the mechanism tables (the funnel's measurements over
traces are in :mod:`kgir_lib.eval.mechanism.funnel`), and reads raw records the same way
(:func:`musique_bridges`, :func:`hotpot_bridges`).

**Matching.** :func:`entity_matches` -- an entity name (of a ``G_Ans`` triple) is the bridge when its
normalised form equals an alias (``mode="equal"``), or, in the default ``mode="contains"``, also when an
alias of at least :data:`MIN_CONTAINED_CHARS` characters occurs in it as whole words ("compaq computer
corporation" is Compaq; the reverse, an entity inside the alias, does not count).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from ...data import DataError, load_dataset, passage_id
from ...gold import (Bridge, GoldError, bridge_aliases, hotpot_gold, musique_gold, names, names_bridge, norm,
                     supporting_titles)

__all__ = ["Bridge", "MIN_CONTAINED_CHARS", "MODES", "bridge_aliases", "bridges_of", "entity_matches",
           "hotpot_bridges", "load_bridges", "musique_bridges", "names", "names_bridge", "norm", "record_bridges"]

MIN_CONTAINED_CHARS = 4  # an alias shorter than this matches an entity name only by equality
MODES = ("equal", "contains")


def entity_matches(entity: str, bridge: Bridge, mode: str = "contains") -> bool:
    """Whether entity name ``entity`` is ``bridge`` (module docstring: equality, or whole-alias containment)."""
    if mode not in MODES:
        raise ValueError(f"parameter 'mode': expected one of {MODES}, got {mode!r}")
    e = norm(entity)
    if not e:
        return False
    for a in bridge.aliases:
        if e == a or (mode == "contains" and len(a) >= MIN_CONTAINED_CHARS and f" {a} " in f" {e} "):
            return True
    return False


# ---------------------------------------------------------------------------- raw records
def musique_bridges(record: Mapping) -> tuple:
    """The gold bridges of one raw MuSiQue record (:func:`kgir_lib.gold.musique_gold`); a DataError names a bad
    field."""
    if not isinstance(record.get("question_decomposition"), list) or not isinstance(record.get("paragraphs"), list):
        raise DataError(f"MuSiQue record {record.get('id', '?')!r}: 'question_decomposition' and 'paragraphs' "
                        f"must be lists")
    try:
        return musique_gold(record, passage_id)[1]
    except GoldError as exc:
        raise DataError(f"MuSiQue record {record.get('id', '?')!r}: {exc}") from None


def hotpot_bridges(record: Mapping, corpus_pids: Optional[set] = None,
                   by_title: Optional[Mapping[str, Sequence[str]]] = None) -> tuple:
    """The gold bridge of one raw HotpotQA record, or ``()`` (:func:`kgir_lib.gold.hotpot_gold`).

    The passage id is the context paragraph's (title + sentences joined with "", as
    :mod:`kgir_lib.data` builds it); when ``corpus_pids`` is given and lacks it, the first corpus
    passage with that title (``by_title``), as for gold passages.
    """
    where = f"HotpotQA record {record.get('_id', '?')!r}"
    try:
        context = {str(c[0]): c[1] for c in record.get("context", [])}
        titles = supporting_titles(record)
    except (TypeError, IndexError, GoldError) as exc:
        raise DataError(f"{where}: 'supporting_facts' and 'context' must be lists of [title, ...] pairs ({exc})") \
            from None
    pids = {}
    for title in titles:
        sentences = context.get(title)
        text = "".join(sentences) if isinstance(sentences, list) else sentences
        pid = passage_id(title, text) if isinstance(text, str) else None
        if corpus_pids is not None and pid not in corpus_pids:
            pid = next(iter((by_title or {}).get(title, [])), None)
        pids[title] = pid
    try:
        return hotpot_gold(record, pids)[1]
    except GoldError as exc:
        raise DataError(f"{where}: {exc}") from None


# ---------------------------------------------------------------------------- a dataset's bridges
def record_bridges(record: Mapping, corpus_pids: Optional[set] = None,
                   by_title: Optional[Mapping[str, Sequence[str]]] = None) -> tuple:
    """``(qid, bridges)`` of a raw record; the schema (MuSiQue or HotpotQA) is detected as in :mod:`kgir_lib.data`."""
    if "question_decomposition" in record:
        return str(record.get("id")), musique_bridges(record)
    if "supporting_facts" in record:
        return str(record.get("_id")), hotpot_bridges(record, corpus_pids, by_title)
    raise DataError("record has neither 'question_decomposition' (MuSiQue) nor 'supporting_facts' (HotpotQA)")


def bridges_of(records: Iterable[Mapping], corpus_pids: Optional[set] = None,
               by_title: Optional[Mapping[str, Sequence[str]]] = None) -> dict:
    """``{qid: (Bridge, ...)}`` of raw records (a question without bridge maps to ``()``)."""
    return dict(record_bridges(r, corpus_pids, by_title) for r in records)


def load_bridges(name: str, data_dir: Optional[Path] = None) -> dict:
    """``{qid: (Bridge, ...)}`` for every question of dataset ``name``: the ``gold_bridges`` the loader
    (:func:`kgir_lib.data.load_dataset`) derived."""
    return {q.qid: q.gold_bridges for q in load_dataset(name, data_dir).questions}
