"""The paper's claims (§3.3, §3.4, Table 7) as families declared before any run, the verdict rule, and the
questions a robustness check leaves out (:mod:`kgir_lib.eval.claims`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ...data import load_dataset, tuning_questions
from ...report import KGIR_ABLATION_DATASETS, KGIR_ABLATION_DROPS

SUPPORTS, CONTRADICTS, CANNOT_TELL, NOT_RUN = "supports", "contradicts", "cannot tell", "not run"
REFERENCE = "KGIR-RAG"
ALPHA = 0.05
POWER = 0.8
PAPER_COLUMN = "paper: KGIR-RAG minus other (Table 7, MuSiQue, Qwen2.5-72B)"
BINARY_METRICS = ("EM",)
# How every table of tests and intervals is read, stated once (notebooks 05 and 06, the README, docs/results.md)
READING_RULE = ("The exact paired tests (McNemar for EM, sign-flip for F1 and recall) with Holm's correction inside "
                "each claim's family decide: supports, contradicts or cannot tell. The paired bootstrap 95 % "
                "intervals are effect sizes, unadjusted for the many comparisons, and never a verdict: an interval "
                "that excludes 0 on a row the tests read \"cannot tell\" is not a finding.")
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
    em, f1 = KGIR_ABLATION_DROPS[variant]  # the paper's: full minus variant, as the claim's KGIR-RAG minus other
    return Claim(f"the {what} adds accuracy (Table 7)", f"KGIR-RAG {variant}", ("EM", "F1"),
                 {"EM": em, "F1": f1}, KGIR_ABLATION_DATASETS)


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
