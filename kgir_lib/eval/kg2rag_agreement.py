"""The suite's KG²RAGs beside the authors' code, stage by stage, and the cause of every difference.

``benchmarks/peers/kg2rag_crosscheck.sh`` runs the authors' post-processors (GitHub ``nju-websoft/KG2RAG``) on
the suite's inputs: the same seed chunks with their scores, the same triples per chunk, the same titles and the
same reranker scores. Three stages are compared per question (:data:`STAGES`): (1) the chunks the expansion adds
(the code's ``KGRetrievePostProcessor``; the paper's ``D_q^m``), as a set; (2) the chunks the organisation keeps,
in order (``GraphFilterPostProcessor``); (3) the final list the reader gets, in order (``NaivePostprocessor``).
Two suite sides are compared: ``paper`` (:mod:`kgir_lib.baselines.kg2rag`, the paper's reading; its stages 2 and
3 are one list) and ``code`` (:mod:`kgir_lib.baselines.kg2rag_code`, the code's reading).

**Agreement** (:func:`stage_agreement`): Jaccard overlap, same set, same list (order included), the share of
pairs of shared chunks in the same order (:func:`pair_order`), and for the final list whether the reader's
context (its first ``context`` chunks) is the same.

**Causes** (:func:`classify_code`, :func:`classify_paper`). The authors' code iterates Python sets and
networkx subgraph views, so its output on the same inputs can move with the process's string-hash seed; it is
run untouched under several ``PYTHONHASHSEED`` values, and once with every such order made insertion order (the
one order ``kg2rag_code`` uses). A difference is

- ``same`` when the lists agree;
- a **difference of inputs** (:data:`INPUT`) when ``kg2rag_code`` gives the code's insertion-order result and
  the untouched run differs from it: the hash order is an input of the authors' process that the suite's process
  does not share (:data:`HASH_ORDER`);
- a **documented deviation** (:data:`DEVIATION`, paper against code) when the paper-following ``kg2rag`` differs
  but ``kg2rag_code`` on the same inputs gives the code's result (by itself or up to hash order): what is left is
  the paper's rule against the code's at that stage (:data:`STAGE_DEVIATIONS`);
- a **bug in the suite** (:data:`BUG`) when ``kg2rag_code`` differs from the code's insertion-order run: the suite's
  reading of the code is wrong there. The report counts them; the cross-check found none left.
"""
from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence

import numpy as np
import pandas as pd

STAGES = ("expanded", "organised", "final")
STAGE_LABELS = {
    "expanded": "1. expansion: chunks added, in order (KGRetrievePostProcessor against D_q^m; classed as sets)",
    "organised": "2. organisation: chunks kept, in order (GraphFilterPostProcessor)",
    "final": "3. final top-K, in order: what the reader gets (NaivePostprocessor)",
}
SIDES = {"paper": "kg2rag (paper's reading)", "code": "kg2rag_code (code's reading)"}
SAME, DEVIATION, INPUT, BUG = "same", "documented deviation", "input difference", "bug in the suite"
CLASSES = (SAME, DEVIATION, INPUT, BUG)
HASH_ORDER = "the code's set and subgraph order follows PYTHONHASHSEED"
STAGE_DEVIATIONS = {
    "expanded": "expansion: the paper walks every entity of the seeds' triples one hop through the graph; the code "
                "walks page titles (a triple's head or tail that is a page's title) through a per-title chunk index, "
                "adds every chunk of a reached title, and of a seed's own title only when it is highly related",
    "organised": "organisation: the paper weighs an edge by s(q, c), ranks each tree by its triples and fills the "
                 "budget in rank order; the code weighs an edge by its chunk's retrieval score, adds weight-0 "
                 "co-occurrence edges between entities whose 3-grams are in the question, takes components largest "
                 "first, ranks each tree by its chunks' text, stops at the first tree that overflows the budget, tops "
                 "up below half of it, and keeps the chunks in retrieval order",
    "final": "final order: the paper hands the reader the trees' passages in rank order; the code groups the kept "
             "chunks by page title, titles in order of first appearance",
}


def pair_order(a: Sequence[str], b: Sequence[str]) -> float:
    """The share of pairs of items in both lists that the two lists put in the same order; NaN when fewer than
    two items are shared."""
    shared = [x for x in a if x in set(b)]
    pos = {x: i for i, x in enumerate(b)}
    n = len(shared)
    if n < 2:
        return float("nan")
    concordant = sum(pos[shared[i]] < pos[shared[j]] for i in range(n) for j in range(i + 1, n))
    return concordant / (n * (n - 1) / 2)


def stage_agreement(suite: Sequence[str], upstream: Sequence[str], ordered: bool = True,
                    context: Optional[int] = None) -> dict:
    """Agreement of one stage's lists: ``jaccard`` (two empty sets agree), ``same_set``, and when ``ordered``
    ``same_list`` and ``pair_order``; with ``context``, ``same_context`` (the first ``context`` items equal, in
    order)."""
    sa, sb = set(suite), set(upstream)
    row = {"jaccard": 1.0 if not sa and not sb else len(sa & sb) / len(sa | sb), "same_set": sa == sb,
           "n_suite": len(suite), "n_upstream": len(upstream)}
    if ordered:
        row["same_list"] = list(suite) == list(upstream)
        row["pair_order"] = pair_order(suite, upstream)
    if context is not None:
        row["same_context"] = list(suite)[:context] == list(upstream)[:context]
    return row


def agrees(stage: str, a: Optional[Sequence[str]], b: Optional[Sequence[str]]) -> bool:
    """Whether two lists of ``stage`` agree: as sets for the expansion, as lists for the later stages (the classes
    compare the expansion as a set; its order, which the organisation reads, is measured beside it)."""
    if a is None or b is None:
        return False
    return set(a) == set(b) if stage == "expanded" else list(a) == list(b)


def classify_code(stage: str, code: Sequence[str], upstream: Optional[Sequence[str]],
                  insertion: Optional[Sequence[str]]) -> tuple:
    """``(class, cause)`` of ``kg2rag_code``'s ``stage`` against the untouched upstream run (``upstream``;
    ``None``: the code raised) given upstream's insertion-order run (``insertion``)."""
    if agrees(stage, code, upstream):
        return SAME, ""
    if agrees(stage, code, insertion):
        return INPUT, HASH_ORDER
    if upstream is None:
        return BUG, "the authors' code raised where the suite's reading does not"
    return BUG, "the suite's reading differs from the code's with the hash order taken out"


EARLIER = "; the expanded chunks already differ"


def classify_paper(stage: str, paper: Sequence[str], upstream: Optional[Sequence[str]],
                   code_class: str, earlier_differs: bool = False) -> tuple:
    """``(class, cause)`` of the paper-following ``kg2rag``'s ``stage`` against the untouched upstream run, given
    the class ``kg2rag_code`` got there (:func:`classify_code`); ``earlier_differs``: the paper's expansion
    already differed on this question (the cause says so)."""
    if agrees(stage, paper, upstream):
        return SAME, ""
    if code_class in (SAME, INPUT):
        return DEVIATION, STAGE_DEVIATIONS[stage] + (EARLIER if earlier_differs else "")
    return BUG, "unexplained: the code's reading differs there too"


def question_row(paper: dict, code: dict, upstream: dict, insertion: dict, context: int) -> dict:
    """One question's agreement and causes: ``paper``, ``code``, ``upstream`` and ``insertion`` map each stage
    to its list (upstream's ``None`` where it raised). Every stage's agreement is measured as a set and as a list
    (the expansion's order is what the organisation reads); the classes compare the expansion as a set."""
    row: dict = {}
    for stage in STAGES:
        ctx = context if stage == "final" else None
        up, ins = upstream.get(stage), insertion.get(stage)
        c_class, c_cause = classify_code(stage, code[stage], up, ins)
        earlier = stage != "expanded" and row.get("paper_expanded_class") != SAME
        p_class, p_cause = classify_paper(stage, paper[stage], up, c_class, earlier)
        for side, lst, cls, cause in (("code", code[stage], c_class, c_cause),
                                      ("paper", paper[stage], p_class, p_cause)):
            for k, v in stage_agreement(lst, up or [], True, ctx).items():
                row[f"{side}_{stage}_{k}"] = v
            row[f"{side}_{stage}_class"] = cls
            row[f"{side}_{stage}_cause"] = cause
    return row


def stage_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """One line a (side, stage): the mean Jaccard overlap (%), the share of questions with the same set, the same
    list and (final) the same reader context (%), the mean share of pairs in the same order (%), and n."""
    out = []
    for side, side_label in SIDES.items():
        for stage in STAGES:
            def mean(col: str, prefix: str = f"{side}_{stage}_") -> float:  # this side and stage, bound now
                c = prefix + col
                if c not in rows:
                    return np.nan
                vals = rows[c].dropna().astype(float)
                return round(100.0 * float(vals.mean()), 1) if len(vals) else np.nan
            out.append({"side": side_label, "stage": STAGE_LABELS[stage], "overlap (Jaccard, mean %)": mean("jaccard"),
                        "same set (% of questions)": mean("same_set"), "same list (%)": mean("same_list"),
                        "pairs in the same order (mean %)": mean("pair_order"),
                        "same reader context (%)": mean("same_context"), "n": int(len(rows))})
    return pd.DataFrame(out)


def cause_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """How many questions each (side, stage) has in each class and cause (``same`` always listed)."""
    out = []
    for side, side_label in SIDES.items():
        for stage in STAGES:
            cls, cause = rows[f"{side}_{stage}_class"], rows[f"{side}_{stage}_cause"].fillna("")
            for c in CLASSES:
                mask = cls == c
                for why in sorted(set(cause[mask])) or ([""] if c == SAME else []):
                    out.append({"side": side_label, "stage": STAGE_LABELS[stage], "class": c,
                                "questions": int((mask & (cause == why)).sum()), "cause": why})
    return pd.DataFrame(out)


def seed_agreement(code_final: str, seed_finals: Sequence[str]) -> dict:
    """kg2rag_code's final list (space-joined) against the final lists of the authors' code run untouched under
    several hash seeds, and those runs against each other. With ``p`` the share of hash seeds that give each list:

    - ``code_final_in_seeds``: kg2rag_code's list is one of them; ``code_final_seed_share``: the share of seeds
      whose list it equals (the rate a deterministic reading matches one run, whose expectation is its list's p);
    - ``upstream_seed_pair_share``: the share of pairs of seeds whose lists are equal (an estimate of Σp²; NaN for
      one seed);
    - ``upstream_modal_share``: the most frequent list's share (max p over the seeds tried: no deterministic reading
      matches a run more often in expectation, and Σp² ≤ max p, so the pairs' agreement is no ceiling);
      ``upstream_modal_lists``: how many lists tie for it; ``code_final_modal``: kg2rag_code's list is one of them.
    """
    n = len(seed_finals)
    if n == 0:
        raise ValueError("seed_agreement: no hash seed's final list (parameter 'seed_finals' is empty)")
    pairs = [seed_finals[i] == seed_finals[j] for i in range(n) for j in range(i + 1, n)]
    counts = Counter(seed_finals)
    top = max(counts.values())
    modal = {lst for lst, c in counts.items() if c == top}
    return {"code_final_in_seeds": code_final in counts,
            "code_final_seed_share": counts.get(code_final, 0) / n,
            "upstream_seed_pair_share": sum(pairs) / len(pairs) if pairs else float("nan"),
            "upstream_modal_share": top / n, "upstream_modal_lists": len(modal),
            "code_final_modal": code_final in modal}


def padded_recall_from(final: Sequence[str], seeds: Sequence[str], gold: Sequence[str],
                       k_max: Optional[int] = None) -> float:
    """The smallest k (up to ``k_max``, default the padded list's length) at which Recall@k of kg2rag_code's ranked
    list (its final list, then the seeds not in it: :func:`kgir_lib.methods.context.final_ranking`) differs from
    Recall@k of the final list alone (what the authors' code ranks: its response's source nodes); NaN when no k
    does (no gold passage, or none among the padding)."""
    gold_set = set(gold)
    if not gold_set:
        return float("nan")
    padded = list(dict.fromkeys([*final, *seeds]))
    for k in range(1, (len(padded) if k_max is None else k_max) + 1):
        if len(gold_set & set(padded[:k])) != len(gold_set & set(list(final)[:k])):
            return float(k)
    return float("nan")


def agreement_rate(rows: pd.DataFrame, side: str = "code", stage: str = "final") -> tuple:
    """``(questions whose ``stage`` list equals upstream's untouched run, questions)``."""
    col = rows[f"{side}_{stage}_same_list" if stage != "expanded" else f"{side}_{stage}_same_set"]
    return int(col.astype(bool).sum()), int(len(col))


def crosscheck_sentence(rows: pd.DataFrame) -> str:
    """The cross-check in one sentence, from the report's per-question rows (``results/benchmarks/
    peers_kg2rag.csv``): how often each suite KG²RAG gives the authors' final list, the hash-order questions,
    and the count of each cause. The results page quotes it, so its numbers are the file's."""
    need = ["code_final_same_list", "paper_final_same_list", "code_final_class", "upstream_final_variants"]
    missing = [c for c in need if c not in rows.columns]
    if missing or rows.empty:
        raise ValueError(f"crosscheck_sentence: the rows lack {missing or 'every question'}")
    n = len(rows)
    code, _ = agreement_rate(rows, "code")
    paper, _ = agreement_rate(rows, "paper")
    varies = int((rows["upstream_final_variants"] > 1).sum())
    seeds = int(rows["upstream_hash_seeds"].max()) if "upstream_hash_seeds" in rows else 0
    counts = rows["code_final_class"].value_counts()
    ins = int(rows["code_final_same_insertion"].astype(bool).sum()) if "code_final_same_insertion" in rows else None
    text = (f"on the same {n} questions (inputs, triples, titles and reranker scores shared) the suite's "
            f"kg2rag_code hands the reader the authors' code's final list on {code} ({100 * code / n:.1f} %), the "
            f"paper-following KG²RAG on {paper} ({100 * paper / n:.1f} %)")
    if ins is not None:
        text += f"; with the code's hash order taken out, kg2rag_code gives its final list on {ins} of {n}"
    text += (f"; the code's own final list changes with PYTHONHASHSEED on at least {varies} questions (a lower "
             f"bound: {seeds} seeds tried, more can only find more)")
    if "upstream_seed_pair_share" in rows and rows["upstream_seed_pair_share"].notna().any():
        text += (f", two of its runs agree on {100 * rows['upstream_seed_pair_share'].mean():.1f} % of the questions "
                 f"and kg2rag_code agrees with one on {100 * rows['code_final_seed_share'].mean():.1f} % (estimates "
                 f"from those {seeds} seeds)")
    text += (f"; kg2rag_code's differences from the PYTHONHASHSEED=0 run: {int(counts.get(INPUT, 0))} input "
             f"(hash order), {int(counts.get(BUG, 0))} bug")
    return text[0].upper() + text[1:] + "."
