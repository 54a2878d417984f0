"""One run of the KGIR-RAG loop, a question's state in it, the final ranked list, the passages P_t.

- :class:`Run`: what every step of one run reads: the workspace, the method's settings (each read
  once, when the run starts) and the run's counters.
- :class:`LoopState`: what the loop (:mod:`kgir_lib.kgir.loop`) keeps for one question between
  rounds.
- :func:`ranked_list`: the final ranked passage list Recall@k is read from (a multi-step method
  retrieves several times, so it must say which passages count, in which order). Paper §3.3.3
  attributes KGIR-RAG's recall to the subgraph stage, which "accurately filters the key
  information", and to the rewrite, whose simpler question "makes retrieval more precise"; the
  list follows that order: the source passages of ``G_Ans`` first, then the rewritten questions'
  retrievals, then the original question's.
- :func:`reflection_passages`: the passages the reflection reads (paper §2.4), under the
  profile's rule.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..config import Config
from ..config.fields import REFLECTION_PASSAGES
from ..data import Question
from ..llm import ChatResult, LLMUsage
from ..methods.base import Workspace
from ..methods.context import interleave
from ..methods.reader import format_passages

# the counters every run starts with (a step may add its own)
STAT_KEYS = ("ner_fallbacks", "rewrite_malformed", "reflection_malformed", "forced_answers",
             "subgraphs", "rounds_with_seed", "empty_subgraph_rounds", "evidence_capped_rounds")


@dataclass
class Run:
    """One run of a KGIR-RAG composition over a list of questions: the workspace, the settings the
    steps read (the method's own values, else the profile's, resolved once by
    :meth:`~kgir_lib.methods.base.MethodBase.setting`) and the counters of what happened."""

    ws: Workspace
    top_k: int                            # |D_t| and |D'_t| (eq. 2)
    ngram_threshold: float                # the eq. 5 threshold
    max_iterations: int                   # T of Algorithm 2
    edge_weight: Optional[str] = None     # Algorithm 1's edge weights (resolve_weighting)
    passages_when_empty: bool = True      # an empty G_Ans: the best passages of D_t stand in
    stats: dict = field(default_factory=dict)

    @property
    def cfg(self) -> Config:
        return self.ws.cfg

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the run's counter ``key``."""
        self.stats[key] = self.stats.get(key, 0) + n

    def passages_text(self, pids: Sequence[str]) -> str:
        """The passages ``pids`` as every prompt shows them (the shared reader's form)."""
        return format_passages(self.ws.passages(pids), self.cfg.passage_chars)


@dataclass
class LoopState:
    """Loop state of one question: its current query, rewrite history, rounds, usage and answer."""

    q: Question
    query: str
    history: list = field(default_factory=list)       # q_history: [{"rewrite", "missing"}] (eq. 8)
    rounds: list = field(default_factory=list)        # [LoopRound]
    usage: LLMUsage = field(default_factory=LLMUsage)
    stage_usage: dict = field(default_factory=dict)   # stage -> LLMUsage
    evidence_weights: dict = field(default_factory=dict)  # pid -> best G_Ans edge weight so far
    first_retrieval: list = field(default_factory=list)   # D_1 pids
    rewrite_retrievals: list = field(default_factory=list)  # [D'_t pids] by round
    answer: Optional[str] = None
    answered_by: Optional[str] = None                 # reflection | forced_reader | reader
    reflection_answer: Optional[str] = None           # the reflection's "Answer:" when it stopped
    answer_source: str = "reader"                     # reader | reflection: who wrote ``answer``
    final_context: Optional[str] = None               # the reader's context, when it answers
    final_pids: list = field(default_factory=list)    # the passages of that context, in order
    notes: dict = field(default_factory=dict)         # what a composition's own steps record

    def account(self, stage: str, result: ChatResult) -> None:
        self.usage.add(result)
        self.stage_usage.setdefault(stage, LLMUsage()).add(result)

    def keep_evidence_weights(self, kept: Sequence, weights: dict) -> None:
        """Record each ``G_Ans`` triple's source passage with its best edge weight so far."""
        for tr in kept:
            w = weights.get(tr, 0.0)
            if tr.pid not in self.evidence_weights or w > self.evidence_weights[tr.pid]:
                self.evidence_weights[tr.pid] = w

    def go_on(self, rewrite: str, missing: Optional[str]) -> None:
        """The question goes on to the next round with ``query = q'_t``; the history keeps the
        rewrite and what the reflection said was still missing (eq. 8)."""
        self.history.append({"rewrite": rewrite, "missing": missing})
        self.query = rewrite

    def reader_context(self) -> str:
        """The context the shared reader reads (:func:`~kgir_lib.kgir.steps.hand_to_reader`); a
        ``ValueError`` naming the question when none was handed to it."""
        if self.final_context is None:
            raise ValueError(f"question {self.q.qid}: no reader context (a step hands one to the "
                             f"reader before it reads)")
        return self.final_context

    def ranked_pids(self) -> list:
        return ranked_list(self.evidence_weights, self.rewrite_retrievals, self.first_retrieval)


def ranked_list(evidence_weights: dict, rewrite_retrievals: Sequence[Sequence[str]],
                first_retrieval: Sequence[str]) -> list:
    """KGIR-RAG's final ranked list (module docstring): ``G_Ans`` source passages by their best edge
    weight (ties: first seen), then the rewrite retrievals ``D'_1 .. D'_T`` interleaved by round
    (1st of each round, then 2nd of each, ...), then ``D_1``; no duplicates."""
    evidence = sorted(evidence_weights, key=lambda p: -evidence_weights[p])  # stable: first seen
    return list(dict.fromkeys(evidence + interleave(rewrite_retrievals) + list(first_retrieval)))


def reflection_passages(first: Sequence[str], rewritten: Sequence[str], n: int,
                        rule: str = "new") -> list:
    """``P_t``, at most ``n`` passages of the rewritten question's retrieval ``D'_t``
    (``rewritten``).

    Paper §2.4: "the reflection focuses on the passages the previous stage did not retrieve" and
    combines the subgraph, the rewrite history and "the new passages". ``rule``:

    - ``"new"`` (the paper's reading): the passages of ``D'_t`` not in ``D_t`` (``first``); only
      when none is new (the rewrite returned the question, or found the same passages) the top of
      ``D'_t``, so the reflection never reads an empty list while ``D'_t`` has passages;
    - ``"all"``: the top of ``D'_t``, new or not.
    """
    if rule not in REFLECTION_PASSAGES:
        choices = " | ".join(REFLECTION_PASSAGES)
        raise ValueError(f"parameter 'reflection_passages': unknown rule {rule!r} ({choices})")
    if rule == "all":
        return list(dict.fromkeys(rewritten))[:n]
    seen = set(first)
    new = [p for p in dict.fromkeys(rewritten) if p not in seen]
    return (new or list(dict.fromkeys(rewritten)))[:n]
