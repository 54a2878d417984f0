"""Algorithm 1 measured step by step over a dataset's questions (notebook 03, §2.2).

- :func:`rebuild_subgraph`: steps 4-7 again with other settings on the same ``D_q``, ``G_q`` and
  NER output (no LLM call), its edge weights remembered per batch;
- :func:`compare_readings`: both readings of ``G_tmp`` side by side;
- :func:`subgraph_row`: the sizes of every step for one question and where its gold passages survive;
- :func:`summarise_steps`: what each step keeps over the rows of :func:`subgraph_row`.

The algorithm itself is :mod:`kgir_lib.kgir.subgraph`.
"""
from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd

from ..config.fields import GTMP_READINGS
from ..kg import Triple
from ..kgir.subgraph import EvidenceSubgraph, WeightFn, evidence_subgraph, question_weight_fn, resolve_weighting


_REBUILD_WEIGHTS: dict = {}  # rebuilds of one question that weigh the same triples reuse the same weights


def _memo_weights(ws, weighting: str, weight_fn: WeightFn) -> WeightFn:
    """``weight_fn`` remembered per (workspace, weighting, question, triples in order): a rebuild that weighs
    exactly the batch an earlier rebuild weighed gets the very same numbers without encoding them again."""
    def memo(question: str, triples: Sequence[Triple]) -> list:
        key = (ws.dataset.name, id(ws.dense), weighting, question, tuple(triples))
        if key not in _REBUILD_WEIGHTS:
            if len(_REBUILD_WEIGHTS) >= 4096:
                _REBUILD_WEIGHTS.clear()
            _REBUILD_WEIGHTS[key] = list(weight_fn(question, triples))
        return _REBUILD_WEIGHTS[key]
    return memo


def rebuild_subgraph(ws, sub: EvidenceSubgraph, *, n: Optional[int] = None, threshold: Optional[float] = None,
                     weighting: Optional[str] = None, reading: Optional[str] = None,
                     method: Optional[str] = None) -> EvidenceSubgraph:
    """Steps 4-7 again with other settings, on the same ``D_q``, ``G_q`` and NER output (no LLM call)."""
    n = n or ws.cfg.ngram_n
    threshold = ws.cfg.ngram_threshold if threshold is None else threshold
    weighting = resolve_weighting(weighting or sub.weighting, ws.reranker)
    weight_fn = _memo_weights(ws, weighting, question_weight_fn(ws, sub.retrieved, weighting))
    return evidence_subgraph(sub.question, sub.retrieved, sub.G_q, sub.llm_entities, weight_fn=weight_fn, n=n,
                             threshold=threshold, weighting=weighting, reading=reading or sub.reading,
                             method=method or ws.cfg.match_method)


def compare_readings(ws, subs: Sequence[EvidenceSubgraph], gold: Sequence[Sequence[str]],
                     readings: Sequence[str] = GTMP_READINGS) -> pd.DataFrame:
    """Both ``G_tmp`` readings side by side, one row a reading, over ``subs``:

    ``G_tmp``, ``component triples`` and ``G_Ans`` (sums), ``MST removal %`` (pruned / component
    triples, pooled), ``gold in D_q`` and ``gold in G_Ans`` (gold passages that are the source of a
    triple), and ``gold survival %`` = gold in G_Ans / gold in D_q. No LLM call.
    """
    rows = []
    for reading in readings:
        tot = {"G_tmp": 0, "component triples": 0, "G_Ans": 0, "gold in D_q": 0, "gold in G_Ans": 0}
        for sub, g in zip(subs, gold):
            alt = rebuild_subgraph(ws, sub, reading=reading)
            gset, in_dq = set(g), {p for p, _ in alt.retrieved}
            tot["G_tmp"] += len(alt.G_tmp)
            tot["component triples"] += len(alt.kept) + len(alt.pruned)
            tot["G_Ans"] += len(alt.kept)
            tot["gold in D_q"] += len(gset & in_dq)
            tot["gold in G_Ans"] += len(gset & {t.pid for t in alt.kept})
        comp = tot["component triples"]
        rows.append({"reading": reading, **tot,
                     "MST removal %": 100.0 * (comp - tot["G_Ans"]) / comp if comp else float("nan"),
                     "gold survival %": (100.0 * tot["gold in G_Ans"] / tot["gold in D_q"]
                                         if tot["gold in D_q"] else float("nan"))})
    return pd.DataFrame(rows).set_index("reading")


def subgraph_row(sub: EvidenceSubgraph, gold_pids: Sequence[str] = ()) -> dict:
    """Sizes of every step of Algorithm 1 for one question, and where its gold passages survive.

    ``gold_in_*`` count gold passages among the retrieved passages (``D_q``) and
    among the source passages of ``G_tmp`` and ``G_Ans`` edges.
    """
    gold = set(gold_pids)
    src_tmp = {t.pid for t in sub.G_tmp}
    src_ans = {t.pid for t in sub.kept}
    return {
        "D_q": len(sub.retrieved), "G_q": len(sub.G_q), "E_q": len(sub.E_q), "fallback": sub.used_fallback,
        "seeds": len(sub.seeds), "G_tmp": len(sub.G_tmp), "components": len(sub.components),
        "G_Ans": len(sub.kept), "pruned": len(sub.pruned), "seeded": bool(sub.seeds),
        "gold": len(gold), "gold_in_D_q": len(gold & {p for p, _ in sub.retrieved}),
        "gold_in_G_tmp": len(gold & src_tmp), "gold_in_G_Ans": len(gold & src_ans),
    }


def summarise_steps(df: pd.DataFrame) -> pd.Series:
    """What each step of Algorithm 1 keeps over rows of :func:`subgraph_row` (a DataFrame, one question a row):
    mean sizes of G_q, G_tmp and G_Ans, the share of tree edges the maximum spanning tree removes (eq. 7), the
    seed-match rate (eq. 5), the triples kept from G_q, empty G_Ans, NER fallbacks, and how many gold passages
    reach D_q and survive into G_tmp and G_Ans (notebook 03 §3)."""
    g_dq = df["gold_in_D_q"].sum()
    return pd.Series({
        "questions": len(df), "mean |G_q|": df["G_q"].mean(), "mean |G_tmp|": df["G_tmp"].mean(),
        "mean |G_Ans|": df["G_Ans"].mean(),
        "MST removal %": 100 * df["pruned"].sum() / max(df["G_Ans"].sum() + df["pruned"].sum(), 1),
        "seed-match %": 100 * df["seeded"].mean(),
        "G_q -> G_Ans kept %": 100 * df["G_Ans"].sum() / max(df["G_q"].sum(), 1),
        "empty G_Ans %": 100 * (df["G_Ans"] == 0).mean(), "NER fallback %": 100 * df["fallback"].mean(),
        "gold in D_q %": 100 * g_dq / max(df["gold"].sum(), 1),
        "gold survival G_tmp %": 100 * df["gold_in_G_tmp"].sum() / max(g_dq, 1),
        "gold survival G_Ans %": 100 * df["gold_in_G_Ans"].sum() / max(g_dq, 1),
    })
