"""Notebook 05's first screen: every method ranked, one row a paper's claim about it, with this run's verdicts."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .family import CANNOT_TELL, CONTRADICTS, NOT_RUN, REFERENCE, SUPPORTS
from .headline import _number

SCOREBOARD_CLAIM = "paper's claim (KGIR-RAG against this method)"
SCOREBOARD_VERDICT = "verdict of this run (exact test, Holm)"


def _rank(values: pd.DataFrame) -> pd.Series:
    """Rank 1 = best by the first column, ties broken by the second; equal pairs share a rank."""
    order = values.apply(tuple, axis=1).map(lambda t: tuple(-np.inf if np.isnan(x) else x for x in t))
    return order.rank(method="min", ascending=False).astype("Int64")


# Methods that hand the shared reader the same passages in the same order as Naive RAG (the encoder's most similar
# passages), so that the reader, answering the same prompts, gives the same answers: label (or its start) -> why.
SAME_CONTEXT_AS_NAIVE_RAG = {
    "Naive RAG": "the encoder's most similar passages, read by the shared reader",
    "Dense": "the same ranked list (Naive RAG is Dense plus the reader)",
    "KG²RAG w/o organisation": "its seed passages in similarity order, which are Naive RAG's",
    "LightRAG (naive": "its naive mode's vector search over the same encoder, the same passages and reader prompts",
}


def _verdict_text(part: pd.DataFrame) -> str:
    """One claim's rows as one line per dataset (``pooled`` last), each verdict labelled with its metric and
    followed by KGIR-RAG minus the method and the Holm-adjusted p, in the claim's metric order, e.g.
    "hotpotqa: EM cannot tell (-7.1, p 1.0); F1 cannot tell (-4.7, p 1.0)"."""
    lines = []
    for dataset, rows in part.groupby("dataset", sort=False):
        name = "pooled" if dataset == "all" else dataset
        if (rows["reading"] == NOT_RUN).all():
            lines.append(f"{name}: {NOT_RUN}")
            continue
        lines.append(f"{name}: " + "; ".join(
            f"{r['metric']} {r['reading']} ({_number(r['diff'], '+.1f')}, p {_number(r['p (Holm)'], '.2g')})"
            for r in rows.to_dict("records")))
    return "\n".join(lines)


def scoreboard(scores: pd.DataFrame, table: pd.DataFrame, datasets: Optional[Sequence[str]] = None,
               reference: str = REFERENCE, metrics: Sequence[str] = ("EM", "F1")) -> pd.DataFrame:
    """Notebook 05's first screen: every method of the run ranked by EM (then F1) per dataset, one row a paper's
    claim about it, with this run's verdicts beside it.

    The means are Tables 4/5's (:func:`kgir_lib.eval.evaluate.summary_table` of the same ``scores``); the claims
    and verdicts are ``table`` (:func:`claims_table`, the table the README's :func:`claims_headline` renders).
    Index ``(method, SCOREBOARD_CLAIM)``: a method with two claims has two rows (its scores on both), one without
    any has one ("none"). Columns ``(dataset, "rank" | metric)``, then ``(SCOREBOARD_VERDICT, "")``: one line a
    dataset and pooled, each verdict labelled with its metric, KGIR-RAG minus the method and the Holm-adjusted p.
    Rows: methods by mean rank over the datasets (best first), ties in the run's order; a method's claims in the
    table's order."""
    from ..evaluate import summary_table

    if datasets is None:
        datasets = list(dict.fromkeys(scores["dataset"]))
    means = summary_table(scores, tuple(metrics), label="ours", datasets=datasets)
    cols: dict = {}
    for d in datasets:
        cols[(d, "rank")] = _rank(means[[("ours", d, m) for m in metrics]])
        for m in metrics:
            cols[(d, m)] = means[("ours", d, m)].astype(float)
    claims_of: dict[str, list[tuple[str, str]]] = {}
    for (name, other), part in table.groupby(["claim", "compared with"], sort=False):
        claims_of.setdefault(other, []).append((f"{name} ({' / '.join(dict.fromkeys(part['metric']))})",
                                                _verdict_text(part)))
    per_method = pd.DataFrame(cols, index=means.index)
    mean_rank = per_method[[(d, "rank") for d in datasets]].astype(float).mean(axis=1)
    order = sorted(range(len(per_method)), key=lambda i: (mean_rank.iloc[i], i))
    rows, keys = [], []
    for m in per_method.index[order]:
        said = ([("the method every claim is about", "")] if m == reference else claims_of.get(m, [("none", "")]))
        for claim, verdict in said:  # one row a claim: a method with two claims has two rows
            rows.append({**per_method.loc[m].to_dict(), (SCOREBOARD_VERDICT, ""): verdict})
            keys.append((m, claim))
    out = pd.DataFrame(rows, index=pd.MultiIndex.from_tuples(keys, names=["method", SCOREBOARD_CLAIM]),
                       columns=[*cols, (SCOREBOARD_VERDICT, "")])
    out.columns = pd.MultiIndex.from_tuples(out.columns, names=["dataset", ""])
    for d in datasets:
        out[(d, "rank")] = out[(d, "rank")].astype("Int64")
    return out


def scoreboard_sentence(board: pd.DataFrame, table: pd.DataFrame, reference: str = REFERENCE) -> str:
    """The answer of :func:`scoreboard` in words: where ``reference`` ranks on each dataset, how many claim rows
    the exact tests decide each way, and the smallest EM difference the run could detect (its MDE)."""
    datasets = [d for d, what in board.columns if what == "rank"]
    methods = board.groupby(level="method", sort=False).head(1).droplevel(SCOREBOARD_CLAIM)  # one row a method
    if reference not in methods.index:
        return f"{reference} was not run: no claim can be read."
    row = methods.loc[reference]
    ranks = "; ".join(f"{row[(d, 'rank')]} of {int(methods[(d, 'rank')].notna().sum())} on {d} (EM "
                      f"{_number(row[(d, 'EM')], '.1f')}, F1 {_number(row[(d, 'F1')], '.1f')})" for d in datasets)
    tested = table[table["reading"] != NOT_RUN]
    counts = tested["reading"].value_counts()
    mde_column = next(c for c in table.columns if str(c).startswith("MDE"))  # its label may name α and power
    em = tested.loc[(tested["metric"] == "EM") & (tested["dataset"] != "all"), mde_column].astype(float)
    mde = em[np.isfinite(em)]
    sure = (f" Differences in EM smaller than {_number(mde.min(), '.0f')}-{_number(mde.max(), '.0f')} points cannot "
            f"be detected with these questions (MDE, 80 % power), so {CANNOT_TELL!r} is no evidence against the "
            f"paper." if len(mde) else
            f" With these questions no EM difference, however large, could reach significance (MDE ∞), so "
            f"{CANNOT_TELL!r} is no evidence against the paper." if len(em) else "")
    k = table["claim"].nunique()
    return (f"{reference} ranks {ranks} by EM. Of the {len(tested)} tests of the paper's {k} claim{'s' * (k != 1)}, "
            f"the verdict is {SUPPORTS!r} on {int(counts.get(SUPPORTS, 0))}, {CONTRADICTS!r} on "
            f"{int(counts.get(CONTRADICTS, 0))} and {CANNOT_TELL!r} on {int(counts.get(CANNOT_TELL, 0))}." + sure)


def _same_context_reason(method: str) -> Optional[str]:
    return next((why for start, why in SAME_CONTEXT_AS_NAIVE_RAG.items() if method.startswith(start)), None)


def _listing(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _shared_context(method: str, known: str, contexts: Optional[pd.DataFrame]) -> Optional[str]:
    """Why ``method`` scores as ``known`` (a method of :data:`SAME_CONTEXT_AS_NAIVE_RAG`), from ``contexts``
    (:attr:`kgir_lib.eval.evaluate.SuiteResult.contexts`): on how many questions it handed the shared reader
    ``known``'s passages in ``known``'s order, and how the other questions scored. None without the traces of both."""
    if contexts is None or contexts.empty:
        return None
    cols = ["dataset", "qid", "context", "EM", "F1"]
    mine, theirs = (contexts.loc[contexts["method"] == m, cols] for m in (method, known))
    pairs = mine.merge(theirs, on=["dataset", "qid"], suffixes=("", "_known"))
    if pairs.empty or pairs["context"].isna().any() or pairs["context_known"].isna().any():
        return None
    same = pairs["context"] == pairs["context_known"]
    n, k = len(pairs), int(same.sum())
    why = (f"it handed the shared reader {known}'s passages in {known}'s order on "
           + (f"every one of the {n} questions" if k == n else f"{k} of the {n} questions"))
    if k == n:
        return why
    other = pairs[~same]
    alike = int(((other["EM"] == other["EM_known"]) & (other["F1"] == other["F1_known"])).sum())
    rest = n - k
    if alike == rest:
        return why + (f", and on the other {rest} its answer{'s' * (rest != 1)} scored what {known}'s did "
                      f"(EM and F1)")
    return why + f"; the other {rest} score differently, and their differences cancel in the means"


def identical_scores_note(board: pd.DataFrame, contexts: Optional[pd.DataFrame] = None) -> str:
    """The note under :func:`scoreboard`: which methods score identically on every dataset and metric of the board,
    and why, where the reason is known (:data:`SAME_CONTEXT_AS_NAIVE_RAG`: they hand the shared reader Naive RAG's
    passages in Naive RAG's order, so the reader gives the same answers); any other method in the tie, or any other
    tie, is said to score the same on these questions, and, given the run's reader ``contexts``
    (:attr:`kgir_lib.eval.evaluate.SuiteResult.contexts`), on how many questions a method tied with them read the
    same passages. Empty when no two methods score alike."""
    scored = [c for c in board.columns if c[1] not in ("rank", "")]
    methods = board.groupby(level="method", sort=False).head(1).droplevel(SCOREBOARD_CLAIM)[scored]
    groups: dict[tuple, list[str]] = {}
    for method, values in methods.iterrows():
        key = tuple("nan" if pd.isna(v) else float(v) for v in values)
        if not all(k == "nan" for k in key):
            groups.setdefault(key, []).append(str(method))
    notes = []
    for names in (g for g in groups.values() if len(g) > 1):
        known = [(n, _same_context_reason(n)) for n in names if _same_context_reason(n)]
        rest = [n for n in names if not _same_context_reason(n)]
        if len(known) < 2:
            notes.append(f"{_listing(names)} score identically on these questions.")
            continue
        notes.append(f"{_listing([n for n, _ in known])} score identically because they hand the shared reader the "
                     "same passages in the same order, so it gives the same answers: "
                     + "; ".join(f"{n}, {r}" for n, r in known) + ".")
        ref = next((n for n, _ in known if n == "Naive RAG"), known[0][0])  # the method the others copy
        why = {n: _shared_context(n, ref, contexts) for n in rest}
        unexplained = [n for n in rest if why[n] is None]
        notes += [f"{n} scores the same: {why[n]}." for n in rest if why[n] is not None]
        if unexplained:
            notes.append(f"{_listing(unexplained)} score{'s' * (len(unexplained) == 1)} the same on these "
                         "questions.")
    return " ".join(notes)
