"""Per-question agreement between the suite's HippoRAG 2 and upstream's (``benchmarks/peers/``).

Both systems answer the same questions over the same corpus, OpenIE graph, encoder and LLM; this module
compares what each did, question by question, and summarises the agreement rates:

- **passages**: overlap of the top-``k`` passage sets (``|A ∩ B| / k``), same set, same order; Recall@2/5
  of each (the suite's :func:`kgir_lib.metrics.recall_at_k`, HippoRAG's definition);
- **facts**: the linked candidates (query-to-triple top 5) and the facts the recognition-memory filter
  kept, compared as sets of :func:`fact_key` (upstream's ``text_processing`` folding, spaces collapsed);
- **answers**: EM / F1 of each (the suite's SQuAD rules), exact string agreement (after trimming) and
  agreement after SQuAD normalisation; on the questions both systems answered (else NaN, left out of
  the means, so both sides' EM / F1 are over the same questions).

Upstream's passages arrive as text (``"title\\ntext"``) and are mapped to the suite's pids by content
(:func:`pids_of_docs`). :func:`rescore_question` scores a new suite side against upstream's per-question scores
as an earlier report recorded them (when upstream cannot run again); :func:`crosscheck_sentence` words a
report's rows for the README. Nothing here calls a model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from ..data import Corpus
from ..baselines.hippo_graph import upstream_fold
from .metrics import best_em, best_f1, normalize_answer, recall_at_k


def phrase_key(text: str) -> str:
    """Upstream HippoRAG's phrase folding (:func:`~kgir_lib.baselines.hippo_graph.upstream_fold`) with runs
    of spaces collapsed, so both systems' phrases compare."""
    return " ".join(upstream_fold(text).split())


def fact_key(fact: Sequence[str]) -> tuple:
    """A fact ``(subject, predicate, object)`` as a comparable key (each part through :func:`phrase_key`)."""
    if len(fact) != 3:
        raise ValueError(f"a fact has 3 parts (subject, predicate, object), got {len(fact)}: {fact!r}")
    return tuple(phrase_key(x) for x in fact)


def pids_of_docs(docs: Sequence[str], corpus: Corpus) -> list:
    """The suite pid of each upstream passage text (``"title\\ntext"``); ``KeyError`` naming an unknown one."""
    by_content = {p.content: p.pid for p in corpus.passages}
    out = []
    for d in docs:
        if d not in by_content:
            raise KeyError(f"upstream passage not in the corpus: {d[:80]!r}")
        out.append(by_content[d])
    return out


def top_overlap(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """``|top-k(a) ∩ top-k(b)| / k`` (k > 0)."""
    if k <= 0:
        raise ValueError(f"parameter 'k' must be positive, got {k}")
    return len(set(a[:k]) & set(b[:k])) / k


def set_agreement(a: Iterable[tuple], b: Iterable[tuple]) -> float:
    """Jaccard similarity of two sets of keys; two empty sets agree fully (1.0)."""
    sa, sb = set(a), set(b)
    return 1.0 if not sa and not sb else len(sa & sb) / len(sa | sb)


@dataclass(frozen=True)
class Side:
    """What one system did on one question: its ranked pids, linked and kept facts, answer."""

    ranked: Sequence[str]
    candidates: Sequence[Sequence[str]]
    kept: Sequence[Sequence[str]]
    answer: Optional[str]       # None: not answered (the answer measures are NaN)
    fallback: bool = False


def compare_question(suite: Side, upstream: Side, golds: Sequence[str], gold_pids: Sequence[str],
                     k: int = 5, injected: Optional[Sequence[str]] = None) -> dict:
    """One row of agreement measures for one question (see the module docstring).

    ``injected``: upstream's ranking when seeded with the suite's kept facts (graph + PPR given the
    same facts); its top-``k`` overlap with the suite's ranking is ``injected_top{k}``.
    """
    cs, cu = {fact_key(f) for f in suite.candidates}, {fact_key(f) for f in upstream.candidates}
    ks, ku = {fact_key(f) for f in suite.kept}, {fact_key(f) for f in upstream.kept}
    row = {f"top{k}_overlap": top_overlap(suite.ranked, upstream.ranked, k),
           f"top{k}_same_set": set(suite.ranked[:k]) == set(upstream.ranked[:k]),
           f"top{k}_same_order": list(suite.ranked[:k]) == list(upstream.ranked[:k]),
           "candidates_jaccard": set_agreement(cs, cu), "candidates_same": cs == cu,
           "kept_jaccard": set_agreement(ks, ku), "kept_same": ks == ku,
           "n_kept_suite": len(ks), "n_kept_upstream": len(ku),
           "all_kept_suite": bool(cs) and ks == cs, "all_kept_upstream": bool(cu) and ku == cu,
           "fallback_suite": bool(suite.fallback), "fallback_upstream": bool(upstream.fallback),
           "answer_suite": suite.answer, "answer_upstream": upstream.answer}
    both = suite.answer is not None and upstream.answer is not None
    answer_s, answer_u = suite.answer or "", upstream.answer or ""  # (read only when both answered)
    row["answer_exact_same"] = answer_s.strip() == answer_u.strip() if both else np.nan
    row["answer_norm_same"] = (normalize_answer(answer_s) == normalize_answer(answer_u)
                               if both else np.nan)
    for name, side, answer in (("suite", suite, answer_s), ("upstream", upstream, answer_u)):
        row[f"EM_{name}"] = 100.0 * best_em(answer, golds) if both else np.nan
        row[f"F1_{name}"] = 100.0 * best_f1(answer, golds) if both else np.nan
        for r in (2, 5):
            row[f"R@{r}_{name}"] = 100.0 * recall_at_k(side.ranked, gold_pids, r)
    for r in (2, 5):
        row[f"R@{r}_same"] = row[f"R@{r}_suite"] == row[f"R@{r}_upstream"]
    if injected is not None:
        row[f"injected_top{k}"] = top_overlap(suite.ranked, injected, k)
        row[f"injected_top{k}_same_order"] = list(suite.ranked[:k]) == list(injected[:k])
    return row


# Upstream's per-question scores as a report's CSV keeps them (:func:`compare_question`'s ``*_upstream`` columns):
# enough to score a new suite side against a finished upstream run without upstream's environment.
UPSTREAM_SCORES = ("answer_upstream", "EM_upstream", "F1_upstream", "R@2_upstream", "R@5_upstream",
                   "n_kept_upstream", "all_kept_upstream", "fallback_upstream")


def rescore_question(suite: Side, upstream: Mapping, golds: Sequence[str], gold_pids: Sequence[str]) -> dict:
    """One agreement row of the suite's side (as this code computes it) against upstream's recorded scores.

    ``upstream`` holds :data:`UPSTREAM_SCORES` for the question (a row of an earlier report's per-question CSV:
    upstream's answer, or NaN when it did not answer; its EM, F1, Recall@2/5; how many facts its filter kept,
    whether it kept every candidate, whether it fell back to dense retrieval). Upstream's ranked passages and
    facts are not in such a row, so the measures that need them (top-k overlap, fact agreement) are left out;
    the rest are :func:`compare_question`'s, with the same rules (EM / F1 and answer agreement on questions
    both systems answered; Recall@k of the suite's ranking with the suite's :func:`recall_at_k`).
    """
    missing = [c for c in UPSTREAM_SCORES if c not in upstream]
    if missing:
        raise KeyError(f"upstream's recorded scores lack {missing}")
    answer_up = upstream["answer_upstream"]
    answer_up = None if answer_up is None or (isinstance(answer_up, float) and np.isnan(answer_up)) else str(answer_up)
    cs, ks = {fact_key(f) for f in suite.candidates}, {fact_key(f) for f in suite.kept}
    both = suite.answer is not None and answer_up is not None
    answer_s, answer_u = suite.answer or "", answer_up or ""  # (read only when both answered)
    row = {"n_kept_suite": len(ks), "n_kept_upstream": int(upstream["n_kept_upstream"]),
           "all_kept_suite": bool(cs) and ks == cs, "all_kept_upstream": bool(upstream["all_kept_upstream"]),
           "fallback_suite": bool(suite.fallback), "fallback_upstream": bool(upstream["fallback_upstream"]),
           "answer_suite": suite.answer, "answer_upstream": answer_up,
           "answer_exact_same": answer_s.strip() == answer_u.strip() if both else np.nan,
           "answer_norm_same": normalize_answer(answer_s) == normalize_answer(answer_u) if both else np.nan,
           "EM_suite": 100.0 * best_em(answer_s, golds) if both else np.nan,
           "F1_suite": 100.0 * best_f1(answer_s, golds) if both else np.nan,
           "EM_upstream": float(upstream["EM_upstream"]) if both else np.nan,
           "F1_upstream": float(upstream["F1_upstream"]) if both else np.nan}
    for r in (2, 5):
        row[f"R@{r}_suite"] = 100.0 * recall_at_k(suite.ranked, gold_pids, r)
        row[f"R@{r}_upstream"] = float(upstream[f"R@{r}_upstream"])
        row[f"R@{r}_same"] = row[f"R@{r}_suite"] == row[f"R@{r}_upstream"]
    return row


def seeded_agreement(suite_seeded: Sequence[str], upstream_ranked: Sequence[str], k: int = 5) -> dict:
    """The suite's ranking when seeded with upstream's kept facts against upstream's own ranking."""
    return {f"seeded_top{k}": top_overlap(suite_seeded, upstream_ranked, k),
            f"seeded_top{k}_same_order": list(suite_seeded[:k]) == list(upstream_ranked[:k])}


def summary(rows: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """The agreement table: one line a measure, ``value`` (a rate in %, or a mean) and ``n`` questions.

    Rates of boolean columns are percentages of questions; EM, F1, Recall are means of each side.
    """
    out = []

    def add(label: str, col: str, scale: float = 100.0, mask: Optional[pd.Series] = None) -> None:
        if col not in rows:
            return
        vals = rows.loc[mask, col] if mask is not None else rows[col]
        vals = vals.dropna().astype(float)
        out.append({"measure": label, "value": round(float(vals.mean()) * scale, 1) if len(vals) else np.nan,
                     "n": int(len(vals))})
    add(f"top-{k} passage overlap, mean %", f"top{k}_overlap")
    add(f"top-{k} same passage set, % of questions", f"top{k}_same_set")
    add(f"top-{k} same order, % of questions", f"top{k}_same_order")
    add(f"top-{k} overlap given the suite's kept facts (upstream graph + PPR), mean %", f"injected_top{k}")
    add(f"top-{k} same order given the suite's kept facts, % of questions", f"injected_top{k}_same_order")
    add(f"top-{k} overlap, the suite's graph + PPR given upstream's kept facts, mean %", f"seeded_top{k}")
    add(f"top-{k} same order, the suite's graph + PPR given upstream's kept facts, % of questions",
        f"seeded_top{k}_same_order")
    for r in (2, 5):
        add(f"Recall@{r} equal, % of questions", f"R@{r}_same")
    add("linked candidate facts identical, % of questions", "candidates_same")
    add("linked candidate facts, mean Jaccard %", "candidates_jaccard")
    add("linked candidate facts identical, this code's linking, % of questions", "links_now_same")
    add("kept facts identical, % of questions", "kept_same")
    add("kept facts, mean Jaccard %", "kept_jaccard")
    if "candidates_same" in rows:
        add("kept facts identical, of the questions with identical candidates, %", "kept_same",
            mask=rows["candidates_same"].astype(bool))
    add("answer exact string agreement, %", "answer_exact_same")
    add("answer agreement after SQuAD normalisation, %", "answer_norm_same")
    return pd.DataFrame(out)


def side_by_side(rows: pd.DataFrame) -> pd.DataFrame:
    """Each system's means over the same questions: EM, F1 (questions both answered), Recall@2/5, kept
    facts a question, the share of questions whose filter kept every candidate (%), and the share that fell
    back to dense retrieval (%)."""
    out = []
    for label, col, scale in (("EM", "EM", 1.0), ("F1", "F1", 1.0), ("Recall@2", "R@2", 1.0),
                              ("Recall@5", "R@5", 1.0), ("kept facts a question", "n_kept", 1.0),
                              ("every candidate kept, % of questions", "all_kept", 100.0),
                              ("dense fallback (no fact kept), %", "fallback", 100.0)):
        line: dict = {"measure": label}
        for name in ("suite", "upstream"):
            vals = rows[f"{col}_{name}"].dropna().astype(float)
            line[name] = round(float(vals.mean()) * scale, 1) if len(vals) else np.nan
        line["n"] = int(len(vals))
        out.append(line)
    return pd.DataFrame(out)


def crosscheck_sentence(rows: pd.DataFrame) -> str:
    """The cross-check in one sentence, from a report's per-question rows (``results/benchmarks/
    peers_hipporag2.csv``): each side's Recall@5 and EM on the same questions, how many questions have the
    same Recall@5, and, where the rows hold them, the graph + PPR agreement given the same kept facts in both
    directions and the linking check, with the run that measured them when they were carried
    (``upstream_record``). The README quotes it, so its numbers are the file's."""
    need = ["R@5_suite", "R@5_upstream", "R@5_same", "EM_suite", "EM_upstream"]
    missing = [c for c in need if c not in rows.columns]
    if missing or rows.empty:
        raise ValueError(f"crosscheck_sentence: the rows lack {missing or 'every question'}")
    n = len(rows)
    answered = rows.dropna(subset=["EM_suite", "EM_upstream"])

    def count(col: str) -> int:
        return int(rows[col].astype(bool).sum())
    text = (f"the suite's HippoRAG 2 reaches Recall@5 {rows['R@5_suite'].mean():.1f} against upstream's "
            f"{rows['R@5_upstream'].mean():.1f} on the same {n} questions, with the same Recall@5 on "
            f"{count('R@5_same')} of them (EM {answered['EM_suite'].mean():.1f} against "
            f"{answered['EM_upstream'].mean():.1f} on the {len(answered)} both answered)")
    seeded = []
    if "seeded_top5_same_order" in rows and rows["seeded_top5_same_order"].notna().any():
        seeded.append(f"the suite's graph + PPR seeded with upstream's kept facts returns upstream's top-5 "
                      f"passages in upstream's order on {count('seeded_top5_same_order')} of {n} questions")
    if "injected_top5_same_order" in rows and rows["injected_top5_same_order"].notna().any():
        seeded.append(f"upstream's seeded with the suite's returns the suite's on "
                      f"{count('injected_top5_same_order')}")
    if seeded:
        text += "; given the same kept facts, " + " and ".join(seeded)
    linked = "links_now_same" in rows and rows["links_now_same"].notna().any()
    if linked:
        text += (f"; the suite's query-to-fact linking finds upstream's top-5 candidate facts on "
                 f"{count('links_now_same')}")
    if (seeded or linked) and "upstream_record" in rows and rows["upstream_record"].notna().any():
        what = " and ".join(w for w, on in (("seeded runs", seeded), ("linking check", linked)) if on)
        text += f" ({what} as measured by {rows['upstream_record'].dropna().iloc[0]}, not re-run)"
    return text[0].upper() + text[1:] + "."


def graph_agreement(suite_edges: Mapping[tuple, float], upstream_edges: Mapping[tuple, float],
                    tol: float = 1e-9) -> dict:
    """Phrase-phrase edges of the two graphs keyed by :func:`phrase_key` pairs (weights of edges whose
    keys fold together are summed): counts, shared pairs, and shared pairs of equal weight."""
    def fold(edges: Mapping[tuple, float]) -> dict:
        out: dict = {}
        for (a, b), w in edges.items():
            ka, kb = phrase_key(a), phrase_key(b)
            if ka == kb:
                continue
            key = (min(ka, kb), max(ka, kb))
            out[key] = out.get(key, 0.0) + float(w)
        return out
    s, u = fold(suite_edges), fold(upstream_edges)
    shared = set(s) & set(u)
    return {"suite_edges": len(s), "upstream_edges": len(u), "shared": len(shared),
            "only_suite": len(set(s) - set(u)), "only_upstream": len(set(u) - set(s)),
            "shared_equal_weight": sum(abs(s[key] - u[key]) <= tol for key in shared)}
