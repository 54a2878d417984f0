"""Where KGIR-RAG's answers are lost: retrieval, distractor passages, triples, the passage cut and the reader
(notebook 04, ``04_loss_decomposition``).

The step attribution (:mod:`kgir_lib.eval.mechanism.step_attribution`) reruns the loop with one step handed the
gold; its gold-context ceiling fixes retrieval, removes distractors and drops the triples all at once. This
module separates them. It takes KGIR-RAG's own final reader prompt of every question (paper §2.4: the triples of
``G_Ans`` or the passages standing in for them, then the passages the reflection read; the same passage budget,
order and cut) and has the shared reader answer it again, changed one thing at a time (:data:`CONDITIONS`):

- (a) ``as_run``: the prompt as KGIR-RAG sent it (its answer is the run's own, from the cache);
- (b) ``retrieval_fixed``: the gold passages the prompt lacks swapped in for its lowest-ranked non-gold passages
  (:func:`swap_in_gold`): retrieval fixed, the context's shape kept (triples, budget, order);
- (c) ``gold_with_triples``: the gold passages only, the triples kept: the distractor passages removed;
- (d) ``gold_only``: the gold passages only, cut at the profile's ``passage_chars``: the step attribution's
  gold-context ceiling, the very same prompt;
- (e) ``gold_uncut``: as (d) with every gold passage whole: what ``passage_chars`` costs.

Each prompt is read by every reader of the profile's ``decomposition_readers`` (default: the profile's own
model), on the same prompts: the reader-capacity axis. The adjacent differences add up: EM(e) - EM(a) is
retrieval (a->b) + distractor passages (b->c) + triples (c->d) + the cut (d->e).

**Tests.** Per dataset, one family declared here before any run (:func:`family`): for every reader, McNemar's
exact test of each condition against the one before it (4 tests), and for every reader but the first, each
condition read by it against the first reader (5 tests); Holm within the family. With two readers: 13 tests.
A test no question can make counts as p = 1.

**Where it does not apply.** A question without gold passages, or whose answer no reader call wrote (the
profile's ``kgir_answer_source`` is the reflection), is left out and counted (:func:`prompts_of`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from ...data import Passage
from ...gold import bridge_aliases, names
from ...methods.reader import format_passages, parse_answer, reader_request
from ..metrics import best_em, best_f1
from ..stats import holm, mcnemar_exact
from . import round_facts as rf

if TYPE_CHECKING:
    from ...llm import Usage

CONDITIONS = ("as_run", "retrieval_fixed", "gold_with_triples", "gold_only", "gold_uncut")
LABELS = {
    "as_run": "(a) KGIR-RAG's own reader prompt",
    "retrieval_fixed": "(b) missing gold swapped in (retrieval fixed)",
    "gold_with_triples": "(c) gold passages + triples (distractors removed)",
    "gold_only": "(d) gold passages only (the ceiling)",
    "gold_uncut": "(e) gold passages uncut",
}
# what changes from the condition before: the loss it measures
STEPS = {"retrieval_fixed": "retrieval", "gold_with_triples": "distractor passages", "gold_only": "triples",
         "gold_uncut": "the passage cut"}
STAGE = "loss_decomposition"
# each step in the sentence's words: what it does, not what it "accounts for" (a step's gain depends on the order,
# and (b) restores withheld and never-retrieved gold passages at once: kgir_lib.eval.mechanism.loss_orders)
IN_ORDER = {"retrieval_fixed": "the missing gold passages swapped in (retrieved-but-withheld and never-retrieved "
                               "alike)",
            "gold_with_triples": "the distractor passages removed", "gold_only": "the triples removed",
            "gold_uncut": "the cut lifted"}


@dataclass(frozen=True)
class ReaderPrompt:
    """One reader prompt: the question, the triples block ("" for none), the passages in order, their cut."""

    qid: str
    question: str
    triples: str
    pids: tuple
    cut: Optional[int]

    def context(self, passage: Mapping[str, Passage]) -> str:
        """The reader's context as KGIR-RAG writes it (:func:`kgir_lib.kgir.steps.hand_to_reader`): the
        triples, then the passages, each cut to ``cut`` characters; ``(none)`` when both are empty."""
        parts = [self.triples] if self.triples else []
        if self.pids:
            parts.append(format_passages([passage[p] for p in self.pids], self.cut))
        return "\n\n".join(parts) if parts else "(none)"


def final_prompt(record: Mapping, cut: Optional[int]) -> Optional[ReaderPrompt]:
    """KGIR-RAG's final reader prompt of one trace: the last round with a reader call, its evidence (the
    ``G_Ans`` triples; nothing when passages stood in for them, since they are among the context passages) and
    the passages it read; ``None`` when no reader call wrote the answer."""
    rounds = [r for r in rf.rounds(record) if r.get("final")]
    if not rounds:
        return None
    last = rounds[-1]
    triples = ""
    if last.get("evidence_source") == "subgraph":
        triples = str(last.get("evidence") or "").removeprefix("Triples:\n")
    trace = rf.trace_of(record)
    return ReaderPrompt(rf.qid_of(record), str(trace.get("question", "")), triples,
                        tuple(last["final"].get("context_pids") or ()), cut)


def swap_in_gold(pids: Sequence[str], gold: Sequence[str]) -> list:
    """``pids`` with the ``gold`` passages it lacks put in place of its lowest-ranked non-gold passages (gold order
    into rank order), so the budget and every other position stay; gold beyond the budget is appended."""
    missing = [g for g in dict.fromkeys(gold) if g not in set(pids)]
    out = list(pids)
    slots = sorted([i for i, p in enumerate(out) if p not in set(gold)][::-1][:len(missing)])
    for i, g in zip(slots, missing):
        out[i] = g
    return out + missing[len(slots):]


def conditions(prompt: ReaderPrompt, gold: Sequence[str]) -> dict:
    """The five prompts of one question (module docstring), by condition."""
    gold = tuple(dict.fromkeys(gold))
    return {
        "as_run": prompt,
        "retrieval_fixed": replace(prompt, pids=tuple(swap_in_gold(prompt.pids, gold))),
        "gold_with_triples": replace(prompt, pids=gold),
        "gold_only": replace(prompt, triples="", pids=gold),
        "gold_uncut": replace(prompt, triples="", pids=gold, cut=None),
    }


def prompts_of(records: Sequence[Mapping], cut: Optional[int]) -> tuple:
    """``({qid: {condition: ReaderPrompt}}, {qid: gold answers}, left out)`` for one dataset's KGIR-RAG trace
    records; ``left out`` counts ``no gold passages`` and ``no reader call``."""
    prompts, answers, left = {}, {}, {"no gold passages": 0, "no reader call": 0}
    for record in records:
        gold_answers, gold_pids = rf.golds(record)
        prompt = final_prompt(record, cut)
        if not gold_pids:
            left["no gold passages"] += 1
        elif prompt is None:
            left["no reader call"] += 1
        else:
            prompts[prompt.qid] = conditions(prompt, gold_pids)
            answers[prompt.qid] = tuple(gold_answers)
    return prompts, answers, left


def read_prompts(llm, prompts: Mapping[str, Mapping[str, ReaderPrompt]], passage: Mapping[str, Passage],
                 max_tokens: int, conditions: Sequence[str] = CONDITIONS) -> pd.DataFrame:
    """One reader's answer to every prompt of ``conditions`` (each question's prompts hold them all): one batched
    call a condition (stage ``loss_decomposition``); ``qid, condition, answer, raw`` rows. A reply that gives no
    answer is kept as an empty answer (wrong)."""
    rows = []
    qids = list(prompts)
    for condition in conditions:
        requests = [reader_request(prompts[q][condition].question, prompts[q][condition].context(passage),
                                   max_tokens) for q in qids]
        for q, res in zip(qids, llm.generate(requests, stage=STAGE) if requests else []):
            rows.append({"qid": q, "condition": condition, "answer": parse_answer(res.text), "raw": res.text})
    return pd.DataFrame(rows, columns=["qid", "condition", "answer", "raw"])


def score_answers(read: pd.DataFrame, answers: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """EM and F1 (×100) of each answer against the question's gold answers."""
    out = read.copy()
    out["EM"] = [100.0 * best_em(a, answers[q]) for q, a in zip(out["qid"], out["answer"])]
    out["F1"] = [100.0 * best_f1(a, answers[q]) for q, a in zip(out["qid"], out["answer"])]
    return out


# ---------------------------------------------------------------------------- the declared family and the table
def family(readers: Sequence[str]) -> list:
    """The tests of one dataset's family, declared before the run: ``(reader, condition, against)`` where
    ``against`` is ``"previous"`` (the condition before, same reader) or the first reader's name."""
    tests = [(r, c, "previous") for r in readers for c in CONDITIONS[1:]]
    return tests + [(r, c, readers[0]) for r in readers[1:] for c in CONDITIONS]


COLUMNS = ["dataset", "reader", "condition", "label", "n", "EM", "F1", "step", "ΔEM", "EM b/c", "p", "p (Holm)",
           "ΔEM vs first reader", "EM b/c vs first reader", "p vs first reader", "p vs first reader (Holm)"]
COLUMN_NOTES = {
    "reader": "the model that read the prompts (the same prompts for every reader)",
    "n": "questions with gold passages whose final answer a reader call wrote",
    "step": "what changes from the condition above (the loss it measures)",
    "ΔEM": "EM minus the condition above, same reader",
    "EM b/c": "questions only this condition got right / only the condition above did (McNemar's b / c)",
    "p": "McNemar's exact test against the condition above",
    "p (Holm)": "p adjusted by Holm within the dataset's declared family (every test of this table's dataset)",
    "ΔEM vs first reader": "EM minus the first reader's on the same prompts",
    "EM b/c vs first reader": "questions only this reader got right / only the first reader did",
    "p vs first reader": "McNemar's exact test of this reader against the first reader on the same prompts",
    "p vs first reader (Holm)": "that p adjusted by Holm within the dataset's declared family",
}


def _mcnemar(a: pd.Series, b: pd.Series) -> tuple:
    test = mcnemar_exact((a > 0).astype(float).to_numpy(), (b > 0).astype(float).to_numpy())
    return test.p, f"{test.b}/{test.c}"


def decomposition_table(scored: Mapping[str, pd.DataFrame], dataset: str) -> pd.DataFrame:
    """One dataset's table: a row per reader and condition (``scored``: ``{reader: score_answers(...)}``, the
    readers in the declared order), with the adjacent and the reader tests, Holm within :func:`family`."""
    readers = list(scored)
    em = {r: s.pivot(index="qid", columns="condition", values="EM") for r, s in scored.items()}
    f1 = {r: s.pivot(index="qid", columns="condition", values="F1") for r, s in scored.items()}
    rows, pvals = [], []
    for r in readers:
        for i, c in enumerate(CONDITIONS):
            row = {"dataset": dataset, "reader": r, "condition": c, "label": LABELS[c], "n": len(em[r]),
                   "EM": em[r][c].mean(), "F1": f1[r][c].mean(), "step": STEPS.get(c, "")}
            if i:
                prev = CONDITIONS[i - 1]
                row["ΔEM"] = row["EM"] - em[r][prev].mean()
                row["p"], row["EM b/c"] = _mcnemar(em[r][c], em[r][prev])
            if r != readers[0]:
                first = em[readers[0]][c].reindex(em[r].index)
                row["ΔEM vs first reader"] = row["EM"] - first.mean()
                row["p vs first reader"], row["EM b/c vs first reader"] = _mcnemar(em[r][c], first)
            rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    keyed = {(r, c, "previous"): p for r, c, p in zip(table["reader"], table["condition"], table["p"])}
    keyed.update({(r, c, readers[0]): p for r, c, p in zip(table["reader"], table["condition"],
                                                            table["p vs first reader"])})
    tests = family(readers)
    pvals = [keyed.get(t, np.nan) for t in tests]
    adjusted = dict(zip(tests, holm([1.0 if np.isnan(p) else p for p in pvals])))
    table["p (Holm)"] = [adjusted[(r, c, "previous")] if (r, c, "previous") in adjusted else np.nan
                         for r, c in zip(table["reader"], table["condition"])]
    table["p vs first reader (Holm)"] = [adjusted.get((r, c, readers[0]), np.nan) if r != readers[0] else np.nan
                                         for r, c in zip(table["reader"], table["condition"])]
    return table


# ---------------------------------------------------------------------------- what the cut hides
def cut_text(p: Passage, cut: Optional[int]) -> str:
    """A passage as the reader sees it under ``cut`` (title and text, :func:`format_passages`)."""
    return format_passages([p], cut)


def past_the_cut(names_list: Sequence[str], gold: Sequence[Passage], cut: Optional[int]) -> bool:
    """Whether one of the names (normalised aliases) is in a gold passage only past the cut: named by some whole
    gold passage, by none as the reader sees it."""
    aliases = [a for n in names_list for a in bridge_aliases(n)]
    seen = any(names(cut_text(p, cut), a) for p in gold for a in aliases)
    whole = any(names(cut_text(p, None), a) for p in gold for a in aliases)
    return whole and not seen


def cut_table(questions: Sequence, passage: Mapping[str, Passage], cut: Optional[int],
              dataset: str) -> pd.DataFrame:
    """One row: how many questions (with gold passages) have a gold passage longer than the cut, and whose gold
    answer, or a gold bridge, lies in a gold passage only past the cut."""
    qs = [q for q in questions if q.gold_pids]
    longer = answer = bridge = 0
    for q in qs:
        gold = [passage[p] for p in q.gold_pids]
        longer += any(cut is not None and len(p.text) > cut for p in gold)
        answer += past_the_cut(q.answers, gold, cut)
        bridge += any(past_the_cut([b.name], gold, cut) for b in q.gold_bridges)
    return pd.DataFrame([{"dataset": dataset, "questions": len(qs), "passage_chars": cut,
                          "gold passage longer than the cut": longer, "answer only past the cut": answer,
                          "bridge only past the cut": bridge}])


# ---------------------------------------------------------------------------- in one sentence
def _pts(x: float) -> str:
    return f"{x:+.1f}"


def decomposition_sentence(table: pd.DataFrame, dataset: str, reader: Optional[str] = None) -> str:
    """The decomposition in one sentence for ``dataset``, read with ``reader`` (default: the table's last reader,
    the largest by the profile's order), and what it gains over the first reader on the same prompts."""
    rows = table[table["dataset"] == dataset]
    readers = list(dict.fromkeys(rows["reader"]))
    reader = reader or readers[-1]
    mine = rows[rows["reader"] == reader].set_index("condition")
    total = mine.loc["gold_uncut", "EM"] - mine.loc["as_run", "EM"]
    parts = ", ".join(f"{IN_ORDER[c]}{' add' if i == 0 else ''} {_pts(mine.loc[c, 'ΔEM'])}"
                      for i, c in enumerate(CONDITIONS[1:]))
    text = (f"{dataset} (n = {int(mine.loc['as_run', 'n'])}, {reader}): of the {total:.1f} EM points between "
            f"KGIR-RAG's own prompt ({mine.loc['as_run', 'EM']:.1f}) and the uncut gold passages "
            f"({mine.loc['gold_uncut', 'EM']:.1f}), in this order {parts}")
    if reader != readers[0]:
        gain = mine.loc["as_run", "ΔEM vs first reader"]
        ceiling = mine.loc["gold_uncut", "ΔEM vs first reader"]
        text += (f"; on the same prompts it gains {_pts(gain)} over {readers[0]} at (a) and {_pts(ceiling)} at (e)")
    return text + "."


# ---------------------------------------------------------------------------- the whole study of a run
def reader_llms(cfg, llm) -> dict:
    """``{model: LLM}`` of the profile's ``decomposition_readers`` (default: its own model), in that order; every
    one shares ``llm``'s cache (its keys include the model, so the readers' answers never mix)."""
    from ...llm import LLM, build_backend, cache_only_mode
    from ...llm.embedded import EMBEDDED_MODELS

    readers = cfg.decomposition_readers or [cfg.llm_model]
    unknown = [m for m in readers if m != cfg.llm_model and cfg.llm_backend == "llamacpp" and m not in EMBEDDED_MODELS]
    if unknown:
        raise ValueError(f"parameter 'decomposition_readers': {unknown[0]!r} is not an embedded model (known: "
                         f"{', '.join(sorted(EMBEDDED_MODELS))})")
    out = {}
    for model in readers:
        if model == cfg.llm_model:
            out[model] = llm
        else:
            backend = build_backend(replace(cfg, llm_model=model, llm_model_path=None))
            out[model] = LLM(backend, llm.cache, progress=getattr(llm, "progress", False),
                             cache_only=cache_only_mode())
    return out


def readers_usage(readers: Mapping[str, Any], before: Mapping[str, dict]) -> "Usage":
    """The decomposition's own LLM usage: each reader's calls of stage ``loss_decomposition`` since ``before``
    (``{model: reader.usage.snapshot()}`` taken before :func:`loss_decomposition`), one stage a reader, named
    ``loss_decomposition <model>`` (the readers are different models; their tokens are not summed)."""
    from ...llm import Usage

    out = Usage()
    for model, reader in readers.items():
        since = reader.usage.since(before.get(model, {})).stages.get(STAGE)
        if since is not None and since.calls:
            out.stages[f"{STAGE} {model}"] = since
    return out


def loss_decomposition(cfg, readers: Mapping[str, object], runs: Mapping[str, tuple]) -> tuple:
    """The decomposition of a run: ``readers`` is ``{model: LLM}`` in the declared order (:func:`reader_llms`),
    ``runs`` is ``{dataset: (workspace, questions, KGIR-RAG outputs)}``.
    Returns ``(table, cut table, answers, left out)``: :func:`decomposition_table` of every dataset, one
    :func:`cut_table` row a dataset, every reader's answer to every prompt (``dataset, reader, qid, condition,
    answer, EM, F1``) and, per dataset, the questions left out (:func:`prompts_of`)."""
    tables, cuts, answers, left_out = [], [], [], {}
    for dataset, (ws, questions, outputs) in runs.items():
        records = [{"qid": o.qid, "answer": o.answer, "trace": o.trace} for o in outputs]
        prompts, gold, left_out[dataset] = prompts_of(records, cfg.passage_chars)
        passage = {p: ws.dataset.corpus[p] for q in prompts.values() for c in q.values() for p in c.pids}
        scored = {}
        for model, reader in readers.items():
            scored[model] = score_answers(read_prompts(reader, prompts, passage, cfg.max_tokens("reader")), gold)
            answers.append(scored[model].drop(columns=["raw"]).assign(dataset=dataset, reader=model))
        tables.append(decomposition_table(scored, dataset))
        corpus = {p.pid: p for p in ws.dataset.corpus.passages}
        cuts.append(cut_table(questions, corpus, cfg.passage_chars, dataset))
    columns = ["dataset", "reader", "qid", "condition", "answer", "EM", "F1"]
    return (pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS),
            pd.concat(cuts, ignore_index=True) if cuts else pd.DataFrame(),
            (pd.concat(answers, ignore_index=True).reindex(columns=columns) if answers
             else pd.DataFrame(columns=columns)),
            left_out)


# ---------------------------------------------------------------------------- the figure
SHORT = {"as_run": "(a)\nown", "retrieval_fixed": "retrieval", "gold_with_triples": "distractors",
         "gold_only": "triples", "gold_uncut": "cut"}


def plot_decomposition(table: pd.DataFrame):
    """A waterfall per dataset and reader: EM of KGIR-RAG's own prompt (a), each step's rise or fall (retrieval
    fixed, distractor passages removed, triples removed, the cut lifted), the uncut gold passages (e) as an
    outline; the readers side by side on the same prompts. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    datasets = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(5.5 * max(len(datasets), 1), 5.2), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        rows = table[table["dataset"] == ds]
        ticks, labels, x = [], [], 0.0
        for reader in dict.fromkeys(rows["reader"]):
            mine = rows[rows["reader"] == reader].set_index("condition")
            prev = float(mine.loc["as_run", "EM"])
            ax.bar(x, prev, color="tab:blue")
            ax.text(x, prev + 1, f"{prev:.0f}", ha="center", fontsize=12)
            ax.text(x + 2.5, 0.97, reader.replace("-Instruct-Q4_K_M", "").replace("Qwen2.5-Coder-", "reader "),
                    transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=12)
            ticks.append(x)
            labels.append(SHORT["as_run"])
            for c in CONDITIONS[1:]:
                x += 1
                em = float(mine.loc[c, "EM"])
                ax.bar(x, em - prev, bottom=prev, color="tab:green" if em >= prev else "tab:red")
                if em == prev:
                    ax.hlines(em, x - 0.4, x + 0.4, color="tab:green", lw=2)
                ticks.append(x)
                labels.append(SHORT[c])
                prev = em
            ax.bar(x + 1, prev, color="none", edgecolor="black", lw=1.2)
            ax.text(x + 1, prev + 1, f"{prev:.0f}", ha="center", fontsize=12)
            ticks.append(x + 1)
            labels.append("(e)\nuncut")
            x += 3
        ax.set_xticks(ticks, labels=labels, fontsize=12, rotation=90)
        ax.tick_params(axis="y", labelsize=12)
        ax.set_ylabel("EM (×100)", fontsize=12)
        ax.set_ylim(0, min(100.0, float(rows["EM"].max()) * 1.2 + 8))
        ax.set_title(f"{ds} (n = {int(rows['n'].iloc[0])})", fontsize=13)
    handles = [Patch(color="tab:blue", label="(a) KGIR-RAG's own prompt"),
               Patch(color="tab:green", label="a step's gain"), Patch(color="tab:red", label="a step's loss"),
               Patch(facecolor="none", edgecolor="black", label="(e) uncut gold passages")]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=12, frameon=False)
    fig.suptitle("Where the answers are lost: the same prompts changed one thing at a time", fontsize=13)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig
