"""Gold reasoning chains of multi-hop questions: hops, bridge entities, next hops and the ideal rewrite.

KGIR-RAG's mechanism (paper §2, §3.5, Fig. 6) turns on a *bridge entity* the question does not name ("the top
PC maker of 1994" -> Compaq): the evidence subgraph exposes it, the rewrite names it, the rewritten question's
retrieval finds the next hop. The datasets give the gold chain; :mod:`kgir_lib.data` stores it on each
:class:`~kgir_lib.data.Question` (``gold_hops``, ``gold_bridges``), the mechanism tables read the bridges
(:mod:`kgir_lib.eval.mechanism.bridges`) and the oracle study variants (:mod:`kgir_lib.kgir.study`) read the
hops. One derivation serves both.

**MuSiQue** (``question_decomposition``: hops with ``question``, ``answer``, ``paragraph_support_idx``): a
:class:`GoldHop` per hop (its sub-question, answer, supporting passage id and title). The answer of every hop
but the last is a gold bridge. Its *next hop* is every later hop whose question refers to it as ``#i``
(MuSiQue's own reference; a 3-hop "3hop2" question has two parallel hops feeding the third), and hop ``i + 1``
when no hop refers to it; the next hop's passage is that hop's supporting paragraph. A bridge every alias of
which the question already names is dropped (it hides nothing).

**HotpotQA** has no sub-questions: a hop per supporting paragraph, with empty question and answer.
``type == "comparison"`` questions and questions whose answer is yes/no have no bridge. Otherwise
(``type == "bridge"``, and the untyped records of the sample) the bridge is the title of the one supporting
paragraph the question does not name (none of the title's aliases occurs in the question as whole words);
when zero or two supporting titles are unnamed the question has no bridge (ambiguous). Its next hop's passage
is that paragraph itself: the question names the first paragraph's entity, that paragraph names the bridge,
and the bridge's own paragraph holds the second hop.

In both, a bridge whose alias equals the final answer is dropped: the question asks for that entity, so there
is no hop after it.

**Normalisation and aliases.** :func:`normalize_answer` is SQuAD's (lower case, ASCII punctuation and the
articles a/an/the dropped, white space folded; EM and F1 of :mod:`kgir_lib.eval.metrics` use it); :func:`norm`
applies it after folding accents, dropping a possessive "'s" ("Compaq's" names Compaq) and turning hyphens,
dashes and slashes into spaces (SQuAD deletes them, which glues "Hewlett-Packard" into one word). The aliases
of a name (:func:`bridge_aliases`) are the normalised name, the name without a parenthesised part ("Roxie Hart
(film)" -> "roxie hart") and the part before the first comma ("Key West, Florida" -> "key west"). A text
*names* an alias when the alias occurs in the normalised text as whole words (:func:`names`).

**The ideal rewrite** (:func:`ideal_rewrite`): the last sub-question with every ``#k`` replaced by hop k's
gold answer -- what eq. 8's rewrite would write after resolving every hop before the last. MuSiQue writes some
sub-questions as ``X >> relation`` (a Wikidata relation); :func:`hop_question` words those as a question by the
relation's own template in :data:`RELATION_QUESTIONS` ("X >> place of birth" -> "Where was X born?"; every
relation of the shipped samples has one), and by :data:`RELATION_QUESTION` ("What is the <relation> of <X>?")
for a relation the table does not know. A rewrite that names the final answer or one of its aliases
(:func:`names_answer`) would hand the retrieval the answer, not the next hop: the oracle study variants treat it
as not applied.
"""
from __future__ import annotations

import re
import string
import unicodedata
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

RELATION_QUESTION = "What is the {relation} of {subject}?"  # a relation RELATION_QUESTIONS does not word
RELATION_QUESTIONS = {  # MuSiQue's Wikidata relations ("X >> relation") worded as questions about X
    "applies to jurisdiction": "Which jurisdiction does {subject} apply to?",
    "author": "Who is the author of {subject}?",
    "award received": "Which award did {subject} receive?",
    "capital": "What is the capital of {subject}?",
    "capital of": "What is {subject} the capital of?",
    "cast member": "Who was a cast member of {subject}?",
    "child": "Who is a child of {subject}?",
    "composer": "Who composed {subject}?",
    "conflict": "Which conflict did {subject} take part in?",
    "continent": "Which continent is {subject} on?",
    "country": "Which country is {subject} in?",
    "country of citizenship": "What is the country of citizenship of {subject}?",
    "creator": "Who created {subject}?",
    "crosses": "What does {subject} cross?",
    "director": "Who directed {subject}?",
    "educated at": "Where was {subject} educated?",
    "employer": "Who was the employer of {subject}?",
    "father": "Who is the father of {subject}?",
    "followed by": "What followed {subject}?",
    "follows": "What did {subject} follow?",
    "instance of": "What is {subject} an instance of?",
    "licensed to broadcast to": "Where is {subject} licensed to broadcast to?",
    "located in or next to body of water": "Which body of water is {subject} located in or next to?",
    "located in the administrative territorial entity": "Which administrative territorial entity is {subject} "
                                                        "located in?",
    "location": "What is the location of {subject}?",
    "location of formation": "Where was {subject} formed?",
    "manufacturer": "Who manufactured {subject}?",
    "member of": "What was {subject} a member of?",
    "member of political party": "Which political party was {subject} a member of?",
    "member of sports team": "Which sports team was {subject} a member of?",
    "mouth of the watercourse": "Where does {subject} flow into?",
    "native language": "What is the native language of {subject}?",
    "owned by": "Who owns {subject}?",
    "part of": "What is {subject} part of?",
    "performer": "Who performed {subject}?",
    "place of birth": "Where was {subject} born?",
    "place of death": "Where did {subject} die?",
    "producer": "Who produced {subject}?",
    "record label": "What is the record label of {subject}?",
    "shares border with": "What shares a border with {subject}?",
    "sibling": "Who is a sibling of {subject}?",
    "spouse": "Who is the spouse of {subject}?",
    "sport": "Which sport is {subject} associated with?",
    "work location": "Where did {subject} work?",
}
REF = re.compile(r"#(\d+)")
_PUNCT = set(string.punctuation)
_SPLIT = re.compile(r"[-\u2010-\u2015/]")
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s\b")
_PAREN = re.compile(r"\s*\([^)]*\)")
_PREPOSITIONS = {"of", "with", "in", "at", "to", "by", "for", "from", "on", "into"}


class GoldError(ValueError):
    """A gold chain that cannot be read; the message names the hop or field (callers add the file and record)."""


@dataclass(frozen=True)
class GoldHop:
    """One hop of a gold chain: the sub-question ("" for HotpotQA), its gold answer ("" for HotpotQA), the
    supporting passage's id and title."""

    question: str
    answer: str
    pid: str
    title: str


@dataclass(frozen=True)
class Bridge:
    """A gold bridge entity: its name, normalised aliases, the next hop's passage ids, the hop it answers."""

    name: str
    aliases: tuple
    next_pids: tuple
    hop: int = 1


# ---------------------------------------------------------------------------- normalisation and naming
def normalize_answer(text: Optional[str]) -> str:
    """SQuAD normalisation: lower case, drop ASCII punctuation, drop a/an/the, fold white space."""
    text = "" if text is None else str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def norm(text: Optional[str]) -> str:
    """SQuAD normalisation after folding accents, dropping possessive 's and splitting on hyphens, dashes and
    slashes (module docstring)."""
    s = unicodedata.normalize("NFKD", "" if text is None else str(text))
    s = "".join(ch for ch in s if not unicodedata.combining(ch))
    return normalize_answer(_SPLIT.sub(" ", _POSSESSIVE.sub("", s)))


def _forms(name: str) -> list:
    """The surface forms behind the aliases: the name, without a parenthesised part, before the first comma."""
    bare = _PAREN.sub("", name)
    return [name, bare, bare.split(",")[0]]


def bridge_aliases(name: str) -> tuple:
    """The normalised name, without a parenthesised part, and before the first comma; empty ones dropped."""
    return tuple(dict.fromkeys(a for a in (norm(v) for v in _forms(name)) if a))


def names(text: Optional[str], alias: str) -> bool:
    """Whether the normalised ``text`` contains the (normalised) ``alias`` as whole words."""
    return bool(alias) and f" {alias} " in f" {norm(text)} "


def names_bridge(text: Optional[str], bridge: Bridge, question: str = "") -> bool:
    """Whether ``text`` names one of ``bridge``'s aliases that ``question`` does not name."""
    return any(names(text, a) and not names(question, a) for a in bridge.aliases)


def named_form(name: str, text: str) -> Optional[str]:
    """The first surface form of ``name`` (whole, without its parenthesised part, before its first comma) that
    ``text`` names as whole words, stripped; ``None`` when ``text`` names none ("Roxie Hart (film)" in "Who
    starred in Roxie Hart?" -> "Roxie Hart")."""
    return next((f.strip() for f in _forms(name) if names(text, norm(f))), None)


def _keep(bridge: Bridge, question: str, answers: Sequence[str]) -> bool:
    """Not named by the question already, and not the final answer itself."""
    final = {norm(a) for a in answers}
    if not bridge.aliases or any(a in final for a in bridge.aliases):
        return False
    return not all(names(question, a) for a in bridge.aliases)


def next_hop_pids(bridges: Sequence[Bridge]) -> tuple:
    """The next-hop passages of ``bridges``, in hop order, without repeats."""
    return tuple(dict.fromkeys(p for b in bridges for p in b.next_pids))


# ---------------------------------------------------------------------------- MuSiQue
def chain_bridges(hops: Sequence[GoldHop], question: str, answers: Sequence[str]) -> tuple:
    """The gold bridges of a decomposition (module docstring: the answer of every hop but the last, its next
    hop by ``#i`` reference, else the following hop), without those the question names or that are the answer."""
    out = []
    for i, hop in enumerate(hops[:-1]):
        refs = [j for j, h in enumerate(hops) if j > i and str(i + 1) in REF.findall(h.question)]
        nxt = tuple(dict.fromkeys(hops[j].pid for j in (refs or [i + 1])))
        b = Bridge(hop.answer, bridge_aliases(hop.answer), nxt, hop=i + 1)
        if _keep(b, question, answers):
            out.append(b)
    return tuple(out)


def musique_gold(record: Mapping, pid_of: Callable[[str, str], str]) -> tuple:
    """``(hops, bridges)`` of one raw MuSiQue record; ``pid_of(title, text)`` is the suite's passage id
    (:func:`kgir_lib.data.passage_id`). A record without a decomposition has neither (``((), ())``); a
    malformed one is a :class:`GoldError` naming the hop and field."""
    raw = record.get("question_decomposition")
    if raw is None or raw == []:
        return (), ()
    paras = record.get("paragraphs")
    if not isinstance(raw, list) or not isinstance(paras, list):
        raise GoldError("'question_decomposition' and 'paragraphs' must be lists")
    hops = []
    for j, hop in enumerate(raw):
        idx = hop.get("paragraph_support_idx") if isinstance(hop, Mapping) else None
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < len(paras) \
                or not isinstance(paras[idx], Mapping):
            raise GoldError(f"hop {j + 1}: 'paragraph_support_idx' {idx!r} is not an index into its {len(paras)} "
                            f"paragraphs")
        p = paras[idx]
        title, text = str(p.get("title", "")), str(p.get("paragraph_text", ""))
        hops.append(GoldHop(str(hop.get("question", "")), str(hop.get("answer", "")), pid_of(title, text), title))
    answers = [str(record.get("answer", ""))] + [str(a) for a in record.get("answer_aliases") or []]
    return tuple(hops), chain_bridges(hops, str(record.get("question", "")), answers)


# ---------------------------------------------------------------------------- HotpotQA
def supporting_titles(record: Mapping) -> list:
    """The supporting titles of a raw HotpotQA record, in order, without repeats."""
    try:
        return list(dict.fromkeys(str(f[0]) for f in record.get("supporting_facts", [])))
    except (TypeError, IndexError, KeyError) as exc:
        raise GoldError(f"'supporting_facts' must be a list of [title, ...] pairs ({exc})") from None


def hotpot_gold(record: Mapping, pids: Mapping[str, Optional[str]]) -> tuple:
    """``(hops, bridges)`` of one raw HotpotQA record (module docstring); ``pids`` maps each supporting title to
    its passage id (``None`` when the corpus lacks it: an error only for the bridge's own paragraph)."""
    question, answer = str(record.get("question", "")), str(record.get("answer", ""))
    titles = supporting_titles(record)
    hops = tuple(GoldHop("", "", pids.get(t) or "", t) for t in titles)
    if record.get("type") == "comparison" or norm(answer) in ("yes", "no"):
        return hops, ()
    unnamed = [h for h in hops if not any(names(question, a) for a in bridge_aliases(h.title))]
    if len(unnamed) != 1:
        return hops, ()
    title, pid = unnamed[0].title, unnamed[0].pid
    if not pid:
        raise GoldError(f"supporting title {title!r} is not in the corpus")
    b = Bridge(title, bridge_aliases(title), (pid,), hop=1)
    return hops, ((b,) if _keep(b, question, [answer]) else ())


# ---------------------------------------------------------------------------- the ideal rewrite
def substitute(text: str, answers: Sequence[str]) -> Optional[str]:
    """``text`` with every ``#k`` replaced by ``answers[k - 1]``; ``None`` when a reference has no answer."""
    if any(not 1 <= int(k) <= len(answers) for k in REF.findall(text)):
        return None
    return REF.sub(lambda m: answers[int(m.group(1)) - 1], text)


def relation_question(subject: str, relation: str) -> str:
    """``X >> relation`` worded as a question: the relation's template in :data:`RELATION_QUESTIONS`, else
    :data:`RELATION_QUESTION` (without its "of" after a relation that ends with a preposition)."""
    template = RELATION_QUESTIONS.get(relation.lower())
    if template:
        return template.format(subject=subject)
    text = RELATION_QUESTION.format(relation=relation, subject=subject)
    if relation.lower().split()[-1:] and relation.lower().split()[-1] in _PREPOSITIONS:  # no "located in of X"
        text = text.replace(f"{relation} of ", f"{relation} ", 1)
    return text


def hop_question(text: str) -> str:
    """A sub-question as a question: ``X >> relation`` through :func:`relation_question`, else the text itself;
    white space folded and dropped before punctuation and a closing bracket, the first letter upper-cased, a
    final "?"."""
    if ">>" in text:
        subject, relation = (" ".join(part.split()) for part in text.split(">>", 1))
        text = relation_question(subject.strip(" ,;:"), relation)
    text = re.sub(r"\s+([,.;:?!)])", r"\1", " ".join(text.split())).rstrip(" .")
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith("?") else text + "?"


def names_answer(text: Optional[str], answers: Sequence[str]) -> bool:
    """Whether ``text`` names the final answer or one of its aliases (any alias of any of ``answers``, as whole
    words after :func:`norm`)."""
    return any(names(text, a) for answer in answers for a in bridge_aliases(answer))


def ideal_rewrite(hops: Sequence[GoldHop]) -> Optional[str]:
    """The last sub-question with every ``#k`` replaced by hop k's gold answer, as a question
    (:func:`hop_question`); ``None`` for a chain of fewer than two hops, without sub-questions (HotpotQA) or
    with a reference to no earlier hop."""
    if len(hops) < 2 or not hops[-1].question.strip():
        return None
    text = substitute(hops[-1].question, [h.answer for h in hops[:-1]])
    return hop_question(text) if text else None
