"""Hand-made KGIR-RAG traces (the trace form of ``LoopRound.to_dict``) for the mechanism tests.

The running example is the paper's Fig. 6: "Which company merged in 2002 with the top PC maker of 1994?"
-- bridge Compaq, next hop's passage ``pHP`` (Hewlett-Packard).
"""
from __future__ import annotations

from kgir_lib.eval.mechanism.bridges import Bridge, bridge_aliases

QUESTION = "Which company merged in 2002 with the top PC maker of 1994?"
REWRITE = "Which company merged with Compaq in 2002?"
COMPAQ = Bridge("Compaq", bridge_aliases("Compaq"), ("pHP",), hop=1)


def rnd(t: int = 1, query: str = QUESTION, retrieved=("pCompaq", "pIBM", "pDell"), seeds=("PC maker",),
        gans=(("Compaq", "was top PC maker of", "1994", "pCompaq", 0.9),), rewrite: str | None = REWRITE,
        malformed: bool = False, rewrite_retrieved=("pHP", "pCompaq", "pApple"), reflection_passages=None,
        verdict: str | None = "answer", answer: str | None = "Hewlett-Packard", final=None,
        evidence_source: str = "subgraph", **extra) -> dict:
    """One round dict; ``verdict`` 'answer', 'missing', 'malformed' or None (no reflection)."""
    d: dict = {"iteration": t, "query": query, "retrieved": [[p, 0.5] for p in retrieved], "usable": {},
               "truncated": {}, "evidence_source": evidence_source, "evidence": ""}
    if evidence_source == "subgraph":
        d["subgraph"] = {"seeds": list(seeds), "G_Ans": [list(g) for g in gans], "pruned": []}
    if rewrite is not None:
        d["rewrite"] = {"raw": f"Rewritten question: {rewrite}", "question": rewrite, "malformed": malformed,
                        "unchanged": rewrite == query}
        d["rewrite_retrieved"] = [[p, 0.5] for p in rewrite_retrieved]
        new = [p for p in rewrite_retrieved if p not in retrieved]
        d["new_passages"] = new
        d["reflection_passages"] = list(reflection_passages if reflection_passages is not None
                                        else list(dict.fromkeys(new + list(rewrite_retrieved)))[:5])
    if verdict is not None:
        d["reflection"] = {"raw": "", "final": False, "answerable": verdict == "answer",
                           "answer": answer if verdict == "answer" else None,
                           "missing": "something" if verdict == "missing" else None, "reasoning": "",
                           "malformed": verdict == "malformed"}
    if final is not None:
        d["final"] = final
    d.update(extra)
    return d


def record(qid: str = "q1", rounds=None, answer: str = "Hewlett-Packard", gold_answers=("Hewlett-Packard", "HP"),
           gold_pids=("pCompaq", "pHP"), question: str = QUESTION, ranked_pids=None, variant: str = "full",
           answered_by: str = "reflection", **top) -> dict:
    """A trace-file line (``MethodOutput.to_json``) around ``rounds``."""
    rounds = [rnd()] if rounds is None else rounds
    trace = {"method": "KGIR-RAG", "variant": variant, "qid": qid, "question": question,
             "gold_answers": list(gold_answers), "gold_pids": list(gold_pids), "answer": answer,
             "answered_by": answered_by, "iterations_used": len(rounds), "rounds": rounds, **top}
    out = {"qid": qid, "answer": answer, "usage": {}, "trace": trace}
    if ranked_pids is not None:
        out["ranked_pids"] = list(ranked_pids)
    return out
