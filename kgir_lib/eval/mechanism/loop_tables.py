"""Tables read from KGIR-RAG traces: the loop facts of each question, the usable-output rates per
stage, the seed match rate and the counts of notebook 04's loop diagram.

They read the rounds back as :class:`~kgir_lib.kgir.rounds.LoopRound` records
(:func:`~kgir_lib.kgir.rounds.trace_rounds`); the loop (:mod:`kgir_lib.kgir.loop`) only writes them.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ...kgir.rounds import STAGES, trace_rounds

__all__ = ["STAGES", "USABLE_STAGES", "REFLECT_AFTER_TURN", "LOOP_COUNTS", "trace_row", "usable_counts",
           "seed_match_rate", "usable_table", "trace_table", "loop_counts"]

USABLE_STAGES = ("ner", "rewrite", "reflect", "reflect_verdict", "reader")
REFLECT_AFTER_TURN = "reflect, after verdict turn"


def trace_row(trace: dict) -> dict:
    """Loop facts of one question's trace: rounds, who answered, fallbacks and malformed replies,
    LLM use."""
    rounds = trace_rounds(trace)
    llm = trace.get("llm", {})
    subs = [r.subgraph for r in rounds if r.subgraph is not None]
    capped = [r.evidence_shown is not None and r.evidence_triples is not None
              and r.evidence_shown < r.evidence_triples for r in rounds]
    return {
        "qid": trace.get("qid"),
        "iterations": trace.get("iterations_used", len(rounds)),
        "answered_by": trace.get("answered_by"),
        "ner_fallbacks": sum(s.used_fallback for s in subs),
        "rewrite_malformed": sum(r.rewrite_malformed for r in rounds),
        "reflection_malformed": sum(bool(r.reflection and r.reflection.malformed) for r in rounds),
        "G_Ans_triples": sum(len(s.kept) for s in subs),
        "pruned_triples": sum(len(s.pruned) for s in subs),
        "rounds_with_seed": sum(bool(s.seeds) for s in subs),
        "subgraph_rounds": len(subs),
        "evidence_capped_rounds": sum(capped),
        "truncated": sum(s.get("truncated", 0) for s in llm.values()),
        "llm_calls": sum(s.get("calls", 0) for s in llm.values()),
        "prompt_tokens": sum(s.get("prompt_tokens", 0) for s in llm.values()),
        "completion_tokens": sum(s.get("completion_tokens", 0) for s in llm.values()),
        **{f"calls_{k}": llm.get(k, {}).get("calls", 0) for k in STAGES},
    }


def usable_counts(traces: Sequence[dict]) -> dict:
    """``{stage: {"outputs", "usable", "truncated"}}`` over the rounds of KGIR-RAG traces.

    A stage's output is *usable* when it was parsed as intended, not a fallback
    (:mod:`kgir_lib.kgir.loop`); rounds that did not run a stage do not count for it.
    """
    out = {st: {"outputs": 0, "usable": 0, "truncated": 0} for st in USABLE_STAGES}
    for tr in traces:
        for r in trace_rounds(tr):
            for st, ok in r.usable.items():
                if st in out:
                    out[st]["outputs"] += 1
                    out[st]["usable"] += int(bool(ok))
                    out[st]["truncated"] += int(bool(r.truncated.get(st)))
    return out


def seed_match_rate(traces: Sequence[dict]) -> float:
    """Share of subgraph rounds with at least one seed; NaN without subgraph rounds."""
    rows = [trace_row(t) for t in traces]
    n = sum(r["subgraph_rounds"] for r in rows)
    return sum(r["rounds_with_seed"] for r in rows) / n if n else float("nan")


def usable_table(outputs: Sequence) -> pd.DataFrame:
    """Usable-output rates per stage (%), from outputs or traces: one row a stage.

    ``reflect`` counts the first replies; ``reflect_verdict`` the verdict turns (sent only after a
    first reply without a verdict line); the derived row ``reflect, after verdict turn`` the
    reflections the loop could act on (outputs: every reflection; usable: first replies with a
    verdict plus verdict turns with one).
    """
    traces = [o.trace if hasattr(o, "trace") else o for o in outputs]
    counts = usable_counts(traces)
    first = counts["reflect"]
    turn = counts["reflect_verdict"]
    after_turn = {"outputs": first["outputs"], "usable": first["usable"] + turn["usable"],
                  "truncated": turn["truncated"]}
    counts = {**{st: c for st, c in counts.items() if st != "reader"},
              REFLECT_AFTER_TURN: after_turn, "reader": counts["reader"]}
    rows = []
    for st, c in counts.items():
        rate = 100.0 * c["usable"] / c["outputs"] if c["outputs"] else float("nan")
        rows.append({"stage": st, "outputs": c["outputs"], "usable": c["usable"], "usable %": rate,
                     "truncated": c["truncated"]})
    return pd.DataFrame(rows).set_index("stage")


def trace_table(outputs: Sequence) -> pd.DataFrame:
    """:func:`trace_row` for every output, as a DataFrame (works on outputs read back from trace
    files)."""
    return pd.DataFrame([trace_row(o.trace) for o in outputs])


LOOP_COUNTS = ("questions", "rounds", "with seed", "without seed", "rewrite usable",
               "rewrite malformed", "new passages", "no new passage", "answer", "missing",
               "no verdict", "next round", "stopped by reflection", "forced at cap")


def loop_counts(traces: Sequence[dict]) -> dict:
    """What happened at each step of Algorithm 2 over KGIR-RAG traces, the numbers of notebook 04's
    loop diagram (:func:`kgir_lib.notebook.viz.plot_loop`): ``questions``; ``rounds`` (rounds run
    in all) and ``rounds by number`` (``{t: rounds t run}``); subgraph rounds ``with seed`` /
    ``without seed`` (an empty ``G_Ans``: the passages of ``D_t`` stand in); rewrites ``rewrite
    usable`` / ``rewrite malformed`` (the query kept); ``new passages`` / ``no new passage``
    (rounds whose ``D'_t`` brought a passage ``D_t`` lacked, or not); reflection verdicts
    ``answer`` / ``missing`` / ``no verdict`` (malformed); ``next round`` (questions sent on with
    ``q'_t``); and what ended each question: ``stopped by reflection``, ``forced at cap``."""
    out = {k: 0 for k in LOOP_COUNTS}
    by_number: dict = {}
    verdict_row = {"answer": "answer", "missing": "missing", "malformed": "no verdict"}
    for tr in traces:
        trace = tr if "rounds" in tr else (tr.get("trace") or {})
        rounds = trace_rounds(trace)
        out["questions"] += 1
        for r in rounds:
            out["rounds"] += 1
            by_number[r.iteration] = by_number.get(r.iteration, 0) + 1
            if r.subgraph is not None:
                out["with seed" if r.subgraph.seeds else "without seed"] += 1
            if r.rewrite_raw is not None:
                out["rewrite malformed" if r.rewrite_malformed else "rewrite usable"] += 1
            if r.reflection_passages is not None:
                out["new passages" if r.new_passages else "no new passage"] += 1
            v = r.verdict()
            if v:
                out[verdict_row[v]] += 1
        out["next round"] += max(len(rounds) - 1, 0)
        stopped = trace.get("answered_by")
        out["stopped by reflection"] += int(stopped == "reflection")
        out["forced at cap"] += int(stopped == "forced_reader")
    return {**out, "rounds by number": dict(sorted(by_number.items()))}
