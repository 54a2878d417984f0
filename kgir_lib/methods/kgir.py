"""KGIR-RAG (paper §2.2-2.4, Algorithms 1-2; METHOD.md §2) and its Table 7 ablations.

The loop, for every open question, round ``t = 1 .. max_iterations``::

    query_1 = q
    D_t     = dense top-k(query_t)                                  eq. 2
    G_Ans_t = evidence subgraph(query_t, D_t)       [stage kgir_ner]  Algorithm 1
    q'_t    = Rewrite(q, history, G_Ans_t)          [stage kgir_rewrite]  eq. 8
    D'_t    = dense top-k(q'_t)
    P_t     = reflection passages of D'_t (below)
    verdict = Reflection(q'_t, G_Ans_t, history, P_t) [stage kgir_reflect]
    answer  -> done;  missing -> history += (q'_t, missing), query_{t+1} = q'_t

Rewrite and Reflection see at most ``MAX_EVIDENCE_TRIPLES`` (20) ``G_Ans``
triples, heaviest first. In the last round the reflection prompt says it must answer; a question whose
reflection still gives no answer is answered by the shared reader (stage ``kgir_final``, recorded as
``forced``): the original question ``q``, ``G_Ans_T`` and ``P_T``.

Choices the paper leaves open (issue 10 items 3 and 5b):

- **Reflection passages** ``P_t`` (§2.4: the reflection combines the evidence
  subgraph, the rewrite history and "the passages the previous stage did not
  retrieve"): the passages of ``D'_t`` that are not in ``D_t`` come first, and
  the list is topped up with the best other passages of ``D'_t`` up to
  ``context_passages``. With only the new passages, a rewrite that returns the
  question unchanged (``D'_t = D_t``) leaves the reflection with no passage at
  all, and with an empty ``G_Ans`` it is blind (the Fig. 6 failure the issue
  describes); topping up keeps the paper's emphasis on new passages and never
  shows nothing while ``D'_t`` is not empty.
- **Empty** ``G_Ans`` (no seed matched, or no triple around it): the step that
  fails is eq. 5 (matching ``E_q`` to the entities of ``G_q``); then Rewrite has
  no fact to substitute and returns the question, so ``D'_t = D_t``. With
  ``passages_when_empty=True`` (default) Rewrite and Reflection see the
  ``context_passages`` best passages of ``D_t`` in that round instead (as in the
  w/o-subgraph ablation, the paper's own stand-in for the subgraph); the trace
  records ``evidence_source`` ``"passages"`` and the stats count
  ``empty_subgraph_rounds``.
- **Reader questions**: every reader call (forced answer, w/o reflection, w/o
  rewrite) answers the *original* question ``q``; the rewrite's facts reach the
  reader through ``G_Ans`` and the rewritten question's retrieval.

Batching: every stage runs across all questions still open, as ONE
``llm.generate`` call per stage per round (so a vLLM server or engine is kept
full); retrieval is batched the same way.

Variants (paper Table 7, §3.4), switches of the same loop:

- ``"full"``: as above.
- ``"no_subgraph"``: no NER / subgraph; Rewrite and Reflection see the
  ``context_passages`` most similar passages of ``D_t`` instead of ``G_Ans_t``.
- ``"no_reflection"``: one round: subgraph, one rewrite, one retrieval with
  ``q'_1``, then the reader answers ``q`` from ``G_Ans_1`` and the top
  ``context_passages`` passages of ``D'_1`` (paper §3.4: "rewrite once with the
  subgraph, retrieve once, answer").
- ``"no_rewrite"``: one round: subgraph, then the reader answers ``q`` from
  ``G_Ans_1`` alone (no rewrite, no reflection, no iteration).

Final ranked passage list (for Recall@k, METHOD.md §6; issue 10 item 2):

1. the source passages of ``G_Ans`` edges over all rounds, ordered by their
   best edge weight (ties: first seen);
2. then the retrievals with the rewritten questions ``D'_1 .. D'_T``,
   interleaved by round (1st of ``D'_1``, 1st of ``D'_2``, ..., then the 2nd of
   each, ...), so every round's rewrite counts within the top 5;
3. then ``D_1``, the retrieval with the original question; duplicates dropped.

``D_t`` for ``t > 1`` is the retrieval with ``q'_{t-1}``, i.e. ``D'_{t-1}``, so
it adds nothing. Without the subgraph (``no_subgraph``) step 1 is empty;
without the rewrite (``no_rewrite``) step 2 is.

Usable outputs (issue 9 §3): each round's trace records, per stage, whether
the reply was parsed as intended (``usable``: NER gave a JSON entity list with
an entity that occurs in the question; the rewrite a question; the reflection
an ``Answer:`` or ``Missing:`` line; the reader a short non-empty answer) and
whether it was cut at the token budget (``truncated``). :func:`usable_table`
turns traces into rates per stage; ``rounds_with_seed`` / ``rounds`` is the
seed-match rate (issue 10 item 5b).

Each :class:`MethodOutput` carries a JSON-serialisable trace: every round's
query, retrieval, subgraph (``EvidenceSubgraph.to_dict``), rewrite (raw and
parsed), new passages, reflection verdict (raw and parsed), the answer, who
answered, and the LLM usage per stage.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

from ..progress import progress as tqdm  # one line per bar in executed notebooks

from ..data import Question
from ..reader import answer_usable, format_passages, parse_answer, reader_request
from ..rewrite import (evidence_block, parse_reflection, parse_rewrite, reflection_requests, rewrite_requests)
from ..subgraph import EvidenceSubgraph, build_subgraphs, format_triples, ner_usable, resolve_weighting, retrieve
from .base import MethodOutput, QuestionUsage, Workspace
from .retrievers import interleave

VARIANTS = {
    "full": "KGIR-RAG",
    "no_subgraph": "KGIR-RAG w/o subgraph",
    "no_reflection": "KGIR-RAG w/o reflection",
    "no_rewrite": "KGIR-RAG w/o rewrite",
}
STAGES = ("kgir_ner", "kgir_rewrite", "kgir_reflect", "kgir_final")
MAX_EVIDENCE_TRIPLES = 20


@dataclass
class _Open:
    """Loop state of one question."""

    q: Question
    query: str
    history: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    usage: QuestionUsage = field(default_factory=QuestionUsage)
    stage_usage: dict = field(default_factory=dict)
    evidence_weights: dict = field(default_factory=dict)  # pid -> best G_Ans edge weight
    first_retrieval: list = field(default_factory=list)   # D_1 pids
    rewrite_retrievals: list = field(default_factory=list)  # [D'_t pids] by round
    answer: Optional[str] = None
    answered_by: Optional[str] = None
    final_question: Optional[str] = None
    final_context: Optional[str] = None

    def account(self, stage: str, result) -> None:
        self.usage.add(result)
        s = self.stage_usage.setdefault(stage, {"calls": 0, "cache_hits": 0, "prompt_tokens": 0,
                                                 "completion_tokens": 0, "seconds": 0.0, "truncated": 0})
        s["calls"] += 1
        s["truncated"] = s.get("truncated", 0) + int(bool(getattr(result, "truncated", False)))
        s["cache_hits"] += int(result.cached)
        s["prompt_tokens"] += result.prompt_tokens
        s["completion_tokens"] += result.completion_tokens
        s["seconds"] += result.seconds

    def ranked_pids(self) -> list:
        """G_Ans passages (best edge weight), then D'_1..D'_T interleaved by round, then D_1 (module docstring)."""
        return ranked_list(self.evidence_weights, self.rewrite_retrievals, self.first_retrieval)


def ranked_list(evidence_weights: dict, rewrite_retrievals: Sequence[Sequence[str]],
                first_retrieval: Sequence[str]) -> list:
    """KGIR-RAG's final ranked list (issue 10 item 2): ``G_Ans`` source passages by their best edge weight
    (ties: first seen), then the rewrite retrievals ``D'_t`` interleaved by round, then ``D_1``; no duplicates."""
    evidence = sorted(evidence_weights, key=lambda p: -evidence_weights[p])  # stable: first seen
    return list(dict.fromkeys(evidence + interleave(rewrite_retrievals) + list(first_retrieval)))


def reflection_passages(first: Sequence[str], rewritten: Sequence[str], n: int) -> list:
    """``P_t``: the passages of ``D'_t`` (``rewritten``) not in ``D_t`` (``first``) first, topped up with the
    best other passages of ``D'_t``, ``n`` at most (module docstring: never blind when ``D'_t = D_t``)."""
    seen = set(first)
    new = [p for p in rewritten if p not in seen]
    return list(dict.fromkeys(new + list(rewritten)))[:n]


class KGIRRAG:
    """KGIR-RAG and its Table 7 ablations; see the module docstring for the loop and the ranked list.

    ``max_iterations``, ``top_k`` and ``ngram_threshold`` default (``None``) to the
    profile's values; ``edge_weight`` is ``"auto"`` (reranker if configured, else
    cosine of question and triple text), ``"reranker"``, ``"cosine"`` or ``"passage"``.
    """

    def __init__(self, variant: str = "full", max_iterations: Optional[int] = None, top_k: Optional[int] = None,
                 ngram_threshold: Optional[float] = None, edge_weight: Optional[str] = None,
                 passages_when_empty: bool = True):
        if variant not in VARIANTS:
            raise ValueError(f"unknown KGIR-RAG variant {variant!r} (choose from {sorted(VARIANTS)})")
        if max_iterations is not None and max_iterations < 1:
            raise ValueError(f"parameter 'max_iterations': must be >= 1, got {max_iterations}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"parameter 'top_k': must be >= 1, got {top_k}")
        if ngram_threshold is not None and not 0.0 <= ngram_threshold <= 1.0:
            raise ValueError(f"parameter 'ngram_threshold': must be in [0, 1], got {ngram_threshold}")
        resolve_weighting(edge_weight, None)  # validates the name
        self.variant = variant
        self.name = VARIANTS[variant]
        self.uses_kg = variant != "no_subgraph"  # (evaluate.run_fingerprint: only then does the KG matter)
        self.max_iterations = max_iterations
        self.top_k = top_k
        self.ngram_threshold = ngram_threshold
        self.edge_weight = edge_weight
        self.passages_when_empty = passages_when_empty
        self.stats: dict = {}

    # ------------------------------------------------------------------ helpers
    def _rounds(self, ws: Workspace) -> int:
        if self.variant in ("no_reflection", "no_rewrite"):
            return 1
        return self.max_iterations or ws.cfg.max_iterations

    @staticmethod
    def _passages_text(ws: Workspace, pids: Sequence[str]) -> str:
        return format_passages(ws.passages(pids), ws.cfg.passage_chars)

    def _count(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    # ------------------------------------------------------------------ the loop
    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        """Answer every question; returns one :class:`MethodOutput` per question, in order."""
        cfg = ws.cfg
        k = self.top_k or cfg.top_k
        n_ctx = cfg.context_passages
        use_subgraph = self.variant != "no_subgraph"
        T = self._rounds(ws)
        self.stats = {"questions": len(questions), "ner_fallbacks": 0, "rewrite_malformed": 0,
                      "reflection_malformed": 0, "forced_answers": 0, "subgraphs": 0, "rounds_with_seed": 0,
                      "empty_subgraph_rounds": 0}
        states = [_Open(q=q, query=q.question) for q in questions]
        open_ = list(states)
        bar = tqdm(total=T, desc=f"{self.name} rounds", disable=not getattr(ws.llm, "progress", False) or not states,
                   leave=False)
        for t in range(1, T + 1):
            if not open_:
                break
            bar.update(1)
            last = t == T
            # -- retrieval with the current query (eq. 2), batched
            D = retrieve(ws, [s.query for s in open_], k)
            rounds = [{"iteration": t, "query": s.query, "retrieved": [[p, round(float(x), 6)] for p, x in d]}
                      for s, d in zip(open_, D)]
            for s, d, r in zip(open_, D, rounds):
                s.rounds.append(r)
                r["usable"], r["truncated"] = {}, {}
                if t == 1:
                    s.first_retrieval = [p for p, _ in d]
            # -- evidence subgraph (Algorithm 1): ONE NER call for all open questions
            subs: list = [None] * len(open_)
            if use_subgraph:
                subs = self._subgraphs(ws, open_, D, rounds, k)
            evidence = [self._evidence(ws, sub, d, r) for sub, d, r in zip(subs, D, rounds)]
            if self.variant == "no_rewrite":
                for s, sub, d in zip(open_, subs, D):
                    s.final_context = self._reader_context(ws, sub, [])
                open_ = []
                break
            # -- rewrite (eq. 8): ONE call
            rw = ws.llm.generate(rewrite_requests([s.q.question for s in open_], evidence,
                                                  [s.history for s in open_], max_tokens=cfg.max_tokens("rewrite")),
                                 stage="kgir_rewrite")
            rewrites = []
            for s, res, r in zip(open_, rw, rounds):
                s.account("kgir_rewrite", res)
                parsed = parse_rewrite(res.text)
                self._count("rewrite_malformed", int(parsed is None))
                rewrites.append(parsed or s.query)
                r["rewrite"] = {"raw": res.text, "question": parsed or s.query, "malformed": parsed is None,
                                "unchanged": (parsed or s.query).strip().lower() == s.query.strip().lower()}
                r["usable"]["rewrite"], r["truncated"]["rewrite"] = parsed is not None, res.truncated
            # -- retrieval with the rewritten questions; the reflection's passages P_t
            D2 = retrieve(ws, rewrites, k)
            shown = []
            for s, d, d2, r in zip(open_, D, D2, rounds):
                first, second = [p for p, _ in d], [p for p, _ in d2]
                seen = set(first)
                shown.append(reflection_passages(first, second, n_ctx))
                s.rewrite_retrievals.append(second)
                r["rewrite_retrieved"] = [[p, round(float(x), 6)] for p, x in d2]
                r["new_passages"] = [p for p in second if p not in seen][:n_ctx]
                r["reflection_passages"] = shown[-1]
            if self.variant == "no_reflection":
                for s, sub, d2 in zip(open_, subs, D2):
                    s.final_context = self._reader_context(ws, sub, [p for p, _ in d2[:n_ctx]])
                open_ = []
                break
            # -- reflection (Fig. 5): ONE call
            rf = ws.llm.generate(reflection_requests(rewrites, evidence, [s.history for s in open_],
                                                     [self._passages_text(ws, ps) for ps in shown],
                                                     [last] * len(open_), [s.q.question for s in open_],
                                                     max_tokens=cfg.max_tokens("reflect")),
                                 stage="kgir_reflect")
            still = []
            for s, res, q2, sub, ps, r in zip(open_, rf, rewrites, subs, shown, rounds):
                s.account("kgir_reflect", res)
                verdict = parse_reflection(res.text)
                self._count("reflection_malformed", int(verdict.malformed))
                r["reflection"] = {"raw": res.text, "final": last, **verdict.to_dict()}
                r["usable"]["reflect"], r["truncated"]["reflect"] = not verdict.malformed, res.truncated
                if verdict.answerable:
                    s.answer, s.answered_by = verdict.answer, "reflection"
                elif last:
                    s.final_context = self._reader_context(ws, sub, ps, r.get("evidence_source") == "passages")
                else:
                    s.history.append({"rewrite": q2, "missing": verdict.missing})
                    s.query = q2
                    still.append(s)
            open_ = still
        bar.close()
        self._final_answers(ws, states)
        return [self._output(s) for s in states]

    def _subgraphs(self, ws: Workspace, open_: Sequence[_Open], D: Sequence, rounds: Sequence[dict], k: int) -> list:
        """Algorithm 1 for every open question (ONE batched NER call); records the subgraph in each round."""
        subs, ner = build_subgraphs(ws, [s.query for s in open_], D, k=k, threshold=self.ngram_threshold,
                                    weighting=self.edge_weight)
        for s, sub, res, r in zip(open_, subs, ner, rounds):
            s.account("kgir_ner", res)
            r["ner_raw"] = res.text
            r["subgraph"] = sub.to_dict()
            r["usable"]["ner"], r["truncated"]["ner"] = ner_usable(res.text, s.query), res.truncated
            self._count("subgraphs")
            self._count("ner_fallbacks", int(sub.used_fallback))
            self._count("rounds_with_seed", int(bool(sub.seeds)))
            for tr in sub.kept:
                w = sub.weights.get(tr, 0.0)
                if tr.pid not in s.evidence_weights or w > s.evidence_weights[tr.pid]:
                    s.evidence_weights[tr.pid] = w
        return subs

    def _evidence(self, ws: Workspace, sub: Optional[EvidenceSubgraph], d: Sequence, r: dict) -> str:
        """What Rewrite and Reflection see: ``G_Ans`` triples, or the best passages of ``D_t`` (w/o subgraph;
        an empty ``G_Ans`` with ``passages_when_empty``)."""
        top = [p for p, _ in d[:ws.cfg.context_passages]]
        if sub is None or (not sub.kept and self.passages_when_empty):
            if sub is not None:
                self._count("empty_subgraph_rounds")
            r["evidence_source"] = "passages"
            ev = evidence_block(passages_text=self._passages_text(ws, top))
        else:
            r["evidence_source"] = "subgraph"
            ev = evidence_block(format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES))
        r["evidence"] = ev
        return ev

    # ------------------------------------------------------------------ answers and outputs
    def _reader_context(self, ws: Workspace, sub: Optional[EvidenceSubgraph], passages: Sequence[str],
                        no_triples: bool = False) -> str:
        """Reader context: the G_Ans triples (unless ``no_triples``), then ``passages``."""
        parts = []
        if sub is not None and not no_triples and sub.kept:
            parts.append(format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES))
        if passages:
            parts.append(self._passages_text(ws, passages))
        if not parts and sub is not None:
            parts.append(format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES))
        return "\n\n".join(parts) if parts else "(none)"

    def _final_answers(self, ws: Workspace, states: Sequence[_Open]) -> None:
        """ONE reader call for every question still without an answer (ablations and forced answers).

        The reader answers the original question ``q`` (module docstring)."""
        todo = [s for s in states if s.answer is None]
        if not todo:
            return
        budget = ws.cfg.max_tokens("reader")
        reqs = [reader_request(s.q.question, s.final_context or "(none)", budget) for s in todo]
        for s, res in zip(todo, ws.llm.generate(reqs, stage="kgir_final")):
            s.account("kgir_final", res)
            s.answer = parse_answer(res.text)
            forced = self.variant in ("full", "no_subgraph")
            s.answered_by = "forced_reader" if forced else "reader"
            self._count("forced_answers", int(forced))
            last = s.rounds[-1]
            last["final"] = {"raw": res.text, "question": s.q.question, "answer": s.answer, "forced": forced}
            last.setdefault("usable", {})["reader"] = answer_usable(res.text)
            last.setdefault("truncated", {})["reader"] = res.truncated

    def _output(self, s: _Open) -> MethodOutput:
        ranked = s.ranked_pids()
        trace = {
            "method": self.name,
            "variant": self.variant,
            "qid": s.q.qid,
            "question": s.q.question,
            "gold_answers": list(s.q.answers),
            "gold_pids": list(s.q.gold_pids),
            "answer": s.answer or "",
            "answered_by": s.answered_by,
            "iterations_used": len(s.rounds),
            "rounds": s.rounds,
            "history": s.history,
            "llm": s.stage_usage,
            "usage": asdict(s.usage),
        }
        return MethodOutput(qid=s.q.qid, answer=s.answer or "", ranked_pids=ranked, usage=s.usage, trace=trace)


# ---------------------------------------------------------------------- reading traces back
def trace_row(trace: dict) -> dict:
    """Loop facts of one question's trace: rounds, who answered, fallbacks and malformed replies, LLM use."""
    rounds = trace.get("rounds", [])
    llm = trace.get("llm", {})
    return {
        "qid": trace.get("qid"),
        "iterations": trace.get("iterations_used", len(rounds)),
        "answered_by": trace.get("answered_by"),
        "ner_fallbacks": sum(bool((r.get("subgraph") or {}).get("used_fallback")) for r in rounds),
        "rewrite_malformed": sum(bool((r.get("rewrite") or {}).get("malformed")) for r in rounds),
        "reflection_malformed": sum(bool((r.get("reflection") or {}).get("malformed")) for r in rounds),
        "G_Ans_triples": sum(len((r.get("subgraph") or {}).get("G_Ans", [])) for r in rounds),
        "pruned_triples": sum(len((r.get("subgraph") or {}).get("pruned", [])) for r in rounds),
        "rounds_with_seed": sum(bool((r.get("subgraph") or {}).get("seeds")) for r in rounds if "subgraph" in r),
        "subgraph_rounds": sum("subgraph" in r for r in rounds),
        "truncated": sum(s.get("truncated", 0) for s in llm.values()),
        "llm_calls": sum(s.get("calls", 0) for s in llm.values()),
        "prompt_tokens": sum(s.get("prompt_tokens", 0) for s in llm.values()),
        "completion_tokens": sum(s.get("completion_tokens", 0) for s in llm.values()),
        **{f"calls_{k}": llm.get(k, {}).get("calls", 0) for k in STAGES},
    }


USABLE_STAGES = ("ner", "rewrite", "reflect", "reader")


def usable_counts(traces: Sequence[dict]) -> dict:
    """``{stage: {"outputs", "usable", "truncated"}}`` over the rounds of KGIR-RAG traces (issue 9 §3).

    A stage's output is *usable* when it was parsed as intended, not a fallback
    (module docstring); rounds that did not run a stage do not count for it.
    """
    out = {st: {"outputs": 0, "usable": 0, "truncated": 0} for st in USABLE_STAGES}
    for tr in traces:
        for r in tr.get("rounds", []):
            for st, ok in (r.get("usable") or {}).items():
                if st in out:
                    out[st]["outputs"] += 1
                    out[st]["usable"] += int(bool(ok))
                    out[st]["truncated"] += int(bool((r.get("truncated") or {}).get(st)))
    return out


def seed_match_rate(traces: Sequence[dict]) -> float:
    """Share of subgraph rounds with at least one seed (issue 10 item 5b); NaN without subgraph rounds."""
    rows = [trace_row(t) for t in traces]
    n = sum(r["subgraph_rounds"] for r in rows)
    return sum(r["rounds_with_seed"] for r in rows) / n if n else float("nan")


def usable_table(outputs: Sequence) -> "object":
    """Usable-output rates per stage (%), from outputs or traces: one row a stage (issue 9 §3)."""
    import pandas as pd

    traces = [o.trace if hasattr(o, "trace") else o for o in outputs]
    rows = []
    for st, c in usable_counts(traces).items():
        rate = 100.0 * c["usable"] / c["outputs"] if c["outputs"] else float("nan")
        rows.append({"stage": st, "outputs": c["outputs"], "usable": c["usable"], "usable %": rate,
                     "truncated": c["truncated"]})
    return pd.DataFrame(rows).set_index("stage")


def trace_table(outputs: Sequence[MethodOutput]):
    """:func:`trace_row` for every output, as a DataFrame (works on outputs read back from trace files)."""
    import pandas as pd

    return pd.DataFrame([trace_row(o.trace) for o in outputs])
