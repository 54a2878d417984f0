"""The loop seen going round (notebook 04): one question's round 2 (or later), what its rewrite changed and whether
it retrieved the next hop.

Algorithm 2 iterates: a reflection that finds something missing sends the question round again, and that round's
rewrite ``q'_t`` retrieves ``D'_t``. :func:`find_iteration` reads every round ``t >= 2`` of the questions with a gold
bridge from the traces, of the full method first and then of the forced-rounds study variant (``kgir_forced``: every
round runs whatever the reflection says, labelled so), and picks, in this order of preference: a rewrite that
changes the question by more than a surface edit (:data:`kgir_lib.eval.mechanism.rewrite_form.MORE_THAN_SURFACE`:
it names the gold bridge or a ``G_Ans`` entity, or rewords it), a natural round over a forced one, a round whose
``D'_t`` brought a passage of the question's next hop (the funnel's step 4,
:func:`kgir_lib.eval.mechanism.funnel.funnel_steps`) that no earlier retrieval of the question had held, then the
form (:data:`PREFERENCE`), the funnel's chain up to step 4, a right answer, the earliest round. When no round
changes the question by more than a surface edit, the example is the best round the run has and
:func:`iteration_sentence` says so, naming its form. :func:`before_after` puts that round's two retrievals side by
side: ``D_t``, retrieved with the round's query, and ``D'_t``, retrieved with its rewrite.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import pandas as pd

from ..eval.mechanism import rewrite_form as rwf
from ..eval.mechanism import round_facts as rf
from ..eval.mechanism.bridges import Bridge
from ..eval.mechanism.funnel import funnel_steps
from ..eval.metrics import best_em

__all__ = ["Iteration", "RUN_LABELS", "PREFERENCE", "find_iteration", "new_next_hop", "before_after", "rewrite_history",
           "iteration_sentence"]

# The runs searched, in order (the paper's method first), and how the notebook labels each.
RUN_LABELS = {"kgir": "KGIR-RAG as the model runs it (the reflection chose to go on)",
              "kgir_forced": "the forced-rounds study variant (every round runs whatever the reflection says)"}
# The rewrite forms, best example first: the three that change the question by more than a surface edit, then the rest.
PREFERENCE = (rwf.BRIDGE, rwf.ENTITY, rwf.OTHER, rwf.SURFACE, rwf.IDENTICAL, rwf.MALFORMED)


@dataclass
class Iteration:
    """One question's round ``round`` (``>= 2``), its rewrite's form and what the rewrite changed, and the next-hop
    passages its ``D'_t`` brought that no earlier retrieval held (``()``: none)."""

    method: str          # "kgir" (natural) or "kgir_forced" (forced)
    dataset: str
    qid: str
    round: int
    record: dict         # the trace-file line
    next_pids: tuple     # the next-hop passages D'_t brought, new to the question (may be empty)
    form: str = ""       # the rewrite's form (kgir_lib.eval.mechanism.rewrite_form.rewrite_form)
    change: str = ""     # what the rewrite changed, in words (kgir_lib.eval.mechanism.rewrite_form.rewrite_change)
    natural: Optional[dict] = None  # for a forced round: the full method's own trace of the question

    @property
    def more_than_surface(self) -> bool:
        """Whether the rewrite changed the question by more than a surface edit."""
        return self.form in rwf.MORE_THAN_SURFACE

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


def _key(it: Iteration, bridges: Sequence[Bridge], methods: Sequence[str]) -> tuple:
    """Which of two candidates teaches better (module docstring): more than a surface edit, natural, a new
    next-hop passage, the form, the funnel's chain up to step 4, a right answer after the round, the earliest round
    (ties: the first dataset and question read)."""
    s = funnel_steps(it.record, bridges, it.round)
    return (not it.more_than_surface, list(methods).index(it.method), not it.next_pids, PREFERENCE.index(it.form),
            not s["chain_finds"], not s["correct"], it.round)


def find_iteration(runs: Mapping[tuple, Sequence[Mapping]], bridges: Mapping[str, Mapping[str, Sequence[Bridge]]],
                   methods: Sequence[str] = tuple(RUN_LABELS)) -> Optional[Iteration]:
    """The round that shows the loop going round (module docstring), or ``None`` when no question with a gold bridge
    went past round 1 with a rewrite in any run. ``runs``: ``{(method, dataset): trace-file lines}``
    (:func:`kgir_lib.eval.mechanism.tables.read_run`); ``bridges``: ``{dataset: {qid: gold bridges}}``; ``methods``:
    the runs searched, the natural one first."""
    found = []
    for method in methods:
        for (m, dataset), records in runs.items():
            if m != method:
                continue
            gold = bridges.get(dataset, {})
            for r in records:
                b = tuple(gold.get(rf.qid_of(r)) or ())
                if not b:
                    continue
                for t in range(2, len(rf.rounds(r)) + 1):
                    rnd = rf.rounds(r)[t - 1]
                    form = rwf.rewrite_form(rnd, b)
                    if form:
                        found.append((Iteration(method, dataset, rf.qid_of(r), t, dict(r), new_next_hop(r, b, t),
                                                form, rwf.rewrite_change(rnd, b)), b))
    if not found:
        return None
    best = min(found, key=lambda x: _key(x[0], x[1], methods))[0]
    if best.forced:
        best.natural = next((dict(r) for r in runs.get(("kgir", best.dataset), ()) if rf.qid_of(r) == best.qid), None)
    return best


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
    """The example in words: which run, which round, the rewrite's form and what it changed, what its ``D'_t``
    brought, the answer after it; when the rewrite changed the question by no more than a surface edit, first that
    no round of the runs searched did more."""
    rnd = rf.rounds(it.record)[it.round - 1]
    after = rf.d_rewrite(rnd)
    answers, _ = rf.golds(it.record)
    forced = isinstance(rf.trace_of(it.record).get("round_answers"), list)
    answer = rf.round_answer(it.record, it.round) if forced else rf.final_answer(it.record)
    right = "right" if answer and best_em(answer, answers) else "wrong"
    head = "" if it.more_than_surface else (
        "No round after the first of this run, natural or forced, changed the question by more than a surface edit; "
        "below is the best it has. ")
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
    if it.next_pids:
        hops = ", ".join(f"'{title(p)}' (rank {after.index(p) + 1} of D'_{it.round})" for p in it.next_pids)
        found = (f"It retrieves {hops}: a passage of the question's next hop that no earlier retrieval of the "
                 f"question held.")
    else:
        found = (f"Its retrieval D'_{it.round} brought no passage of the question's next hop that an earlier "
                 f"retrieval of the question had not held.")
    return (head + how + f" Round {it.round}'s rewrite ({it.form}) {it.change}. " + found
            + f" The answer after round {it.round}: '{answer}' ({right}; gold: {' | '.join(answers[:2])}).")
