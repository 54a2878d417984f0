"""The local run's per-question scores, which its committed question explorer (``results/local/explorer.json.gz``)
holds for KGIR-RAG and the twelve other methods of notebook 05, against the committed tables computed from the same
scores: ``05_bootstrap_ci``'s EM and F1 rows (KGIR-RAG minus each method, paired bootstrap; the explorer holds no
recall) and the rows of ``05_claims`` and
``05_claims_without_tuning_questions`` that compare KGIR-RAG with one of those methods (means, difference, interval,
discordant counts, exact McNemar p), and those methods' EM and F1 in Tables 4/5. No model: the explorer is a committed file, and the library's functions the
notebook calls recompute each cell.

EM is 0 or 100 a question, so its cells come out exactly. The explorer rounds each question's F1 to one decimal, so
an F1 mean moves by at most 0.05 and a difference of two, or a percentile of resampled differences, by at most 0.1:
F1 cells are compared within 0.1. The ablation variants (w/o rewrite, w/o subgraph, ...) are not in the explorer;
their rows are pinned from their discordant counts (tests/test_local_tables.py)."""
from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from kgir_lib.config import PROJECT_ROOT, default_data_dir, load_config
from kgir_lib.eval import claims as cl
from kgir_lib.eval.bootstrap import SIDE_COLUMN, bootstrap_table

RUN = PROJECT_ROOT / "results" / "local"
DATA = default_data_dir()
N_BOOT = 2000  # notebook 05's default, the local run's (its captions say 2000 resamples)
F1_ROUNDING = 0.1  # the explorer's F1 is rounded to 0.1 a question: a difference of means moves by at most 0.1


def explorer_scores() -> pd.DataFrame:
    """One row a (method, dataset, question) with its EM and F1, in the explorer's question order."""
    with gzip.open(RUN / "explorer.json.gz", "rt", encoding="utf-8") as f:
        questions = json.load(f)["questions"]
    return pd.DataFrame([{"method": m["method"], "dataset": q["dataset"], "qid": q["qid"], "EM": m["EM"],
                          "F1": m["F1"]} for q in questions for m in q["methods"]])


def _close(metric: str, got: float, want: float) -> bool:
    return got == want if metric == "EM" else abs(got - want) <= F1_ROUNDING


def test_the_caption_states_the_resamples_the_test_uses():
    caption = (RUN / "tables" / "05_bootstrap_ci.md").read_text(encoding="utf-8").split("\n\n", 1)[0]
    assert f"{N_BOOT} resamples" in caption


def test_the_local_bootstrap_intervals_are_the_explorers_scores():
    scores = explorer_scores()
    committed = pd.read_csv(RUN / "tables" / "05_bootstrap_ci.csv")
    rebuilt = bootstrap_table(scores, metrics=("EM", "F1"), n_boot=N_BOOT, seed=0)
    both = rebuilt.merge(committed, on=["dataset", "baseline", "metric"], suffixes=("", " committed"),
                         validate="one_to_one")
    methods = set(scores["method"]) - {"KGIR-RAG"}
    ours = committed[committed["baseline"].isin(methods) & committed["metric"].isin(["EM", "F1"])]
    assert len(both) == len(rebuilt) == 2 * 3 * len(methods) == len(ours)  # every EM and F1 row of those methods
    for r in both.to_dict("records"):
        key = (r["dataset"], r["baseline"], r["metric"])
        assert r["n"] == r["n committed"], key
        for col in ("mean diff", "CI lo", "CI hi"):
            assert _close(r["metric"], r[col], r[f"{col} committed"]), (key, col, r[col], r[f"{col} committed"])
        if r["metric"] == "EM" or min(abs(r["CI lo"]), abs(r["CI hi"])) > F1_ROUNDING:
            assert r[SIDE_COLUMN] == r[f"{SIDE_COLUMN} committed"], key


def _tuning_qids() -> set:
    from kgir_lib.data import load_dataset, tuning_questions

    cfg = load_config("local", data_dir=str(DATA))
    return {q.qid for q in tuning_questions(load_dataset("musique_train", cfg.data_path).questions, seed=cfg.seed)}


@pytest.mark.parametrize("name", ["05_claims", "05_claims_without_tuning_questions"])
def test_the_local_claims_against_other_methods_are_the_explorers_scores(name):
    scores = explorer_scores()
    if name.endswith("without_tuning_questions"):
        if not DATA.is_dir():
            pytest.skip(f"no shared data at {DATA} (the tuning questions are drawn from it)")
        tuned = _tuning_qids()
        scores = scores[~((scores["dataset"] == "musique_train") & scores["qid"].isin(tuned))]
    table = pd.read_csv(RUN / "tables" / f"{name}.csv")
    others = set(scores["method"])
    rows = table[table["compared with"].isin(others) & (table["n"] > 0)]
    # the notebook's function on the explorer's scores: the variants it lacks leave their rows untested, so only
    # the columns a row computes alone are compared (not Holm's p, the reading or the MDE, which its family sets)
    rebuilt = cl.claims_table(scores, n_boot=N_BOOT, seed=0)
    rebuilt = rebuilt[rebuilt["compared with"].isin(others) & (rebuilt["n"] > 0)]
    keys = ["claim", "dataset", "metric", "compared with"]
    both = rows.merge(rebuilt, on=keys, suffixes=("", " rebuilt"), validate="one_to_one")
    assert len(both) == len(rows) == len(rebuilt)
    checked = 0
    for r in both.to_dict("records"):
        key, metric = tuple(r[k] for k in keys), r["metric"]
        assert r["n"] == r["n rebuilt"] and r["test"] == r["test rebuilt"], key
        for col in ("KGIR-RAG", "other", "diff", "CI lo", "CI hi"):
            assert _close(metric, r[f"{col} rebuilt"], r[col]), (key, col, r[f"{col} rebuilt"], r[col])
        if metric == "EM":
            assert (r["discordant rebuilt"], r["p rebuilt"]) == (r["discordant"], r["p"]), key
        checked += 1
    assert checked == 4 * 3 * 2  # IRCoT, KG²RAG, KG²RAG (authors' code), HippoRAG 2; two datasets and pooled; EM, F1


def test_the_local_tables_4_and_5_are_the_explorers_means():
    """Our columns of Tables 4/5 (EM and F1 per dataset) for every method the explorer holds: each method's mean
    over the dataset's questions (EM exactly, F1 within the explorer's rounding of 0.05 a mean)."""
    scores = explorer_scores()
    [path] = (RUN / "tables").glob("05_table4_5_qa_*.csv")
    table = pd.read_csv(path).set_index("method")
    ours = {c: c.rsplit(" / ", 2)[1:] for c in table.columns if c.startswith("ours (")}
    assert sorted(ours.values()) == sorted([d, m] for d in ("musique_train", "hotpotqa") for m in ("EM", "F1"))
    means = scores.groupby(["method", "dataset"], sort=False)[["EM", "F1"]].mean()
    assert set(means.index.get_level_values("method")) <= set(table.index)
    for (method, dataset), r in means.iterrows():
        for col, (d, metric) in ours.items():
            if d == dataset:
                want = table.loc[method, col]
                assert r[metric] == want if metric == "EM" else abs(r[metric] - want) <= 0.05, (method, d, metric)
    assert len(means) == 13 * 2
