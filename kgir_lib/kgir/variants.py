"""KGIR-RAG as a method of the suite: every composition of its steps in one table.

:data:`VARIANTS` declares, as data, each composition the suite runs: the paper's method, Table 7's
ablations (§3.4), the forced rounds, and the study variants (oracles handed one step's gold, two
repairs of ours); each row's ``description`` is the one description of that variant (notebooks
and documents render it: :func:`describe`). :class:`KGIRRAG` runs a row of the paper's kinds,
:class:`StudyKGIRRAG` one of the study's (the registry, :mod:`kgir_lib.registry`, builds both by
key); :data:`STUDY_VARIANTS` are the rows notebook 04's step attribution compares with the full
method.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, replace
from typing import Callable, ClassVar, Optional, Sequence

from ..data import Question
from ..methods.base import MethodBase, MethodOutput, Workspace
from .contract import PassagesStep, RewriteStep, SeedsStep
from .loop import PAPER, Composition, Loop, Steps, output
from .state import STAT_KEYS, LoopState, Run
from .steps import NER, ReflectionPassages, Rewrite
from .study import (PARTS, GoldContextFirst, GoldNextHopFirst, GoldSeeds, IdealRewrite, OracleNote,
                    ReadEveryRound, RewriteNamingTheBridge, RoundAnswersNote)
from .subgraph import resolve_weighting

KINDS = ("method", "ablation", "rounds", "oracle", "ours", "own")  # what a row is: KIND_WORDS
KIND_WORDS = {"method": "the paper's method", "ablation": "a Table 7 ablation (§3.4)",
              "rounds": "a study of the rounds, beside the method",
              "oracle": "an oracle: one step handed the gold (a study, not the paper's method)",
              "ours": "a repair of ours, beside the paper's method",
              "own": "a researcher's composition, registered when the run starts"}
KEY_FORM = re.compile(r"[a-z][a-z0-9_]{0,63}")  # a registry key: it names the trace folder


@dataclass(frozen=True)
class Variant:
    """One composition of KGIR-RAG: its display ``name``, registry ``key``, ``kind``
    (:data:`KINDS`), what it runs (a :class:`~kgir_lib.kgir.loop.Loop` over its steps, or another
    composition with an ``answer`` method), what it adds to each question's trace (``note``), and
    its ``description``."""

    name: str
    key: str
    kind: str
    composition: Composition
    description: str
    note: Optional[Callable[[LoopState], dict]] = None

    @property
    def steps(self) -> Steps:
        return self.composition.steps

    @property
    def oracle(self) -> tuple:
        """The steps this composition hands the gold (:data:`~kgir_lib.kgir.study.PARTS`), in the
        funnel's order."""
        s = self.steps
        steps = (self.composition, s.seeds, s.rewrite, s.passages)
        parts = {getattr(x, "part", None) for x in steps}
        return tuple(p for p in PARTS if p in parts)


def _oracle(name: str, key: str, description: str, composition: Optional[Composition] = None,
            *, seeds: Optional[SeedsStep] = None, rewrite: Optional[RewriteStep] = None,
            passages: Optional[PassagesStep] = None) -> Variant:
    """A row whose composition (default: the loop over the paper's steps with the ``seeds``,
    ``rewrite`` and ``passages`` steps given replaced) hands steps the gold, with the trace's
    ``oracle`` record."""
    composition = composition or Loop(replace(
        PAPER, seeds=PAPER.seeds if seeds is None else seeds,
        rewrite=PAPER.rewrite if rewrite is None else rewrite,
        passages=PAPER.passages if passages is None else passages))
    variant = Variant(name, key, "oracle", composition, description)
    return replace(variant, note=OracleNote(variant.oracle))


_SEEDS = GoldSeeds(NER())  # the paper's steps (PAPER.seeds, PAPER.rewrite) where the gold has none
_REWRITE = IdealRewrite(Rewrite())
_NEXT_HOP = GoldNextHopFirst(PAPER.passages)

VARIANTS: dict = {
    "full": Variant(
        "KGIR-RAG", "kgir", "method", Loop(PAPER),
        "The paper's method (§2.2-2.4, Algorithms 1-2): dense retrieval, the evidence subgraph "
        "G_Ans from NER seeds, the rewrite q'_t, the rewritten question's retrieval D'_t, the "
        "reflection over P_t; the shared reader words the answer."),
    "no_subgraph": Variant(
        "KGIR-RAG w/o subgraph", "kgir_no_subgraph", "ablation",
        Loop(replace(PAPER, seeds=None, subgraph=None)),
        "No NER and no subgraph: the context_passages most similar passages of D_t stand in for "
        "G_Ans_t (Table 7, w/o subgraph)."),
    "no_reflection": Variant(
        "KGIR-RAG w/o reflection", "kgir_no_reflection", "ablation",
        Loop(replace(PAPER, reflect=None)),
        "One round: rewrite once with the subgraph, retrieve once, answer: the reader answers from "
        "G_Ans_1 and the top of D'_1 (Table 7, w/o reflection)."),
    "no_rewrite": Variant(
        "KGIR-RAG w/o rewrite", "kgir_no_rewrite", "ablation",
        Loop(replace(PAPER, rewrite=None, reflect=None)),
        "One round, no rewrite: the reader answers from G_Ans_1 alone (Table 7, w/o rewrite)."),
    "forced": Variant(
        "KGIR-RAG (forced rounds)", "kgir_forced", "rounds",
        Loop(replace(PAPER, reflect=ReadEveryRound())),
        "Every round runs and the reflection's stop is ignored; the shared reader answers after "
        "every round (round_answers), so the answer after T = 1, 2, 3 rounds is read off one run: "
        "what iteration adds when a small model stops early. Not the paper's method.",
        note=RoundAnswersNote()),
    "oracle_seeds": _oracle(
        "KGIR-RAG + oracle seeds", "kgir_oracle_seeds",
        "In every round E_q is the gold entities the question's gold chain names (a X >> relation "
        "hop's subject, each part of it between its #k references as MuSiQue writes it: a name "
        "('Siege of Cassel', '1920 Summer Olympics' of '#1 at the 1920 Summer Olympics') or the "
        "common noun of a name the reference completes ('Arrondissement' of 'Arrondissement of "
        "#1'), which the rule does not tell apart; a sub-question's paragraph title when it names "
        "it; on HotpotQA the supporting titles the question names), matched to G_q by the "
        "profile's eq. 5 rule as "
        "given (not grounded in the round's query); no NER call. A question whose gold names no "
        "entity runs NER as the full method.", seeds=_SEEDS),
    "oracle_rewrite": _oracle(
        "KGIR-RAG + oracle rewrite", "kgir_oracle_rewrite",
        "Round 1's rewrite q'_1 is the ideal rewrite: the last sub-question with every #k replaced "
        "by hop k's gold answer (a X >> relation hop worded by its relation's template), written "
        "without an LLM call; D'_1 is retrieved with it and later rounds rewrite as the full "
        "method. MuSiQue only: HotpotQA has no sub-questions, so no honest ideal rewrite; an "
        "ideal rewrite that names the final answer or an alias of it is not applied.",
        rewrite=_REWRITE),
    "oracle_next_hop": _oracle(
        "KGIR-RAG + oracle next hop", "kgir_oracle_next_hop",
        "The gold next-hop passages (the passage of the hop after each bridge; for a HotpotQA "
        "bridge question the bridge's own paragraph) are put first in every round's reflection "
        "passages P_t, which keep at most context_passages; the reflection and the reader read "
        "them. On a two-hop question the next hop's passage is the one that holds the answer, so "
        "this hands over the answer-bearing passage: a context oracle, not a retrieval fix.",
        passages=_NEXT_HOP),
    "oracle_context": _oracle(
        "Oracle context (gold passages, shared reader)", "kgir_oracle_context",
        "The shared reader answers q from the question's gold passages alone, in order: one "
        "reader call, no retrieval, so no recall: the reader's ceiling. A question without gold "
        "passages runs the full method.", GoldContextFirst(Loop(PAPER))),
    "oracle_seeds_rewrite": _oracle(
        "KGIR-RAG + oracle seeds + rewrite", "kgir_oracle_seeds_rewrite",
        "The oracle seeds and the oracle rewrite together: the waterfall's second step from the "
        "full method towards the ceiling.", seeds=_SEEDS, rewrite=_REWRITE),
    "oracle_seeds_rewrite_next_hop": _oracle(
        "KGIR-RAG + oracle seeds + rewrite + next hop", "kgir_oracle_seeds_rewrite_next_hop",
        "The oracle seeds, rewrite and next hop together: the waterfall's third step.",
        seeds=_SEEDS, rewrite=_REWRITE, passages=_NEXT_HOP),
    "bridge_rewrite": Variant(
        "KGIR-RAG + bridge rewrite (ours)", "kgir_bridge_rewrite", "ours",
        Loop(replace(PAPER, rewrite=RewriteNamingTheBridge())),
        "The rewrite first names the entity of G_Ans that answers the hop the question depends "
        "on, then substitutes it (prompt kgir_bridge_rewrite); a reply without a question is "
        "malformed, counted, and keeps the query, as the paper's rewrite does."),
    "all_passages": Variant(
        "KGIR-RAG + reflection reads all of D'_t (ours)", "kgir_all_passages", "ours",
        Loop(replace(PAPER, passages=ReflectionPassages(rule="all"))),
        "The full method with P_t the top of D'_t, new or not (reflection_passages \"all\"; "
        "benchmarks/bench_reflection_passages.py measures it against \"new\")."),
}
# The rows notebook 04's step attribution compares with the full method: the oracles, then ours.
STUDY_VARIANTS: dict = {v: row for v, row in VARIANTS.items() if row.kind in ("oracle", "ours")}
KEYS = {v: row.key for v, row in VARIANTS.items()}


def describe(keys: Optional[Sequence[str]] = None) -> str:
    """The variants' descriptions as a Markdown list, one item a registry key of ``keys`` (default:
    every row), in the table's order: name, kind, description."""
    rows = [row for row in VARIANTS.values() if keys is None or row.key in keys]
    return "\n".join(f"- *{row.name}* (`{row.key}`, {KIND_WORDS[row.kind]}): {row.description}"
                     for row in rows)


# ---------------------------------------------------------------- the methods
@dataclass
class KGIRRAG(MethodBase):
    """KGIR-RAG and its variants of the paper's kinds (:data:`VARIANTS`): ``variant`` names the
    row.

    ``max_iterations``, ``top_k`` and ``ngram_threshold`` default (``None``) to the profile's values
    (:meth:`~kgir_lib.methods.base.MethodBase.setting`, read once when a run starts: the
    :class:`~kgir_lib.kgir.state.Run`); ``edge_weight`` is ``"auto"`` (reranker if configured,
    else cosine of question and triple text), ``"reranker"``, ``"cosine"`` or ``"passage"``;
    ``passages_when_empty``: an empty ``G_Ans`` hands its round the best passages of ``D_t``.
    """

    variant: str = "full"
    max_iterations: Optional[int] = None
    top_k: Optional[int] = None
    ngram_threshold: Optional[float] = None
    edge_weight: Optional[str] = None
    passages_when_empty: bool = True
    knobs = {"max_iterations": "max_iterations", "top_k": "top_k",
             "ngram_threshold": "ngram_threshold"}
    kinds: ClassVar[tuple] = ("method", "ablation", "rounds")  # the rows this class runs

    def __post_init__(self) -> None:
        self.check_variant()
        super().__post_init__()
        resolve_weighting(self.edge_weight, None)  # validates the name
        self.stats: dict = {}

    def check_variant(self) -> None:
        """A ``ValueError`` unless ``variant`` names a row of the kinds this class runs."""
        known = [v for v, row in VARIANTS.items() if row.kind in self.kinds]
        if self.variant not in known:
            raise ValueError(f"unknown {type(self).__name__} variant {self.variant!r} "
                             f"(choose from {sorted(known)})")

    @property
    def spec(self) -> Variant:
        return VARIANTS[self.variant]

    # name, key and uses_kg (evaluate.run_fingerprint: only when it is true does the KG matter):
    # read-only views of the row where the base class declares class-level attributes (as KG2RAG's
    # and LightRAG's variants do)
    @property
    def name(self) -> str:  # type: ignore[override]
        return self.spec.name

    @property
    def key(self) -> str:  # type: ignore[override]
        return self.spec.key

    @property
    def uses_kg(self) -> bool:  # type: ignore[override]
        return self.spec.steps.subgraph is not None

    def start(self, ws: Workspace, n_questions: int) -> Run:
        """The run of ``n_questions`` in ``ws``: every setting resolved once, the counters zero."""
        return Run(ws=ws, top_k=self.setting(ws, "top_k"),
                   ngram_threshold=self.setting(ws, "ngram_threshold"),
                   max_iterations=int(self.setting(ws, "max_iterations")),
                   edge_weight=self.edge_weight, passages_when_empty=self.passages_when_empty,
                   stats={"questions": n_questions, **dict.fromkeys(STAT_KEYS, 0)})

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        """Answer every question with the row's composition; one :class:`MethodOutput` per
        question, in order."""
        run = self.start(ws, len(questions))
        self.stats = run.stats
        states = self.spec.composition.answer(run, list(questions), self.name)
        return [self._output(s) for s in states]

    def _output(self, state: LoopState) -> MethodOutput:
        out = output(state, self.name, self.variant)
        if self.spec.note is not None:
            out.trace.update(self.spec.note(state))
        return out


@dataclass
class StudyKGIRRAG(KGIRRAG):
    """KGIR-RAG's study variants (:data:`STUDY_VARIANTS`): oracles handed one step's gold, and two
    repairs of ours; never the paper's method, which is :class:`KGIRRAG`'s."""

    kinds: ClassVar[tuple] = ("oracle", "ours")


# ---------------------------------------------------------------- a researcher's own composition
def compose(name: str, key: str, steps: Steps, description: str) -> Variant:
    """A composition of one's own (kind ``"own"``): the loop of Algorithm 2 over ``steps``, shown
    as ``name`` in the tables, run and stored under the registry ``key`` (lower-case letters,
    digits, ``_``), described by ``description``. :func:`kgir_lib.registry.register` makes it a
    method of the suite; no row of :data:`VARIANTS` is needed."""
    for what, value in (("name", name), ("description", description)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"compose: parameter {what!r} must be a non-empty text, got {value!r}")
    if not isinstance(key, str) or not KEY_FORM.fullmatch(key):
        raise ValueError(f"compose: parameter 'key' must be lower-case letters, digits and _ "
                         f"(it names the trace folder), got {key!r}")
    if not isinstance(steps, Steps):
        raise ValueError(f"compose: parameter 'steps' must be a kgir_lib.kgir.loop.Steps, got "
                         f"{type(steps).__name__}")
    return Variant(name, key, "own", Loop(steps), description)


@dataclass
class OwnKGIRRAG(KGIRRAG):
    """A researcher's composition (:func:`compose`) run as a method of the suite, with the settings
    of :class:`KGIRRAG`; the trace's ``variant`` is the composition's key."""

    composition: Optional[Variant] = None
    kinds: ClassVar[tuple] = ("own",)

    def check_variant(self) -> None:
        if not isinstance(self.composition, Variant) or self.composition.kind != "own":
            raise ValueError(f"parameter 'composition': a composition of kgir_lib.compose(...), "
                             f"got {type(self.composition).__name__}")
        self.variant = self.composition.key

    @property
    def spec(self) -> Variant:
        assert self.composition is not None
        return self.composition

    def params(self) -> dict:
        """The settings, and the composition by its key, name, description and steps (each step by
        its class and, for a dataclass, its fields: :func:`step_words`), the trace-resume
        fingerprint: traces are reused only for the same composition."""
        own = self.spec
        return {**{k: v for k, v in super().params().items() if k != "composition"},
                "composition": [own.key, own.name, own.description, step_words(own.composition)]}


def step_words(x: object) -> object:
    """``x`` (a composition, its steps, their fields) in words that stay the same from one process
    to the next: a dataclass as its class and fields, a plain number or text as itself, any other
    object as its class (its memory address would change every run)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        kind = f"{type(x).__module__}.{type(x).__qualname__}"
        return [kind, {f.name: step_words(getattr(x, f.name)) for f in dataclasses.fields(x)}]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)):
        return [step_words(v) for v in x]
    return f"{type(x).__module__}.{type(x).__qualname__}"
