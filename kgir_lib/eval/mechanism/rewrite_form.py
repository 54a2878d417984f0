"""What KGIR-RAG's rewrite did to the question, round by round (notebook 04, ``04_rewrite_form``).

The paper's mechanism (§2.3, eq. 8, Fig. 4) is a rewrite that replaces the multi-hop part of the question with
what the triples of ``G_Ans`` say ("the track where the 2013 Liqui Moly Bathurst 12 Hour was staged" -> "Mount
Panorama Circuit"). This module reads every round's rewrite ``q'_t`` from the traces (no model call) and puts it in
one form, against the question it rewrites (the round's query ``q_t``: the question in round 1, the previous
rewrite after), the first that holds in this order (:data:`FORMS`):

- ``malformed``: the rewrite reply held no question (the loop kept ``q_t``);
- ``identical``: the same text after lower-casing, dropping punctuation and folding white space
  (:func:`normalise`);
- ``names the gold bridge``: it names a gold bridge entity (the answer of a hop before the last,
  :mod:`kgir_lib.eval.mechanism.bridges`) that ``q_t`` does not name (:func:`kgir_lib.gold.names_bridge`);
- ``names a G_Ans entity``: it names an entity of the ``G_Ans`` triples shown to the rewrite (a head or tail, whole
  words after :func:`kgir_lib.gold.norm`) that ``q_t`` does not name;
- ``surface edit``: at most :data:`SURFACE_EDITS` token insertions, deletions or substitutions between the two
  normalised texts (:func:`token_edits`): a typo fix, a dropped or added word;
- ``other rewrite``: any other change (a reworded question naming nothing new).

Besides the forms, two counts that may overlap with any form: rewrites that name a shown ``G_Ans`` entity the
question lacks, and, among rounds of questions with a gold bridge, rewrites that name one.
"""
from __future__ import annotations

import difflib
import unicodedata
from typing import Mapping, Sequence

import pandas as pd

from ...gold import Bridge, names, names_bridge, norm
from . import round_facts as rf

SURFACE_EDITS = 2  # token edits a surface edit may make (a typo fix is one substitution)
MALFORMED, IDENTICAL, BRIDGE, ENTITY, SURFACE, OTHER = ("malformed", "identical", "names the gold bridge",
                                                        "names a G_Ans entity", "surface edit", "other rewrite")
FORMS = (MALFORMED, IDENTICAL, BRIDGE, ENTITY, SURFACE, OTHER)
NAMES_ENTITY = "names a G_Ans entity the question lacks (any form)"
BRIDGE_ROUNDS = "rounds with a gold bridge"
NAMES_BRIDGE = "names the gold bridge (any form)"


def normalise(text: str) -> str:
    """Lower case, every punctuation character dropped, white space folded."""
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in str(text or "").lower())
    return " ".join(text.split())


def token_edits(a: str, b: str) -> int:
    """The token edit distance (Levenshtein over the :func:`normalise`-d words) between two texts."""
    x, y = normalise(a).split(), normalise(b).split()
    prev = list(range(len(y) + 1))
    for i, xi in enumerate(x, 1):
        cur = [i]
        for j, yj in enumerate(y, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (xi != yj)))
        prev = cur
    return prev[-1]


def shown_entities(rnd: Mapping) -> list:
    """The heads and tails of the ``G_Ans`` triples shown to the rewrite, in order, once each."""
    return list(dict.fromkeys(str(e) for r in rf.shown_rows(rnd) for e in (r[0], r[2])))


def names_new_entity(rewrite: str, question: str, entities: Sequence[str]) -> bool:
    """Whether ``rewrite`` names one of ``entities`` (whole words after :func:`kgir_lib.gold.norm`) that
    ``question`` does not."""
    return any(names(rewrite, a) and not names(question, a) for a in (norm(e) for e in entities) if a)


def rewrite_form(rnd: Mapping, bridges: Sequence[Bridge] = ()) -> str:
    """The form of one round's rewrite (module docstring); ``""`` for a round without a rewrite."""
    rw = rnd.get("rewrite")
    if not rw:
        return ""
    if rw.get("malformed"):
        return MALFORMED
    query, rewrite = str(rnd.get("query", "")), str(rw.get("question") or "")
    if normalise(rewrite) == normalise(query):
        return IDENTICAL
    if any(names_bridge(rewrite, b, query) for b in bridges):
        return BRIDGE
    if names_new_entity(rewrite, query, shown_entities(rnd)):
        return ENTITY
    return SURFACE if token_edits(rewrite, query) <= SURFACE_EDITS else OTHER


MORE_THAN_SURFACE = (BRIDGE, ENTITY, OTHER)  # the forms that change the question by more than a surface edit


def word_edits(question: str, rewrite: str) -> list:
    """The word edits turning ``question`` into ``rewrite``, over the :func:`normalise`-d words, in order:
    ``("replaced", old, new)``, ``("dropped", old, "")``, ``("added", "", new)``; ``[]`` when identical."""
    x, y = normalise(question).split(), normalise(rewrite).split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=x, b=y, autojunk=False).get_opcodes():
        old, new = " ".join(x[i1:i2]), " ".join(y[j1:j2])
        if op != "equal":
            out.append(({"replace": "replaced", "delete": "dropped", "insert": "added"}[op], old, new))
    return out


def _edit_words(edits: Sequence[tuple]) -> str:
    parts = [f"replaced '{o}' with '{n}'" if k == "replaced" else f"{k} '{o or n}'" for k, o, n in edits]
    if len(parts) < 2:
        return parts[0] if parts else "changed nothing"
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def rewrite_change(rnd: Mapping, bridges: Sequence[Bridge] = ()) -> str:
    """What one round's rewrite changed in the question it rewrites, in words: its form
    (:func:`rewrite_form`), the names it added (the gold bridge, the ``G_Ans``
    entities) and its word edits (:func:`word_edits`); ``""`` for a round without a rewrite."""
    form = rewrite_form(rnd, bridges)
    if form in ("", MALFORMED, IDENTICAL):
        return {"": "", MALFORMED: "the rewrite reply held no question, so the loop kept the question as it was",
                IDENTICAL: "left the question as it was (case, punctuation and spacing aside)"}[form]
    query, rewrite = str(rnd.get("query", "")), str(rnd["rewrite"].get("question") or "")
    edits = _edit_words(word_edits(query, rewrite))
    if form == BRIDGE:
        named = [b.name for b in bridges if names_bridge(rewrite, b, query)]
        return f"named the gold bridge {', '.join(repr(n) for n in named)}, which the question lacked ({edits})"
    if form == ENTITY:
        named = [e for e in shown_entities(rnd) if norm(e) and names(rewrite, norm(e)) and not names(query, norm(e))]
        return f"named the G_Ans entity {', '.join(repr(n) for n in named)}, which the question lacked ({edits})"
    if form == SURFACE:
        return f"made a surface edit naming no gold bridge or G_Ans entity the question lacked: {edits}"
    return f"reworded the question naming no gold bridge or G_Ans entity it lacked: {edits}"


def form_rows(records: Sequence[Mapping], bridges: Mapping[str, Sequence[Bridge]]) -> pd.DataFrame:
    """One row a round with a rewrite: ``qid, round, form, names entity, bridge question, names bridge``."""
    rows = []
    for record in records:
        qb = tuple(bridges.get(rf.qid_of(record), ()))
        for t, rnd in enumerate(rf.rounds(record), 1):
            form = rewrite_form(rnd, qb)
            if not form:
                continue
            rw = rnd["rewrite"]
            rewrite, query = ("" if rw.get("malformed") else str(rw.get("question") or "")), str(rnd.get("query", ""))
            rows.append({"qid": rf.qid_of(record), "round": t, "form": form,
                         "names entity": names_new_entity(rewrite, query, shown_entities(rnd)),
                         "bridge question": bool(qb),
                         "names bridge": any(names_bridge(rewrite, b, query) for b in qb)})
    return pd.DataFrame(rows, columns=["qid", "round", "form", "names entity", "bridge question", "names bridge"])


COLUMNS = ["method", "dataset", "round", "rewrites", *FORMS, NAMES_ENTITY, BRIDGE_ROUNDS, NAMES_BRIDGE]
COLUMN_NOTES = {
    "round": "the loop's round (1, 2, ...) and 'any' (every round)",
    "rewrites": "rounds with a rewrite call",
    MALFORMED: "the reply held no question (the forms are exclusive, the first that holds in this order; they add "
               "up to rewrites)",
    IDENTICAL: "the same text as the question it rewrites, after lower-casing, dropping punctuation, folding spaces",
    BRIDGE: "names a gold bridge entity the question it rewrites does not name",
    ENTITY: "names an entity of the G_Ans triples shown to it that the question it rewrites does not name",
    SURFACE: f"at most {SURFACE_EDITS} token insertions, deletions or substitutions, naming nothing new",
    OTHER: "any other change",
    NAMES_ENTITY: "rewrites naming a shown G_Ans entity the question lacks, whatever their form",
    BRIDGE_ROUNDS: "rounds of questions with a gold bridge",
    NAMES_BRIDGE: "of those, rewrites naming a gold bridge the question lacks",
}


def form_table(records: Sequence[Mapping], bridges: Mapping[str, Sequence[Bridge]], dataset: str,
               method: str = "kgir") -> pd.DataFrame:
    """Per round and over every round (``any``): the rewrites of ``records`` counted by form."""
    rows = form_rows(records, bridges)
    out = []
    for rnd in [*sorted(rows["round"].unique()), "any"]:
        g = rows if rnd == "any" else rows[rows["round"] == rnd]
        counts = g["form"].value_counts()
        out.append({"method": method, "dataset": dataset, "round": str(rnd), "rewrites": len(g),
                    **{f: int(counts.get(f, 0)) for f in FORMS}, NAMES_ENTITY: int(g["names entity"].sum()),
                    BRIDGE_ROUNDS: int(g["bridge question"].sum()),
                    NAMES_BRIDGE: int((g["names bridge"] & g["bridge question"]).sum())})
    return pd.DataFrame(out, columns=COLUMNS)


def form_sentence(table: pd.DataFrame, dataset: str, method: str = "kgir") -> str:
    """Every round's rewrites of ``dataset`` in one sentence, every number from the table's ``any`` row."""
    r = table[(table["dataset"] == dataset) & (table["method"] == method) & (table["round"] == "any")].iloc[0]
    n = int(r["rewrites"])
    return (f"{dataset}: of the {n} rewrites, {int(r[IDENTICAL])} left the question identical (case, punctuation "
            f"and spacing aside), {int(r[SURFACE])} made a surface edit of at most {SURFACE_EDITS} words naming "
            f"nothing new, {int(r[OTHER])} reworded it naming nothing new, {int(r[ENTITY])} named a G_Ans entity it "
            f"lacked and {int(r[BRIDGE])} the gold bridge ({int(r[MALFORMED])} malformed).")


METHOD_WORDS = {"kgir": "KGIR-RAG as run", "kgir_forced": "every round forced"}


def form_sentences(table: pd.DataFrame) -> list:
    """:func:`form_sentence` of every method and dataset of ``table``, each followed by the run it counts."""
    return [f"{form_sentence(table, d, m)[:-1]}; {METHOD_WORDS.get(m, m)}."
            for m in dict.fromkeys(table["method"]) for d in dict.fromkeys(table["dataset"])]
