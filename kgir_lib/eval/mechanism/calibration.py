"""How well KGIR-RAG's reflection (paper §2.4, Fig. 5) knows when to stop.

Each round the reflection says "answer" (stop) or "missing" (another round). Per dataset and round,
:func:`calibration_table`:

- ``P(correct | answer)``: the share of "answer" verdicts whose answer is correct (EM, gold aliases);
  the answer is the one the method returns at that round (:func:`kgir_lib.eval.mechanism.round_facts.round_answer`:
  ``final.answer`` when the round has a reader call, else the reflection's own answer); beside it the
  share for the reflection's own answer alone;
- ``P(gold present | missing)``: the share of "missing" verdicts whose input already held every gold
  passage (the input: the source passages of the ``G_Ans`` triples shown, the evidence passages of a
  round without ``G_Ans``, and the reflection passages ``P_t``;
  :func:`kgir_lib.eval.mechanism.round_facts.reflection_input`), and the mean share of gold passages present -- a
  "missing" with the gold in hand is a reading failure, not a retrieval one;
- malformed verdicts (no verdict line) are counted apart.

:func:`oracle_stop_table` (forced-rounds traces, every round answered by the reader): EM when stopping
where the reflection first says "answer" (else after the last round) against the *oracle stop*, the
first round whose answer is correct -- the best any stopping rule could do with these answers; exact
McNemar test between them. :func:`plot_calibration` draws both shares per round.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..metrics import best_em
from ..stats import mcnemar_exact
from . import round_facts as rf

# What the columns of calibration_table and oracle_stop_table mean (shown under the tables in notebook 04).
COLUMN_NOTES = {
    "reflections": "reflection verdicts in this round",
    "answer": "verdicts 'answer' (stop here)",
    "missing": "verdicts 'missing' (go on to another round)",
    "malformed": "replies without a verdict line",
    "P(correct | answer) %": "of the 'answer' verdicts, answers the method returned that are right (EM)",
    "P(own answer correct | answer) %": "the same for the reflection's own Answer: line",
    "P(gold present | missing) %": "of the 'missing' verdicts, those whose input already held every gold passage",
    "gold share in input | missing %": "of the 'missing' verdicts, the mean share of gold passages in the input",
    "EM reflection stop": "EM when stopping where the reflection first says 'answer'",
    "EM oracle stop": "EM when stopping at the first round whose answer is right (a perfect stopping rule)",
    "mean stop round": "mean round at which the reflection stops",
    "mean oracle round": "mean first round with a right answer (the last round when none is)",
    "McNemar b": "questions right at the reflection's stop but not at the oracle stop",
    "McNemar c": "questions right at the oracle stop but not at the reflection's stop",
    "p oracle vs reflection stop": "exact McNemar test of the two stops",
}


def calibration_rows(record: Mapping, n_ctx: int) -> list:
    """One row a round with a reflection: verdict, whether its answer is right, gold passages in its input."""
    answers, gold = rf.golds(record)
    rows = []
    for t, rnd in enumerate(rf.rounds(record), 1):
        v = rf.verdict(rnd)
        if not v:
            continue
        row = {"qid": rf.qid_of(record), "round": t, "verdict": v, "correct": np.nan, "own_correct": np.nan,
               "gold_present": np.nan, "gold_share": np.nan}
        if v == "answer":
            row["correct"] = float(best_em(rf.round_answer(record, t) or "", answers))
            row["own_correct"] = float(best_em(str((rnd.get("reflection") or {}).get("answer") or ""), answers))
        elif v == "missing" and gold:
            seen = set(rf.reflection_input(rnd, n_ctx))
            row["gold_present"] = float(set(gold) <= seen)
            row["gold_share"] = len(set(gold) & seen) / len(set(gold))
        rows.append(row)
    return rows


def _summary(g: pd.DataFrame) -> dict:
    ans, mis = g[g["verdict"] == "answer"], g[(g["verdict"] == "missing")]
    pct = lambda s: 100 * float(s.mean()) if s.notna().any() else float("nan")  # noqa: E731
    return {"reflections": len(g), "answer": len(ans), "P(correct | answer) %": pct(ans["correct"]),
            "P(own answer correct | answer) %": pct(ans["own_correct"]), "missing": len(mis),
            "P(gold present | missing) %": pct(mis["gold_present"]),
            "gold share in input | missing %": pct(mis["gold_share"]),
            "malformed": int((g["verdict"] == "malformed").sum())}


def calibration_table(records: Sequence[Mapping], n_ctx: int, dataset: str = "") -> pd.DataFrame:
    """Per round (and ``all``) of KGIR-RAG traces (module docstring); shares ×100."""
    rows = pd.DataFrame([row for r in records for row in calibration_rows(r, n_ctx)])
    cols = ["dataset", "round", "reflections", "answer", "P(correct | answer) %", "P(own answer correct | answer) %",
            "missing", "P(gold present | missing) %", "gold share in input | missing %", "malformed"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    out = [{"dataset": dataset, "round": str(t), **_summary(g)} for t, g in rows.groupby("round", sort=True)]
    out.append({"dataset": dataset, "round": "all", **_summary(rows)})
    return pd.DataFrame(out, columns=cols)


def oracle_stop_rows(record: Mapping) -> dict:
    """One forced-rounds trace: the reflection's stopping round and its answer's EM, the oracle's, rounds 1 and T."""
    answers, _ = rf.golds(record)
    ra = rf.trace_of(record).get("round_answers")
    if not isinstance(ra, list) or not ra:
        raise ValueError(f"question {rf.qid_of(record)!r}: trace has no 'round_answers' (not a forced-rounds run)")
    em = [best_em(rf.round_answer(record, t) or "", answers) for t in range(1, len(ra) + 1)]
    stop = min(rf.stop_round(record) or len(ra), len(ra))
    oracle = next((t for t, e in enumerate(em, 1) if e), len(ra))
    return {"qid": rf.qid_of(record), "stop": stop, "EM stop": em[stop - 1], "oracle": oracle,
            "EM oracle": em[oracle - 1], "EM round 1": em[0], "EM round T": em[-1]}


def oracle_stop_table(records: Sequence[Mapping], dataset: str = "") -> pd.DataFrame:
    """One row: EM (×100) at the reflection's stop, at the oracle stop, after round 1 and after the last
    round; mean stopping rounds; exact McNemar of oracle against the reflection's stop."""
    d = pd.DataFrame([oracle_stop_rows(r) for r in records])
    cols = ["dataset", "n", "EM reflection stop", "EM oracle stop", "EM round 1", "EM round T", "mean stop round",
            "mean oracle round", "McNemar b", "McNemar c", "p oracle vs reflection stop"]
    if d.empty:
        return pd.DataFrame(columns=cols)
    mc = mcnemar_exact(d["EM stop"], d["EM oracle"])
    return pd.DataFrame([{"dataset": dataset, "n": len(d), "EM reflection stop": 100 * d["EM stop"].mean(),
                          "EM oracle stop": 100 * d["EM oracle"].mean(), "EM round 1": 100 * d["EM round 1"].mean(),
                          "EM round T": 100 * d["EM round T"].mean(), "mean stop round": d["stop"].mean(),
                          "mean oracle round": d["oracle"].mean(), "McNemar b": mc.b, "McNemar c": mc.c,
                          "p oracle vs reflection stop": mc.p}], columns=cols)


# Figure drawing (colours, positions, labels): outside the mutation run, which covers the numbers.
# pragma: no mutate start
# The outcomes of a round's verdicts, in the bars' order, with their colours.
OUTCOMES = (("answer, right", "tab:green"), ("answer, wrong", "tab:red"),
            ("missing, the gold already read", "tab:orange"), ("missing, gold not read", "tab:blue"),
            ("no verdict line", "tab:gray"))
FONT = 11.0


def verdict_outcomes(table: pd.DataFrame) -> pd.DataFrame:
    """Per row of :func:`calibration_table` (rounds, not ``all``): how many of the round's reflections fall in each
    of :data:`OUTCOMES`, from the row's counts and shares (a share × its count is a whole number of verdicts)."""
    sub = table[table["round"] != "all"]
    out = []
    for _, r in sub.iterrows():
        answer, missing = int(r["answer"]), int(r["missing"])
        right = round(answer * float(r["P(correct | answer) %"]) / 100) if answer else 0
        read = round(missing * float(r["P(gold present | missing) %"]) / 100) if missing else 0
        out.append({"dataset": r["dataset"], "round": r["round"], "reflections": int(r["reflections"]),
                    OUTCOMES[0][0]: right, OUTCOMES[1][0]: answer - right, OUTCOMES[2][0]: read,
                    OUTCOMES[3][0]: missing - read, OUTCOMES[4][0]: int(r["malformed"])})
    return pd.DataFrame(out)


def plot_calibration(table: pd.DataFrame, title: str = "", order=None):
    """What the reflection decided in each round, and whether it was right: one bar a dataset and round, as the
    share of that round's reflections in each of :data:`OUTCOMES` ("answer" and the answer right or wrong;
    "missing" with every gold passage already in what it read, or not; no verdict line), each segment labelled with
    its count. ``order``: the datasets' order (default: as the table has them). Returns the figure."""
    import matplotlib.pyplot as plt

    counts = verdict_outcomes(table)
    if order is not None:
        rank = {d: i for i, d in enumerate(order)}
        counts = counts.sort_values("dataset", key=lambda s: s.map(lambda d: rank.get(d, len(rank))), kind="stable")
    counts = counts.iloc[::-1]  # the first row on top
    fig, ax = plt.subplots(figsize=(9.5, 0.55 * max(len(counts), 1) + 1.9))
    y = np.arange(len(counts))
    left = np.zeros(len(counts))
    total = counts["reflections"].clip(lower=1).to_numpy(dtype=float)
    for name, color in OUTCOMES:
        share = 100 * counts[name].to_numpy(dtype=float) / total
        ax.barh(y, share, left=left, color=color, label=name, height=0.75)
        for yi, x0, w, n in zip(y, left, share, counts[name]):
            if n and w >= 4:
                ax.text(x0 + w / 2, float(yi), str(int(n)), ha="center", va="center", fontsize=FONT, color="white",
                        weight="bold")
        left += share
    ax.set_yticks(y, labels=[f"{d}, round {t} (n = {n})" for d, t, n in
                             zip(counts["dataset"], counts["round"], counts["reflections"])], fontsize=FONT)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the round's reflections", fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.set_title(title or "What the reflection decided, and whether it was right", fontsize=FONT + 1, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.17 if len(counts) > 3 else -0.3), ncol=3, fontsize=FONT,
              frameon=False)
    fig.tight_layout()
    return fig
# pragma: no mutate end


def natural_rounds_sentence(per_question: pd.DataFrame, dataset: str) -> str:
    """How far the full method's loop runs by itself on ``dataset``, from notebook 04's per-question table
    (``04_kgir_per_question``: each question's ``iterations`` and who answered), and what a study of the loop's
    steps therefore covers."""
    rows = per_question[per_question["dataset"] == dataset]
    n, past = len(rows), int((rows["iterations"] > 1).sum())
    forced = int((rows["answered_by"] == "forced_reader").sum())
    counts = rows["iterations"].value_counts().sort_index()
    spread = ", ".join(f"{int(k)} round{'s' if k > 1 else ''}: {int(v)}" for k, v in counts.items())
    text = (f"{dataset} (n = {n}): the loop goes past round 1 by itself on {past} of {n} questions ({spread}; "
            f"{forced} answered by the reader after the last round)")
    if past <= n / 10:
        text += ("; so what the step attribution and the loss decomposition study is, in effect, one round "
                 "(retrieve, build G_Ans, rewrite once, retrieve D'_1, reflect, read): the iteration itself is "
                 "exercised only by the forced rounds")
    return text + "."
