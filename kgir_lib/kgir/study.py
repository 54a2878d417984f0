"""The steps of KGIR-RAG's study variants: oracles handed one step's gold, the bridge rewrite of
ours and the forced rounds.

None of them is the paper's method (:data:`kgir_lib.kgir.loop.PAPER`); each is a step object with
one public method, put in place of the paper's step by a composition of
:data:`kgir_lib.kgir.variants.VARIANTS`, where every variant is described. The gold comes from the
question's gold chain (:mod:`kgir_lib.gold`, ``Question.gold_hops`` / ``gold_bridges``), read for
each step here:

- :func:`oracle_entities` (the seeds): each hop's gold entities (:func:`hop_entities`), in hop
  order, without repeats (case aside): of a ``X >> relation`` hop, the subject ``X`` split at its
  ``#k`` references (the question does not name them), each part stripped of punctuation and of
  stop words at either end ("#1 at the 1920 Summer Olympics" -> "1920 Summer Olympics"). This
  admits every such part, named entity or not: where the reference completes a name, the part
  left is its common noun ("Arrondissement of #1 >> country" -> "Arrondissement", "#1 Courthouse"
  -> "Courthouse"), matched to the graph like any other seed; no rule here tells a name from a
  noun, and dropping those parts would change the oracle's committed requests. Of a
  natural-language sub-question, its supporting paragraph's title when the sub-question names it
  (:func:`kgir_lib.gold.named_form`: the whole title, without its parenthesised part, or before
  its comma), nothing else (a word of the graph the sub-question happens to contain, "city" or
  "currency", is no gold entity); of a HotpotQA question (no sub-questions), each supporting title
  the question names, nothing else;
- :func:`gold_rewrite` (the rewrite): the ideal rewrite (:func:`kgir_lib.gold.ideal_rewrite`),
  unless it names the final answer or an alias of it (:func:`kgir_lib.gold.names_answer`);
- the next hop: :func:`kgir_lib.gold.next_hop_pids` of the question's bridges;
- the context: the question's gold passages.

**Where an oracle does not apply** (no gold for the step), the question runs that step as the
full method does, and its trace says so (:class:`OracleNote`: ``oracle.not_applied`` maps the step
to the reason).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence, Union

from ..data import Question
from ..gold import GoldHop, ideal_rewrite, named_form, names_answer, next_hop_pids
from ..llm.prompts import chat
from .entity_matching import STOP_WORDS
from .contract import (PassagesStep, ReadStep, RewriteStep, Rewritten, SeedsStep, checked)
from .loop import Loop, Steps
from .rewrite import REWRITE_MAX_TOKENS, clean_answer, format_history, parse_rewrite, strip_marks
from .rounds import LoopRound
from .state import LoopState, Run
from .steps import Read, hand_to_reader, reflection_verdicts
from .subgraph import Seeds

PARTS = ("seeds", "rewrite", "next_hop", "context")  # the steps an oracle replaces, funnel order
_REFS = re.compile(r"#\d+")


# ---------------------------------------------------------------- the gold, read for each step
def _clean(part: str) -> str:
    words = part.strip(" ,;:.").split()
    while words and words[0].lower() in STOP_WORDS:
        words.pop(0)
    while words and words[-1].lower() in STOP_WORDS:
        words.pop()
    return " ".join(words).strip(" ,;:.")


def hop_entities(hop: GoldHop, question: str) -> list:
    """The gold entity strings one hop names (module docstring); ``question`` is the multi-hop
    question (read for HotpotQA hops, which have no sub-question)."""
    if ">>" in hop.question:
        parts = (_clean(p) for p in _REFS.split(hop.question.split(">>", 1)[0]))
        return [e for e in parts if re.search(r"\w", e)]
    form = named_form(hop.title, hop.question if hop.question.strip() else question)
    return [form] if form else []


def oracle_entities(q: Question) -> list:
    """``E_q`` of the seeds oracle: :func:`hop_entities` of every gold hop, in hop order, without
    repeats."""
    out: dict = {}
    for hop in q.gold_hops:
        for e in hop_entities(hop, q.question):
            out.setdefault(e.lower(), e)
    return list(out.values())


def gold_rewrite(q: Question) -> tuple:
    """``(the ideal rewrite, None)`` of ``q``, or ``(None, why it does not apply)``."""
    rewrite = ideal_rewrite(q.gold_hops)
    if rewrite is None:
        if not any(h.question.strip() for h in q.gold_hops):
            return None, "no sub-questions (HotpotQA): no ideal rewrite"
        return None, "fewer than two hops, or a #k reference to no earlier hop"
    if names_answer(rewrite, q.answers):
        return None, "the ideal rewrite names the final answer"
    return rewrite, None


def oracle_plan(q: Question, parts: Sequence[str]) -> dict:
    """What the gold supplies for ``q`` to each of ``parts`` that needs it before the run, and why
    a part does not apply (``not_applied``)."""
    plan: dict = {"parts": list(parts), "not_applied": {}}
    if "seeds" in parts:
        plan["seeds"] = []
        if not q.gold_hops:
            plan["not_applied"]["seeds"] = "no gold chain"
    if "rewrite" in parts:
        plan["rewrite"], reason = gold_rewrite(q)
        if reason:
            plan["not_applied"]["rewrite"] = reason
    if "next_hop" in parts:
        plan["next_hop_pids"] = list(next_hop_pids(q.gold_bridges))
        if not plan["next_hop_pids"]:
            plan["not_applied"]["next_hop"] = "no gold bridge"
    if "context" in parts:
        plan["context_pids"] = list(q.gold_pids)
        if not q.gold_pids:
            plan["not_applied"]["context"] = "no gold passages"
    return plan


# ---------------------------------------------------------------- the oracle steps
@dataclass(frozen=True)
class GoldSeeds:
    """Finds the seeds in the gold (:func:`oracle_entities`), used as given (not grounded in the
    round's query), with no NER call; a question whose gold names no entity asks ``ner`` (the
    paper's step). Records, per round, the gold entities used or ``None``."""

    ner: SeedsStep
    part = "seeds"

    def __call__(self, run: Run, states: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> list[Seeds]:
        gold = [oracle_entities(s.q) for s in states]
        asked = [i for i, g in enumerate(gold) if not g]
        found = iter(self.ner(run, [states[i] for i in asked], [rounds[i] for i in asked]))
        seeds = []
        for s, g in zip(states, gold):
            s.notes.setdefault("seeds", []).append(list(g) if g else None)
            run.count("oracle_seed_rounds", int(bool(g)))
            seeds.append(Seeds(list(g), ground=False) if g else next(found))
        return seeds


@dataclass(frozen=True)
class IdealRewrite:
    """Round 1's rewrite is the ideal rewrite (:func:`gold_rewrite`), written without an LLM call;
    later rounds, and questions it does not apply to, rewrite with ``rewrite`` (the paper's step,
    or another)."""

    rewrite: RewriteStep
    part = "rewrite"

    def __call__(self, run: Run, states: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> Sequence[Union[Rewritten, str]]:
        out: list[Union[Rewritten, str, None]] = [None] * len(states)
        for i, (s, r) in enumerate(zip(states, rounds)):
            ideal = gold_rewrite(s.q)[0] if r.iteration == 1 else None
            if ideal:  # the trace's rewrite record keeps a null bridge beside the form
                out[i] = Rewritten(ideal, note={"form": "oracle", "bridge": None})
        rest = [i for i, x in enumerate(out) if x is None]
        if rest:
            done = self.rewrite(run, [states[i] for i in rest], [rounds[i] for i in rest])
            for i, q2 in zip(rest, checked("rewrite", self.rewrite, done, len(rest))):
                out[i] = q2
        return [x for x in out if x is not None]


@dataclass(frozen=True)
class GoldNextHopFirst:
    """The gold next-hop passages (:func:`kgir_lib.gold.next_hop_pids`) first in ``P_t``, which
    keeps at most ``context_passages``; the rest as ``passages`` (the paper's rule) chooses."""

    passages: PassagesStep
    part = "next_hop"

    def __call__(self, run: Run, state: LoopState, first: Sequence[str],
                 rewritten: Sequence[str]) -> list[str]:
        shown = self.passages(run, state, first, rewritten)
        gold = list(next_hop_pids(state.q.gold_bridges))
        if not gold:
            return shown
        return list(dict.fromkeys([*gold, *shown]))[:run.cfg.context_passages]


@dataclass(frozen=True)
class GoldContextFirst:
    """The shared reader (``read``) answers each question from its gold passages alone: one round,
    no retrieval, one reader call; questions without gold passages run ``rest`` (the full method's
    loop) first. Answers in question order."""

    rest: Loop
    read: ReadStep = Read()
    part = "context"

    @property
    def steps(self) -> Steps:
        return self.rest.steps

    def answer(self, run: Run, questions: Sequence[Question],
               label: str = "KGIR-RAG") -> list[LoopState]:
        gold = [q for q in questions if q.gold_pids]
        loop = {s.q.qid: s for s in self.rest.answer(run, [q for q in questions if not q.gold_pids],
                                                         label)}
        states = [LoopState(q=q, query=q.question) for q in gold]
        for s in states:
            s.rounds.append(LoopRound(iteration=1, query=s.q.question, retrieved=[]))
            s.final_context = run.passages_text(s.q.gold_pids)
            s.final_pids = list(s.q.gold_pids)
            s.first_retrieval = list(s.q.gold_pids)
        for s, answer in zip(states, self.read(run, states)):
            s.answer = answer
            s.answered_by = s.answered_by or "reader"
        run.stats["oracle_context"] = len(states)
        done = {s.q.qid: s for s in states}
        return [done.get(q.qid) or loop[q.qid] for q in questions]


@dataclass(frozen=True)
class OracleNote:
    """The trace's ``oracle`` record of a composition with oracle steps ``parts``: what the gold
    supplied (:func:`oracle_plan`, the seeds used per round: null where NER ran) and
    ``not_applied``; ``no_retrieval`` when the gold passages were read in place of any
    retrieval (no recall to read)."""

    parts: tuple

    def __call__(self, state: LoopState) -> dict:
        plan = oracle_plan(state.q, self.parts)
        if "seeds" in state.notes:
            plan["seeds"] = state.notes["seeds"]
        if "seeds" in plan and plan["seeds"] and all(x is None for x in plan["seeds"]):
            plan["not_applied"] = {**plan["not_applied"], "seeds": "the gold names no entity"}
        note: dict[str, object] = {"oracle": plan}
        if "context" in plan["parts"] and "context" not in plan["not_applied"]:
            note["no_retrieval"] = True
        return note


# ---------------------------------------------------------------- the bridge rewrite (ours)
_BRIDGE = re.compile(r"^\s*bridge(?:\s+entity)?\s*[:：]\s*(.*)$", re.I)
_NO_BRIDGE = {"", "none", "n/a", "na", "unknown", "no bridge", "nothing", "null"}


@dataclass(frozen=True)
class BridgeRewrite:
    """A parsed bridge-rewrite reply: the bridge entity it names (``None``: no usable ``Bridge:``
    line, or "none") and the rewritten question (``None``: malformed, the caller keeps the
    query)."""

    bridge: Optional[str]
    question: Optional[str]

    @property
    def malformed(self) -> bool:
        return self.question is None


def bridge_rewrite_requests(questions: Sequence[str], evidences: Sequence[str],
                            histories: Sequence[Sequence[dict]],
                            max_tokens: int = REWRITE_MAX_TOKENS) -> list:
    """One bridge-rewrite request per question (prompt ``kgir_bridge_rewrite``): the same inputs as
    :func:`~kgir_lib.kgir.rewrite.rewrite_requests` (``q``, its history, the evidence), a two-line
    reply asked for."""
    if not len(questions) == len(evidences) == len(histories):
        raise ValueError("bridge_rewrite_requests: questions, evidences and histories differ in "
                         "length")
    return [chat("kgir_bridge_rewrite",
                 {"question": q, "evidence": ev, "history": format_history(hist)},
                 rstrip=True, max_tokens=max_tokens, stop=("\n\n", "\nTriples:"))
            for q, ev, hist in zip(questions, evidences, histories)]


def parse_bridge_rewrite(text: Optional[str]) -> BridgeRewrite:
    """The bridge and the question of a bridge-rewrite reply; never raises.

    The bridge is the first ``Bridge:`` line ("none", "unknown" or empty: no bridge). The question
    is read from the other lines as :func:`~kgir_lib.kgir.rewrite.parse_rewrite` reads a rewrite
    (``Question:`` / ``Rewritten question:`` markers, else the first line that is a question);
    none is a malformed reply."""
    lines = (text or "").splitlines()
    marked = [m.group(1) for m in (_BRIDGE.match(ln) for ln in lines) if m]
    bridge = strip_marks(clean_answer(marked[0])) if marked else None
    question = parse_rewrite("\n".join(ln for ln in lines if not _BRIDGE.match(ln)))
    return BridgeRewrite(None if bridge is None or bridge.lower() in _NO_BRIDGE else bridge,
                         question)


class RewriteNamingTheBridge:
    """The rewrite first names the entity of the evidence that answers the hop the question depends
    on, then substitutes it (prompt ``kgir_bridge_rewrite``, :func:`parse_bridge_rewrite`), in ONE
    call; a reply without a question is malformed (``rewrite_malformed``; ``bridge_missing``
    counts replies without a usable ``Bridge:`` line) and keeps the query, as the paper's rewrite
    does."""

    def __call__(self, run: Run, states: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> list[Rewritten]:
        requests = bridge_rewrite_requests([s.q.question for s in states],
                                           [r.evidence for r in rounds],
                                           [s.history for s in states],
                                           max_tokens=run.cfg.max_tokens("rewrite"))
        rewrites = []
        for s, res in zip(states, run.ws.llm.generate(requests, stage="kgir_rewrite")):
            s.account("kgir_rewrite", res)
            parsed = parse_bridge_rewrite(res.text)
            run.count("rewrite_malformed", int(parsed.malformed))
            run.count("bridge_missing", int(parsed.bridge is None))
            note = {"form": "bridge", "bridge": parsed.bridge}
            rewrites.append(Rewritten(parsed.question, res.text, truncated=res.truncated,
                                      note=note))
        return rewrites


# ---------------------------------------------------------------- forced rounds
@dataclass(frozen=True)
class ReadEveryRound:
    """The reflection runs as the paper's (its requests and verdicts), but its stop is ignored:
    ``read`` (the shared reader) answers every open question after every round
    (``round_answers``), every question goes on to the next round, and the answer is the last
    round's."""

    read: ReadStep = Read()

    def __call__(self, run: Run, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                 last: bool) -> list[LoopState]:
        verdicts = reflection_verdicts(run, states, rounds, last)
        for s, r in zip(states, rounds):
            hand_to_reader(run, s, r, r.shown_passages())
        answers = self.read(run, states)
        still = []
        for s, verdict, r, answer in zip(states, verdicts, rounds, answers):
            s.notes.setdefault("round_answers", []).append(answer)
            if last:
                s.answer = answer
                s.answered_by = "reader"
            else:
                s.go_on(r.rewritten(), verdict.missing)
                still.append(s)
        return still


class RoundAnswersNote:
    """The trace's ``round_answers``: the reader's answer after each round."""

    def __call__(self, state: LoopState) -> dict:
        return {"round_answers": list(state.notes.get("round_answers", []))}
