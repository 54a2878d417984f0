"""The deployable repair against KGIR-RAG and Naive RAG (``05_first_and_new``): the tests declared in
:mod:`kgir_lib.kgir.first_retrieval` (:data:`~kgir_lib.kgir.first_retrieval.FAMILY`), read from the traces.

Per dataset: the repair's EM and F1 (×100) and each reference method's on the questions both answered, the
difference, McNemar's exact test (EM) or the sign-flip test (F1), Holm within the dataset's four tests, and the
minimum detectable EM difference (exact McNemar, power :data:`~kgir_lib.eval.claims.POWER`, level ``ALPHA`` / 4,
from the row's own discordance).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd

from ...kgir.first_retrieval import FAMILY, FIRST_AND_NEW, KEY
from ..claims import ALPHA, POWER
from ..stats import holm, mcnemar_exact, mde_mcnemar, sign_flip_test
from ..metrics import best_em, best_f1
from . import round_facts as rf

if TYPE_CHECKING:
    from ...data import Dataset

CAPTION = ("KGIR-RAG with D_1's top passages beside the new passages of D'_t (ours, kgir_lib.kgir.first_retrieval) "
           "against KGIR-RAG and Naive RAG on the same questions: McNemar's exact test (EM), the sign-flip test "
           "(F1), Holm within each dataset's four declared tests. ")
MDE_COLUMN = f"MDE EM ({POWER:.0%} power, α = {ALPHA} / {len(FAMILY)})"
COLUMNS = ["dataset", "against", "metric", "n", "repair", "reference", "Δ", "b/c", "p", "p (Holm)", MDE_COLUMN]


def scores(records: Sequence[Mapping], gold: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """EM and F1 (×100) of each trace-file line against the question's gold answers (``gold``: ``{qid: answers}``,
    from the dataset: not every method's trace records them), indexed by qid."""
    rows = [{"qid": rf.qid_of(r), "EM": 100.0 * best_em(rf.final_answer(r), gold[rf.qid_of(r)]),
             "F1": 100.0 * best_f1(rf.final_answer(r), gold[rf.qid_of(r)])} for r in records]
    return pd.DataFrame(rows, columns=["qid", "EM", "F1"]).set_index("qid")


def repair_table(runs: Mapping[str, Sequence[Mapping]], gold: Mapping[str, Sequence[str]],
                 dataset: str) -> pd.DataFrame:
    """``runs``: ``{method key: trace records}`` with :data:`~kgir_lib.kgir.first_retrieval.KEY` and the references
    of the family; ``gold``: ``{qid: gold answers}``. One row a declared test; a reference without traces leaves its
    rows' tests at p = 1 in Holm."""
    mine = scores(runs[KEY], gold)
    rows = []
    for against, metric in FAMILY:
        row: dict[str, object] = {"dataset": dataset, "against": against, "metric": metric}
        if against in runs:
            ref = scores(runs[against], gold)
            both = mine.index.intersection(ref.index)
            a, b = mine.loc[both, metric], ref.loc[both, metric]
            row.update({"n": len(both), "repair": a.mean(), "reference": b.mean(), "Δ": a.mean() - b.mean()})
            if metric == "EM":
                test = mcnemar_exact((a > 0).astype(float).to_numpy(), (b > 0).astype(float).to_numpy())
                row.update({"b/c": f"{test.b}/{test.c}", "p": test.p})
                disc = (test.b + test.c) / len(both) if len(both) else 0.0
                row[MDE_COLUMN] = 100.0 * mde_mcnemar(len(both), disc, ALPHA / len(FAMILY), POWER) if len(both) \
                    else np.nan
            else:
                row["p"] = sign_flip_test((a - b).to_numpy())
        rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    table["p (Holm)"] = holm([1.0 if pd.isna(p) else p for p in table["p"]])
    return table


def run_table(run_dir: Path, datasets: Mapping[str, "Dataset"]) -> pd.DataFrame:
    """Notebook 05's ``05_first_and_new``: :func:`repair_table` of every dataset (``{name: kgir_lib.data.Dataset}``,
    in the order of the panels) from the run's trace files of the repair and its references, indexed by dataset,
    reference and metric. A dataset whose repair traces are missing is a ValueError naming the run directory."""
    from .tables import read_run

    references = list(dict.fromkeys(against for against, _ in FAMILY))
    runs = read_run(Path(run_dir), list(datasets), methods=(KEY, *references))
    missing = [d for d in datasets if (KEY, d) not in runs]
    if missing:
        raise ValueError(f"05_first_and_new: no {KEY} trace file of {', '.join(missing)} under {run_dir}/traces")
    parts = [repair_table({m: runs[(m, d)] for m in (KEY, *references) if (m, d) in runs},
                          {q.qid: q.answers for q in ds.questions}, d)
             for d, ds in datasets.items()]
    return pd.concat(parts, ignore_index=True).set_index(["dataset", "against", "metric"])


def repair_sentence(table: pd.DataFrame, dataset: str) -> str:
    """The repair's EM against both references on ``dataset``, every number from the table."""
    rows = table[(table["dataset"] == dataset) & (table["metric"] == "EM")].set_index("against")
    parts = [f"{r['repair']:.1f} against {against}'s {r['reference']:.1f} ({r['Δ']:+.1f}, {r['b/c']}, Holm p "
             f"{r['p (Holm)']:.2g})" for against, r in rows.iterrows() if pd.notna(r["n"])]
    n = int(rows["n"].dropna().iloc[0]) if rows["n"].notna().any() else 0
    return f"{dataset} (n = {n}): D_1 beside D'_t reaches EM " + "; ".join(parts) + "."


# The profiles whose committed runs hold the repair's calls (their response logs).
RAN_ON = ("sample", "local")


def listing_note(method_keys: Sequence[str], profile: str) -> str:
    """Notebooks 05 and 06: whether this run lists the repair (registry key :data:`KEY`, a method of the profile's
    ``eval_methods``), what it is, and, when it does not, where it ran and the command that would run it here."""
    head = f"*{FIRST_AND_NEW.name}* (`{KEY}`; ours, a deployable repair, not the paper's method): "
    if KEY in method_keys:
        return head + FIRST_AND_NEW.description + f" Listed in this profile's ({profile}) tables."
    return (head + f"not among this profile's ({profile}) methods. The repair ran on the {' and '.join(RAN_ON)} "
            f"profiles (its calls are in their response logs). To run it here, add `{KEY}` to the profile's "
            f"`eval_methods` (null: every method of kgir_lib.registry.DEFAULT_METHODS) and run "
            f"`KGIR_PROFILE={profile} python -m kgir_lib.runner --only 05 06`.")
