"""Study variants of KGIR-RAG: oracles that hand one step the gold, and two repairs of ours.

None of them is the paper's method, which stays :class:`~kgir_lib.kgir.loop.KGIRRAG` (``full``); each is
labelled ("oracle" or "ours") and measured against it (notebook 04, ``04_step_attribution``). The bridge funnel
(:mod:`kgir_lib.eval.mechanism.funnel`) says where the chain seed -> bridge in ``G_Ans`` -> rewrite names it ->
``D'_t`` finds the next hop -> answer breaks; an oracle variant replaces one step with the gold chain of the
question (:mod:`kgir_lib.gold`, ``Question.gold_hops`` / ``gold_bridges``) and keeps everything else as the full
method runs it, so the difference to the full method is what fixing that step buys.

**Oracle variants** (:data:`STUDY_VARIANTS`):

- ``oracle_seeds``: in every round ``E_q`` is the entities the gold sub-questions name (:func:`oracle_entities`),
  matched to the entities of ``G_q`` by the profile's eq. 5 rule (as given: not grounded in the round's query;
  the full method's fallback when nothing matches is kept); no NER call. Read off each hop
  (:func:`hop_entities`), in hop order, without repeats (case aside):

  * ``X >> relation``: the subject ``X`` split at its ``#k`` references (the question does not name them), each
    part stripped of punctuation and of stop words at either end ("#1 at the 1920 Summer Olympics" ->
    "1920 Summer Olympics");
  * a natural-language sub-question: its supporting paragraph's title when the sub-question names it
    (:func:`kgir_lib.gold.named_form`: the whole title, without its parenthesised part, or before its comma),
    nothing else (a word of the graph the sub-question happens to contain, "city" or "currency", is no gold
    entity);
  * HotpotQA (no sub-questions): each supporting title the question names (``named_form``), nothing else.

  A question whose gold names no entity runs NER as the full method does (trace: ``oracle.seeds[t]`` is null,
  ``not_applied`` says "the gold names no entity"; ``04_step_attribution`` counts the questions it applied to).
- ``oracle_rewrite``: round 1's rewrite ``q'_1`` is the ideal rewrite (:func:`kgir_lib.gold.ideal_rewrite`: the
  last sub-question with every ``#k`` replaced by hop k's gold answer); no rewrite call in round 1, ``D'_1`` is
  retrieved with it; later rounds rewrite as the full method. MuSiQue only: HotpotQA has no sub-questions, so
  no honest ideal rewrite. An ideal rewrite that names the final answer or an alias of it
  (:func:`kgir_lib.gold.names_answer`) is not applied: it would hand the retrieval the answer.
- ``oracle_next_hop``: the gold next-hop passages (:func:`kgir_lib.gold.next_hop_pids` of the question's bridges:
  the passages of the hop after each bridge; HotpotQA bridge questions: the bridge's own paragraph) are put
  first in every round's reflection passages ``P_t``, which keep at most ``context_passages``; the reflection
  and the reader read them.
- ``oracle_context``: the shared reader answers ``q`` from the gold passages alone (the question's gold
  passages in order, one reader call, no retrieval): the reader's ceiling. Recall is not defined for it (the
  trace says ``no_retrieval``).
- cumulative: ``oracle_seeds_rewrite`` (seeds + rewrite) and ``oracle_seeds_rewrite_next_hop`` (+ next hop), the
  waterfall from the full method towards the ceiling.

**Where an oracle does not apply** (no gold for the step: HotpotQA has no sub-questions, a question without a
gold bridge has no next hop, a dataset without gold passages has no context), the question runs that step as
the full method does, and its trace says so: ``oracle.not_applied`` maps the step to the reason. A question to
which no step of the variant applies therefore asks the full method's requests (answered from its cache);
``04_step_attribution`` counts the questions each variant applied to.

**Ours** (repairs of the weakest step, beside the paper's method, never in its place):

- ``bridge_rewrite``: the rewrite first names the entity of ``G_Ans`` that answers the hop the question depends
  on, then substitutes it (prompt ``kgir_bridge_rewrite``, :func:`kgir_lib.kgir.rewrite.parse_bridge_rewrite`); a
  reply without a question is malformed, counted (``rewrite_malformed``; ``bridge_missing`` counts replies
  without a usable ``Bridge:`` line) and keeps the query, as the paper's rewrite does.
- ``all_passages``: the full method with the profile's ``reflection_passages`` set to ``"all"`` (the top of
  ``D'_t``, new or not; ``benchmarks/bench_reflection_passages.py`` measures it against ``"new"``).

**Trace.** Each oracle variant's trace holds ``oracle``: ``parts`` (the steps it replaces), ``seeds`` (per round,
the gold entities used, or null where NER ran), ``rewrite`` (the ideal rewrite), ``next_hop_pids``,
``context_pids`` and ``not_applied``; the round's ``rewrite`` carries ``form`` ("oracle" or "bridge") and the
bridge rewrite's ``bridge``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import ClassVar, Optional, Sequence

from ..data import Question
from ..gold import GoldHop, ideal_rewrite, named_form, names_answer, next_hop_pids
from ..llm.prompts import chat
from ..methods.base import MethodOutput, Workspace
from .entity_matching import STOP_WORDS
from .loop import KGIRRAG, Variant
from .rewrite import REWRITE_MAX_TOKENS, _clean_answer, _strip, format_history, parse_rewrite
from .rounds import LoopRound
from .state import LoopState

PARTS = ("seeds", "rewrite", "next_hop", "context")  # the steps an oracle can replace, in the funnel's order
_REFS = re.compile(r"#\d+")


@dataclass(frozen=True)
class StudyVariant(Variant):
    """A study variant: the oracle parts it replaces with the gold, or one of our repairs (module docstring)."""

    oracle: tuple = ()                         # of PARTS
    bridge_rewrite: bool = False               # ours: the two-field bridge rewrite
    reflection_passages: Optional[str] = None  # ours: the profile's P_t rule replaced ("all")


STUDY_VARIANTS: dict = {
    "oracle_seeds": StudyVariant("KGIR-RAG + oracle seeds", "kgir_oracle_seeds", oracle=("seeds",)),
    "oracle_rewrite": StudyVariant("KGIR-RAG + oracle rewrite", "kgir_oracle_rewrite", oracle=("rewrite",)),
    "oracle_next_hop": StudyVariant("KGIR-RAG + oracle next hop", "kgir_oracle_next_hop", oracle=("next_hop",)),
    "oracle_context": StudyVariant("Oracle context (gold passages, shared reader)", "kgir_oracle_context",
                                   oracle=("context",)),
    "oracle_seeds_rewrite": StudyVariant("KGIR-RAG + oracle seeds + rewrite", "kgir_oracle_seeds_rewrite",
                                         oracle=("seeds", "rewrite")),
    "oracle_seeds_rewrite_next_hop": StudyVariant("KGIR-RAG + oracle seeds + rewrite + next hop",
                                                  "kgir_oracle_seeds_rewrite_next_hop",
                                                  oracle=("seeds", "rewrite", "next_hop")),
    "bridge_rewrite": StudyVariant("KGIR-RAG + bridge rewrite (ours)", "kgir_bridge_rewrite", bridge_rewrite=True),
    "all_passages": StudyVariant("KGIR-RAG + reflection reads all of D'_t (ours)", "kgir_all_passages",
                                 reflection_passages="all"),
}


# ---------------------------------------------------------------------------- the gold, read for each step
def _clean(part: str) -> str:
    words = part.strip(" ,;:.").split()
    while words and words[0].lower() in STOP_WORDS:
        words.pop(0)
    while words and words[-1].lower() in STOP_WORDS:
        words.pop()
    return " ".join(words).strip(" ,;:.")


def hop_entities(hop: GoldHop, question: str) -> list:
    """The gold entity strings one hop names (module docstring, ``oracle_seeds``); ``question`` is the
    multi-hop question (read for HotpotQA hops, which have no sub-question)."""
    if ">>" in hop.question:
        return [e for e in (_clean(p) for p in _REFS.split(hop.question.split(">>", 1)[0])) if re.search(r"\w", e)]
    form = named_form(hop.title, hop.question if hop.question.strip() else question)
    return [form] if form else []


def oracle_entities(q: Question) -> list:
    """``E_q`` of the oracle seeds: :func:`hop_entities` of every gold hop, in hop order, without repeats."""
    out: dict = {}
    for hop in q.gold_hops:
        for e in hop_entities(hop, q.question):
            out.setdefault(e.lower(), e)
    return list(out.values())


def oracle_plan(q: Question, parts: Sequence[str]) -> dict:
    """What the gold supplies for ``q`` to each of ``parts`` that needs it before the run, and why a part
    does not apply (``not_applied``)."""
    plan: dict = {"parts": list(parts), "not_applied": {}}
    if "seeds" in parts:
        plan["seeds"] = []
        if not q.gold_hops:
            plan["not_applied"]["seeds"] = "no gold chain"
    if "rewrite" in parts:
        plan["rewrite"] = ideal_rewrite(q.gold_hops)
        if plan["rewrite"] is None:
            plan["not_applied"]["rewrite"] = ("no sub-questions (HotpotQA): no ideal rewrite"
                                              if not any(h.question.strip() for h in q.gold_hops)
                                              else "fewer than two hops, or a #k reference to no earlier hop")
        elif names_answer(plan["rewrite"], q.answers):
            plan["rewrite"] = None
            plan["not_applied"]["rewrite"] = "the ideal rewrite names the final answer"
    if "next_hop" in parts:
        plan["next_hop_pids"] = list(next_hop_pids(q.gold_bridges))
        if not plan["next_hop_pids"]:
            plan["not_applied"]["next_hop"] = "no gold bridge"
    if "context" in parts:
        plan["context_pids"] = list(q.gold_pids)
        if not q.gold_pids:
            plan["not_applied"]["context"] = "no gold passages"
    return plan


# ---------------------------------------------------------------- the bridge rewrite (study variant, ours)
_BRIDGE = re.compile(r"^\s*bridge(?:\s+entity)?\s*[:：]\s*(.*)$", re.I)
_NO_BRIDGE = {"", "none", "n/a", "na", "unknown", "no bridge", "nothing", "null"}


@dataclass(frozen=True)
class BridgeRewrite:
    """A parsed bridge-rewrite reply: the bridge entity it names (``None``: no usable ``Bridge:`` line, or
    "none") and the rewritten question (``None``: malformed, the caller keeps the query)."""

    bridge: Optional[str]
    question: Optional[str]

    @property
    def malformed(self) -> bool:
        return self.question is None


def bridge_rewrite_requests(questions: Sequence[str], evidences: Sequence[str], histories: Sequence[Sequence[dict]],
                            max_tokens: int = REWRITE_MAX_TOKENS) -> list:
    """One bridge-rewrite request per question (prompt ``kgir_bridge_rewrite``): the same inputs as
    :func:`rewrite_requests` (``q``, its history, the evidence), a two-line reply asked for."""
    if not len(questions) == len(evidences) == len(histories):
        raise ValueError("bridge_rewrite_requests: questions, evidences and histories differ in length")
    return [chat("kgir_bridge_rewrite", {"question": q, "evidence": ev, "history": format_history(hist)},
                 rstrip=True, max_tokens=max_tokens, stop=("\n\n", "\nTriples:"))
            for q, ev, hist in zip(questions, evidences, histories)]


def parse_bridge_rewrite(text: Optional[str]) -> BridgeRewrite:
    """The bridge and the question of a bridge-rewrite reply; never raises.

    The bridge is the first ``Bridge:`` line ("none", "unknown" or empty: no bridge). The question is read
    from the other lines as :func:`parse_rewrite` reads a rewrite (``Question:`` / ``Rewritten question:``
    markers, else the first line that is a question); none is a malformed reply."""
    lines = (text or "").splitlines()
    marked = [m.group(1) for m in (_BRIDGE.match(ln) for ln in lines) if m]
    bridge = _strip(_clean_answer(marked[0])) if marked else None
    question = parse_rewrite("\n".join(ln for ln in lines if not _BRIDGE.match(ln)))
    return BridgeRewrite(None if bridge is None or bridge.lower() in _NO_BRIDGE else bridge, question)


# ---------------------------------------------------------------------------- the variants
class StudyKGIRRAG(KGIRRAG):
    """KGIR-RAG's loop with one step (or several) handed the gold, or one of our repairs (module docstring)."""

    variants: ClassVar[dict] = STUDY_VARIANTS

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        v = self.spec
        self._plans = {q.qid: oracle_plan(q, v.oracle) for q in questions}
        if v.reflection_passages:  # the full method with another rule for P_t
            ws = replace(ws, cfg=replace(ws.cfg, reflection_passages=v.reflection_passages))
        if "context" not in v.oracle:
            return super().run(ws, questions)
        gold = [q for q in questions if q.gold_pids]
        loop = {o.qid: o for o in super().run(ws, [q for q in questions if not q.gold_pids])}
        stats = dict(self.stats)
        states = [LoopState(q=q, query=q.question) for q in gold]
        for s in states:  # the reader over the gold passages alone: one round, no retrieval
            s.rounds.append(LoopRound(iteration=1, query=s.q.question, retrieved=[]))
            s.final_context, s.final_pids = self._passages_text(ws, s.q.gold_pids), list(s.q.gold_pids)
            s.first_retrieval = list(s.q.gold_pids)
        self._read(ws, states, "final")
        self.stats = {**stats, "questions": len(questions), "oracle_context": len(states)}
        done = {s.q.qid: self._output(s) for s in states}
        return [done.get(q.qid) or loop[q.qid] for q in questions]

    # ------------------------------------------------------------------ the steps handed the gold
    def _given_entities(self, open_: Sequence[LoopState]) -> Optional[list]:
        if "seeds" not in self.spec.oracle:
            return None
        return [lambda G_q, q=s.q: oracle_entities(q) for s in open_]

    def _subgraphs(self, ws: Workspace, open_: Sequence[LoopState], rounds: Sequence[LoopRound]) -> list:
        subs = super()._subgraphs(ws, open_, rounds)
        if "seeds" in self.spec.oracle:
            for s, sub, r in zip(open_, subs, rounds):
                gold = "ner" not in r.usable  # no NER reply: the gold entities stood in
                s.oracle.setdefault("seeds", []).append(list(sub.llm_entities) if gold else None)
                self._count("oracle_seed_rounds", int(gold))
        return subs

    def _rewrite(self, ws: Workspace, open_: Sequence[LoopState], evidence: Sequence[str],
                 rounds: Sequence[LoopRound]) -> list:
        out: list = [None] * len(open_)
        for i, (s, r) in enumerate(zip(open_, rounds)):
            ideal = self._plans[s.q.qid].get("rewrite") if "rewrite" in self.spec.oracle else None
            if ideal and r.iteration == 1:  # the ideal rewrite, no LLM call
                r.rewrite_raw, r.rewrite, r.rewrite_malformed, r.rewrite_form = "", ideal, False, "oracle"
                r.rewrite_unchanged = ideal.strip().lower() == s.query.strip().lower()
                out[i] = ideal
        rest = [i for i, x in enumerate(out) if x is None]
        if rest:
            step = self._bridge_rewrite if self.spec.bridge_rewrite else super()._rewrite
            for i, q2 in zip(rest, step(ws, [open_[i] for i in rest], [evidence[i] for i in rest],
                                        [rounds[i] for i in rest])):
                out[i] = q2
        return out

    def _bridge_rewrite(self, ws: Workspace, open_: Sequence[LoopState], evidence: Sequence[str],
                        rounds: Sequence[LoopRound]) -> list:
        """Ours: the two-field rewrite (``Bridge:`` / ``Question:``) in ONE call; a reply without a question is
        malformed and keeps the query, as the paper's rewrite does."""
        requests = bridge_rewrite_requests([s.q.question for s in open_], evidence, [s.history for s in open_],
                                           max_tokens=ws.cfg.max_tokens("rewrite"))
        rewrites = []
        for s, res, r in zip(open_, ws.llm.generate(requests, stage="kgir_rewrite"), rounds):
            s.account("kgir_rewrite", res)
            parsed = parse_bridge_rewrite(res.text)
            self._count("rewrite_malformed", int(parsed.malformed))
            self._count("bridge_missing", int(parsed.bridge is None))
            r.rewrite_raw, r.rewrite, r.rewrite_malformed = res.text, parsed.question or s.query, parsed.malformed
            r.rewrite_unchanged = r.rewrite.strip().lower() == s.query.strip().lower()
            r.rewrite_form, r.rewrite_bridge = "bridge", parsed.bridge
            r.usable["rewrite"], r.truncated["rewrite"] = not parsed.malformed, res.truncated
            rewrites.append(r.rewrite)
        return rewrites

    def _rewrite_retrieval(self, ws: Workspace, open_: Sequence[LoopState], rewrites: Sequence[str],
                           rounds: Sequence[LoopRound]) -> list:
        shown = super()._rewrite_retrieval(ws, open_, rewrites, rounds)
        if "next_hop" in self.spec.oracle:
            for i, (s, r) in enumerate(zip(open_, rounds)):
                gold = self._plans[s.q.qid]["next_hop_pids"]
                if gold:  # first in P_t, which keeps its size cap
                    shown[i] = r.reflection_passages = list(dict.fromkeys([*gold, *shown[i]]))[:ws.cfg.context_passages]
        return shown

    def _output(self, s: LoopState) -> MethodOutput:
        out = super()._output(s)
        if self.spec.oracle:
            plan = {**self._plans[s.q.qid], **s.oracle}
            if "seeds" in plan and plan["seeds"] and all(x is None for x in plan["seeds"]):
                plan["not_applied"] = {**plan["not_applied"], "seeds": "the gold names no entity"}
            out.trace["oracle"] = plan
            if "context" in plan["parts"] and "context" not in plan["not_applied"]:
                out.trace["no_retrieval"] = True  # the gold passages were given: no recall to read
        return out
