"""Gold bridge entities of multi-hop questions, and how a text or an entity name is said to name one.

KGIR-RAG's mechanism (paper §2, §3.5 and Fig. 6) turns on a *bridge entity* the question does not name
("the top PC maker of 1994" -> Compaq): the evidence subgraph exposes it, the rewrite names it, the
rewritten question's retrieval finds the next hop. This module gives each question its gold bridges; the
measurements over traces are in :mod:`kgir_lib.eval.mechanism.funnel`.

**MuSiQue** (``question_decomposition``: hops with ``question``, ``answer``, ``paragraph_support_idx``).
The answer of every hop but the last is a gold bridge. Its *next hop* is every later hop whose question
refers to it as ``#i`` (MuSiQue's own reference; a 3-hop "3hop2" question has two parallel hops feeding
the third), and hop ``i + 1`` when no hop refers to it. The next hop's passage is that hop's supporting
paragraph, with the suite's passage id (:func:`kgir_lib.data.passage_id` of title and text, as for gold
passages). A bridge every alias of which the question already names is dropped (it hides nothing).

**HotpotQA.** ``type == "comparison"`` questions and questions whose answer is yes/no have no bridge.
Otherwise (``type == "bridge"``, and the untyped records of the sample) the bridge is the title of the
one supporting paragraph the question does not name (none of the title's aliases occurs in the question
as whole words); when zero or two supporting titles are unnamed the question has no bridge (ambiguous).
Its next hop's passage is that paragraph itself: the question names the first paragraph's entity, that
paragraph names the bridge, and the bridge's own paragraph holds the second hop.

In both, a bridge whose alias equals the final answer is dropped: the question asks for that entity,
so there is no hop after it.

**Normalisation and aliases.** :func:`norm` is the SQuAD normalisation of :mod:`kgir_lib.eval.metrics`
(lower case, punctuation and the articles a/an/the dropped, white space folded), applied after folding
accents, dropping a possessive "'s" ("Compaq's" names Compaq) and turning hyphens, dashes and slashes
into spaces (SQuAD deletes them, which glues "Hewlett-Packard" into one word).

The aliases of a bridge (:func:`bridge_aliases`) are the normalised name, the name without a
parenthesised part ("Roxie Hart (film)" -> "roxie hart") and the part before the first comma
("Key West, Florida" -> "key west"); MuSiQue gives other aliases for final answers only.

**Matching.** :func:`names` -- a text names an alias when the alias occurs in the normalised text as
whole words. :func:`entity_matches` -- an entity name (of a ``G_Ans`` triple) is the bridge when its
normalised form equals an alias (``mode="equal"``), or, in the default ``mode="contains"``, also when an
alias of at least :data:`MIN_CONTAINED_CHARS` characters occurs in it as whole words ("compaq computer
corporation" is Compaq; the reverse, an entity inside the alias, does not count).
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from ...data import DataError, load_corpus, passage_id
from ..metrics import normalize_answer

MIN_CONTAINED_CHARS = 4  # an alias shorter than this matches an entity name only by equality
MODES = ("equal", "contains")
_SPLIT = re.compile(r"[-\u2010-\u2015/]")
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s\b")
_PAREN = re.compile(r"\s*\([^)]*\)")
_REF = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class Bridge:
    """A gold bridge entity: its name, normalised aliases, the next hop's passage ids, the hop it answers."""

    name: str
    aliases: tuple
    next_pids: tuple
    hop: int = 1


# ---------------------------------------------------------------------------- normalisation and matching
def norm(text: Optional[str]) -> str:
    """SQuAD normalisation after folding accents, dropping possessive 's and splitting on hyphens, dashes and
    slashes (module docstring)."""
    s = unicodedata.normalize("NFKD", "" if text is None else str(text))
    s = "".join(ch for ch in s if not unicodedata.combining(ch))
    return normalize_answer(_SPLIT.sub(" ", _POSSESSIVE.sub("", s)))


def bridge_aliases(name: str) -> tuple:
    """The normalised name, without a parenthesised part, and before the first comma; empty ones dropped."""
    variants = [name, _PAREN.sub("", name), _PAREN.sub("", name).split(",")[0]]
    return tuple(dict.fromkeys(a for a in (norm(v) for v in variants) if a))


def names(text: Optional[str], alias: str) -> bool:
    """Whether the normalised ``text`` contains the (normalised) ``alias`` as whole words."""
    return bool(alias) and f" {alias} " in f" {norm(text)} "


def names_bridge(text: Optional[str], bridge: Bridge, question: str = "") -> bool:
    """Whether ``text`` names one of ``bridge``'s aliases that ``question`` does not name."""
    return any(names(text, a) and not names(question, a) for a in bridge.aliases)


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


def _keep(bridge: Bridge, question: str, answers: Sequence[str]) -> bool:
    """Not named by the question already, and not the final answer itself."""
    final = {norm(a) for a in answers}
    if not bridge.aliases or any(a in final for a in bridge.aliases):
        return False
    return not all(names(question, a) for a in bridge.aliases)


# ---------------------------------------------------------------------------- MuSiQue
def musique_bridges(record: Mapping) -> tuple:
    """The gold bridges of one raw MuSiQue record (module docstring); a DataError names a bad field."""
    qid = record.get("id", "?")
    hops = record.get("question_decomposition")
    paras = record.get("paragraphs")
    if not isinstance(hops, list) or not isinstance(paras, list):
        raise DataError(f"MuSiQue record {qid!r}: 'question_decomposition' and 'paragraphs' must be lists")

    def pid_of(hop: Mapping, j: int) -> str:
        idx = hop.get("paragraph_support_idx")
        if not isinstance(idx, int) or not 0 <= idx < len(paras):
            raise DataError(f"MuSiQue record {qid!r} hop {j + 1}: 'paragraph_support_idx' {idx!r} is not an index "
                            f"into its {len(paras)} paragraphs")
        p = paras[idx]
        return passage_id(p.get("title", ""), p.get("paragraph_text", ""))

    answers = [str(record.get("answer", ""))] + [str(a) for a in record.get("answer_aliases") or []]
    question = str(record.get("question", ""))
    out = []
    for i, hop in enumerate(hops[:-1]):
        refs = [j for j, h in enumerate(hops) if j > i and str(i + 1) in _REF.findall(str(h.get("question", "")))]
        nxt = tuple(dict.fromkeys(pid_of(hops[j], j) for j in (refs or [i + 1])))
        name = str(hop.get("answer", ""))
        b = Bridge(name, bridge_aliases(name), nxt, hop=i + 1)
        if _keep(b, question, answers):
            out.append(b)
    return tuple(out)


# ---------------------------------------------------------------------------- HotpotQA
def hotpot_bridges(record: Mapping, corpus_pids: Optional[set] = None,
                   by_title: Optional[Mapping[str, Sequence[str]]] = None) -> tuple:
    """The gold bridge of one raw HotpotQA record, or ``()`` (module docstring).

    The passage id is the context paragraph's (title + sentences joined with "", as
    :mod:`kgir_lib.data` builds it); when ``corpus_pids`` is given and lacks it, the first corpus
    passage with that title (``by_title``), as for gold passages.
    """
    question, answer = str(record.get("question", "")), str(record.get("answer", ""))
    if record.get("type") == "comparison" or norm(answer) in ("yes", "no"):
        return ()
    try:
        titles = list(dict.fromkeys(str(f[0]) for f in record.get("supporting_facts", [])))
        context = {str(c[0]): c[1] for c in record.get("context", [])}
    except (TypeError, IndexError) as exc:
        raise DataError(f"HotpotQA record {record.get('_id', '?')!r}: 'supporting_facts' and 'context' must be "
                        f"lists of [title, ...] pairs ({exc})") from None
    unnamed = [t for t in titles if not any(names(question, a) for a in bridge_aliases(t))]
    if len(unnamed) != 1:
        return ()
    title = unnamed[0]
    sentences = context.get(title)
    text = "".join(sentences) if isinstance(sentences, list) else sentences
    pid = passage_id(title, text) if isinstance(text, str) else None
    if corpus_pids is not None and pid not in corpus_pids:
        pid = next(iter((by_title or {}).get(title, [])), None)
    if pid is None:
        raise DataError(f"HotpotQA record {record.get('_id', '?')!r}: supporting title {title!r} is not in the corpus")
    b = Bridge(title, bridge_aliases(title), (pid,), hop=1)
    return (b,) if _keep(b, question, [answer]) else ()


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
    """``{qid: (Bridge, ...)}`` for every question of dataset ``name`` (files as :func:`kgir_lib.data.load_dataset`)."""
    from ...config import default_data_dir
    from ...data import _find

    data_dir = Path(data_dir) if data_dir else default_data_dir()
    qpath = _find(data_dir, name, ".json")
    corpus = load_corpus(_find(data_dir, name, "_corpus.json"))
    by_title: dict = {}
    for p in corpus.passages:
        by_title.setdefault(p.title, []).append(p.pid)
    try:
        raw = json.loads(qpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{qpath}: not valid JSON ({exc})") from None
    if not isinstance(raw, list):
        raise DataError(f"{qpath}: expected a list of questions")
    out, pids = {}, set(corpus.pids)
    for i, rec in enumerate(raw):
        try:
            qid, bridges = record_bridges(rec, pids, by_title)
        except DataError as exc:
            raise DataError(f"{qpath}: record {i}: {exc}") from None
        out[qid] = bridges
    return out
