"""Per-question agreement between the suite's IRCoT / ITER-RETGEN and FlashRAG's pipelines (``benchmarks/peers/``).

Both sides answer the same questions over the same corpus, dense retriever (the suite's all-MiniLM-L6-v2 index,
top-k of the profile) and LLM (the local profile's 1.5B GGUF, greedy); what differs is each implementation's
prompt, loop, list merging and answer parsing. Per method and question (:func:`compare_question`):

- **answers**: EM and F1 of each side (the suite's SQuAD rules for both), and agreement after SQuAD normalisation;
- **retrieval**: Recall@5 of each side's final list, the top-5 overlap (``|A ∩ B| / 5``), same set, same order.
  FlashRAG's final list is taken in FlashRAG's own order (what its evaluator reads); for IRCoT, whose merged list
  FlashRAG sorts by ascending score, the same pool best first is reported beside it (``*_best_first``);
- **iterations**: LLM generations of the loop (IRCoT: thoughts; ITER-RETGEN: rounds) and retrievals per question.

:func:`paired_tests` tests each side's EM (exact McNemar), F1 and Recall@5 (exact sign-flip) per method, one
declared family per method (:data:`FAMILY`) with Holm inside it, effect = suite − FlashRAG with a paired bootstrap
95 % interval. Nothing here calls a model.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..methods.context import interleave
from .bootstrap import paired_bootstrap
from .metrics import best_em, best_f1, normalize_answer, recall_at_k
from .stats import holm, mcnemar_exact, sign_flip_test

RECORD_METHODS = ("ircot", "iter_retgen")   # the methods both sides run (a record's ``method``)
# FlashRAG's IRCoT run again with the earlier thoughts kept in its prompt through the OpenAI client (a shim,
# ``benchmarks/peers/flashrag_pipelines.py``): its rows are IRCoT rows under this method name
IRCOT_KEPT = "ircot_kept"
METHOD_NAMES = {"ircot": "IRCoT", "iter_retgen": "ITER-RETGEN", IRCOT_KEPT: "IRCoT, earlier thoughts kept (shim)"}
# The claim family of each method, declared before the run: the three paired tests suite vs FlashRAG on the same
# questions, Holm-adjusted inside the family (one family a method).
FAMILY = ("EM", "F1", "R@5")
IRCOT_ANSWER_MARK = "So the answer is:"   # the marker FlashRAG's IRCoT stops on and parses after


def suite_record(method: str, question, output) -> dict:
    """One question of the suite's IRCoT or ITER-RETGEN (a :class:`~kgir_lib.methods.base.MethodOutput`) as a
    compact record: answer, final ranked list, reader context, generations of the loop and retrievals."""
    t = output.trace
    rec = {"qid": output.qid, "question": question.question, "answer": output.answer,
           "ranked_pids": list(output.ranked_pids), "context_pids": list(t["context_pids"]),
           "reader_raw": t.get("reader_raw", "")}
    if method == "ircot":
        rec.update(iterations=len(t["raw_steps"]), retrievals=len(t["retrievals"]), stop=t["stop"],
                   cot=t["cot"], raw_steps=t["raw_steps"], cot_answer=t["cot_answer"],
                   searches=[{"query": r["query"], "hits": r["hits"]} for r in t["retrievals"]])
    elif method == "iter_retgen":
        rec.update(iterations=len(t["rounds"]), retrievals=len(t["rounds"]),
                   generations=[r["generation"] for r in t["rounds"]],
                   searches=[{"query": r["query"], "hits": r["hits"]} for r in t["rounds"]])
    else:
        raise ValueError(f"method {method!r}: expected one of {list(RECORD_METHODS)}")
    return rec


def best_first(final: Sequence[Sequence]) -> list:
    """The pids of a scored list ``[[pid, score], ...]`` by descending score (ties keep list order)."""
    order = sorted(range(len(final)), key=lambda i: -float(final[i][1]))
    return [final[i][0] for i in order]


def flashrag_side(method: str, record: Mapping) -> dict:
    """FlashRAG's record of one question (``flashrag_pipelines.py``) as ``answer``, ``ranked`` (FlashRAG's final
    list in its own order), ``iterations``, ``retrievals``, and for IRCoT ``ranked_best_first``."""
    if method == "ircot":
        final = record["final"]
        return {"answer": record["pred"], "ranked": [p for p, _ in final], "ranked_best_first": best_first(final),
                "iterations": int(record["iterations"]), "retrievals": len(record["searches"]),
                "marked": any(IRCOT_ANSWER_MARK in t for t in record["thoughts"])}
    # (a list of one retrieval stays best first; FlashRAG sorts ascending only when it merges a second one)
    if method == "iter_retgen":
        return {"answer": record["pred"], "ranked": list(record["final"]), "iterations": int(record["iterations"]),
                "retrievals": len(record["rounds"])}
    raise ValueError(f"method {method!r}: expected one of {list(RECORD_METHODS)}")


def top_overlap(a: Sequence[str], b: Sequence[str], k: int = 5) -> float:
    """``|top-k(a) ∩ top-k(b)| / k``."""
    if k <= 0:
        raise ValueError(f"parameter 'k' must be positive, got {k}")
    return len(set(a[:k]) & set(b[:k])) / k


def compare_question(suite: Mapping, flashrag: Mapping, golds: Sequence[str], gold_pids: Sequence[str],
                     k: int = 5) -> dict:
    """One row of measures for one question: ``suite`` is a :func:`suite_record`, ``flashrag`` a
    :func:`flashrag_side` (module docstring). EM / F1 / Recall are in % (0 or 100 for EM)."""
    s_rank, f_rank = list(suite["ranked_pids"]), list(flashrag["ranked"])
    s_ans, f_ans = suite["answer"] or "", flashrag["answer"] or ""
    row = {"EM_suite": 100.0 * best_em(s_ans, golds), "EM_flashrag": 100.0 * best_em(f_ans, golds),
           "F1_suite": 100.0 * best_f1(s_ans, golds), "F1_flashrag": 100.0 * best_f1(f_ans, golds),
           f"R@{k}_suite": 100.0 * recall_at_k(s_rank, gold_pids, k),
           f"R@{k}_flashrag": 100.0 * recall_at_k(f_rank, gold_pids, k),
           f"top{k}_overlap": top_overlap(s_rank, f_rank, k),
           f"top{k}_same_set": set(s_rank[:k]) == set(f_rank[:k]),
           f"top{k}_same_order": s_rank[:k] == f_rank[:k],
           "answer_suite": s_ans, "answer_flashrag": f_ans,
           "answer_norm_same": normalize_answer(s_ans) == normalize_answer(f_ans),
           "iterations_suite": int(suite["iterations"]), "iterations_flashrag": int(flashrag["iterations"]),
           "retrievals_suite": int(suite["retrievals"]), "retrievals_flashrag": int(flashrag["retrievals"]),
           "answer_words_suite": len(s_ans.split()), "answer_words_flashrag": len(f_ans.split())}
    if "ranked_best_first" in flashrag:
        bf = list(flashrag["ranked_best_first"])
        row[f"R@{k}_flashrag_best_first"] = 100.0 * recall_at_k(bf, gold_pids, k)
        row[f"top{k}_overlap_best_first"] = top_overlap(s_rank, bf, k)
    if "marked" in flashrag:
        row["flashrag_answer_marked"] = bool(flashrag["marked"])
        row["flashrag_list_merged"] = int(flashrag["retrievals"]) > 1
    return row


def paired_tests(rows: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per method and metric of :data:`FAMILY`: each side's mean, the effect suite − FlashRAG with its paired
    bootstrap 95 % interval, the exact test (McNemar for EM, with b = suite-only and c = FlashRAG-only correct
    questions; sign-flip for F1 and Recall@5) and its Holm-adjusted p inside the method's family. ``rows`` has a
    ``method`` column and :func:`compare_question`'s columns; questions with a NaN metric are left out."""
    out = []
    for method, grp in rows.groupby("method", sort=False):
        lines = []
        for metric in FAMILY:
            a, b = grp[f"{metric}_suite"].to_numpy(float), grp[f"{metric}_flashrag"].to_numpy(float)
            ok = ~(np.isnan(a) | np.isnan(b))
            a, b = a[ok], b[ok]
            diff, lo, hi = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
            line = {"method": METHOD_NAMES.get(method, method), "metric": metric, "n": int(a.size),
                    "suite": round(float(a.mean()), 1), "flashrag": round(float(b.mean()), 1),
                    "suite − flashrag": round(diff, 1), "95% CI": f"[{lo:.1f}, {hi:.1f}]"}
            if metric == "EM":
                t = mcnemar_exact(a, b)
                line.update(test="exact McNemar", detail=f"suite only {t.b}, FlashRAG only {t.c}", p=t.p)
            else:
                line.update(test="exact sign-flip", detail=f"{int((a != b).sum())} questions differ",
                            p=sign_flip_test(a - b))
            lines.append(line)
        adj = holm([x["p"] for x in lines])
        for x, p in zip(lines, adj):
            x["p"] = round(float(x["p"]), 4)
            x["p (Holm)"] = round(float(p), 4)
        out += lines
    return pd.DataFrame(out)


def agreement(rows: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Per method: top-k agreement of the final lists and of the answers (column ``both``), and each side's
    iterations, retrievals and answer length per question, one line a measure."""
    out = []
    for method, g in rows.groupby("method", sort=False):
        name = METHOD_NAMES.get(method, method)

        def add(measure: str, suite=None, flashrag=None, both=None, *,
                method_name: str = name, n: int = len(g)) -> None:  # this method's name and n, bound now
            out.append({"method": method_name, "measure": measure, "suite": suite, "flashrag": flashrag, "both": both,
                        "n": n})
        add(f"final top-{k} overlap (FlashRAG's list in its order), mean %",
            both=round(100 * g[f"top{k}_overlap"].mean(), 1))
        add(f"final top-{k} same set, % of questions", both=round(100 * g[f"top{k}_same_set"].mean(), 1))
        add(f"final top-{k} same order, % of questions", both=round(100 * g[f"top{k}_same_order"].mean(), 1))
        if f"top{k}_overlap_best_first" in g and g[f"top{k}_overlap_best_first"].notna().any():
            add("FlashRAG's list sorted ascending (a second retrieval merged), % of questions",
                flashrag=round(100 * g["flashrag_list_merged"].astype(bool).mean(), 1))
            add(f"final top-{k} overlap, FlashRAG's pool best first, mean %",
                both=round(100 * g[f"top{k}_overlap_best_first"].mean(), 1))
            add(f"Recall@{k} of FlashRAG's pool best first",
                flashrag=round(float(g[f"R@{k}_flashrag_best_first"].mean()), 1))
        add("answers equal after SQuAD normalisation, %", both=round(100 * g["answer_norm_same"].mean(), 1))
        same = g[g[f"top{k}_same_set"].astype(bool)]  # the same passages retrieved: F1 apart is the reading's
        if len(same):
            add(f"F1 on the {len(same)} questions with the same final top-{k} set, mean",
                round(float(same["F1_suite"].mean()), 1), round(float(same["F1_flashrag"].mean()), 1))
        add("LLM generations of the loop a question, mean", round(g["iterations_suite"].mean(), 2),
            round(g["iterations_flashrag"].mean(), 2))
        add("  generations: questions", distribution(g["iterations_suite"]), distribution(g["iterations_flashrag"]))
        add("retrievals a question, mean", round(g["retrievals_suite"].mean(), 2),
            round(g["retrievals_flashrag"].mean(), 2))
        add("answer words a question, mean (as parsed)", round(g["answer_words_suite"].mean(), 1),
            round(g["answer_words_flashrag"].mean(), 1))
        if "flashrag_answer_marked" in g and g["flashrag_answer_marked"].notna().any():
            add(f"thoughts reaching '{IRCOT_ANSWER_MARK}', % of questions",
                flashrag=round(100 * g["flashrag_answer_marked"].astype(bool).mean(), 1))
    return pd.DataFrame(out)


MERGE_RULES = ("FlashRAG: best score a passage, ascending", "best score a passage, descending",
               "suite: round-robin by rank")


def merged_lists(searches: Sequence[Mapping]) -> dict:
    """One question's retrievals (``[{"query", "hits": [[pid, score], ...]}, ...]``, in order) merged three ways
    (:data:`MERGE_RULES`): FlashRAG's IRCoT (a passage keeps its best score; once a second retrieval is merged the
    pool is sorted ascending, stable in first-seen order; one retrieval stays as retrieved), the same pool best
    first, and the suite's round-robin (:func:`kgir_lib.methods.context.interleave`)."""
    score: dict = {}
    for s in searches:
        for pid, sc in s["hits"]:
            score[pid] = max(score[pid], float(sc)) if pid in score else float(sc)
    pool = list(score.items())
    ascending = ([p for p, _ in sorted(pool, key=lambda x: x[1])] if len(searches) > 1
                 else [p for p, _ in searches[0]["hits"]] if searches else [])
    return {MERGE_RULES[0]: ascending, MERGE_RULES[1]: [p for p, _ in sorted(pool, key=lambda x: -x[1])],
            MERGE_RULES[2]: interleave([[p for p, _ in s["hits"]] for s in searches])}


def merge_rule_table(retrievals: Mapping[str, Sequence[tuple[str, Sequence[Mapping]]]],
                     gold: Mapping[str, Sequence[str]], k: int = 5) -> pd.DataFrame:
    """Recall@``k`` of each merge rule on the same recorded retrievals, no LLM call: one line a side (``retrievals``:
    side -> each question's searches) and rule, over that side's questions with more than one retrieval (where the
    rules can differ); ``gold``: qid -> gold pids, the searches lists keyed by ``qid``."""
    out = []
    for side, per_q in retrievals.items():
        multi = [(qid, s) for qid, s in per_q if len(s) > 1 and len(gold.get(qid, ()))]
        for rule in MERGE_RULES:
            vals = [100.0 * recall_at_k(merged_lists(s)[rule], gold[qid], k) for qid, s in multi]
            out.append({"retrievals of": side, "merge rule": rule, "questions": len(multi),
                        f"Recall@{k}": round(float(np.mean(vals)), 1) if vals else np.nan})
    return pd.DataFrame(out)


def reading_split(rows: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> tuple:
    """ITER-RETGEN's F1 gap split into the context and the rest (``benchmarks/peers/flashrag_differences.md``, item
    5). ``rows``: :func:`compare_question` rows with ``EM_suite_reread`` and ``F1_suite_reread``, the suite's last
    round read again over the same final retrieval shown as FlashRAG shows it (every retrieved passage, whole).
    Returns ``(table, test)``: EM and F1 of the suite as run, of the re-read and of FlashRAG, over the ITER-RETGEN
    questions with a re-read and over those whose final top-5 sets are the same; and the one declared test, the
    re-read's F1 against the suite's as run (exact sign-flip; a family of one, so no Holm) with its paired
    bootstrap 95 % interval."""
    g = rows[rows["method"] == "iter_retgen"]
    g = g[g["F1_suite_reread"].notna()] if "F1_suite_reread" in g else g.iloc[0:0]
    if g.empty:
        raise ValueError("reading_split: no ITER-RETGEN row has a re-read answer (F1_suite_reread)")
    same = g["top5_same_set"].astype(bool).to_numpy()
    reads = {"the suite as run: 5 passages of at most 600 characters": "suite",
             "the suite's reader over every retrieved passage, whole (FlashRAG's context)": "suite_reread",
             "FlashRAG": "flashrag"}
    table = pd.DataFrame([{"ITER-RETGEN read by": name, "n": int(len(g)), "EM": round(float(g[f"EM_{c}"].mean()), 1),
                           "F1": round(float(g[f"F1_{c}"].mean()), 1), "n same top-5 set": int(same.sum()),
                           "F1, same top-5 set": (round(float(g[f"F1_{c}"].to_numpy(float)[same].mean()), 1)
                                                  if same.any() else None)}
                          for name, c in reads.items()])
    reread, base = g["F1_suite_reread"].to_numpy(float), g["F1_suite"].to_numpy(float)
    diff, lo, hi = paired_bootstrap(reread, base, n_boot=n_boot, seed=seed)
    test = {"n": int(len(g)), "F1 re-read": round(float(reread.mean()), 1), "F1 as run": round(float(base.mean()), 1),
            "re-read − as run": round(diff, 1), "95% CI": f"[{lo:.1f}, {hi:.1f}]",
            "questions differ": int((reread != base).sum()), "p": round(sign_flip_test(reread - base), 4)}
    return table, test


def reading_sentence(rows: pd.DataFrame) -> str:
    """ITER-RETGEN's F1 gap and its split in one sentence (:func:`reading_split`), from the report's per-question
    rows (``results/benchmarks/peers_flashrag.csv``): the context's share is a point estimate with its interval,
    and the rest of the gap is named, not measured. The results page quotes it, so its numbers are the file's."""
    _, test = reading_split(rows)
    g = rows[rows["method"] == "iter_retgen"]
    g = g[g["F1_suite_reread"].notna()]
    flash, suite = float(g["F1_flashrag"].mean()), float(g["F1_suite"].mean())
    same = int(g["top5_same_set"].astype(bool).sum())
    return (f"ITER-RETGEN's F1 is {flash:.1f} (FlashRAG) against {suite:.1f} (suite) on the same {len(g)} questions; "
            f"the suite's reader over FlashRAG's context (every retrieved passage, whole) reaches "
            f"{test['F1 re-read']:.1f}, {test['re-read − as run']:+.1f} (95 % paired bootstrap interval "
            f"{test['95% CI']}, exact sign-flip {p_clause(test['p'])}): a point estimate of the context's share of "
            f"the {flash - suite:.1f}-point gap. The rest is not measured, and besides FlashRAG's bare-answer prompt "
            f"it holds different final retrievals (the same top-5 set on {same} of {len(g)} questions), the message "
            f"roles, the prompt's layout and FlashRAG's unparsed answer.")


def distribution(values: pd.Series) -> str:
    """``"1: 60, 2: 25, 3: 15"``: how many questions took each value."""
    counts = values.astype(int).value_counts().sort_index()
    return ", ".join(f"{int(v)}: {int(c)}" for v, c in counts.items())


def p_value(p: float) -> str:
    """A p-value as the report and its sentence show it: :func:`paired_tests` keeps 4 decimals, so a p below 0.0001
    reads "< 0.0001", never 0 (a sign-flip p is at least 1 / (1 + the assignments drawn))."""
    return "< 0.0001" if p < 0.0001 else f"{p:.2g}"


def p_clause(p: float) -> str:
    """``p = 0.28``, or ``p < 0.0001`` (:func:`p_value`): a p as a sentence says it."""
    shown = p_value(p)
    return f"p {shown}" if shown.startswith("<") else f"p = {shown}"


def crosscheck_sentence(rows: pd.DataFrame) -> str:
    """The cross-check in one sentence, from the report's per-question rows (``results/benchmarks/
    peers_flashrag.csv``): per method, each side's EM and Recall@5 on the same questions with the exact p of each
    difference (:func:`paired_tests`; for IRCoT FlashRAG's Recall@5 as it ranks, tested, and with its pool best
    first, untested), and on how many questions the final top-5 passage sets are the same. The
    results page quotes it, so its numbers are the file's."""
    need = {"method", "EM_suite", "EM_flashrag", "F1_suite", "F1_flashrag", "R@5_suite", "R@5_flashrag",
            "top5_same_set"}
    if not need <= set(rows.columns) or rows.empty:
        raise ValueError(f"crosscheck_sentence: the rows lack {sorted(need - set(rows.columns)) or 'every question'}")
    tests = paired_tests(rows).set_index(["method", "metric"])
    parts = []
    for method, g in rows.groupby("method", sort=False):
        name = METHOD_NAMES.get(method, method)
        em, r5 = tests.loc[(name, "EM")], tests.loc[(name, "R@5")]
        best = g["R@5_flashrag_best_first"] if "R@5_flashrag_best_first" in g else pd.Series(dtype=float)
        r5_text = f"{r5['flashrag']:.1f} (sign-flip {p_clause(r5['p'])})"
        if best.notna().any():
            r5_text = (f"{r5['flashrag']:.1f} as FlashRAG ranks it (sign-flip {p_clause(r5['p'])}) and "
                       f"{best.mean():.1f} with its pool best first")
        parts.append(f"{name}: EM {em['suite']:.1f} (suite) against {em['flashrag']:.1f} (FlashRAG) on the same "
                     f"{int(em['n'])} questions (exact McNemar {p_clause(em['p'])}), Recall@5 {r5['suite']:.1f} "
                     f"against {r5_text}, the same final top-5 passages on "
                     f"{int(g['top5_same_set'].astype(bool).sum())} of {len(g)} questions")
    return "; ".join(parts) + "."
