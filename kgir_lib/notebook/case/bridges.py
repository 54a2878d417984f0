"""Fig. 6 candidates: how closely a KGIR-RAG trace follows the paper's worked example (notebook 07).

The pattern (paper §3.5, Fig. 6): not answerable in round 1, the question rewritten around a *bridge
entity* taken from ``G_Ans``, answered in round 2, ideally correctly. :func:`find_bridge_cases` ranks
trace records by it; :func:`bridge_entities` and :func:`is_question_rewrite` are its parts;
:func:`bridge_summary` counts, per dataset, how many traces take each step.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional, Sequence

import pandas as pd

from ...eval.metrics import best_em, best_f1
from ...kgir.entity_matching import STOP_WORDS, normalize_name
from ...kgir.rounds import trace_rounds
from .records import KGIR_METHOD


def _mentions(text: str, entity: str) -> bool:
    n = normalize_name(entity)
    return len(n) >= 3 and f" {n} " in f" {normalize_name(text)} "


_TRIPLE_ECHO = re.compile(r"^\s*[\(\[].*[\)\]]\s*\??\s*$")  # "(h, r, t)" or "(h, r t)?" copied whole
# entity_matching's stop words, extended with the function words a rewrite keeps without rewriting anything
_FUNCTION_WORDS = STOP_WORDS | {"were", "are", "be", "whom", "that", "this", "it", "its", "as"}


def is_question_rewrite(question: str, rewrite: Optional[str]) -> bool:
    """Whether ``rewrite`` reads as a rewrite of ``question`` (eq. 8), not an echo of a triple or of the prompt.

    It must not be wholly bracketed like a ``(h, r, t)`` triple, and must keep at least one
    content word of the question (a rewrite changes the multi-hop part, not the
    whole question).
    """
    if not rewrite or _TRIPLE_ECHO.match(rewrite):
        return False
    q_words = set(normalize_name(question).split()) - _FUNCTION_WORDS
    return bool(q_words & set(normalize_name(rewrite).split()))


def bridge_entities(question: str, rewrite: Optional[str], G_Ans: Sequence) -> list:
    """Entities of ``G_Ans`` that the rewrite names and the original question does not (the bridge, Fig. 6).

    Empty when the rewrite is not a question rewrite (:func:`is_question_rewrite`):
    a small model that copies a triple into the "rewrite" names the triple's
    entities without having rewritten anything.
    """
    if rewrite is None or not is_question_rewrite(question, rewrite):
        return []
    ents = dict.fromkeys(e for t in G_Ans for e in ((t[0], t[2]) if isinstance(t, (list, tuple)) else (t.head, t.tail)))
    return [e for e in ents if _mentions(rewrite, e) and not _mentions(question, e)]


def bridge_features(record: dict) -> dict:
    """How far one KGIR-RAG trace follows Fig. 6 (a record is a trace-file line or a bare trace)."""
    trace = record.get("trace", record)
    rounds = trace_rounds(trace)
    question = trace.get("question", "")
    answer = record.get("answer", trace.get("answer", "")) or ""
    gold = trace.get("gold_answers", [])
    r1 = rounds[0] if rounds else None
    refl1 = r1.reflection if r1 else None
    rewrite1 = r1.rewrite if r1 else None
    bridges = bridge_entities(question, rewrite1, r1.G_Ans if r1 else [])
    answered_round = next((r.iteration for r in rounds if r.reflection and r.reflection.answerable), None)
    feats = {
        "qid": str(trace.get("qid", record.get("qid", ""))),
        "question": question,
        "rounds": len(rounds),
        "unanswered_round1": refl1 is not None and not refl1.answerable,
        "missing_round1": refl1 is not None and not refl1.answerable and bool(refl1.missing),
        "rewrite_1": rewrite1 or "",
        "bridge_entities": bridges,
        "bridge_rewrite": bool(bridges),
        "rewrite_unchanged": rewrite1 is not None and normalize_name(rewrite1) == normalize_name(question),
        "answered_round": answered_round,
        "answered_round2": answered_round == 2,
        "answer": answer,
        "gold": " | ".join(map(str, gold)),
        "EM": 100 * best_em(answer, gold) if gold else 0.0,
        "F1": 100 * best_f1(answer, gold) if gold else 0.0,
    }
    feats["figure6"] = feats["unanswered_round1"] and feats["bridge_rewrite"] and feats["answered_round2"]
    feats["figure6_correct"] = feats["figure6"] and feats["EM"] == 100.0
    # ranking: the structural steps first (bridge rewrite weighs most), then correctness
    feats["score"] = (2.0 * feats["bridge_rewrite"] + feats["unanswered_round1"] + 0.5 * feats["missing_round1"]
                      + feats["answered_round2"]
                      + 0.5 * (answered_round is not None and answered_round >= 2)
                      + feats["EM"] / 100 + 0.5 * feats["F1"] / 100)
    return feats


def find_bridge_cases(traces: Iterable[dict], dataset: Optional[str] = None) -> pd.DataFrame:
    """Rank KGIR-RAG traces by how closely they follow Fig. 6, best first.

    A full match (``figure6``) is: round 1's reflection did not answer, round 1's
    rewrite is a rewrite of the question that names an entity of round 1's
    ``G_Ans`` absent from the question (the bridge), and round 2's reflection
    answered; ``figure6_correct`` adds EM = 100. ``missing_round1`` marks a round-1
    verdict that named the missing information (as in Fig. 5) rather than a
    malformed reply.
    Only full-method KGIR-RAG traces count (ablation variants are skipped).
    Ties keep the input order.
    """
    rows = []
    for rec in traces:
        trace = rec.get("trace", rec)
        if trace.get("method", KGIR_METHOD) != KGIR_METHOD or trace.get("variant", "full") != "full":
            continue
        feats = bridge_features(rec)
        feats["dataset"] = rec.get("dataset") or trace.get("dataset") or dataset or ""
        rows.append(feats)
    cols = ["dataset", "qid", "score", "figure6", "figure6_correct", "unanswered_round1", "missing_round1",
            "bridge_rewrite", "rewrite_unchanged",
            "answered_round2", "answered_round", "rounds", "bridge_entities", "question", "rewrite_1", "answer",
            "gold", "EM", "F1"]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)


SUMMARY_STEPS = {  # bridge_summary's columns: candidate column -> label
    "unanswered_round1": "not answered in round 1",
    "bridge_rewrite": "round-1 rewrite names a bridge entity",
    "rewrite_unchanged": "round-1 rewrite = the question",
    "answered_round2": "answered in round 2",
    "figure6": "whole Fig. 6 pattern",
    "figure6_correct": "whole pattern, EM = 100",
}


def bridge_summary(candidates: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, how many KGIR-RAG traces take each step of the Fig. 6 pattern (paper §3.5).

    ``candidates`` as from :func:`find_bridge_cases`. Columns: ``questions``, then one count per
    :data:`SUMMARY_STEPS` entry, then ``answered in round 1`` (the iteration never ran). A run whose
    reflection answers in round 1 never exercises the rewrite-and-retrieve loop, whatever its scores.
    """
    cols = ["questions", *SUMMARY_STEPS.values(), "answered in round 1"]
    if candidates.empty:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="dataset"))
    g = candidates.groupby("dataset", sort=False)
    out = pd.DataFrame({"questions": g.size()})
    for col, label in SUMMARY_STEPS.items():
        out[label] = g[col].sum().astype(int)
    out["answered in round 1"] = (candidates["answered_round"] == 1).groupby(candidates["dataset"], sort=False).sum()
    return out
