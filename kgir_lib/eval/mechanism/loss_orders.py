"""The loss decomposition with condition (b) split and its steps taken in two orders (notebook 04,
``04_loss_orders``).

:mod:`kgir_lib.eval.mechanism.loss_decomposition` re-reads KGIR-RAG's final reader prompt with one thing changed at a
time, in one order. Two things that order hides:

- its step (a) -> (b), "retrieval fixed", swaps in every gold passage the prompt lacks, and most of those were
  retrieved and withheld by the paper's context rule (§2.4: the reader reads ``G_Ans``'s triples and the *new*
  passages of ``D'_t``), not missed by retrieval (:mod:`kgir_lib.eval.mechanism.missing_gold` counts them). Here
  the step is split: first the **retrieved but withheld** gold passages are restored (``withheld_restored``, "the
  context rule"), then the **never retrieved** ones are added (giving (b) itself, "retrieval");
- a step's gain depends on what was fixed before it. The same five fixes are taken in the **reverse order** too
  (the cut lifted first, then the triples removed, the distractor passages, the never-retrieved gold added, the
  withheld gold restored), and each fix's gain is reported in both orders (:func:`fix_effects`).

**The conditions** (:func:`order_conditions`; every one from the run's own prompt, no retrieval, loop or
reflection call; the passages of a gold-only prompt in gold order, as (c)-(e)):

- forward (:data:`FORWARD`): (a) ``as_run`` -> ``withheld_restored``: (b)'s prompt with each never-retrieved gold
  passage put back to the passage (b) had swapped out (the same swap rule and positions as (b)) -> (b)
  ``retrieval_fixed`` -> (c) ``gold_with_triples`` -> (d) ``gold_only`` -> (e) ``gold_uncut``;
- reverse (:data:`REVERSE`): (a) -> ``as_run_uncut`` (the cut lifted) -> ``uncut_no_triples`` (the triples removed)
  -> ``uncut_gold_in_prompt`` (only the gold passages the prompt held: the distractors removed) ->
  ``uncut_plus_never_retrieved`` (the never-retrieved gold added) -> (e) ``gold_uncut`` (the withheld gold
  restored).

A passage is *retrieved* when a retrieval of the loop returned it (``D_1``, a round's ``D_t`` or ``D'_t``,
:func:`kgir_lib.eval.mechanism.missing_gold.retrieved`). A question without a never-retrieved missing gold passage
has ``withheld_restored`` = (b); one without a withheld passage, ``withheld_restored`` = (a): the same prompt, the
same answer (the cache), no call.

**Tests, declared here before any call** (:func:`family`): per dataset one family; for every reader, McNemar's
exact test of each condition against the one before it in each order (5 + 5), and for every reader but the first,
each condition against the first reader on the same prompts (:data:`ALL`: 10 conditions); Holm within the family.
With two readers: 30 tests. A test no question can make counts as p = 1. Each adjacent row carries its minimum
detectable EM difference (exact McNemar, power :data:`~kgir_lib.eval.claims.POWER`, level ``ALPHA`` / family
size, from the row's own discordance), labelled as the step attribution labels it.

Shapley values over the five fixes would need every one of the 32 subsets read by both readers; the two orders
are what this module measures, and the sentence gives each fix's range over them.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd

from ..claims import ALPHA, POWER
from ..stats import holm, mcnemar_exact, mde_mcnemar
from . import loss_decomposition as ld
from . import round_facts as rf
from .missing_gold import retrieved

if TYPE_CHECKING:
    from ...llm import ChatRequest

FORWARD = ("as_run", "withheld_restored", "retrieval_fixed", "gold_with_triples", "gold_only", "gold_uncut")
REVERSE = ("as_run", "as_run_uncut", "uncut_no_triples", "uncut_gold_in_prompt", "uncut_plus_never_retrieved",
           "gold_uncut")
ORDERS = {"forward": FORWARD, "reverse": REVERSE}
ALL = tuple(dict.fromkeys(FORWARD + REVERSE))  # 10 conditions
NEW = tuple(c for c in ALL if c not in ld.CONDITIONS)  # the 5 this module adds to the decomposition's 5
CONTEXT_RULE, RETRIEVAL, DISTRACTORS, TRIPLES, CUT = ("the context rule", "retrieval", "distractor passages",
                                                      "triples", "the passage cut")
FIXES = (CONTEXT_RULE, RETRIEVAL, DISTRACTORS, TRIPLES, CUT)
FIX_WORDS = {CONTEXT_RULE: "restoring the withheld gold (the context rule)",
             RETRIEVAL: "adding the never-retrieved gold (retrieval)", DISTRACTORS: "removing the distractor passages",
             TRIPLES: "removing the triples", CUT: "lifting the cut"}
# the fix each condition adds to the one before it, per order
STEPS = {"forward": dict(zip(FORWARD[1:], FIXES)), "reverse": dict(zip(REVERSE[1:], FIXES[::-1]))}
LABELS = {
    **ld.LABELS,
    "withheld_restored": "retrieved-but-withheld gold restored (the context rule)",
    "as_run_uncut": "(a) with the passages uncut",
    "uncut_no_triples": "(a) uncut, without the triples",
    "uncut_gold_in_prompt": "(a) uncut, no triples, only the gold passages it held",
    "uncut_plus_never_retrieved": "... plus the never-retrieved gold passages",
}
STAGE = ld.STAGE
MDE_COLUMN = f"MDE EM ({POWER:.0%} power, α = {ALPHA} / family size)"


def restore_withheld(pids: Sequence[str], gold: Sequence[str], found: set) -> list:
    """(b)'s passages (:func:`~kgir_lib.eval.mechanism.loss_decomposition.swap_in_gold`) with each gold passage no
    retrieval found put back to the passage (b) swapped out at its position (or dropped, when (b) appended it):
    only the retrieved-but-withheld gold swapped in, at (b)'s positions."""
    swapped = ld.swap_in_gold(pids, gold)
    out = [p if p in pids or p in found else pids[i] for i, p in enumerate(swapped[:len(pids)])]
    return out + [p for p in swapped[len(pids):] if p in found]


def order_conditions(prompt: ld.ReaderPrompt, gold: Sequence[str], found: set) -> dict:
    """The ten prompts of one question (:data:`ALL`, module docstring), by condition; ``found``: the passages a
    retrieval of the loop returned."""
    gold = tuple(dict.fromkeys(gold))
    out = dict(ld.conditions(prompt, gold))
    held = tuple(g for g in gold if g in set(prompt.pids))
    never = tuple(g for g in gold if g not in found and g not in set(prompt.pids))
    out["withheld_restored"] = replace(prompt, pids=tuple(restore_withheld(prompt.pids, gold, found)))
    out["as_run_uncut"] = replace(prompt, cut=None)
    out["uncut_no_triples"] = replace(prompt, triples="", cut=None)
    out["uncut_gold_in_prompt"] = replace(prompt, triples="", cut=None, pids=held)
    out["uncut_plus_never_retrieved"] = replace(prompt, triples="", cut=None,
                                                pids=tuple(g for g in gold if g in held or g in never))
    return {c: out[c] for c in ALL}


def prompts_of(records: Sequence[Mapping], cut) -> tuple:
    """As :func:`~kgir_lib.eval.mechanism.loss_decomposition.prompts_of`, with the ten conditions a question."""
    prompts, answers, left = {}, {}, {"no gold passages": 0, "no reader call": 0}
    for record in records:
        gold_answers, gold_pids = rf.golds(record)
        prompt = ld.final_prompt(record, cut)
        if not gold_pids:
            left["no gold passages"] += 1
        elif prompt is None:
            left["no reader call"] += 1
        else:
            prompts[prompt.qid] = order_conditions(prompt, gold_pids, set(retrieved(record)))
            answers[prompt.qid] = tuple(gold_answers)
    return prompts, answers, left


def new_requests(prompts: Mapping[str, Mapping[str, ld.ReaderPrompt]], passage, max_tokens: int) -> list:
    """The distinct reader requests of the five new conditions (:data:`NEW`) that no condition of the
    decomposition already sends: what reading the orders costs beyond it, before any cache."""
    from ...methods.reader import reader_request

    def key(p: ld.ReaderPrompt) -> str:
        return json.dumps(reader_request(p.question, p.context(passage), max_tokens).payload(), sort_keys=True)

    old = {key(p) for q in prompts.values() for c, p in q.items() if c in ld.CONDITIONS}
    new: dict[str, ChatRequest] = {}
    for q in prompts.values():
        for c in NEW:
            if key(q[c]) not in old:
                new.setdefault(key(q[c]), reader_request(q[c].question, q[c].context(passage), max_tokens))
    return list(new.values())


def read_prompts(llm, prompts: Mapping[str, Mapping[str, ld.ReaderPrompt]], passage, max_tokens: int) -> pd.DataFrame:
    """One reader's answer to every prompt of :data:`ALL` (stage ``loss_decomposition``, as the decomposition's
    own calls, so its five conditions are the same cached requests); ``qid, condition, answer, raw`` rows."""
    return ld.read_prompts(llm, prompts, passage, max_tokens, conditions=ALL)


# ---------------------------------------------------------------------------- the declared family and the table
def family(readers: Sequence[str]) -> list:
    """The tests of one dataset's family, declared before any call: ``(reader, order, condition, against)``;
    ``against`` is ``"previous"`` (the condition before it in ``order``, same reader) or the first reader's name
    (``order`` is then ``""``)."""
    tests = [(r, o, c, "previous") for r in readers for o, chain in ORDERS.items() for c in chain[1:]]
    return tests + [(r, "", c, readers[0]) for r in readers[1:] for c in ALL]


def family_size(readers: Sequence[str]) -> int:
    """How many tests :func:`family` declares (30 with two readers)."""
    return len(family(readers))


COLUMNS = ["dataset", "reader", "order", "condition", "label", "n", "EM", "F1", "step", "ΔEM", "EM b/c", "p",
           "p (Holm)", MDE_COLUMN, "ΔEM vs first reader", "EM b/c vs first reader", "p vs first reader",
           "p vs first reader (Holm)"]
COLUMN_NOTES = {
    "order": "forward: (a), withheld gold restored, never-retrieved gold added (b), distractors removed (c), triples "
             "removed (d), cut lifted (e); reverse: the same fixes from the cut back to the withheld gold",
    "step": "the fix this condition adds to the one above it in its order",
    "ΔEM": "EM minus the condition above in the same order, same reader",
    "EM b/c": "questions only this condition got right / only the condition above did (McNemar's b / c)",
    "p": "McNemar's exact test against the condition above in the same order",
    "p (Holm)": "p adjusted by Holm within the dataset's declared family (both orders, every reader)",
    MDE_COLUMN: "the smallest EM difference this step's questions could detect at the family's first Holm level, "
                "from the step's own discordance",
    "ΔEM vs first reader": "EM minus the first reader's on the same prompts (on the forward rows)",
    "p vs first reader (Holm)": "that test's p adjusted by Holm within the dataset's declared family",
}


def _mcnemar(a: pd.Series, b: pd.Series) -> tuple:
    test = mcnemar_exact((a > 0).astype(float).to_numpy(), (b > 0).astype(float).to_numpy())
    return test.p, f"{test.b}/{test.c}", test.b + test.c


def orders_table(scored: Mapping[str, pd.DataFrame], dataset: str) -> pd.DataFrame:
    """One dataset's table: a row per reader, order and condition (``scored``: ``{reader: scored answers}`` with
    every condition of :data:`ALL`, the readers in the declared order), the adjacent and the reader tests, Holm
    within :func:`family`, and each adjacent row's MDE."""
    readers = list(scored)
    size = family_size(readers)
    em = {r: s.pivot(index="qid", columns="condition", values="EM") for r, s in scored.items()}
    f1 = {r: s.pivot(index="qid", columns="condition", values="F1") for r, s in scored.items()}
    rows, keyed = [], {}
    for r in readers:
        for order, chain in ORDERS.items():
            for i, c in enumerate(chain):
                n = len(em[r])
                row = {"dataset": dataset, "reader": r, "order": order, "condition": c, "label": LABELS[c], "n": n,
                       "EM": em[r][c].mean(), "F1": f1[r][c].mean(), "step": STEPS[order].get(c, "")}
                if i:
                    prev = chain[i - 1]
                    row["ΔEM"] = row["EM"] - em[r][prev].mean()
                    row["p"], row["EM b/c"], disc = _mcnemar(em[r][c], em[r][prev])
                    row[MDE_COLUMN] = 100.0 * mde_mcnemar(n, disc / n, ALPHA / size, POWER) if n else np.nan
                    keyed[(r, order, c, "previous")] = row["p"]
                if r != readers[0] and (order == "forward" or c not in FORWARD):  # once a condition
                    first = em[readers[0]][c].reindex(em[r].index)
                    row["ΔEM vs first reader"] = row["EM"] - first.mean()
                    row["p vs first reader"], row["EM b/c vs first reader"], _ = _mcnemar(em[r][c], first)
                    keyed[(r, "", c, readers[0])] = row["p vs first reader"]
                rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    tests = family(readers)
    pvals = [keyed.get(t, np.nan) for t in tests]
    adjusted = dict(zip(tests, holm([1.0 if np.isnan(p) else p for p in pvals])))
    table["p (Holm)"] = [adjusted.get((r, o, c, "previous"), np.nan)
                         for r, o, c in zip(table["reader"], table["order"], table["condition"])]
    table["p vs first reader (Holm)"] = [
        adjusted.get((r, "", c, readers[0]), np.nan) if pd.notna(p) else np.nan
        for r, c, p in zip(table["reader"], table["condition"], table["p vs first reader"])]
    return table


def fix_effects(table: pd.DataFrame, dataset: str, reader: str) -> pd.DataFrame:
    """Each fix's EM gain in each order measured, and its range: ``fix, forward, reverse, low, high``."""
    rows = table[(table["dataset"] == dataset) & (table["reader"] == reader) & (table["step"] != "")]
    wide = rows.pivot(index="step", columns="order", values="ΔEM").reindex(FIXES)
    wide["low"], wide["high"] = wide.min(axis=1), wide.max(axis=1)
    return wide.reset_index().rename(columns={"step": "fix"})


def orders_sentence(table: pd.DataFrame, dataset: str, reader: str) -> str:
    """The five fixes of ``dataset`` read by ``reader`` in one sentence: each fix's gain in the forward order ("in
    this order") and in the reverse, every number from the table."""
    effects = fix_effects(table, dataset, reader)
    mine = table[(table["dataset"] == dataset) & (table["reader"] == reader) & (table["order"] == "forward")]
    mine = mine.set_index("condition")
    parts = "; ".join(f"{FIX_WORDS[r.fix]} adds {r.forward:+.1f} in this order, {r.reverse:+.1f} in the reverse"
                      for r in effects.itertuples())
    return (f"{dataset} (n = {int(mine.loc['as_run', 'n'])}, {reader}): from KGIR-RAG's own prompt "
            f"({mine.loc['as_run', 'EM']:.1f}) to the uncut gold passages ({mine.loc['gold_uncut', 'EM']:.1f}): "
            f"{parts}.")


def loss_orders(cfg, readers: Mapping[str, object], runs: Mapping[str, tuple]) -> tuple:
    """The study of a run: ``readers`` ``{model: LLM}`` (:func:`~kgir_lib.eval.mechanism.loss_decomposition.
    reader_llms`), ``runs`` ``{dataset: (workspace, KGIR-RAG trace records)}``. Returns ``(table, answers, left
    out)``: :func:`orders_table` of every dataset, every reader's answer to every prompt, and per dataset the
    questions left out."""
    tables, answers, left_out = [], [], {}
    for dataset, (ws, records) in runs.items():
        prompts, gold, left_out[dataset] = prompts_of(records, cfg.passage_chars)
        passage = {p: ws.dataset.corpus[p] for q in prompts.values() for c in q.values() for p in c.pids}
        scored = {}
        for model, reader in readers.items():
            scored[model] = ld.score_answers(read_prompts(reader, prompts, passage, cfg.max_tokens("reader")), gold)
            answers.append(scored[model].drop(columns=["raw"]).assign(dataset=dataset, reader=model))
        tables.append(orders_table(scored, dataset))
    columns = ["dataset", "reader", "qid", "condition", "answer", "EM", "F1"]
    return (pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS),
            pd.concat(answers, ignore_index=True).reindex(columns=columns) if answers
            else pd.DataFrame(columns=columns),
            left_out)


# ---------------------------------------------------------------------------- the run, from the traces
def run_orders(cfg, datasets: Sequence[str] = ()) -> tuple:
    """:func:`loss_orders` over ``cfg``'s run: KGIR-RAG's traces of every dataset of the decomposition
    (``cfg.decomposition_scope``, narrowed to ``datasets`` when given) read from the run directory, every
    reader of ``decomposition_readers``; the table is saved as ``04_loss_orders``. Resumable: every answer goes
    through the run's LLM cache (``KGIR_LLM_CACHE_ONLY=1``: none may be missing)."""
    from ...data import load_dataset
    from ...llm import build_llm
    from .tables import read_run

    scope = [d for d in cfg.decomposition_scope if not datasets or d in datasets]
    traces = read_run(cfg.run_dir, scope, methods=("kgir",))
    missing = [d for d in scope if ("kgir", d) not in traces]
    if missing:
        raise ValueError(f"loss orders: no KGIR-RAG trace file of {', '.join(missing)} under {cfg.run_dir} "
                         f"(notebook 04 writes them)")
    readers = ld.reader_llms(cfg, build_llm(cfg, progress=False))
    runs = {d: (_Corpus(load_dataset(d, cfg.data_path)), traces[("kgir", d)]) for d in scope}
    table, answers, left = loss_orders(cfg, readers, runs)
    save(table, cfg)
    return table, answers, left


CAPTION = ("The loss decomposition with (b) split (withheld gold restored, then never-retrieved gold added) and its "
           "five fixes in two orders, forward and reverse, on KGIR-RAG's own final reader prompts; McNemar's exact "
           "test against the condition above in each order and against the first reader, Holm within each "
           "dataset's declared family. ")


def save(table: pd.DataFrame, cfg):
    """Write ``04_loss_orders`` (csv and md) into the run's tables; the path."""
    from ... import report

    return report.save_table(table.set_index(["dataset", "reader", "order", "condition"]).round(4), cfg,
                             "04_loss_orders", CAPTION + report.model_note(cfg, short=True))


class _Corpus:
    """What :func:`loss_orders` reads of a workspace: ``dataset.corpus``."""

    def __init__(self, dataset):
        self.dataset = dataset


def main(argv=None) -> int:
    """``python -m kgir_lib.eval.mechanism.loss_orders --profile sample``: :func:`run_orders`."""
    import argparse

    from ...config import load_config

    ap = argparse.ArgumentParser(description="The loss decomposition split and in two orders (reader calls).")
    ap.add_argument("--profile", default=None, help="profile (default: $KGIR_PROFILE, else sample)")
    ap.add_argument("--datasets", nargs="*", default=(), help="a subset of the decomposition's datasets")
    args = ap.parse_args(argv)
    cfg = load_config(args.profile)
    from ...llm.response_log import export_run_cache

    try:
        table, _, left = run_orders(cfg, args.datasets)
    finally:
        rows, log = export_run_cache(cfg)  # what was read so far, even on a failure: a rerun resumes from it
        print(f"response log: {rows} response(s) in {log}")
    for d in dict.fromkeys(table["dataset"]):
        for r in dict.fromkeys(table["reader"]):
            print(orders_sentence(table, d, r))
    print("left out:", left)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
