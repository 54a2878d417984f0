"""Which question notebook 07 tells the Fig. 6 story with: one call, :func:`choose_case`.

Fig. 6 (paper §3.5) is a **chain**: the evidence subgraph of the first retrieval holds the bridge entity
(Compaq), the rewrite names it, the rewritten question's retrieval finds the next hop (the Compaq-HP merger),
and the answer is correct. :func:`choose_case` takes the question that went furthest along that chain,
says plainly whether any question completed it, and names the step where the chosen one stopped.

**Where the chain comes from.** :data:`CHAIN` names its steps; a *chain function* says, for one KGIR-RAG trace
record, which steps happened. Today's is :func:`heuristic_chain`, built on the Fig. 6 features of
:mod:`kgir_lib.notebook.case.bridges`: it cannot know the gold bridge entity, so its first step is "the rewrite names an
entity of G_Ans the question does not". A per-question funnel that knows the gold bridge plugs in as the
``chain`` argument of :func:`choose_case` (any callable record -> sequence of booleans; a ``steps`` attribute
names its steps, else :data:`CHAIN`). :func:`gold_chain` is that funnel: it knows each question's gold bridge
(:mod:`kgir_lib.eval.mechanism.bridges`) and reads the chain with :func:`kgir_lib.eval.mechanism.funnel.funnel_steps`;
notebook 07 uses it wherever the dataset gives gold bridges.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import pandas as pd

from ...kgir.rounds import trace_rounds
from .bridges import bridge_features
from .records import CaseStudy

__all__ = ["CHAIN", "GOLD_CHAIN", "STEP_CLAUSES", "CaseChoice", "heuristic_chain", "gold_chain", "chain_table",
           "choose_case", "chain_clause", "case_chain", "case_chain_note", "gold_bridge_names", "INTERVENTIONS",
           "Intervention", "find_intervention", "chain_marks"]

CHAIN = ("bridge named by the rewrite", "next hop retrieved", "answered correctly")
GOLD_CHAIN = ("gold bridge in G_Ans", "rewrite names it", "D'_t finds the next hop", "answer correct")
# Each step as a clause, taken and not taken, for the sentence that says where a chain stopped.
STEP_CLAUSES = {
    "bridge named by the rewrite": ("the rewrite names a bridge entity of G_Ans",
                                    "the rewrite names no entity of G_Ans the question does not"),
    "next hop retrieved": ("the rewritten question's retrieval brings a gold passage up",
                           "the rewritten question's retrieval brings no gold passage up"),
    "answered correctly": ("the answer is right", "the answer is wrong"),
    "gold bridge in G_Ans": ("the gold bridge entity is in G_Ans", "the gold bridge entity is not in G_Ans"),
    "rewrite names it": ("the rewrite names it", "the rewrite does not name it"),
    "D'_t finds the next hop": ("the rewritten question's retrieval D'_t finds the next hop",
                                "the rewritten question's retrieval D'_t does not find the next hop"),
    "answer correct": ("the answer is right", "the answer is wrong"),
}


def chain_clause(step: str, taken: bool) -> str:
    """``step`` of a chain as a clause (:data:`STEP_CLAUSES`), taken or not; an unknown step as is."""
    yes, no = STEP_CLAUSES.get(step, (step, f"not {step}"))
    return yes if taken else no
ChainFn = Callable[[dict], Sequence[bool]]


def steps_of(chain: ChainFn) -> tuple:
    """The step names of a chain function (its ``steps`` attribute, else :data:`CHAIN`)."""
    return tuple(getattr(chain, "steps", CHAIN))


def gold_chain(data_dir, datasets: Sequence[str] = (), mode: str = "contains") -> ChainFn:
    """The Fig. 6 chain judged against the gold bridge entities (:data:`GOLD_CHAIN`, the funnel's steps 2-5,
    :func:`kgir_lib.eval.mechanism.funnel.funnel_steps`), in the round that went furthest. A record of a question
    without a gold bridge takes no step. Records carry their ``dataset``
    (:func:`kgir_lib.notebook.case.records.load_kgir_traces`); the gold of ``datasets`` is read at once, that of
    any other dataset when a record of it first comes (the gold is the question's own, whatever the profile)."""
    from ...eval.mechanism import round_facts as rf
    from ...eval.mechanism.bridges import load_bridges
    from ...eval.mechanism.funnel import funnel_steps

    bridges = {ds: load_bridges(ds, data_dir) for ds in dict.fromkeys(datasets)}
    keys = ("chain_in_gans", "chain_named", "chain_finds", "chain_correct")

    def of(dataset) -> dict:
        if dataset and dataset not in bridges:
            bridges[dataset] = load_bridges(dataset, data_dir)
        return bridges.get(dataset, {})

    def chain(record: dict) -> tuple:
        found = of(record.get("dataset")).get(rf.qid_of(record))
        if not found:
            return (False,) * len(keys)
        rounds = [funnel_steps(record, found, t, mode) for t in range(1, len(rf.rounds(record)) + 1)]
        best = max(rounds, key=lambda s: sum(s[k] for k in keys), default={k: False for k in keys})
        return tuple(bool(best[k]) for k in keys)

    chain.steps = GOLD_CHAIN  # type: ignore[attr-defined]  # (the step names, read beside the function)
    return chain


def heuristic_chain(record: dict) -> tuple:
    """The :data:`CHAIN` steps one trace took, judged from the trace alone (:mod:`kgir_lib.notebook.case.bridges`):

    1. a round-1 rewrite that is a rewrite of the question and names an entity of round 1's ``G_Ans`` the
       question does not (:func:`kgir_lib.notebook.case.bridges.bridge_entities`);
    2. the rewritten question's retrieval ``D'_1`` brings a gold passage that round 1's ``D_1`` did not hold, or
       ranks one higher than ``D_1`` did (the next hop moved up);
    3. the final answer matches a gold answer exactly.
    Each step counts only when the steps before it happened."""
    feats = bridge_features(record)
    trace = record.get("trace", record)
    rounds = trace_rounds(trace)
    gold = set(trace.get("gold_pids", []))
    bridge = bool(feats["bridge_rewrite"])
    hop = bridge and bool(rounds) and _gold_moved_up(rounds[0].retrieved, rounds[0].rewrite_retrieved, gold)
    return bridge, hop, hop and feats["EM"] == 100.0


def _gold_moved_up(before: Sequence, after: Sequence, gold: set) -> bool:
    """A gold passage in ``after`` (``[(pid, score)]``) that ``before`` lacks or ranks lower."""
    rank_before = {p: i for i, (p, _) in enumerate(before)}
    return any(p in gold and i < rank_before.get(p, len(before)) for i, (p, _) in enumerate(after))


def chain_table(records: Sequence[dict], chain: ChainFn = heuristic_chain, any_variant: bool = False) -> pd.DataFrame:
    """One row per full KGIR-RAG trace (``any_variant``: per trace of whichever variant, a study variant's included):
    the :data:`CHAIN` steps it took, ``reached`` (steps in a row from the first), and the Fig. 6 features for reading
    it; furthest first, then by the Fig. 6 score."""
    rows, names = [], steps_of(chain)
    for rec in records:
        trace = rec.get("trace", rec)
        if not any_variant and trace.get("variant", "full") != "full":
            continue
        steps = [bool(s) for s in chain(rec)]
        reached = next((i for i, s in enumerate(steps) if not s), len(steps))
        f = bridge_features(rec)
        rows.append({"dataset": rec.get("dataset") or trace.get("dataset", ""), "qid": f["qid"],
                     **dict(zip(names, steps)), "reached": reached, "score": f["score"],
                     "question": f["question"], "rewrite": f["rewrite_1"], "bridge": ", ".join(f["bridge_entities"]),
                     "answer": f["answer"], "gold": f["gold"], "rounds": f["rounds"]})
    df = pd.DataFrame(rows, columns=["dataset", "qid", *names, "reached", "score", "question", "rewrite", "bridge",
                                     "answer", "gold", "rounds"])
    return df.sort_values(["reached", "score"], ascending=False, kind="stable").reset_index(drop=True)


@dataclass
class CaseChoice:
    """The question of the case study and why: ``full`` is True when it completed the whole chain."""

    dataset: Optional[str]
    qid: Optional[str]
    reached: int          # steps of CHAIN it took in a row
    full: bool
    note: str             # one plain sentence for the notebook
    table: pd.DataFrame   # every trace's chain (chain_table)
    steps: tuple = CHAIN  # the chain's step names


def choose_case(records: Sequence[dict], dataset: Optional[str] = None, qid: Optional[str] = None,
                chain: ChainFn = heuristic_chain) -> CaseChoice:
    """The case study's question: ``dataset``/``qid`` when given, else the trace that went furthest along the
    Fig. 6 chain. The note says how many traces completed it and, when none did, where the chosen one stopped."""
    table, steps = chain_table(records, chain), steps_of(chain)
    n_full = int((table["reached"] == len(steps)).sum()) if len(table) else 0
    count = f"{n_full} of {len(table)} KGIR-RAG traces of this run complete the whole Fig. 6 chain"
    if dataset is not None and qid is not None:
        row = table[(table["dataset"] == dataset) & (table["qid"] == str(qid))]
        reached = int(row["reached"].iloc[0]) if len(row) else 0
        if not len(row):
            return CaseChoice(dataset, str(qid), 0, False,
                              f"question {qid} of {dataset}, as asked. The run has no KGIR-RAG trace of it (its "
                              f"dataset is not among the run's, or it was not sampled): it runs below, and its chain "
                              f"is read from the question's own gold there. For comparison: {count}.", table, steps)
        return CaseChoice(dataset, str(qid), reached, reached == len(steps),
                          f"question {qid} of {dataset}, as asked; {count}.", table, steps)
    if table.empty:
        return CaseChoice(None, None, 0, False, "No KGIR-RAG traces in this run directory (run notebook 04 first).",
                          table, steps)
    top = table.iloc[0]
    reached = int(top["reached"])
    if reached == len(steps):
        why = "it completes the whole chain"
    elif reached == 0:
        why = (f"NO trace completes the chain, and none even takes its first step (in every one, "
               f"{chain_clause(steps[0], False)}); this is the best-scored trace by the Fig. 6 features")
    else:
        taken = ", ".join(chain_clause(x, True) for x in steps[:reached])
        why = (f"NO trace completes the chain; this one goes furthest: {taken}, "
               f"but {chain_clause(steps[reached], False)}")
    return CaseChoice(str(top["dataset"]), str(top["qid"]), reached, reached == len(steps),
                      f"question {top['qid']} of {top['dataset']}: {why}. {count[0].upper() + count[1:]}.",
                      table, steps)


WHOLE = "— (the whole chain)"  # case_chain's "breaks at" when every step is taken
# Interventions that can complete a chain the model's own run does not, smallest first: more rounds (the
# forced-rounds study variant: the reflection's stop overruled, no gold), then the gold of one step, then of several
# (notebook 04's study variants, kgir_lib/kgir/study.py; their answers are in each profile's response log).
INTERVENTIONS = ("kgir_forced", "kgir_oracle_seeds", "kgir_oracle_rewrite", "kgir_oracle_next_hop",
                 "kgir_oracle_seeds_rewrite", "kgir_oracle_seeds_rewrite_next_hop")


@dataclass
class Intervention:
    """The smallest intervention that completes the chain on some question: its registry key, the question, and how
    far the model's own run went on it (steps of the chain in a row)."""

    key: str
    dataset: str
    qid: str
    natural_reached: int


def find_intervention(run_dir, datasets: Sequence[str], chain: ChainFn, natural: pd.DataFrame,
                      keys: Sequence[str] = INTERVENTIONS) -> Optional[Intervention]:
    """The first of ``keys`` (smallest first, :data:`INTERVENTIONS`) whose run in ``run_dir`` completes ``chain`` on a
    question of ``datasets``; of its complete questions, the one the model's own run (``natural``, a
    :func:`chain_table`) went furthest on, then the first in that run's order. ``None`` when no intervention's traces
    complete it (or none ran)."""
    from ...eval.mechanism.tables import read_run

    steps = steps_of(chain)
    went = {(str(d), str(q)): int(r) for d, q, r in zip(natural["dataset"], natural["qid"], natural["reached"])}
    for key in keys:
        records = [{**r, "dataset": d} for (_, d), recs in read_run(run_dir, datasets, methods=(key,)).items()
                   for r in recs]
        table = chain_table(records, chain, any_variant=True)
        full = table[table["reached"] == len(steps)]
        if len(full):
            best = max(zip(full["dataset"], full["qid"]), key=lambda dq: went.get((str(dq[0]), str(dq[1])), 0))
            return Intervention(key, str(best[0]), str(best[1]), went.get((str(best[0]), str(best[1])), 0))
    return None


def chain_marks(chain: pd.DataFrame) -> pd.DataFrame:
    """A :func:`case_chain` table as a reader sees it: each step ✓ or ✗, and a last column that says whether every
    step holds in the round (the chain notebook 07 highlights) or where it breaks."""
    from ...eval.mechanism.funnel import STEPS

    out = chain.copy()
    for step in STEPS[1:]:
        if step in out:
            out[step] = out[step].map(lambda v: "✓" if bool(v) else "✗")
    out["the whole chain"] = chain["breaks at"].map(lambda b: "✓ every step holds" if b == WHOLE
                                                    else f"breaks at {b}")
    return out.drop(columns=["breaks at"])


def case_chain(case, bridge: Optional[str] = None, next_hop_titles: Sequence[str] = ()) -> pd.DataFrame:
    """A case's Fig. 6 chain in the funnel's terms (notebook 04: :func:`kgir_lib.eval.mechanism.funnel.funnel_steps`),
    one row a round. The gold bridges are the question's own (``Question.gold_bridges``, derived from its dataset's
    gold chain by :mod:`kgir_lib.gold`, for a question of any dataset), or given by hand: ``bridge`` (an entity
    name) and the titles of the passages that hold the next hop (a free question: notebook 07's Fig. 6 corpus,
    bridge Compaq, next hop Hewlett-Packard's passage). Each step is judged on its own (the funnel's "alone": an
    oracle rewrite names the bridge even where no seed matched, and a right answer read from a first retrieval that
    held both hops is right); ``breaks at`` is the funnel's chain, the first step not taken with every one before
    it; ``next hop already in D_t`` says when step 4 had nothing left to find. A question without a gold bridge (a
    comparison question) gives an empty table."""
    from ...eval.mechanism.bridges import Bridge, bridge_aliases
    from ...eval.mechanism.funnel import STEPS, STEP_KEYS, funnel_steps
    from .build import find_question

    corpus = case.ws.dataset.corpus
    cols = ["round", *STEPS[1:], "breaks at", "next hop already in D_t"]
    if bridge is None:
        golds = list(find_question(case.ws.dataset, case.qid).gold_bridges)
        if not golds:
            return pd.DataFrame(columns=cols)
    else:
        titles = {p.title for p in corpus.passages}
        unknown = [t for t in next_hop_titles if t not in titles]
        if not str(bridge).strip():
            raise ValueError("case_chain: 'bridge' needs an entity name")
        if not next_hop_titles or unknown:
            raise ValueError(f"case_chain: next-hop titles {unknown or list(next_hop_titles)} are not titles of the "
                             f"case's corpus ({sorted(titles)[:6]})")
        golds = [Bridge(str(bridge), bridge_aliases(str(bridge)),
                        tuple(p.pid for p in corpus.passages if p.title in set(next_hop_titles)))]
    trace = dict(case.output.trace or {})
    trace.setdefault("gold_answers", list(case.gold_answers))
    record = {"qid": case.qid, "answer": case.answer, "trace": trace}
    rows = []
    for t in range(1, len(trace.get("rounds") or []) + 1):
        steps = funnel_steps(record, golds, t)
        chained = [bool(steps[f"chain_{k}"]) for k in STEP_KEYS[1:]]
        first_not = next((STEPS[1:][i] for i, s in enumerate(chained) if not s), WHOLE)
        rows.append({"round": t, **{name: bool(steps[k]) for name, k in zip(STEPS[1:], STEP_KEYS[1:])},
                     "breaks at": first_not, "next hop already in D_t": bool(steps["next_hop_in_D_t"])})
    return pd.DataFrame(rows, columns=cols)


def gold_bridge_names(case) -> list:
    """The names of the gold bridge entities of the case's question (``Question.gold_bridges``); ``[]`` without."""
    from .build import find_question

    return [b.name for b in find_question(case.ws.dataset, case.qid).gold_bridges]


def case_chain_note(chain: pd.DataFrame) -> str:
    """One sentence on a :func:`case_chain` table: the round whose chain went furthest and where it breaks, and
    whether the answer was right without the chain."""
    if chain.empty:
        return "The case has no round to read."
    from ...eval.mechanism.funnel import STEPS

    depth = chain["breaks at"].map(lambda b: len(STEPS) if b == WHOLE else STEPS.index(b))
    best = chain.loc[depth.idxmax()]
    if best["breaks at"] == WHOLE:
        return f"Round {int(best['round'])} takes the whole chain, from the seed to a correct answer."
    already = bool(best["next hop already in D_t"])
    note = (f"Furthest round ({int(best['round'])}): the chain breaks at {best['breaks at']}"
            f"{'; the next hop was already in D_t' if already else ''}.")
    right = [int(r) for r, ok in zip(chain["round"], chain[STEPS[-1]]) if ok]
    if right:
        how = ("from a retrieval that already held the next hop, so the chain had nothing to add" if already
               else "without the chain's steps")
        note += f" The answer is correct all the same (round {right[0]}), {how}."
    return note


def next_hop_reading(cases: Mapping[str, CaseStudy], next_hop_titles: Sequence[str]) -> pd.DataFrame:
    """Round 1 of several runs of one free question, side by side (notebook 07 §9: the model's rewrite against the
    oracle rewrite): who wrote the rewrite, the rewrite, the best rank of a next-hop passage (by title) in ``D_1``
    and in ``D'_1``, whether the reflection read one (``P_1``), whether the final answer's context held one, the
    answer and its EM. ``cases``: ``{run label: CaseStudy}``."""
    rows = []
    for label, case in cases.items():
        r = case.rounds[0]
        hop = {p.pid for p in case.ws.dataset.corpus.passages if p.title in set(next_hop_titles)}

        def rank(pids: Sequence[str], hop: set = hop) -> Optional[int]:  # this case's next-hop passages, bound now
            return next((i for i, p in enumerate(pids, 1) if p in hop), None)
        context = next((list(x.final.context_pids) for x in reversed(case.rounds) if x.final is not None), [])
        rows.append({"run": label,
                     "rewrite by": "the gold (oracle)" if r.rewrite_note.get("form") == "oracle" else "the model",
                     "round-1 rewrite": r.rewrite, "next hop's rank in D_1": rank([p for p, _ in r.retrieved]),
                     "next hop's rank in D'_1": rank([p for p, _ in r.rewrite_retrieved]),
                     "reflection read it (P_1)": bool(hop & set(r.reflection_passages or [])),
                     "in the reader's context": bool(hop & set(context)), "answer": case.answer, "EM": case.em})
    return pd.DataFrame(rows)
