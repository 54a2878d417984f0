"""Step attribution: what fixing each step of KGIR-RAG's chain would buy (notebook 04, ``04_step_attribution``).

The bridge funnel (:mod:`kgir_lib.eval.mechanism.funnel`) says where the chain seed -> bridge in ``G_Ans`` ->
rewrite names it -> ``D'_t`` finds the next hop -> answer breaks. The oracle study variants
(:mod:`kgir_lib.kgir.study`) hand one step the gold and keep the rest of the full method; this module reads
their traces beside the full method's (``kgir``) and says, per dataset, what each step is worth:

- each variant's EM, F1 and R@5 (×100) on the questions both it and the full method answered (``n``), the full
  method's on the same questions, and the difference;
- the exact paired tests against the full method (:mod:`kgir_lib.eval.stats`): McNemar for EM, the sign-flip
  test for F1 and R@5, with :data:`kgir_lib.eval.claims.ALPHA`'s convention. **The family is declared here, before
  any run** (:data:`FAMILY`: every variant of :data:`ROWS` by every metric of :data:`METRICS`), one family per
  dataset, Holm-adjusted within it (:func:`kgir_lib.eval.stats.holm`); a test no dataset can make (recall of the
  context oracle, which retrieves nothing) is left out of the family (:data:`FAMILY_SIZE` tests). A profile that
  runs only some variants, or a variant with no question in common with the full method, still adjusts for the
  whole family: each test not made counts as p = 1, so a narrower run never buys a smaller correction;
- the minimum detectable EM difference of each row (``MDE EM``: exact McNemar, power :data:`POWER`, level
  ``ALPHA`` / :data:`FAMILY_SIZE`, the family's first Holm level), from the row's own discordance rate;
- the funnel steps each variant passes (the chain up to each step, any round, over the questions with a gold
  bridge), and how many of those questions had a next-hop passage in the final answer's context (``next hop
  read``: what the next-hop oracle changes, which step 4 -- a passage ``D'_t`` retrieved -- does not see);
- ``oracle applied``: the questions whose trace says every oracle step of the variant applied (the others ran
  the missing step as the full method), and per step (``gold given: <step>``, :data:`GIVEN`) the questions that
  step had its gold on. A step with gold on no question of a dataset (the ideal rewrite on HotpotQA, which has no
  sub-questions) leaves its variant the full method's requests:
  :func:`kgir_lib.eval.mechanism.headroom.headroom_sentence` and :func:`~kgir_lib.eval.mechanism.headroom.plot_headroom`
  say it has no gold there instead of drawing it as a step that adds nothing.

:mod:`kgir_lib.eval.mechanism.headroom` reads the table: :func:`~kgir_lib.eval.mechanism.headroom.plot_headroom`
draws the waterfall (full method -> each cumulative oracle -> the gold-context ceiling, with the single-step
oracles and our two repairs apart), :func:`headroom_sentence` says it in one sentence from the table.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from ...gold import Bridge
from ...kgir.study import PARTS
from ...kgir.variants import STUDY_VARIANTS
from ..claims import ALPHA, POWER
from ..metrics import best_em, best_f1, recall_at_k
from ..stats import holm, mcnemar_exact, mde_mcnemar, sign_flip_test
from . import round_facts as rf
from .funnel import STEPS, funnel_rows, funnel_table

REFERENCE = "kgir"
CUMULATIVE = ("kgir_oracle_seeds", "kgir_oracle_seeds_rewrite", "kgir_oracle_seeds_rewrite_next_hop")
SINGLE = ("kgir_oracle_rewrite", "kgir_oracle_next_hop")
CEILING = "kgir_oracle_context"
OURS = ("kgir_bridge_rewrite", "kgir_all_passages")
ROWS = (*CUMULATIVE, *SINGLE, CEILING, *OURS)  # compared with the full method, in this order
METRICS = ("EM", "F1", "R@5")
FAMILY = tuple((key, m) for key in ROWS for m in METRICS)  # one family per dataset (module docstring)
NO_RECALL = (CEILING,)  # retrieves nothing: its R@5 is not a test
FAMILY_SIZE = sum(1 for key, m in FAMILY if not (m == "R@5" and key in NO_RECALL))  # the tests Holm adjusts for
# how headroom_sentence names the variants beside the waterfall
IN_WORDS = {"kgir_oracle_rewrite": "the ideal rewrite",
            "kgir_oracle_next_hop": "the answer-bearing gold next hop",
            "kgir_bridge_rewrite": "the bridge rewrite", "kgir_all_passages": "the reflection reading all of D'_t"}
KINDS = {REFERENCE: "the paper's method", **{k: "oracle" for k in (*CUMULATIVE, *SINGLE, CEILING)},
         **{k: "ours" for k in OURS}}
# the oracle steps (kgir_lib.kgir.study.PARTS, as the traces name them), in words and in the waterfall's labels
PART_WORDS = {"seeds": "oracle seeds", "rewrite": "the ideal rewrite", "next_hop": "the gold next hop",
              "context": "the gold passages"}
PART_LABELS = {part: part.replace("_", " ") for part in PARTS}
GIVEN = {part: f"gold given: {label}" for part, label in PART_LABELS.items()}  # a column per oracle step
ADDS = {v.key: v.oracle for v in STUDY_VARIANTS.values() if v.oracle}  # registry key -> the steps it hands the gold
MDE_COLUMN = f"MDE EM ({POWER:.0%} power, α = {ALPHA} / family size)"
# What the columns of step_attribution_table mean (shown under the table in notebook 04).
COLUMN_NOTES = {
    "kind": "the paper's method, an oracle (handed one step's gold) or a repair of ours",
    "n": "questions both the variant and the full method answered",
    "oracle applied": "questions the oracle had gold for (the others ran that step as the full method)",
    **{col: f"questions the oracle had the gold of the {PART_LABELS[p]} step for" for p, col in GIVEN.items()},
    **{k: v for m in METRICS for k, v in {
        f"{m} full": f"the full method's {m} on the same questions",
        f"Δ{m}": f"the variant's {m} minus the full method's",
        f"{m} discordant": ("questions only the variant got right / only the full method did (McNemar's b / c)"
                            if m == "EM" else f"questions whose {m} differs between the two"),
        f"p {m}": "exact paired test against the full method (McNemar for EM, sign-flip otherwise)",
        f"p {m} (Holm)": "p adjusted by Holm's procedure within the dataset's family of tests",
    }.items()},
    MDE_COLUMN: (f"the smallest EM difference these questions detect, given the variant's discordance, at level "
                 f"{ALPHA} / {FAMILY_SIZE} (the declared family's size, whichever variants ran)"),
    "bridge questions": ("questions with a gold bridge entity; the funnel's steps count among them, in any round, "
                         "each step only after every one before it; step 2 counts a triple entity whose name "
                         "contains the bridge's (the funnel table's looser rule)"),
    "next hop read": "bridge questions whose final answer's context held a next-hop passage",
}


def question_scores(records: Sequence[Mapping]) -> pd.DataFrame:
    """EM, F1 and R@5 (×100) of each trace-file line, from the gold answers and passages its trace records;
    R@5 is NaN for a trace marked ``no_retrieval`` and for a question without gold passages."""
    rows = []
    for r in records:
        answers, gold = rf.golds(r)
        answer = rf.final_answer(r)
        no_retrieval = bool(rf.trace_of(r).get("no_retrieval"))
        rows.append({"qid": rf.qid_of(r), "EM": 100.0 * best_em(answer, answers),
                     "F1": 100.0 * best_f1(answer, answers),
                     "R@5": np.nan if no_retrieval else 100.0 * recall_at_k(list(r.get("ranked_pids") or []), gold, 5)})
    return pd.DataFrame(rows, columns=["qid", *METRICS])


def oracle_applied(records: Sequence[Mapping]) -> int:
    """Questions whose trace's ``oracle`` has every step of the variant applied (``not_applied`` empty)."""
    return sum(1 for r in records if (o := rf.trace_of(r).get("oracle")) and not o.get("not_applied"))


def oracle_given(records: Sequence[Mapping]) -> dict:
    """Per oracle step (:data:`GIVEN`'s keys): the questions whose trace has that step among the variant's
    ``parts`` and not in ``not_applied``; NaN for a step no trace has among its parts."""
    out = {}
    for part in GIVEN:
        having = [o for r in records if (o := rf.trace_of(r).get("oracle")) and part in (o.get("parts") or ())]
        out[GIVEN[part]] = sum(1 for o in having if part not in (o.get("not_applied") or {})) if having else np.nan
    return out


def funnel_counts(records: Sequence[Mapping], bridges: Mapping[str, Sequence[Bridge]], n_ctx: int,
                  mode: str = "contains") -> dict:
    """The funnel (any round) of one variant's traces: bridge questions, the chain's count up to each step, and
    the bridge questions whose final answer's context held a next-hop passage."""
    keep = [r for r in records if bridges.get(rf.qid_of(r))]
    out = {"bridge questions": len(keep), **{s: 0 for s in STEPS[1:]}, "next hop read": 0}
    if not keep:
        return out
    table = funnel_table(funnel_rows(keep, bridges, mode, "d"))
    out.update(table[table["round"] == "any"].set_index("step")["n"].reindex(list(STEPS[1:])).astype(int).to_dict())
    out["next hop read"] = sum(any(p in set(rf.answer_context(r, n_ctx)) for b in bridges[rf.qid_of(r)]
                                   for p in b.next_pids) for r in keep)
    return out


def _tests(a: pd.Series, b: pd.Series, metric: str) -> tuple:
    """(p, discordant) of the exact paired test of variant ``a`` against the full method ``b``."""
    if metric == "EM":
        t = mcnemar_exact(a.to_numpy(), b.to_numpy())
        return t.p, f"{t.b}/{t.c}"  # only the variant right / only the full method right
    return sign_flip_test(a.to_numpy() - b.to_numpy()), str(int((a != b).sum()))


def step_attribution_table(runs: Mapping[str, Sequence[Mapping]], bridges: Mapping[str, Sequence[Bridge]],
                           dataset: str, n_ctx: int, labels: Optional[Mapping[str, str]] = None,
                           mode: str = "contains", alpha: float = ALPHA) -> pd.DataFrame:
    """One dataset's step attribution (module docstring): one row for the full method, one per variant of
    :data:`ROWS` that has traces in ``runs`` (``{registry key: trace-file lines}``), in that order.

    Questions are paired by id; a metric NaN for a question (recall without gold passages) leaves it out of that
    metric's test. The p-values of every row's tests form the dataset's family (:data:`FAMILY`), Holm-adjusted.
    """
    if REFERENCE not in runs:
        raise ValueError(f"step_attribution_table: no {REFERENCE!r} traces for dataset {dataset!r}")
    labels = dict(labels or {})
    ref = question_scores(runs[REFERENCE]).set_index("qid")
    rows: list[dict] = []
    tests: list[tuple[int, str]] = []  # (row, metric) of each test made
    for key in (REFERENCE, *[k for k in ROWS if k in runs]):
        scores = question_scores(runs[key]).set_index("qid")
        both = scores.index.intersection(ref.index)
        a, b = scores.loc[both], ref.loc[both]
        row = {"dataset": dataset, "key": key, "method": labels.get(key, key), "kind": KINDS[key], "n": len(both),
               "oracle applied": oracle_applied(runs[key]) if KINDS[key] == "oracle" else np.nan,
               **oracle_given(runs[key])}
        for m in METRICS:
            ok = a[m].notna() & b[m].notna()
            row[m], row[f"{m} full"] = float(a.loc[ok, m].mean()), float(b.loc[ok, m].mean())
            row[f"Δ{m}"] = row[m] - row[f"{m} full"]
            row[f"p {m}"], row[f"{m} discordant"] = np.nan, ""
            if key != REFERENCE and ok.any() and not (m == "R@5" and key in NO_RECALL):
                row[f"p {m}"], row[f"{m} discordant"] = _tests(a.loc[ok, m], b.loc[ok, m], m)
                tests.append((len(rows), m))
        row[MDE_COLUMN] = np.nan
        row.update(funnel_counts(runs[key], bridges, n_ctx, mode))
        rows.append(row)
    # the declared family, whichever variants ran: a test not made counts as p = 1 (Holm stays conservative)
    adjusted = holm([rows[i][f"p {m}"] for i, m in tests] + [1.0] * (FAMILY_SIZE - len(tests)))
    for (i, m), p in zip(tests, adjusted):
        rows[i][f"p {m} (Holm)"] = float(p)
    for row in rows[1:]:
        em = question_scores(runs[row["key"]]).set_index("qid")["EM"].reindex(ref.index).dropna()
        if len(em) and tests:
            d = float((em != ref.loc[em.index, "EM"]).mean())
            row[MDE_COLUMN] = 100.0 * mde_mcnemar(len(em), d, alpha / FAMILY_SIZE, POWER)
    cols = ["dataset", "key", "method", "kind", "n", "oracle applied", *GIVEN.values()]
    for m in METRICS:
        cols += [m, f"{m} full", f"Δ{m}", f"{m} discordant", f"p {m}", f"p {m} (Holm)"]
    cols += [MDE_COLUMN, "bridge questions", *STEPS[1:], "next hop read"]
    return pd.DataFrame(rows).reindex(columns=cols)
