"""The bridge funnel: does KGIR-RAG's mechanism (paper §2, §3.5, Fig. 6) happen, and where does it break?

For every question with a gold bridge (:mod:`kgir_lib.eval.mechanism.bridges`) and every round ``t`` of a KGIR-RAG
trace, the chain of Fig. 6, each step requiring the ones before it:

0. the question *reached* round ``t``;
1. a *seed matched*: a question entity matched a graph entity (eq. 5; the round's subgraph has a seed);
2. a gold bridge is *in G_Ans*: an entity (head or tail) of a kept triple is the bridge
   (:func:`kgir_lib.eval.mechanism.bridges.entity_matches`: ``equal``, the normalised names are equal; or
   ``contains``, the whole alias inside the name, e.g. "Republic of China" for China). The run's tables report
   the funnel under both rules (column :data:`MATCH`), and its sentence quotes the stricter one;
3. the *rewrite names it*: one of those bridges' aliases occurs as whole words in the normalised
   rewrite ``q'_t`` and not in the question (a malformed rewrite names nothing);
4. *D'_t finds the next hop*: a passage of a bridge named in step 3 is in ``D'_t`` (the rewritten
   question's retrieval, all of its top-k) and not in ``D_t``;
5. the *answer is correct*: EM (SQuAD normalisation, gold aliases) of the method's final answer; in a
   forced-rounds run, of the answer after round ``t`` (``round_answers[t-1]``).

:func:`funnel_table` reports each step's count as a share of all bridge questions and of the previous
step (where the chain breaks most is the smallest "% of previous step"), beside the share that passes
the step on its own and the count whose next-hop passage ``D_t`` already held. Round ``any``: the chain
up to the step holds in at least one round.
:func:`bridge_naming_table` asks step 3 and 4 of the other iterative methods too (IRCoT's reasoning
sentences, ITER-RETGEN's generations, HyDE's hypothetical passage).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import pandas as pd

from ...data import Question
from ..metrics import best_em
from ..stats import mcnemar_exact
from . import round_facts as rf
from .bridges import Bridge, entity_matches, names_bridge

STEPS = ("reached round", "1 seed matched", "2 bridge in G_Ans", "3 rewrite names it", "4 D'_t finds next hop",
         "5 answer correct")
STEP_KEYS = ("reached", "seed", "in_gans", "named", "finds", "correct")  # the trace keys of STEPS, in order
TABLE_COLUMNS = ("dataset", "round", "questions", "step", "n", "% of questions", "% of previous step", "n alone",
                 "% alone", "n next hop already in D_t")  # :func:`funnel_table`'s columns
MATCH = "bridge match"  # the column of a run's funnel naming step 2's rule (bridges.MODES: equal, contains)
STRICT = "equal"        # the rule the funnel's sentence quotes: equal names, no containment
WEAKEST_COLUMNS = ("questions", "breaks at", "passed the step before", "passed it", "% of previous step")
# What the columns of funnel_table and weakest_step mean (shown under the tables in notebooks 04 and 05).
COLUMN_NOTES = {
    "questions": "questions with a gold bridge entity",
    MATCH: "how step 2 matches a G_Ans entity to the bridge: equal names, or a name that contains the bridge",
    "n": "questions passing the chain up to this step (this step and every one before it)",
    "% of questions": "n as a share of the questions with a gold bridge",
    "% of previous step": "n as a share of the step before: where this is smallest, the chain breaks most",
    "n alone": "questions passing this step by itself, whether or not the steps before it held",
    "% alone": "n alone as a share of the questions with a gold bridge",
    "n next hop already in D_t": "of n, questions whose first retrieval D_t already held a next-hop passage "
                                 "(step 4 cannot count them: the rewrite had nothing left to find)",
    "breaks at": "the step with the smallest share of the step before",
    "passed the step before": "questions passing the chain up to the step before it",
    "passed it": "of those, questions passing this step too",
}


# What the columns of bridge_naming_table mean (shown under the table in notebook 07).
NAMING_NOTES = {
    "questions": "questions with a gold bridge entity",
    "% names bridge": "the method's generated text (rewrite, reasoning sentence, generation, hypothetical passage) "
                      "names a gold bridge the question does not",
    "% finds next hop": "a retrieval made with that text brings a next-hop passage the first retrieval lacked",
    "% names and finds": "both in one step",
    "names: McNemar b": "questions whose bridge KGIR-RAG's rewrite names and this method's text does not",
    "names: McNemar c": "questions whose bridge this method's text names and KGIR-RAG's rewrite does not",
    "names: p vs kgir": "exact McNemar test of naming the bridge, this method against KGIR-RAG (kgir) on the same "
                        "questions: only b and c count",
}


def _answer_correct(record: Mapping, t: int) -> bool:
    answers, _ = rf.golds(record)
    ra = rf.trace_of(record).get("round_answers")
    answer = rf.round_answer(record, t) if isinstance(ra, list) else rf.final_answer(record)
    return bool(best_em(answer or "", answers)) if answers else False


def _rewrite_text(rnd: Mapping) -> str:
    rw = rnd.get("rewrite") or {}
    return "" if rw.get("malformed") else str(rw.get("question") or "")


def _finds(bridge: Bridge, found: Sequence[str], before: Sequence[str]) -> bool:
    new = set(found) - set(before)
    return any(p in new for p in bridge.next_pids)


def funnel_steps(record: Mapping, bridges: Sequence[Bridge], t: int, mode: str = "contains") -> dict:
    """One question's funnel at round ``t`` (module docstring): ``chain_<step>`` (the step and every one
    before it) and ``<step>`` (the step alone), plus ``next_hop_in_D_t`` (step 4 could not count)."""
    rs = rf.rounds(record)
    out = {f"chain_{k}": False for k in STEP_KEYS} | {k: False for k in STEP_KEYS} | {"next_hop_in_D_t": False}
    if not 0 < t <= len(rs):
        return out
    rnd = rs[t - 1]
    question = str(rf.trace_of(record).get("question", ""))
    entities = [e for r in rf.gans_rows(rnd) for e in (r[0], r[2])]
    in_gans = [b for b in bridges if any(entity_matches(e, b, mode) for e in entities)]
    rewrite = _rewrite_text(rnd)
    named = [b for b in bridges if names_bridge(rewrite, b, question)]
    D, D2 = rf.d_t(rnd), rf.d_rewrite(rnd)
    chain_named = [b for b in in_gans if b in named]
    alone = {"reached": True, "seed": rf.seed_matched(rnd), "in_gans": bool(in_gans), "named": bool(named),
             "finds": any(_finds(b, D2, D) for b in bridges), "correct": _answer_correct(record, t)}
    chain = {"reached": True, "seed": alone["seed"], "in_gans": alone["seed"] and bool(in_gans),
             "named": alone["seed"] and bool(chain_named)}
    chain["finds"] = chain["named"] and any(_finds(b, D2, D) for b in chain_named)
    chain["correct"] = chain["finds"] and alone["correct"]
    out.update(alone)
    out.update({f"chain_{k}": v for k, v in chain.items()})
    out["next_hop_in_D_t"] = any(p in set(D) for b in bridges for p in b.next_pids)
    return out


def funnel_rows(records: Sequence[Mapping], bridges: Mapping[str, Sequence[Bridge]], mode: str = "contains",
                dataset: str = "") -> pd.DataFrame:
    """:func:`funnel_steps` for every question with a gold bridge and every round up to the longest trace."""
    keep = [r for r in records if bridges.get(rf.qid_of(r))]
    T = max((len(rf.rounds(r)) for r in keep), default=0)
    rows = []
    for r in keep:
        for t in range(1, T + 1):
            rows.append({"dataset": dataset, "qid": rf.qid_of(r), "round": t,
                         **funnel_steps(r, bridges[rf.qid_of(r)], t, mode)})
    cols = ["dataset", "qid", "round", *(f"chain_{k}" for k in STEP_KEYS), *STEP_KEYS, "next_hop_in_D_t"]
    return pd.DataFrame(rows, columns=cols)


def _summary(g: pd.DataFrame, n: int) -> list:
    out, prev = [], n
    for step, k in zip(STEPS, STEP_KEYS):
        c, a = int(g[f"chain_{k}"].sum()), int(g[k].sum())
        out.append({"step": step, "n": c, "% of questions": 100.0 * c / n if n else float("nan"),
                    "% of previous step": 100.0 * c / prev if prev else float("nan"),
                    "n alone": a, "% alone": 100.0 * a / n if n else float("nan"),
                    "n next hop already in D_t": int((g[f"chain_{k}"] & g["next_hop_in_D_t"]).sum())})
        prev = c
    return out


def funnel_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and round (and ``any``), one line a step: how many bridge questions pass the chain up to
    it, as % of the bridge questions and of the previous step; ``alone``: passing the step by itself;
    ``n next hop already in D_t``: of those passing the chain up to the step, how many had a next-hop
    passage in ``D_t`` already (step 4 cannot count them: the rewrite had nothing left to find)."""
    out = []
    for ds, d in rows.groupby("dataset", sort=False):
        n = d["qid"].nunique()
        for t, g in d.groupby("round", sort=True):
            out += [{"dataset": ds, "round": str(t), "questions": n, **s} for s in _summary(g, n)]
        anyr = d.drop(columns=["dataset", "round"]).groupby("qid").any()
        out += [{"dataset": ds, "round": "any", "questions": n, **s} for s in _summary(anyr, n)]
    return pd.DataFrame(out, columns=list(TABLE_COLUMNS))


# Figure drawing (colours, positions, labels): outside the mutation run, which covers the numbers.
# pragma: no mutate start
LEGEND_PT = 10.0  # the legend's font, as large as the tick labels


def plot_funnel(table: pd.DataFrame, round_: str = "any", ax=None, order=None):
    """A funnel bar chart: steps on the y axis (first at the top), % of bridge questions passing the chain,
    one bar a dataset (``round_`` as in :func:`funnel_table`; ``order``: the datasets' order, default the table's).
    Returns the axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    sub = table[table["round"] == str(round_)]
    datasets = list(dict.fromkeys(sub["dataset"]))
    if order is not None:
        datasets = [d for d in order if d in datasets] + [d for d in datasets if d not in set(order)]
    y = np.arange(len(STEPS))
    h = 0.8 / max(len(datasets), 1)
    for i, ds in enumerate(datasets):
        vals = sub[sub["dataset"] == ds].set_index("step").reindex(list(STEPS))["% of questions"]
        n = sub.loc[sub["dataset"] == ds, "questions"]
        label = f"{ds} (n = {int(n.iloc[0])})" if len(n) else ds
        ax.barh(y + i * h, vals.to_numpy(dtype=float), height=h, label=label)
    ax.set_yticks(y + h * (len(datasets) - 1) / 2, labels=list(STEPS))
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of questions with a gold bridge (chain up to the step)")
    ax.set_title("KGIR-RAG bridge funnel, " + ("over all rounds" if str(round_) == "any" else f"round {round_}"))
    ax.legend(loc="lower right", fontsize=LEGEND_PT)  # legible on a 1024-px page (kgir_lib.figures.FIGURE_FITS)
    return ax
# pragma: no mutate end


def weakest_step(table: pd.DataFrame, round_: str = "any") -> pd.DataFrame:
    """Per dataset (and method and bridge match, when the table has them), the step where the chain breaks most:
    the smallest "% of previous step" among steps 1-5 (ties: the earlier step), with its count and its
    predecessor's. A table with no rows (a run without a KGIR-RAG trace) gives an empty table with these columns."""
    keys = [c for c in ("method", MATCH, "dataset") if c in table.columns]
    if table.empty or "round" not in table.columns:
        return pd.DataFrame(columns=[*(keys or ["dataset"]), *WEAKEST_COLUMNS])
    sub = table[(table["round"] == str(round_)) & (table["step"] != STEPS[0])]
    rows = []
    for key, g in sub.groupby(keys, sort=False):
        g = g.reset_index(drop=True)
        i = int(g["% of previous step"].astype(float).fillna(101.0).to_numpy().argmin())
        before = int(g.loc[i - 1, "n"]) if i > 0 else int(g.loc[i, "questions"])
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))),
                     "questions": int(g.loc[i, "questions"]), "breaks at": g.loc[i, "step"],
                     "passed the step before": before, "passed it": int(g.loc[i, "n"]),
                     "% of previous step": float(g.loc[i, "% of previous step"])})
    return pd.DataFrame(rows, columns=[*keys, *WEAKEST_COLUMNS])


def funnel_sentence(table: pd.DataFrame, dataset: str, method: str = "kgir", round_: str = "any") -> str:
    """The funnel of one dataset in words, each step with its count and its share of the step before,
    ending with :func:`weakest_step` (the README and notebook 04 quote it, so the numbers are the table's).

    The chain is the one under the stricter match of step 2 (:data:`STRICT`: equal names); step 2 also gives
    the count when a name containing the bridge counts. A table without the :data:`MATCH` column (written
    before both rules were reported) holds the containment rule only, and the sentence says so."""
    sub = table[(table["dataset"] == dataset) & (table["round"] == str(round_))]
    if "method" in sub.columns:
        sub = sub[sub["method"] == method]
    if sub.empty:
        raise ValueError(f"funnel_sentence: no {method!r} rows for dataset {dataset!r}, round {round_!r}")
    loose = None
    if MATCH in sub.columns:
        loose = sub[sub[MATCH] == "contains"].set_index("step")
        sub = sub[sub[MATCH] == STRICT]
        if sub.empty:
            raise ValueError(f"funnel_sentence: no {STRICT!r} rows for dataset {dataset!r} (column {MATCH!r})")
    g = sub.set_index("step")
    n = {step: int(g.loc[step, "n"]) for step in STEPS}
    share = {step: float(g.loc[step, "% of previous step"]) for step in STEPS[2:]}
    pct = {step: "–" if pd.isna(v) else f"{v:.0f} %" for step, v in share.items()}
    if loose is None:
        rule = "; a name containing the bridge counts: this table has no count for equal names"
    elif STEPS[2] in loose.index:
        rule = f"; {int(loose.loc[STEPS[2], 'n'])} if a name containing the bridge counts"
    else:
        rule = ""
    worst = weakest_step(sub).iloc[0]
    return (f"{dataset}: of the {int(sub['questions'].iloc[0])} questions with a gold bridge, a seed matched on "
            f"{n[STEPS[1]]}; the evidence subgraph holds the bridge on {n[STEPS[2]]} of those ({pct[STEPS[2]]}"
            f"{rule}), the rewrite names it on {n[STEPS[3]]} ({pct[STEPS[3]]}), D'_t finds the next hop on "
            f"{n[STEPS[4]]} ({pct[STEPS[4]]}) and the answer is right on {n[STEPS[5]]} ({pct[STEPS[5]]}). The chain "
            f"breaks most at \"{worst['breaks at']}\": {worst['passed it']} of {worst['passed the step before']}.")


def match_rules_table(table: pd.DataFrame, method: str = "kgir", round_: str = "any") -> pd.DataFrame:
    """The funnel under both matches of step 2 side by side (one row a dataset and step; columns ``n`` and
    ``% of previous step`` under each rule of the :data:`MATCH` column), for one method and round."""
    if table.empty or MATCH not in table.columns:
        return pd.DataFrame()
    sub = table[table["round"] == str(round_)]
    if "method" in sub.columns:
        sub = sub[sub["method"] == method]
    wide = sub.pivot_table(index=["dataset", "step"], columns=MATCH, values=["n", "% of previous step"],
                           sort=False)
    wide.columns = [f"{value} ({rule})" for value, rule in wide.columns]
    order = [f"{v} ({r})" for r in (STRICT, *sorted(set(sub[MATCH]) - {STRICT})) for v in ("n", "% of previous step")]
    return wide[[c for c in order if c in wide.columns]].reset_index()

# ---------------------------------------------------------------------------- the other methods
def method_steps(method: str, record: Mapping, baseline: Optional[Sequence[str]] = None) -> tuple:
    """``(steps, first retrieval)`` of an iterative method's trace: each step is (generated text, the
    retrieval made with it). KGIR-RAG: (rewrite ``q'_t``, ``D'_t``) after ``D_1``; IRCoT: (reasoning
    sentence, its retrieval) after the question's; ITER-RETGEN: (generation of round t, retrieval of
    round t+1) after round 1's; HyDE: (hypothetical passage, its retrieval) after ``baseline`` (HyDE has
    no retrieval with the bare question: pass the question's dense top-k, e.g. KGIR-RAG's ``D_1``)."""
    t = rf.trace_of(record)
    if method.startswith("kgir"):
        return [(_rewrite_text(r), rf.d_rewrite(r)) for r in rf.rounds(record)], rf.d_first(record)
    if method == "ircot":
        rets = [rf.pids(r.get("hits")) for r in t.get("retrievals") or []] or [[]]
        cot = list(t.get("cot") or [])
        return [(s, rets[i + 1] if i + 1 < len(rets) else []) for i, s in enumerate(cot)], rets[0]
    if method == "iter_retgen":
        rs = t.get("rounds") or []
        hits = [rf.pids(r.get("hits")) for r in rs] or [[]]
        return [(str(rs[i].get("generation") or ""), hits[i + 1]) for i in range(len(rs) - 1)], hits[0]
    if method == "hyde":
        return [(str(t.get("hypothetical_passage") or ""), rf.pids(t.get("retrieval")))], baseline
    raise ValueError(f"parameter 'method': no bridge steps for {method!r} (kgir*, ircot, iter_retgen, hyde)")


def naming_row(method: str, record: Mapping, bridges: Sequence[Bridge], baseline: Optional[Sequence[str]] = None,
               question: Optional[Question] = None) -> dict:
    """Whether a method's generated text names a gold bridge (not named by the question), whether a later
    retrieval finds a next-hop passage its first retrieval lacked, both in one step, and EM.

    The question text and gold answers come from ``question`` when given (the baselines' traces do not
    keep them), else from the trace (KGIR-RAG's does)."""
    steps, first = method_steps(method, record, baseline)
    if question is not None:
        text, answers = question.question, tuple(question.answers)
    else:
        text, answers = str(rf.trace_of(record).get("question", "")), rf.golds(record)[0]
    named = any(names_bridge(gen, b, text) for gen, _ in steps for b in bridges)
    if first is None:
        finds = both = float("nan")
    else:
        finds = any(_finds(b, hits, first) for _, hits in steps for b in bridges)
        both = any(names_bridge(gen, b, text) and _finds(b, hits, first) for gen, hits in steps for b in bridges)
    return {"qid": rf.qid_of(record), "names": named, "finds": finds, "names_and_finds": both,
            "EM": float(best_em(rf.final_answer(record), answers)) if answers else 0.0}


def bridge_naming_table(records_by_method: Mapping[str, Sequence[Mapping]], bridges: Mapping[str, Sequence[Bridge]],
                        baseline: Optional[Mapping[str, Sequence[str]]] = None, reference: str = "kgir",
                        dataset: str = "", questions: Optional[Mapping[str, Question]] = None) -> pd.DataFrame:
    """Per method (one dataset): % of bridge questions whose generated text names a bridge, whose later
    retrievals find a next-hop passage, both in one step, EM; and the exact McNemar test of "names" against
    ``reference`` (paired by question; ``b``: only ``reference`` names it, ``c``: only this method).
    ``baseline``: ``{qid: the question's dense top-k}`` for HyDE; ``questions``: ``{qid: Question}``
    (question text and gold answers, which the baselines' traces lack)."""
    def question_row(m: str, r: Mapping) -> dict:
        q = rf.qid_of(r)
        return naming_row(m, r, bridges[q], (baseline or {}).get(q), (questions or {}).get(q))

    per = {m: pd.DataFrame([question_row(m, r) for r in recs if bridges.get(rf.qid_of(r))])
           for m, recs in records_by_method.items()}
    ref = per.get(reference)
    rows = []
    for m, d in per.items():
        if d.empty:
            continue
        row = {"dataset": dataset, "method": m, "questions": len(d), "% names bridge": 100 * d["names"].mean(),
               "% finds next hop": 100 * d["finds"].astype(float).mean(),
               "% names and finds": 100 * d["names_and_finds"].astype(float).mean(), "EM": 100 * d["EM"].mean(),
               "names: McNemar b": None, "names: McNemar c": None, f"names: p vs {reference}": float("nan")}
        if ref is not None and m != reference:
            j = ref.merge(d, on="qid", suffixes=("_ref", ""))
            mc = mcnemar_exact(j["names_ref"].astype(float), j["names"].astype(float))
            row.update({"names: McNemar b": mc.b, "names: McNemar c": mc.c, f"names: p vs {reference}": mc.p})
        rows.append(row)
    return pd.DataFrame(rows)
