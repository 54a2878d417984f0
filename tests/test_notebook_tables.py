"""The numbers of every notebook's tables, read after the ci-profile run (ordering: tests/_notebook_checks.py).

``--nbval-lax`` only proves that the cells run. These tests read the CSV tables each notebook wrote
to ``$KGIR_RESULTS_DIR/<profile>/tables`` and check their shape, columns and ranges: recall and
EM/F1 in [0, 100], n per dataset equal to the profile's, a row for every method and variant the
profile runs, and LLM usage consistent with the trace files (modelled on Microsoft recommenders'
notebook tests, which read the numbers an executed notebook recorded).

Each ``check_NN`` takes the config the notebooks ran with, so it can also be pointed at another
run directory by hand: ``check_05(load_config("sample"))``.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from kgir_lib import report
from kgir_lib.registry import DEFAULT_METHODS, method_label
from kgir_lib.report import KGIR_ABLATION_DATASETS

PCT = (0.0, 100.0)


def table(cfg, name: str) -> pd.DataFrame:
    path = cfg.run_dir / "tables" / f"{name}.csv"
    assert path.exists(), f"notebook table {path} was not written"
    df = pd.read_csv(path)
    assert len(df), f"{path} is empty"
    return df


def in_range(values, lo: float, hi: float, what: str) -> None:
    vals = pd.to_numeric(pd.Series(values), errors="raise").dropna()
    bad = vals[(vals < lo - 1e-9) | (vals > hi + 1e-9)]
    assert bad.empty, f"{what}: values outside [{lo}, {hi}]: {bad.tolist()}"


def has_columns(df: pd.DataFrame, cols, what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    assert not missing, f"{what}: missing columns {missing} (has {list(df.columns)})"


def n_questions(cfg) -> int:
    """Questions a dataset the profile answers (every dataset of the sample data has more than that)."""
    assert cfg.n_questions is not None, "checks assume a profile with n_questions set (ci)"
    return int(cfg.n_questions)


def profile_methods(cfg) -> list:
    return list(cfg.eval_methods or DEFAULT_METHODS)


def config_written(cfg, notebook: str) -> None:
    assert (cfg.run_dir / "config" / f"{notebook}.yaml").exists(), f"{notebook} wrote no effective config"


def trace_usage(cfg) -> dict:
    """{(method label, dataset): {qid: LLM calls}} from the trace files of notebooks 04/05."""
    out = {}
    for meta_path in sorted((cfg.run_dir / "traces").glob("*/*.meta.json")):
        meta = json.loads(meta_path.read_text())
        lines = meta_path.with_name(meta_path.name.replace(".meta.json", ".jsonl"))
        if not lines.exists():
            continue
        calls = {}
        for line in lines.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                calls[rec["qid"]] = rec["usage"]["calls"]
        out[(meta["method"], meta["dataset"])] = calls
    return out


# ----------------------------------------------------------------------------- 01
def check_01(cfg) -> None:
    config_written(cfg, "01_extract_kg")
    t3 = table(cfg, "table3_kg_stats")
    has_columns(t3, ["graph", "passages", "entities", "relations", "triples", "triples_per_passage"], "table 3")
    for c in ("passages", "entities", "relations", "triples"):
        in_range(t3[c], 0, math.inf, f"table 3 {c}")
    assert (t3["passages"] > 0).all(), "every graph covers passages"
    ratio = t3["triples"] / t3["passages"]
    assert (ratio - t3["triples_per_passage"]).abs().max() < 1e-6, "triples_per_passage = triples / passages"
    graphs = [g.split(" ")[0] for g in t3["graph"]]
    expected = [d for d in cfg.datasets if d in cfg.extract_datasets or d == "musique_train"]
    assert sorted(graphs) == sorted(expected), f"table 3 rows {graphs}, expected one graph per dataset {expected}"
    cost = table(cfg, "kg_extraction_cost")
    has_columns(cost, ["dataset", "source", "passages in pool", "calls found", "prompt tokens"], "extraction cost")
    assert sorted(cost["dataset"]) == sorted(expected)
    llm_rows = cost[cost["source"] == "llm"]
    if cfg.extract_max_passages is not None:
        in_range(llm_rows["passages in pool"], 0, cfg.extract_max_passages, "extraction pool size")
    assert (llm_rows["calls found"] == llm_rows["passages in pool"]).all(), "one cached call a pooled passage"
    assert not any(report.is_runtime(c) for c in cost.columns), "this run's counts and wall time go to runtime/"


# ----------------------------------------------------------------------------- 02
def check_02(cfg) -> None:
    config_written(cfg, "02_index")
    rec = table(cfg, "recall_single_step")
    cols = [f"{d} R@{k}" for d in cfg.datasets for k in (2, 5)]
    has_columns(rec, ["retriever", *cols], "single-step recall")
    ours = rec[rec["retriever"].str.startswith("ours: ")]
    assert set(ours["retriever"]) == {f"ours: dense ({cfg.embed_model})", "ours: BM25"}
    for c in cols:
        in_range(rec[c], *PCT, c)
    for d in cfg.datasets:
        assert (ours[f"{d} R@5"] >= ours[f"{d} R@2"] - 1e-9).all(), f"{d}: recall grows with k"
        assert ours[f"{d} R@2"].notna().all()
    sample = table(cfg, "recall_single_step_sample")
    for d in cfg.datasets:
        assert (sample[f"{d} n"] == n_questions(cfg)).all(), f"{d}: n = the profile's n_questions"
        in_range(sample[f"{d} R@2"], *PCT, f"{d} R@2")
        assert (sample[f"{d} R@5"] >= sample[f"{d} R@2"] - 1e-9).all()
    curve = table(cfg, "recall_curve")
    in_range(curve["recall"], *PCT, "recall curve")


# ----------------------------------------------------------------------------- 03
def check_03(cfg) -> None:
    config_written(cfg, "03_subgraph_mst")
    per_q = table(cfg, "03_subgraph_per_question")
    has_columns(per_q, ["dataset", "qid", "D_q", "G_q", "G_tmp", "G_Ans", "gold", "gold_in_D_q", "gold_in_G_Ans"],
                "03 per question")
    assert per_q.groupby("dataset")["qid"].nunique().to_dict() == {d: n_questions(cfg) for d in cfg.datasets}
    assert (per_q["D_q"] <= cfg.top_k).all(), "|D_q| <= top_k"
    assert (per_q["G_Ans"] <= per_q["G_tmp"]).all(), "G_Ans is a spanning forest of G_tmp"
    assert (per_q["gold_in_G_Ans"] <= per_q["gold_in_D_q"]).all() and (per_q["gold_in_D_q"] <= per_q["gold"]).all()
    steps = table(cfg, "03_subgraph_steps")
    per_ds = steps[steps["dataset"] != "all"]
    assert sorted(per_ds["dataset"]) == sorted(cfg.datasets) and (per_ds["questions"] == n_questions(cfg)).all()
    for c in [c for c in steps.columns if c.endswith("%")]:
        in_range(steps[c], *PCT, f"03 steps {c}")


# ----------------------------------------------------------------------------- 04
def check_04(cfg) -> None:
    config_written(cfg, "04_iterative_rewrite")
    n = n_questions(cfg)
    metrics = table(cfg, "04_kgir_metrics")
    has_columns(metrics, ["dataset", "n", "EM", "F1", "R@2", "R@5", "rounds / q", "LLM calls / q"], "04 metrics")
    assert sorted(metrics["dataset"]) == sorted(cfg.datasets) and (metrics["n"] == n).all()
    for c in ("EM", "F1", "R@2", "R@5", "dense R@2", "dense R@5"):
        in_range(metrics[c], *PCT, f"04 {c}")
    in_range(metrics["rounds / q"], 1, cfg.max_iterations, "rounds a question")
    per_q = table(cfg, "04_kgir_per_question")
    assert per_q.groupby("dataset")["qid"].nunique().to_dict() == {d: n for d in cfg.datasets}
    in_range(per_q["iterations"], 1, cfg.max_iterations, "iterations")
    for c in ("EM", "F1", "R@2", "R@5"):
        in_range(per_q[c], *PCT, f"04 per question {c}")
    # usage: per question (from the traces) = per stage summed
    by_stage = table(cfg, "04_kgir_usage_by_stage")
    calls_q = per_q.groupby("dataset")["calls"].sum()
    calls_stage = by_stage.groupby("dataset")["calls"].sum()
    assert calls_q.to_dict() == calls_stage.to_dict(), "04: calls per question and per stage disagree"
    traced = trace_usage(cfg)
    for d, part in per_q.groupby("dataset"):
        calls = traced.get(("KGIR-RAG", d))
        assert calls is not None, f"no KGIR-RAG trace file for {d}"
        assert {q: calls[q] for q in part["qid"]} == dict(zip(part["qid"], part["calls"])), d
    means = per_q.groupby("dataset")["calls"].mean()
    for _, row in metrics.iterrows():
        assert abs(row["LLM calls / q"] - means[row["dataset"]]) < 0.01
    # §3b: the study variants against the full method, one row each per dataset, on every question
    from kgir_lib.registry import STUDY_METHODS

    if cfg.attribution_methods == []:
        return
    attr = table(cfg, "04_step_attribution")
    keys = ["kgir", *[k for k in STUDY_METHODS if k in (cfg.attribution_methods or STUDY_METHODS)]]
    for d, part in attr.groupby("dataset"):
        assert sorted(part["key"]) == sorted(keys) and (part["n"] == n).all(), d
    for c in ("EM", "F1", "EM full"):
        in_range(attr[c], *PCT, f"04 step attribution {c}")
    in_range(attr["p EM (Holm)"].dropna(), 0, 1, "04 step attribution adjusted p")


# ----------------------------------------------------------------------------- 05
def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _ours(df: pd.DataFrame, metric: str) -> dict:
    """{dataset: column} of our columns ``ours (<model>, n=N) / <dataset> / <metric>``."""
    out = {}
    for c in df.columns:
        m = re.match(r"^ours \((.+), n=(\d+)\) / (.+) / (.+)$", c)
        if m and m.group(4) == metric:
            out[m.group(3)] = c
    return out


def check_05(cfg) -> None:
    config_written(cfg, "05_eval")
    n = n_questions(cfg)
    labels = [method_label(k, cfg) for k in profile_methods(cfg)]
    qa = table(cfg, f"05_table4_5_qa_{_safe(cfg.llm_model)}")
    assert set(labels) <= set(qa["method"]), f"methods without a row: {set(labels) - set(qa['method'])}"
    assert any(f"ours ({cfg.llm_model}, n={n})" in c for c in qa.columns), "our column group names model and n"
    for metric in ("EM", "F1"):
        cols = _ours(qa, metric)
        assert sorted(cols) == sorted(cfg.datasets), metric
        for c in cols.values():
            in_range(qa[c], *PCT, c)
            assert qa.set_index("method").loc[labels, c].notna().all(), f"{c}: a method has no score"
    published = [c for c in qa.columns if c.startswith("published")]
    assert published, "published numbers in their own labelled columns"
    runs = table(cfg, "05_runs")  # every (dataset, method) run once; whether it was read back is runtime's
    assert list(runs.columns) == ["dataset", "key", "method", "n"] and (runs["n"] == n).all()
    assert list(zip(runs["dataset"], runs["key"])) == [(d, k) for d in cfg.datasets for k in profile_methods(cfg)]
    rec = table(cfg, "05_table6_recall")
    r2, r5 = _ours(rec, "R@2"), _ours(rec, "R@5")
    assert sorted(r2) == sorted(cfg.datasets)
    ours_rec = rec.set_index("method")
    for d in cfg.datasets:
        in_range(ours_rec[r2[d]], *PCT, r2[d])
        retrieving = [lab for lab in labels if lab != "Naive Gen"]
        assert ours_rec.loc[retrieving, r2[d]].notna().all(), f"{d}: a retrieving method has no recall"
        assert (ours_rec.loc[retrieving, r5[d]] >= ours_rec.loc[retrieving, r2[d]] - 1e-9).all()
        if "Naive Gen" in labels:
            assert ours_rec.loc["Naive Gen", [r2[d], r5[d]]].isna().all(), "Naive Gen retrieves nothing"
    cost = table(cfg, "05_cost_per_question_by_dataset")
    has_columns(cost, ["method", "dataset", "questions", "LLM calls / q", "prompt tokens / q"], "05 cost")
    assert set(labels) <= set(cost["method"])
    assert (cost["questions"] == n).all(), "n per method and dataset = the profile's n_questions"
    for c in ("LLM calls / q", "prompt tokens / q", "completion tokens / q"):
        in_range(cost[c], 0, math.inf, c)
    assert not [c for c in cost.columns if "cache hits" in c or "wall seconds" in c], "runtime columns committed"
    runtime = pd.read_csv(cfg.run_dir / "runtime" / "tables" / "05_cost_per_question_by_dataset.csv")
    in_range(runtime["cache hits / q"], 0, math.inf, "cache hits / q")
    assert (runtime["cache hits / q"] <= cost["LLM calls / q"] + 1e-9).all()
    traced = trace_usage(cfg)
    for _, row in cost.iterrows():
        calls = traced.get((row["method"], row["dataset"]))
        assert calls is not None, f"no trace file for {row['method']} on {row['dataset']}"
        assert len(calls) >= n
        assert abs(row["LLM calls / q"] - sum(calls.values()) / len(calls)) < 0.01, (row["method"], row["dataset"])
    overall = table(cfg, "05_cost_per_question")
    assert set(labels) <= set(overall["method"])
    assert (overall["questions"] == n * len(cfg.datasets)).all()
    boot = table(cfg, "05_bootstrap_ci")
    has_columns(boot, ["dataset", "baseline", "metric", "n", "mean diff", "CI lo", "CI hi"], "bootstrap")
    assert (boot["CI lo"] <= boot["mean diff"] + 1e-9).all() and (boot["mean diff"] <= boot["CI hi"] + 1e-9).all()
    in_range(boot[["mean diff", "CI lo", "CI hi"]].stack(), -100, 100, "bootstrap differences")
    assert set(boot["metric"]) == {"EM", "F1", "R@2", "R@5"}
    answers = boot[boot["metric"].isin(["EM", "F1"])]  # recall leaves out questions without gold passages
    per_ds = answers[answers["dataset"] != "all"]
    assert (per_ds["n"] == n).all() and (answers.loc[answers["dataset"] == "all", "n"] == n * len(cfg.datasets)).all()
    assert (boot["n"] <= n * len(cfg.datasets)).all()
    assert set(boot["baseline"]) == set(labels) - {"KGIR-RAG"}
    if "Naive Gen" in labels:
        assert not boot.loc[boot["baseline"] == "Naive Gen", "metric"].isin(["R@2", "R@5"]).any()
    check_claims(table(cfg, "05_claims"), set(labels), n, len(cfg.datasets))
    check_answer_form(table(cfg, "05_answer_form"), qa, labels, n)
    if any(k.startswith("lightrag") for k in profile_methods(cfg)):
        check_lightrag_index(cfg, table(cfg, "05_indexing_cost_lightrag"))


def check_lightrag_index(cfg, idx: pd.DataFrame) -> None:
    """05_indexing_cost_lightrag: one LightRAG index a dataset, of the mode the profile asks; suite_graph calls no
    LLM; every row's per-passage cost is its total over its passages."""
    has_columns(idx, ["dataset", "index", "passages", "LLM calls", "LLM calls / passage"], "05 LightRAG index")
    lr = idx[idx["index"].str.startswith("LightRAG")]
    assert sorted(lr["dataset"]) == sorted(cfg.datasets) and (lr["index"] == f"LightRAG ({cfg.lightrag_index})").all()
    assert (lr["passages"] > 0).all()
    if cfg.lightrag_index == "suite_graph":
        assert (lr["LLM calls"] == 0).all(), "the suite_graph index calls no LLM"
    some = idx[idx["passages"] > 0]
    assert ((some["LLM calls"] / some["passages"] - some["LLM calls / passage"]).abs() < 1e-9).all()


def check_answer_form(form: pd.DataFrame, qa: pd.DataFrame, labels: list, n: int) -> None:
    """05_answer_form: one row a method and dataset; its EM / F1 are Tables 4/5's; partial credit ≤ questions."""
    has_columns(form, ["method", "dataset", "questions", "answer words (mean)", "partial credit (F1 > 0, EM = 0)",
                       "EM", "F1"], "05 answer form")
    assert not form.duplicated(["method", "dataset"]).any()
    assert set(labels) <= set(form["method"])
    assert (form["questions"] == n).all()
    in_range(form["answer words (mean)"], 0, math.inf, "answer words")
    assert ((form["partial credit (F1 > 0, EM = 0)"] >= 0) & (form["partial credit (F1 > 0, EM = 0)"] <= n)).all()
    ours = qa.set_index("method")
    for metric in ("EM", "F1"):
        cols = _ours(qa, metric)
        for r in form.to_dict("records"):
            assert abs(ours.loc[r["method"], cols[r["dataset"]]] - r[metric]) < 1e-6, (r["method"], metric)


def check_claims(claims: pd.DataFrame, methods: set, n: int, n_datasets: int) -> None:
    """05_claims: every paper claim per dataset and metric; each reading follows from its Holm-adjusted exact
    p (which is never below the raw p) and every tested row has a minimum detectable effect."""
    from kgir_lib.eval import claims as cl

    has_columns(claims, ["claim", "dataset", "metric", "compared with", "n", "diff", "CI lo", "CI hi", "test",
                         "p", "p (Holm)", "reading"], "claims")
    mde = cl.mde_column(claims)  # "MDE (α = 0.05/6, power 0.8)"; "MDE" in a table written before it said so
    assert set(claims["claim"]) == {c.name for c in cl.PAPER_CLAIMS}
    for r in claims.to_dict("records"):
        if r["compared with"] not in methods or "KGIR-RAG" not in methods:
            assert r["reading"] == cl.NOT_RUN, r
            continue
        assert r["reading"] == cl.verdict(r["diff"], r["p (Holm)"]), r
        assert 0 <= r["p"] <= r["p (Holm)"] + 1e-12 <= 1 + 1e-12 and r[mde] > 0, r
        assert r["test"] == ("McNemar" if r["metric"] == "EM" else "sign-flip"), r
        assert r["CI lo"] <= r["diff"] + 1e-9 <= r["CI hi"] + 2e-9, r
        assert r["n"] <= (n * n_datasets if r["dataset"] == "all" else n), r
    # a published number (Table 7's drops) beside exactly the rows of a claim that has one, on the datasets
    # it was measured on (MuSiQue), and beside no other dataset or the pool
    published = {(c.name, m, d) for c in cl.PAPER_CLAIMS for m in c.paper for d in c.paper_datasets}
    assert published and all(d in KGIR_ABLATION_DATASETS for _, _, d in published)
    expected = [(r["claim"], r["metric"], r["dataset"]) in published for r in claims.to_dict("records")]
    assert list(claims[cl.PAPER_COLUMN].notna()) == expected


# ----------------------------------------------------------------------------- 06
def check_06(cfg) -> None:
    from kgir_lib.eval import ablation

    config_written(cfg, "06_ablation")
    n = n_questions(cfg)
    # Table 7's rows, then each repair of ours the profile runs (ablation.kgir_ablation_labels)
    for name, labels in (("06_kgir_ablation", ablation.kgir_ablation_labels(profile_methods(cfg))),
                         ("06_kg2rag_ablation", ablation.KG2RAG_VARIANT_LABELS)):
        t = table(cfg, name)
        assert len(t) == len(labels) * len(cfg.ablation_datasets), name
        for d, part in t.groupby("dataset"):
            assert list(part["variant"]) == list(labels.values()), (name, d)
            full = part.iloc[0]
            assert (part["ΔEM (ours)"] - (part["EM"] - full["EM"])).abs().max() < 1e-6, name
            for m in ("EM", "F1"):  # each variant's change inside its paired bootstrap interval; none for full
                lo, hi, delta = part[f"Δ{m} CI lo"], part[f"Δ{m} CI hi"], part[f"Δ{m} (ours)"]
                assert lo.iloc[:1].isna().all() and hi.iloc[:1].isna().all(), (name, d, m)
                inside = (lo.iloc[1:] <= delta.iloc[1:] + 1e-9) & (delta.iloc[1:] <= hi.iloc[1:] + 1e-9)
                assert inside.all(), (name, d, m)
        assert (t["n"] == n).all(), name
        for c in ("EM", "F1", "R@2", "R@5"):
            in_range(t[c], *PCT, f"{name} {c}")
    t = table(cfg, "06_kgir_ablation")  # Table 7's drops beside MuSiQue's rows, and nowhere else
    musique = t["dataset"].isin(KGIR_ABLATION_DATASETS) & t["variant"].isin(ablation.KGIR_VARIANT_LABELS.values())
    for c in ("ΔEM (paper, Qwen2.5-72B)", "ΔF1 (paper, Qwen2.5-72B)"):
        assert t.loc[musique, c].notna().all() and t.loc[~musique, c].isna().all(), c
    check_06_usage(cfg)
    grid = ablation.study_grid()
    n_study = min(cfg.study_n_questions or n, n)
    for name, knob in (("06_kg2rag_k", "top_k"), ("06_kg2rag_m", "m_hops")):
        t = table(cfg, name)
        for d, part in t.groupby("dataset"):
            assert list(part["value"]) == list(grid["kg2rag"][knob]), (name, d)
        assert sorted(set(t["dataset"])) == sorted(cfg.study_datasets) and (t["n"] == n_study).all(), name
        for c in ("EM", "F1", "R@2", "R@5"):
            in_range(t[c], *PCT, f"{name} {c}")
    sens = table(cfg, "06_kgir_sensitivity")
    assert set(sens["param"]) == {"max_iterations", "top_k", "ngram_threshold"} and (sens["n"] == n_study).all()
    robust = table(cfg, "06_kg2rag_robustness")
    for d, part in robust.groupby("dataset"):
        part = part.sort_values("fraction")
        assert list(part["fraction"]) == [0.0, *grid["drop_fractions"]], d
        assert (part.loc[part["fraction"] > 0, "seeds"] == cfg.robustness_seeds).all()
        assert part["triples"].is_monotonic_decreasing, "dropping triples leaves fewer"
        in_range(part[[c for c in part.columns if c.endswith(" mean")]].stack(), *PCT, "robustness means")


def check_06_usage(cfg) -> None:
    """``usage/06_ablation.csv`` counts every method run of notebook 06 once, cache hits included: the calls of
    its runs' trace records (one a question) and the extraction calls their metas record (passages extracted on
    demand, outside any question's record) add up to its total."""
    from kgir_lib.eval import ablation

    usage = pd.read_csv(cfg.run_dir / "usage" / "06_ablation.csv").set_index("stage")
    keys = ["kgir_forced", *(("kgir" if v == "full" else f"kgir_{v}")
                             for v in ablation.kgir_ablation_labels(profile_methods(cfg))),
            *(("kg2rag" if v == "full" else f"kg2rag_{v}") for v in ablation.KG2RAG_VARIANT_LABELS)]
    runs = [cfg.run_dir / "traces" / k / f"{d}.trace.jsonl" for k in keys for d in cfg.ablation_datasets]
    runs += sorted((cfg.run_dir / "traces" / ablation.STUDY_TRACE_DIR).glob("*/*.trace.jsonl"))
    per_question = extract = 0
    for path in runs:
        per_question += sum(json.loads(line)["usage"]["calls"]
                            for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        meta = json.loads(path.with_name(path.name.replace(".jsonl", ".meta.json")).read_text(encoding="utf-8"))
        extract += meta["stages"].get("extract", {}).get("calls", 0)
    assert usage.loc["total", "calls"] == per_question + extract, "06 usage: not its runs' calls"
    assert (usage.loc["extract", "calls"] if "extract" in usage.index else 0) == extract
    assert usage.loc[usage.index != "total", "calls"].sum() == usage.loc["total", "calls"]


# ----------------------------------------------------------------------------- 07
def check_07(cfg) -> None:
    config_written(cfg, "07_case_study")
    tables = cfg.run_dir / "tables"
    answers = sorted(tables.glob("07_case_answers_*.csv"))
    steps = sorted(tables.glob("07_case_steps_*.csv"))
    assert len(answers) >= 1 and len(steps) >= 1, "the case study saves its steps and answers"
    for path in answers:
        t = pd.read_csv(path)
        has_columns(t, ["method", "answer", "EM", "F1", "source"], path.name)
        assert t["method"].iloc[0] == "KGIR-RAG" and t["method"].is_unique
        for c in ("EM", "F1", "R@2", "R@5"):
            in_range(t[c], *PCT, f"{path.name} {c}")
    for path in steps:
        t = pd.read_csv(path)
        assert list(t["round"]) == list(range(1, len(t) + 1)) and len(t) <= cfg.max_iterations, path.name
    check_bridge_summary(table(cfg, "07_bridge_summary"))


def check_bridge_summary(t: pd.DataFrame) -> None:
    """07_bridge_summary: counts within 0..questions, the whole pattern no more frequent than any of its steps."""
    has_columns(t, ["dataset", "questions", "not answered in round 1", "round-1 rewrite names a bridge entity",
                    "answered in round 2", "whole Fig. 6 pattern", "whole pattern, EM = 100", "answered in round 1"],
                "07_bridge_summary")
    assert t["dataset"].is_unique and (t["questions"] >= 1).all()
    counts = t.drop(columns=["dataset", "questions"])
    assert ((counts >= 0) & (counts.le(t["questions"], axis=0))).all().all()
    for step in ("not answered in round 1", "round-1 rewrite names a bridge entity", "answered in round 2"):
        assert (t["whole Fig. 6 pattern"] <= t[step]).all(), step
    assert (t["whole pattern, EM = 100"] <= t["whole Fig. 6 pattern"]).all()
    assert (t["answered in round 1"] + t["not answered in round 1"] <= t["questions"]).all()


CHECKS = {"01_extract_kg": check_01, "02_index": check_02, "03_subgraph_mst": check_03,
          "04_iterative_rewrite": check_04, "05_eval": check_05, "06_ablation": check_06, "07_case_study": check_07}


@pytest.mark.notebooks
@pytest.mark.parametrize("notebook", list(CHECKS))
def test_notebook_tables(notebook, executed):
    CHECKS[notebook](executed(notebook))


def test_every_notebook_has_checks():
    root = Path(__file__).resolve().parents[1] / "notebooks"
    assert sorted(p.stem for p in root.glob("[0-9][0-9]_*.ipynb")) == sorted(CHECKS)
