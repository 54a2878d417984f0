"""The loop seen going round (notebook 04): one question whose round 2 (or later) rewrite retrieves the next hop.

Algorithm 2 iterates: a reflection that finds something missing sends the question round again, and that round's
rewrite ``q'_t`` retrieves ``D'_t``. Whether it does so on a run is read from the traces: :func:`find_iteration`
takes, from the full method's traces first and then from the forced-rounds study variant's (``kgir_forced``: every
round runs whatever the reflection says, labelled so), the first question whose round ``t >= 2`` brought a passage
of the question's next hop (the funnel's step 4, :func:`kgir_lib.eval.mechanism.funnel.funnel_steps`) that no earlier
retrieval of the question had held. :func:`before_after` puts that round's two retrievals side by side: ``D_t``,
retrieved with the round's query, and ``D'_t``, retrieved with its rewrite; :func:`iteration_sentence` says it in
words.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import pandas as pd

from ..eval.mechanism import round_facts as rf
from ..eval.mechanism.bridges import Bridge
from ..eval.mechanism.funnel import funnel_steps
from ..eval.metrics import best_em

__all__ = ["Iteration", "RUN_LABELS", "find_iteration", "new_next_hop", "before_after", "rewrite_history",
           "iteration_sentence"]

# The runs searched, in order (the paper's method first), and how the notebook labels each.
RUN_LABELS = {"kgir": "KGIR-RAG as the model runs it (the reflection chose to go on)",
              "kgir_forced": "the forced-rounds study variant (every round runs whatever the reflection says)"}


@dataclass
class Iteration:
    """One question's round ``round`` whose rewrite retrieved a next-hop passage no earlier retrieval held."""

    method: str          # "kgir" (natural) or "kgir_forced" (forced)
    dataset: str
    qid: str
    round: int
    record: dict         # the trace-file line
    next_pids: tuple     # the next-hop passages D'_t brought, new to the question
    natural: Optional[dict] = None  # for a forced round: the full method's own trace of the question

    @property
    def forced(self) -> bool:
        return self.method != "kgir"

    @property
    def label(self) -> str:
        return RUN_LABELS.get(self.method, self.method)


def new_next_hop(record: Mapping, bridges: Sequence[Bridge], t: int) -> tuple:
    """The next-hop passages round ``t``'s ``D'_t`` retrieved that no earlier retrieval of the question held (the
    ``D_s`` of rounds up to ``t``, the ``D'_s`` before it); ``()`` when the round's rewrite found none
    (:func:`kgir_lib.eval.mechanism.funnel.funnel_steps`' step 4 asks the same against ``D_t`` alone)."""
    rs = rf.rounds(record)
    if not 0 < t <= len(rs) or not funnel_steps(record, bridges, t)["finds"]:
        return ()
    before = {p for s in rs[:t] for p in rf.d_t(s)} | {p for s in rs[:t - 1] for p in rf.d_rewrite(s)}
    hop = {p for b in bridges for p in b.next_pids}
    return tuple(p for p in rf.d_rewrite(rs[t - 1]) if p in hop and p not in before)


def _key(it: Iteration, bridges: Sequence[Bridge]) -> tuple:
    """Which of two candidates teaches better: the rewrite names the bridge (the funnel's chain up to step 4), the
    answer after the round is right, then the earliest round, the first dataset, the question id."""
    s = funnel_steps(it.record, bridges, it.round)
    return (not s["chain_finds"], not s["correct"], it.round)


def find_iteration(runs: Mapping[tuple, Sequence[Mapping]], bridges: Mapping[str, Mapping[str, Sequence[Bridge]]],
                   methods: Sequence[str] = tuple(RUN_LABELS)) -> Optional[Iteration]:
    """The question that shows the loop going round (module docstring), or ``None`` when no round after the first
    of any run brought a new next-hop passage. ``runs``: ``{(method, dataset): trace-file lines}``
    (:func:`kgir_lib.eval.mechanism.tables.read_run`); ``bridges``: ``{dataset: {qid: gold bridges}}``. The methods
    are searched in ``methods``' order: a natural round 2 wins over a forced one."""
    for method in methods:
        found = []
        for (m, dataset), records in runs.items():
            if m != method:
                continue
            gold = bridges.get(dataset, {})
            for r in records:
                b = gold.get(rf.qid_of(r))
                if not b:
                    continue
                for t in range(2, len(rf.rounds(r)) + 1):
                    new = new_next_hop(r, b, t)
                    if new:
                        found.append((Iteration(method, dataset, rf.qid_of(r), t, dict(r), new), b))
                        break
        if found:
            best = min(found, key=lambda x: _key(*x))[0]
            if best.forced:
                best.natural = next((dict(r) for r in runs.get(("kgir", best.dataset), ())
                                     if rf.qid_of(r) == best.qid), None)
            return best
    return None


def _mark(pid: str, it: Iteration, gold: set, new: set) -> str:
    tags = [t for t, ok in (("next hop", pid in set(it.next_pids)), ("gold", pid in gold), ("new", pid in new))
            if ok]
    return f" [{', '.join(tags)}]" if tags else ""


def before_after(it: Iteration, title, k: Optional[int] = None) -> pd.DataFrame:
    """Round ``it.round``'s two retrievals side by side, by rank: ``D_t`` (with the round's query) and ``D'_t`` (with
    its rewrite), each passage by ``title(pid)`` and marked *next hop* (the passage this example is about), *gold*
    (a supporting passage of the question) and *new* (no earlier retrieval of the question held it)."""
    rnd = rf.rounds(it.record)[it.round - 1]
    _, gold_pids = rf.golds(it.record)
    gold = set(gold_pids)
    before, after = rf.d_t(rnd), rf.d_rewrite(rnd)
    k = k or max(len(before), len(after))
    earlier = {p for s in rf.rounds(it.record)[:it.round - 1] for p in rf.d_t(s) + rf.d_rewrite(s)}
    new_before = set(before) - earlier
    new_after = set(after) - earlier - set(before)
    t = it.round
    rows = []
    for i in range(k):
        b = before[i] if i < len(before) else None
        a = after[i] if i < len(after) else None
        rows.append({"rank": i + 1,
                     f"before: D_{t}, retrieved with the round's query": "" if b is None else
                     title(b) + _mark(b, it, gold, new_before),
                     f"after: D'_{t}, retrieved with round {t}'s rewrite": "" if a is None else
                     title(a) + _mark(a, it, gold, new_after)})
    return pd.DataFrame(rows)


def rewrite_history(it: Iteration) -> pd.DataFrame:
    """Each round up to ``it.round``: its query, its rewrite, the reflection's verdict and the answer after it."""
    answers, _ = rf.golds(it.record)
    rows = []
    for t, rnd in enumerate(rf.rounds(it.record)[:it.round], 1):
        answer = rf.round_answer(it.record, t) if isinstance(rf.trace_of(it.record).get("round_answers"), list) \
            else (rf.final_answer(it.record) if t == len(rf.rounds(it.record)) else None)
        rows.append({"round": t, "query": str(rnd.get("query") or ""),
                     "rewrite q'_t": str((rnd.get("rewrite") or {}).get("question") or ""),
                     "reflection": rf.verdict(rnd) or "-",
                     "answer after the round": answer or "-",
                     "right": bool(best_em(answer, answers)) if answer and answers else False})
    return pd.DataFrame(rows)


def iteration_sentence(it: Iteration, title) -> str:
    """The example in one sentence: which run, which round, what the rewrite retrieved, the answer after it."""
    rnd = rf.rounds(it.record)[it.round - 1]
    after = rf.d_rewrite(rnd)
    hops = ", ".join(f"'{title(p)}' (rank {after.index(p) + 1} of D'_{it.round})" for p in it.next_pids)
    answers, _ = rf.golds(it.record)
    forced = isinstance(rf.trace_of(it.record).get("round_answers"), list)
    answer = rf.round_answer(it.record, it.round) if forced else rf.final_answer(it.record)
    right = "right" if answer and best_em(answer, answers) else "wrong"
    if not it.forced:
        how = "A natural round: the reflection found something missing and sent the question round again."
    else:
        how = (f"A forced round (the study variant runs every round, so round {it.round} happens whatever the "
               f"reflection said)")
        if it.natural is not None:
            n = len(rf.rounds(it.natural))
            how += (f"; KGIR-RAG as the model runs it stopped after round {n} with the answer "
                    f"'{rf.final_answer(it.natural)}'")
        how += "."
    return (how + f" Round {it.round}'s rewrite retrieves {hops}: a passage of the question's next "
            f"hop that no earlier retrieval of the question held. The answer after round {it.round}: "
            f"'{answer}' ({right}; gold: {' | '.join(answers[:2])}).")
