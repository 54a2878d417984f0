"""The paper's claims, read off a run with exact paired tests and a correction for multiplicity.

KGIR-RAG claims (§3.3, §3.4, Table 7) that its rewrite raises Recall@k, that the evidence subgraph, the
reflection and the rewrite each add accuracy, and that it answers multi-hop questions better than IRCoT,
KG²RAG and HippoRAG 2. Each claim is a comparison of KGIR-RAG with one other method on the same questions.

**Families, declared before any run.** Each paper claim (:data:`PAPER_CLAIMS`) is one family: its tests
are every (dataset, metric) row the run has for it, the pooled ``all`` rows included. The p-values of a
family are adjusted with Holm's step-down procedure (:func:`kgir_lib.eval.stats.holm`), so the chance of any
false "supports" or "contradicts" within a claim stays at ``ALPHA``.

**The verdict comes from the adjusted exact test** (:mod:`kgir_lib.eval.stats`): EM by the exact McNemar test,
F1 and Recall@k by the paired sign-flip permutation test. ``supports`` when the adjusted p is below
``ALPHA`` and KGIR-RAG is ahead; ``contradicts`` when it is below and KGIR-RAG is behind; ``cannot tell``
otherwise. The paired percentile bootstrap interval (:func:`kgir_lib.eval.bootstrap.paired_bootstrap`) stays in
the table as the effect size's interval; it does not decide.

**Minimum detectable effect** (``MDE``): the smallest difference this many questions detect with ``POWER``
(80 %) power at the family's first Holm level (``ALPHA`` / family size, 0.05/6 for a family of two metrics on
two datasets and their pooled rows): for EM from the run's own discordance rate, by the exact McNemar test
(:func:`kgir_lib.eval.stats.mde_mcnemar`), for F1 and recall from the spread of the per-question differences
(:func:`kgir_lib.eval.stats.mde_paired`). The column says both (:func:`mde_label`: "MDE (α = 0.05/6, power
0.8)"). Beside the paper's Table 7 drop it says whether a run this size could have seen the published effect
at all.

The paper's own number for a comparison sits beside ours where the paper states it: Table 7's ablation
drops (MuSiQue, Qwen2.5-72B), as KGIR-RAG minus the variant, on the MuSiQue rows only
(:data:`kgir_lib.report.KGIR_ABLATION_DATASETS`). The paper prints no numbers as text for the recall
claim or for KGIR-RAG against IRCoT, KG²RAG and HippoRAG 2, so those cells stay empty.

Questions the prompts were tuned on can be left out with :func:`drop_questions`: a robustness check
reported beside the main reading, never in its place.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from ..data import load_dataset, tuning_questions
from ..report import KGIR_ABLATION_DATASETS, KGIR_ABLATION_DROPS
from .bootstrap import dataset_groups, paired_bootstrap, paired_scores
from .stats import holm, mcnemar_exact, mde_mcnemar, mde_paired, sign_flip_test

SUPPORTS, CONTRADICTS, CANNOT_TELL, NOT_RUN = "supports", "contradicts", "cannot tell", "not run"
REFERENCE = "KGIR-RAG"
ALPHA = 0.05
POWER = 0.8
PAPER_COLUMN = "paper: KGIR-RAG minus other (Table 7, MuSiQue, Qwen2.5-72B)"
BINARY_METRICS = ("EM",)
# What the columns of claims_table and scoreboard mean, for the notebook's notes under a table.
COLUMN_NOTES = {
    "diff": "KGIR-RAG minus the compared method, in points",
    "CI lo": "paired bootstrap 95 % interval of the difference (the effect size; it does not decide)",
    "CI hi": "paired bootstrap 95 % interval of the difference (the effect size; it does not decide)",
    "discordant": "EM: questions only KGIR-RAG got right / only the other did (McNemar's b / c); F1 and recall: "
                  "questions whose scores differ",
    "p": "exact paired test: McNemar for EM, sign-flip permutation for F1 and recall",
    "p (Holm)": "p adjusted by Holm's procedure within the claim's family (its datasets, metrics and pooled rows)",
    "MDE": f"minimum detectable effect: the smallest difference these questions detect with {100 * POWER:.0f} % "
           f"power at the family's first Holm level (∞: no difference could)",
    "reading": f"the verdict: 'supports' / 'contradicts' when the adjusted p is below {ALPHA} with KGIR-RAG ahead / "
               f"behind, else 'cannot tell'",
}


@dataclass(frozen=True)
class Claim:
    """One paper claim: KGIR-RAG beats ``other`` on ``metrics`` (higher is better for each). One family.

    ``also``: further methods the same claim is read against, in the same family (KG²RAG as its authors' code
    runs it, beside the paper-following KG²RAG): every (method, dataset, metric) test of the claim is adjusted
    together, declared before the run."""

    name: str
    other: str
    metrics: tuple
    paper: Mapping[str, float] = field(default_factory=dict)  # metric -> KGIR-RAG minus other, as published
    paper_datasets: tuple = ()  # the datasets the published numbers were measured on
    also: tuple = ()

    @property
    def others(self) -> tuple:
        """Every method the claim is read against: ``other``, then ``also``."""
        return (self.other, *self.also)


def _ablation(variant: str, what: str) -> Claim:
    em, f1 = KGIR_ABLATION_DROPS[variant]  # the paper's drops: variant minus full, so negative
    return Claim(f"the {what} adds accuracy (Table 7)", f"KGIR-RAG {variant}", ("EM", "F1"),
                 {"EM": -em, "F1": -f1}, KGIR_ABLATION_DATASETS)


PAPER_CLAIMS: tuple = (
    Claim("the rewrite raises recall", "KGIR-RAG w/o rewrite", ("R@2", "R@5")),
    _ablation("w/o subgraph", "evidence subgraph"),
    _ablation("w/o reflection", "reflection"),
    _ablation("w/o rewrite", "rewrite"),
    Claim("KGIR-RAG ahead of IRCoT", "IRCoT", ("EM", "F1")),
    Claim("KGIR-RAG ahead of KG²RAG", "KG²RAG", ("EM", "F1"), also=("KG²RAG (authors' code)",)),
    Claim("KGIR-RAG ahead of HippoRAG 2", "HippoRAG 2", ("EM", "F1")),
)


def verdict(diff: float, p_adjusted: float, alpha: float = ALPHA) -> str:
    """``supports`` / ``contradicts`` when the family-adjusted exact p is below ``alpha`` (by the sign of
    KGIR-RAG minus the other), else ``cannot tell``."""
    if np.isnan(p_adjusted) or p_adjusted >= alpha or diff == 0:
        return CANNOT_TELL
    return SUPPORTS if diff > 0 else CONTRADICTS


def exact_test(a: np.ndarray, b: np.ndarray, metric: str) -> dict:
    """The exact paired test of ``a`` against ``b`` for ``metric``: ``{"test", "p", "discordant"}`` (EM:
    McNemar, with "b/c" the questions only KGIR-RAG / only the other got right; else the sign-flip test,
    with the number of questions whose scores differ)."""
    if metric in BINARY_METRICS:
        t = mcnemar_exact(a, b)
        return {"test": "McNemar", "p": t.p, "discordant": f"{t.b}/{t.c}"}
    return {"test": "sign-flip", "p": sign_flip_test(a - b), "discordant": str(int((a != b).sum()))}


def minimum_detectable(a: np.ndarray, b: np.ndarray, metric: str, alpha: float) -> float:
    """The MDE (module docstring) of a paired comparison of ``a`` and ``b``, in the metric's points."""
    n = a.size
    if metric in BINARY_METRICS:
        discordance = float((a != b).mean())
        return 100.0 * mde_mcnemar(n, discordance, alpha, POWER)
    sd = float(np.std(a - b, ddof=1)) if n > 1 else float("nan")
    return mde_paired(sd, n, alpha, POWER)


def drop_questions(scores: pd.DataFrame, exclude: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """``scores`` without the questions ``exclude[dataset]`` (e.g. the questions prompts were tuned on)."""
    keep = np.ones(len(scores), dtype=bool)
    for dataset, qids in exclude.items():
        keep &= ~((scores["dataset"] == dataset) & scores["qid"].isin(set(qids))).to_numpy()
    return scores[keep]


def tuned_questions(cfg, datasets: Iterable[str] = ("musique_train",)) -> dict:
    """{dataset: qids} of the prompt-tuning questions (:func:`kgir_lib.data.tuning_questions`, with the
    profile's seed) for each of ``datasets`` the profile evaluates: the reading is also given without them."""
    return {d: [q.qid for q in tuning_questions(load_dataset(d, cfg.data_path).questions, seed=cfg.seed)]
            for d in datasets if d in cfg.datasets}


def mde_condition(alpha: float, power: float, family_sizes: Iterable[int]) -> str:
    """The level and power of the MDE: ``"α = 0.05/6, power 0.8"`` when every family has 6 tests (the first
    Holm level of each), ``"α = 0.05/tests in its family, power 0.8"`` when the sizes differ."""
    sizes = sorted({int(k) for k in family_sizes if k})
    if sizes == [1]:
        level = f"{alpha:g}"
    elif len(sizes) == 1:
        level = f"{alpha:g}/{sizes[0]}"
    else:  # families of different sizes, or none tested
        level = f"{alpha:g}/tests in its family"
    return f"α = {level}, power {power:g}"


def mde_label(alpha: float, power: float, family_sizes: Iterable[int]) -> str:
    """The MDE column's header (:func:`mde_condition` in brackets), so the table says what was computed."""
    return f"MDE ({mde_condition(alpha, power, family_sizes)})"


def mde_column(table: pd.DataFrame) -> str:
    """The name of a claims table's MDE column (``MDE (...)``, or ``MDE`` in a table written before its header
    said the level and power)."""
    found = [c for c in table.columns if c == "MDE" or str(c).startswith("MDE (")]
    if len(found) != 1:
        raise ValueError(f"claims table: expected one MDE column, found {found}")
    return found[0]


def table_mde_condition(table: pd.DataFrame) -> str:
    """The MDE's level and power as a claims table states them: from its column header, else (a table written
    before the header said so) from :data:`ALPHA`, :data:`POWER` and the size of its families (tested rows a
    claim), which is how that table's MDE was computed."""
    col = mde_column(table)
    if col != "MDE":
        return col[len("MDE ("):-1]
    sizes = table[table["n"] > 0].groupby("claim").size()
    return mde_condition(ALPHA, POWER, sizes)


def _row(claim: Claim, other: str, dataset: str, metric: str, reference: str) -> dict:
    return {"claim": claim.name, "dataset": dataset, "compared with": other, "metric": metric, "n": 0,
            reference: np.nan, "other": np.nan, "diff": np.nan, "CI lo": np.nan, "CI hi": np.nan, "test": "",
            "discordant": "", "p": np.nan, "p (Holm)": np.nan, "MDE": np.nan, "reading": NOT_RUN,
            PAPER_COLUMN: claim.paper.get(metric, np.nan) if dataset in claim.paper_datasets else np.nan}


def claims_table(scores: pd.DataFrame, claims: Sequence[Claim] = PAPER_CLAIMS, reference: str = REFERENCE,
                 n_boot: int = 2000, seed: int = 0, pooled: bool = True, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per (claim, compared method, dataset, metric): our means, KGIR-RAG minus the other with its paired bootstrap
    95 % interval, the exact test and its p, the p adjusted within the claim's family (Holm), the minimum
    detectable effect (column :func:`mde_label`, e.g. "MDE (α = 0.05/6, power 0.8)"), the verdict, and the
    paper's difference where the paper states it.

    ``scores`` has one row per (method, dataset, qid) with the metric columns (``evaluate.score``). Only
    questions both methods answered are paired; a metric that is NaN for a question (recall without gold
    passages) leaves that question out. A claim whose method is missing from a dataset gets ``not run`` rows.
    Rows ``all`` pool the datasets over (dataset, question) pairs.
    """
    missing = [c for c in ("method", "dataset", "qid") if c not in scores.columns]
    if missing:
        raise ValueError(f"claims_table: scores lack columns {missing}")
    families, sizes = [], []
    for claim in claims:
        rows, pairs = [], []
        for other in claim.others:
            for dataset, df in dataset_groups(scores, pooled):
                for m in claim.metrics:
                    row = _row(claim, other, dataset, m, reference)
                    a, b = paired_scores(df, reference, other, m)
                    if a.size:
                        diff, lo, hi = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
                        row.update({"n": a.size, reference: float(a.mean()), "other": float(b.mean()), "diff": diff,
                                    "CI lo": lo, "CI hi": hi, **exact_test(a, b, m)})
                    rows.append(row)
                    pairs.append((a, b, m))
        tested = [i for i, r in enumerate(rows) if r["n"]]
        sizes.append(len(tested))
        adjusted = holm([rows[i]["p"] for i in tested])
        for i, p_adj in zip(tested, adjusted):
            a, b, m = pairs[i]
            rows[i].update({"p (Holm)": float(p_adj), "reading": verdict(rows[i]["diff"], p_adj, alpha),
                            "MDE": minimum_detectable(a, b, m, alpha / len(tested))})
        families.extend(rows)
    return pd.DataFrame(families).rename(columns={"MDE": mde_label(alpha, POWER, sizes)})


def _fmt(x: float) -> str:
    return f"{x:+.1f}"


def _cell(r: dict) -> str:
    if r["reading"] == NOT_RUN:
        return f"{r['metric']} not run"
    return (f"{r['metric']} {r['reading']} ({_fmt(r['diff'])} [{_fmt(r['CI lo'])}, {_fmt(r['CI hi'])}], "
            f"p(Holm)={r['p (Holm)']:.2g}, n={r['n']})")


def claims_summary(table: pd.DataFrame, reference: str = REFERENCE) -> str:
    """The reading in words, one Markdown bullet per claim: each dataset's verdict per metric, with
    KGIR-RAG minus the other, its interval, the adjusted p and n, and the paper's number where it has one."""
    lines = []
    for (name, _), part in table.groupby(["claim", "compared with"], sort=False):
        bits = [f"{dataset}: " + "; ".join(_cell(r) for r in rows.to_dict("records"))
                for dataset, rows in part.groupby("dataset", sort=False)]
        paper = part.dropna(subset=[PAPER_COLUMN]).drop_duplicates("metric")  # the rows that hold one (MuSiQue's)
        tail = ""
        if len(paper):
            tail = " Paper (MuSiQue, Qwen2.5-72B): " + ", ".join(
                f"{m} {_fmt(v)}" for m, v in zip(paper["metric"], paper[PAPER_COLUMN])) + "."
        lines.append(f"- **{name}** ({reference} minus {part['compared with'].iloc[0]}). "
                     + " | ".join(bits) + "." + tail)
    return "\n".join(lines)


def _number(x: float, fmt: str) -> str:
    if np.isnan(x) or np.isinf(x):
        return "–" if np.isnan(x) else "∞"
    text = format(x, fmt)
    return "1.0" if text == "1" else text  # a p that rounds to one


def _headline_cell(rows: pd.DataFrame, mde: str) -> str:
    """One dataset's rows of one claim: the differences, then (adjusted p; MDE, from column ``mde``), then any
    verdict that is not "cannot tell", in bold."""
    if (rows["reading"] == NOT_RUN).all():
        return "not run"
    diffs = " / ".join(_number(d, "+.1f") for d in rows["diff"])
    ps = " / ".join(_number(p, ".2g") for p in rows["p (Holm)"])
    mdes = " / ".join(_number(m, ".1f") for m in rows[mde])
    cell = f"{diffs} (p {ps}; MDE {mdes})"
    decided = [f"{m} {r}" for m, r in zip(rows["metric"], rows["reading"]) if r in (SUPPORTS, CONTRADICTS)]
    return f"**{cell}: {', '.join(decided)}**" if decided else cell


def claims_headline(table: pd.DataFrame, datasets: Optional[Sequence[str]] = None,
                    claims: Sequence[Claim] = PAPER_CLAIMS) -> str:
    """The claims table (:func:`claims_table`) as one Markdown row per claim and one column per dataset:
    KGIR-RAG minus the other per metric, the Holm-adjusted exact p, the minimum detectable effect, and the
    verdict where the test decides one. The paper's Table 7 difference (from ``claims``), where it states
    one, follows the claim's name. ``datasets``: the columns, by default every dataset of the table but the
    pooled ``all``. This is the table the README's headline shows."""
    published = {c.name: c.paper for c in claims}
    if datasets is None:
        datasets = [d for d in dict.fromkeys(table["dataset"]) if d != "all"]
    absent = [d for d in datasets if d not in set(table["dataset"])]
    if absent:
        raise ValueError(f"claims_headline: the claims table has no rows for {absent}")
    header = ["paper claim"] + [f"{d} (n = {int(table.loc[table['dataset'] == d, 'n'].max())})" for d in datasets]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    firsts = {c.name: c.other for c in claims}
    for (name, other), part in table.groupby(["claim", "compared with"], sort=False):
        metrics = list(dict.fromkeys(part["metric"]))
        against = "" if firsts.get(name, other) == other else f": against {other}"
        label = f"{name.replace(' (Table 7)', '')}{against}, {' / '.join(metrics)}"
        paper = [published.get(name, {}).get(m) for m in metrics]
        if all(v is not None for v in paper):
            label += " (Table 7: " + " / ".join(_fmt(v) for v in paper) + ")"
        cells = [_headline_cell(part[part["dataset"] == d], mde_column(table)) for d in datasets]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the first screen of notebook 05
SCOREBOARD_CLAIM = "paper's claim (KGIR-RAG against this method)"
SCOREBOARD_VERDICT = "verdict of this run (exact test, Holm)"


def _rank(values: pd.DataFrame) -> pd.Series:
    """Rank 1 = best by the first column, ties broken by the second; equal pairs share a rank."""
    order = values.apply(tuple, axis=1).map(lambda t: tuple(-np.inf if np.isnan(x) else x for x in t))
    return order.rank(method="min", ascending=False).astype("Int64")


def _verdict_text(part: pd.DataFrame) -> str:
    """One claim's rows as two lines per dataset (``pooled`` last): the verdict(s), then KGIR-RAG minus the method
    per metric (in the claim's metric order) and the Holm-adjusted p, e.g. "hotpotqa: cannot tell" and
    "  -7.1 / -4.7 (p 1.0 / 1.0)"."""
    lines = []
    for dataset, rows in part.groupby("dataset", sort=False):
        name = "pooled" if dataset == "all" else dataset
        if (rows["reading"] == NOT_RUN).all():
            lines.append(f"{name}: {NOT_RUN}")
            continue
        words = list(dict.fromkeys(rows["reading"]))
        said = words[0] if len(words) == 1 else ", ".join(f"{m} {r}" for m, r in zip(rows["metric"], rows["reading"]))
        lines.append(f"{name}: {said}\n  {' / '.join(_number(d, '+.1f') for d in rows['diff'])} "
                     f"(p {' / '.join(_number(p, '.2g') for p in rows['p (Holm)'])})")
    return "\n".join(lines)


def scoreboard(scores: pd.DataFrame, table: pd.DataFrame, datasets: Optional[Sequence[str]] = None,
               reference: str = REFERENCE, metrics: Sequence[str] = ("EM", "F1")) -> pd.DataFrame:
    """Notebook 05's first screen: every method of the run ranked by EM (then F1) per dataset, with the paper's
    claim about it and this run's verdict beside it.

    The means are Tables 4/5's (:func:`kgir_lib.eval.evaluate.summary_table` of the same ``scores``); the claims
    and verdicts are ``table`` (:func:`claims_table`, the table the README's :func:`claims_headline` renders):
    the claim column names each claim whose compared method is the row's, the verdict column gives, per
    dataset and pooled, the verdict, KGIR-RAG minus the method and the Holm-adjusted p. Columns ``(dataset,
    "rank" | metric)``, then ``(SCOREBOARD_CLAIM, "")`` and ``(SCOREBOARD_VERDICT, "")``. Rows: by mean rank over
    the datasets (best first), ties in the run's order."""
    from .evaluate import summary_table

    if datasets is None:
        datasets = list(dict.fromkeys(scores["dataset"]))
    means = summary_table(scores, tuple(metrics), label="ours", datasets=datasets)
    cols: dict = {}
    for d in datasets:
        cols[(d, "rank")] = _rank(means[[("ours", d, m) for m in metrics]])
        for m in metrics:
            cols[(d, m)] = means[("ours", d, m)].astype(float)
    claim_of, verdict_of = {}, {}
    for (name, other), part in table.groupby(["claim", "compared with"], sort=False):
        claim_of.setdefault(other, []).append(f"{name} ({' / '.join(dict.fromkeys(part['metric']))})")
        verdict_of.setdefault(other, []).append(_verdict_text(part))
    cols[(SCOREBOARD_CLAIM, "")] = pd.Series(
        ["the method every claim is about" if m == reference else "\n".join(claim_of.get(m, [])) or "none"
         for m in means.index], index=means.index)
    cols[(SCOREBOARD_VERDICT, "")] = pd.Series(["\n".join(verdict_of.get(m, [])) for m in means.index],
                                               index=means.index)
    out = pd.DataFrame(cols, index=means.index)
    out.columns = pd.MultiIndex.from_tuples(out.columns, names=["dataset", ""])
    mean_rank = out[[(d, "rank") for d in datasets]].astype(float).mean(axis=1)
    order = sorted(range(len(out)), key=lambda i: (mean_rank.iloc[i], i))
    out = out.iloc[order]
    out.index.name = "method"
    return out


def scoreboard_sentence(board: pd.DataFrame, table: pd.DataFrame, reference: str = REFERENCE) -> str:
    """The answer of :func:`scoreboard` in words: where ``reference`` ranks on each dataset, how many claim rows
    the exact tests decide each way, and the smallest EM difference the run could detect (its MDE)."""
    datasets = [d for d, what in board.columns if what == "rank"]
    if reference not in board.index:
        return f"{reference} was not run: no claim can be read."
    row = board.loc[reference]
    ranks = "; ".join(f"{row[(d, 'rank')]} of {int(board[(d, 'rank')].notna().sum())} on {d} (EM "
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
