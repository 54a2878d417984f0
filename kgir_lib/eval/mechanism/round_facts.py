"""Facts of one KGIR-RAG trace read for the mechanism tables (:mod:`kgir_lib.eval.mechanism.funnel`,
:mod:`kgir_lib.eval.mechanism.calibration`, :mod:`kgir_lib.eval.mechanism.forced_rounds`,
:mod:`kgir_lib.eval.mechanism.rewrite_retrieval`).

A trace is a trace-file line (``MethodOutput.to_json``: ``qid, answer, ranked_pids, usage, trace``) or
its ``trace`` alone; a round is the dict :meth:`kgir_lib.kgir.rounds.LoopRound.to_dict` writes.
These helpers read the round dicts directly (not :class:`LoopRound`), so fields written by a newer loop
are seen and fields an older trace lacks fall back as documented per function:

- round ``evidence_shown``: the ``G_Ans`` triples shown to Rewrite and Reflection after the cap, as a
  list of ``[head, relation, tail, pid, ...]`` rows, or a count; without it (traces written before the cap
  was the profile's ``max_evidence_triples``), the first ``LEGACY_EVIDENCE_CAP`` distinct
  ``(head, relation, tail)`` of ``G_Ans``, heaviest first (what :func:`kgir_lib.kgir.subgraph.format_triples`
  showed then).
- round ``evidence_pids``: the passages shown instead of an empty ``G_Ans``; older traces: the best of ``D_t``.
- round ``final.context_pids``: the reader's context passages, in order.
- top level ``round_answers`` (forced-rounds runs: the reader's answer after each round).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence


LEGACY_EVIDENCE_CAP = 20  # the fixed cap of the loop before it became a profile field


def trace_of(record: Mapping) -> Mapping:
    """The trace of a trace-file line, or the record itself when it is a bare trace."""
    return record["trace"] if isinstance(record.get("trace"), Mapping) else record


def qid_of(record: Mapping) -> str:
    return str(record.get("qid", trace_of(record).get("qid", "")))


def final_answer(record: Mapping) -> str:
    """The method's answer (the trace-file line's, else the trace's)."""
    return str(record.get("answer", trace_of(record).get("answer", "")) or "")


def rounds(record: Mapping) -> list:
    """The round dicts of a KGIR-RAG trace, in order."""
    return list(trace_of(record).get("rounds") or [])


def golds(record: Mapping) -> tuple:
    """``(gold answers, gold passage ids)`` as the trace records them."""
    t = trace_of(record)
    return tuple(t.get("gold_answers") or ()), tuple(t.get("gold_pids") or ())


def pids(rows: Optional[Sequence]) -> list:
    """Passage ids of ``[[pid, score], ...]`` rows (or of bare ids)."""
    return [r[0] if isinstance(r, (list, tuple)) else r for r in rows or []]


def d_t(rnd: Mapping) -> list:
    """``D_t``: the round's retrieval with its query (eq. 2)."""
    return pids(rnd.get("retrieved"))


def d_rewrite(rnd: Mapping) -> list:
    """``D'_t``: the round's retrieval with the rewritten question (empty without a rewrite retrieval)."""
    return pids(rnd.get("rewrite_retrieved"))


def d_first(record: Mapping) -> list:
    """``D_1``: the first round's retrieval with the original question."""
    rs = rounds(record)
    return d_t(rs[0]) if rs else []


def gans_rows(rnd: Mapping) -> list:
    """The round's ``G_Ans`` rows ``[head, relation, tail, pid, weight]`` (kept order); ``[]`` without a subgraph."""
    return list((rnd.get("subgraph") or {}).get("G_Ans") or [])


def seed_matched(rnd: Mapping) -> bool:
    """Whether a question entity matched a graph entity in this round (eq. 5: at least one seed)."""
    return bool((rnd.get("subgraph") or {}).get("seeds"))


def shown_rows(rnd: Mapping, cap: int = LEGACY_EVIDENCE_CAP) -> list:
    """The ``G_Ans`` rows shown to Rewrite and Reflection (module docstring); every row of a shown
    ``(head, relation, tail)`` counts (a fact extracted from two passages is shown once, from both)."""
    if rnd.get("evidence_source") == "passages":
        return []
    shown = rnd.get("evidence_shown")
    if isinstance(shown, list):
        return [list(r) for r in shown]
    if isinstance(shown, int) and not isinstance(shown, bool):
        cap = shown
    rows = gans_rows(rnd)
    ranked = sorted(rows, key=lambda r: -float(r[4]) if len(r) > 4 else 0.0)  # stable: kept order on ties
    keep = list(dict.fromkeys((r[0], r[1], r[2]) for r in ranked))[:cap]
    keep_set = set(keep)
    return [r for r in ranked if (r[0], r[1], r[2]) in keep_set]


def evidence_passages(rnd: Mapping, n_ctx: int) -> list:
    """Passages shown as evidence instead of ``G_Ans`` (``evidence_source == "passages"``): the ``n_ctx``
    best of ``D_t``; else ``[]``."""
    if rnd.get("evidence_source") != "passages":
        return []
    return list(rnd["evidence_pids"]) if rnd.get("evidence_pids") else d_t(rnd)[:n_ctx]


def reflection_input(rnd: Mapping, n_ctx: int) -> list:
    """What the reflection had to go on: the source passages of the ``G_Ans`` triples shown, the evidence
    passages (empty ``G_Ans``), then ``reflection_passages`` (``P_t``); deduplicated."""
    src = [str(r[3]) for r in shown_rows(rnd) if len(r) > 3]
    return list(dict.fromkeys(src + evidence_passages(rnd, n_ctx) + list(rnd.get("reflection_passages") or [])))


def shown_passages(rnd: Mapping, n_ctx: int) -> list:
    """Passages whose text the round shows the reflection or reader: evidence passages, ``P_t`` and the
    reader's ``final.context_pids``; deduplicated (triples are not passages)."""
    ctx = list((rnd.get("final") or {}).get("context_pids") or [])
    return list(dict.fromkeys(evidence_passages(rnd, n_ctx) + list(rnd.get("reflection_passages") or []) + ctx))


def verdict(rnd: Mapping) -> str:
    """'answer', 'missing', 'malformed', or '' when the round had no reflection."""
    r = rnd.get("reflection")
    if not r:
        return ""
    if r.get("answerable"):
        return "answer"
    return "malformed" if r.get("malformed") else "missing"


def round_answer(record: Mapping, t: int) -> Optional[str]:
    """The answer the method returns at round ``t`` (1-based): ``round_answers[t-1]`` (forced-rounds runs),
    else the round's ``final.answer``, else the reflection's answer when it answered; ``None`` otherwise."""
    ra = trace_of(record).get("round_answers")
    if isinstance(ra, list) and 0 < t <= len(ra):
        return "" if ra[t - 1] is None else str(ra[t - 1])
    rs = rounds(record)
    if not 0 < t <= len(rs):
        return None
    rnd = rs[t - 1]
    if rnd.get("final"):
        return str(rnd["final"].get("answer") or "")
    refl = rnd.get("reflection") or {}
    return str(refl.get("answer") or "") if refl.get("answerable") else None


def stop_round(record: Mapping) -> int:
    """The round the reflection stopped at: the first with verdict 'answer', else the last round."""
    rs = rounds(record)
    return next((i for i, r in enumerate(rs, 1) if verdict(r) == "answer"), len(rs))


def answer_context(record: Mapping, n_ctx: int) -> list:
    """Passages of the context the final answer was written from, in order.

    ``final.context_pids`` of the last round that has one; otherwise (older traces) by variant:
    w/o rewrite, none (the reader saw ``G_Ans`` only); w/o reflection, the first ``n_ctx`` of ``D'_1``;
    otherwise the stopping round's passages: the evidence passages and ``P_t`` when the reflection
    answered, ``P_T`` when the forced reader did.
    """
    t = trace_of(record)
    rs = rounds(record)
    for r in reversed(rs):
        ctx = (r.get("final") or {}).get("context_pids")
        if ctx is not None:
            return list(ctx)
    if not rs or t.get("variant") == "no_rewrite":
        return []
    if t.get("variant") == "no_reflection":
        return d_rewrite(rs[0])[:n_ctx]
    last = rs[stop_round(record) - 1]
    if t.get("answered_by") == "reflection":
        return list(dict.fromkeys(evidence_passages(last, n_ctx) + list(last.get("reflection_passages") or [])))
    return list(last.get("reflection_passages") or [])
