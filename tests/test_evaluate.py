"""Running, resuming, scoring, tables, cost and the paired bootstrap (kgir_lib.eval.evaluate)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from kgir_lib import report
from kgir_lib.baselines.naive import NaiveRAG
from kgir_lib.config import ConfigError, load_config
from kgir_lib.data import Question
from kgir_lib.eval import evaluate as ev
from kgir_lib.eval.bootstrap import ABOVE, CONTAINS, SIDE_COLUMN, bootstrap_table, paired_bootstrap
from kgir_lib.eval.cost import indexing_cost
from kgir_lib.kg import KnowledgeGraph
from kgir_lib.kg.extract import update_kg
from kgir_lib.llm import LLM, ChatResult, LLMCache
from kgir_lib.llm import LLMUsage
from kgir_lib.methods.base import MethodOutput
from kgir_lib.notebook import viz
from kgir_lib.registry import METHODS


# ----------------------------------------------------------------------------- paired bootstrap
def test_bootstrap_of_a_constant_difference_is_that_difference():
    a = np.array([70.0, 20.0, 50.0, 100.0])
    assert paired_bootstrap(a, a - 10.0) == (10.0, 10.0, 10.0)
    assert paired_bootstrap(a, a) == (0.0, 0.0, 0.0)


def test_bootstrap_two_questions_exact():
    # differences {0, 1}: resampled means are 0, .5 or 1 with P = 1/4, 1/2, 1/4, so the 2.5 % and 97.5 %
    # percentiles of 2000 resamples are 0 and 1
    assert paired_bootstrap([1.0, 1.0], [1.0, 0.0], n_boot=2000, seed=0) == (0.5, 0.0, 1.0)


def test_bootstrap_four_questions_exact():
    # differences {0, 0, 0, 1}: the resampled mean is Binomial(4, 1/4) / 4; P(mean = 0) = .32 > .025 and
    # P(mean = 1) = .004 < .025 < P(mean >= .75) = .051, so the 95 % interval is [0, 0.75]
    assert paired_bootstrap([0, 0, 0, 1], [0, 0, 0, 0], n_boot=2000, seed=0) == (0.25, 0.0, 0.75)
    assert paired_bootstrap([0, 0, 0, 1], [0, 0, 0, 0], n_boot=2000, seed=7)[1:] == (0.0, 0.75)


def test_bootstrap_is_seeded_and_checks_its_input():
    rng = np.random.default_rng(1)
    a, b = rng.random(30), rng.random(30)
    assert paired_bootstrap(a, b, seed=3) == paired_bootstrap(a, b, seed=3)
    diff, lo, hi = paired_bootstrap(a, b)
    assert lo <= diff <= hi and diff == pytest.approx(float(np.mean(a - b)))
    with pytest.raises(ValueError, match="equal length"):
        paired_bootstrap([1, 2], [1])
    with pytest.raises(ValueError, match="no paired"):
        paired_bootstrap([], [])
    with pytest.raises(ValueError, match="NaN"):
        paired_bootstrap([1, float("nan")], [0, 0])


# ----------------------------------------------------------------------------- scoring
def q(qid, answers, gold):
    return Question(qid, f"question {qid}", tuple(answers), tuple(gold), "d", 2)


def test_score_per_question():
    qs = [q("a", ["Hewlett-Packard", "HP"], ["g1", "g2"]), q("b", ["Paris"], ["g3"])]
    outs = [MethodOutput("a", "HP", ["g1", "x", "y", "z", "g2"], LLMUsage(2, 1, 100, 10, 1.5)),
            MethodOutput("b", "the city of Paris", [], LLMUsage(1, 0, 50, 5, 0.5), {"no_retrieval": True})]
    df = ev.score(outs, qs)
    assert df["EM"].tolist() == [100.0, 0.0]
    assert df.loc[1, "F1"] == pytest.approx(100 * 2 * (1 / 3 * 1) / (1 / 3 + 1))  # "city of paris" vs "paris"
    assert df.loc[0, "R@2"] == 50.0 and df.loc[0, "R@5"] == 100.0
    assert np.isnan(df.loc[1, "R@2"])
    assert df["calls"].tolist() == [2, 1] and df["prompt_tokens"].sum() == 150
    with pytest.raises(TypeError, match="outputs come first"):  # one argument order
        ev.score(qs, outs)
    with pytest.raises(KeyError, match="'zz'"):
        ev.score([MethodOutput("zz", "x", [])], qs)
    m = ev.mean_scores(df)
    assert m["n"] == 2 and m["EM"] == 50.0 and m["R@2"] == 50.0


# ----------------------------------------------------------------------------- running and resuming
class CountingNaive(NaiveRAG):
    key = "naive_count"
    runs = 0

    def run(self, ws, questions):
        type(self).runs += 1
        return super().run(ws, questions)


def test_run_method_writes_traces_and_resumes(tiny_workspace):
    ws = tiny_workspace(lambda req: "Answer: HP")
    CountingNaive.runs = 0
    qs = ws.dataset.questions
    m = CountingNaive()
    first = ev.run_method(ws, m, qs)
    path = ws.cfg.run_dir / "traces" / "naive_count" / "tiny.trace.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert recs[0]["qid"] == "q1" and recs[0]["trace"]["method"] == "Naive RAG"
    meta = json.loads(path.with_suffix(".meta.json").read_text())
    assert meta["qids"] == ["q1"] and meta["stages"]["naive_rag_reader"]["calls"] == 1
    again = ev.run_method(ws, m, qs)
    assert CountingNaive.runs == 1  # resumed from the trace file
    assert [(o.qid, o.answer, o.ranked_pids) for o in again] == [(o.qid, o.answer, o.ranked_pids) for o in first]
    assert again[0].usage == first[0].usage
    # a trace written under an older row label is reused and its meta gets today's label (tables read it)
    path.with_suffix(".meta.json").write_text(json.dumps({**meta, "method": "Naive RAG (old label)"}))
    ev.run_method(ws, m, qs)
    assert CountingNaive.runs == 1 and json.loads(path.with_suffix(".meta.json").read_text()) == meta
    ev.run_method(ws, CountingNaive(top_k=3), qs)  # other parameters: runs again
    assert CountingNaive.runs == 2
    ev.run_method(ws, m, qs, resume=False)
    assert CountingNaive.runs == 3
    with pytest.raises(TypeError, match="Workspace"):  # one argument order
        ev.run_method(m, ws, qs)


def test_runs_usage_reads_each_runs_meta_so_a_resumed_run_counts_as_the_run_that_made_it(tiny_workspace):
    """A notebook's usage record is the same whether it ran its methods or read them back (notebook 04)."""
    from kgir_lib.llm import Usage

    ws = tiny_workspace(lambda req: "Answer: HP")
    qs = ws.dataset.questions
    ev.run_method(ws, CountingNaive(), qs)
    ev.run_method(ws, CountingNaive(top_k=3), qs, path=ws.cfg.run_dir / "other.trace.jsonl")
    paths = [ws.cfg.run_dir / "traces" / "naive_count" / "tiny.trace.jsonl", ws.cfg.run_dir / "other.trace.jsonl"]
    extra = Usage()
    extra.stage("loss_decomposition m").calls = 5
    cold = ev.runs_usage(paths, extra)
    assert cold.stages["naive_rag_reader"].calls == 2 and cold.stages["loss_decomposition m"].calls == 5
    assert list(cold.stages) == ["naive_rag_reader", "loss_decomposition m"] and cold.total().calls == 7
    assert ev.runs_usage([*paths, str(paths[0])], extra).snapshot() == cold.snapshot()  # a run listed twice: once
    hits = ws.llm.usage.snapshot()
    ev.run_method(ws, CountingNaive(), qs)  # read back: no call now, the same record
    assert ws.llm.usage.snapshot() == hits and ev.runs_usage(paths, extra).snapshot() == cold.snapshot()
    paths[1].with_suffix(".meta.json").unlink()
    with pytest.raises(FileNotFoundError, match="other.trace.jsonl: no .meta.json"):
        ev.runs_usage(paths)


def test_run_method_checks_the_outputs(tiny_workspace):
    ws = tiny_workspace(lambda req: "Answer: HP")

    class Broken(NaiveRAG):
        def run(self, ws, questions):
            return []
    with pytest.raises(ValueError, match="returned outputs"):
        ev.run_method(ws, Broken(), ws.dataset.questions)


class TimedBackend:
    model_id = "timed"

    def run(self, requests, on_result):
        for i, _ in enumerate(requests):
            on_result(i, ChatResult("Answer: HP", 10, 2, 1.5))


def test_cache_hits_cost_their_stored_seconds(tmp_path):
    from kgir_lib.llm import ChatRequest

    llm = LLM(TimedBackend(), LLMCache(tmp_path / "c.sqlite"), progress=False)
    req = [ChatRequest.chat(None, "hello")]
    assert llm.generate(req)[0].seconds == 1.5
    assert llm.generate(req)[0].seconds == 0.0  # plain LLM: a hit is free now
    timed = ev.StoredTimeLLM(llm)
    hit = timed.generate(req)[0]
    assert hit.cached and hit.seconds == 1.5
    assert llm.usage.stage("default").calls == 3  # counted by the wrapped LLM
    assert timed.usage is llm.usage and timed.model_id == llm.model_id and timed.cache is llm.cache
    assert "usage" not in vars(timed)  # a wrapper, not a second view of the LLM's __dict__


# ----------------------------------------------------------------------------- suite, tables, cost
def test_run_suite_scores_every_method_and_a_broken_one_raises(tiny_workspace, tiny_kg, monkeypatch):
    ws = tiny_workspace(lambda req: "Answer: Hewlett-Packard")
    with pytest.raises(ConfigError, match="'methods'.*no_such_key"):  # an unknown key: before any method runs
        ev.run_suite(ws.cfg, ws.llm, ["tiny"], ["naive_gen", "no_such_key"], workspace_fn=lambda c, n, l: ws,
                     progress=False)
    assert not ev.trace_path(ws.cfg, METHODS["naive_gen"](), "tiny").exists()

    def broken(**kw):
        raise ImportError("no module kgir_lib.methods.nothing")
    monkeypatch.setitem(METHODS, "broken", broken)
    with pytest.raises(ImportError, match="nothing"):  # never skipped silently
        ev.run_suite(ws.cfg, ws.llm, ["tiny"], ["naive_gen", "broken"], workspace_fn=lambda cfg, name, llm: ws,
                     progress=False)
    res = ev.run_suite(ws.cfg, ws.llm, ["tiny"], ["naive_gen", "naive_rag", "kg2rag"],
                       workspace_fn=lambda cfg, name, llm: ws, progress=False, resume=False)
    assert list(res.scores["method"]) == ["Naive Gen", "Naive RAG", "KG²RAG"]
    assert res.scores["EM"].tolist() == [100.0, 100.0, 100.0]
    assert res.runs["resumed"].tolist() == [False, False, False]
    assert res.indexing.loc["tiny", "triples"] == len(tiny_kg)
    again = ev.run_suite(ws.cfg, ws.llm, ["tiny"], ["naive_gen"], workspace_fn=lambda c, n, l: ws, progress=False)
    assert again.runs["resumed"].tolist() == [True]


def scores_frame():
    rows = []
    for method, em in (("KGIR-RAG", [100, 100, 0, 100]), ("Naive RAG", [0, 100, 0, 0]), ("BM25", [100, 100, 0, 100])):
        for i, e in enumerate(em):
            rows.append({"dataset": "musique", "key": method, "method": method, "qid": f"q{i}", "EM": float(e),
                         "F1": float(e) / 2, "R@2": 50.0, "R@5": 100.0, "calls": 2, "cache_hits": 0,
                         "prompt_tokens": 100 * (i + 1), "completion_tokens": 10, "seconds": 1.0})
    return pd.DataFrame(rows)


def test_summary_table_with_published_columns_kept_apart():
    ours = ev.summary_table(scores_frame(), ("EM", "F1"), label="ours (tiny, n=4)", datasets=["musique", "hotpotqa"])
    assert ours.loc["KGIR-RAG", ("ours (tiny, n=4)", "musique", "EM")] == 75.0
    assert np.isnan(ours.loc["BM25", ("ours (tiny, n=4)", "hotpotqa", "F1")])
    table = report.with_published(ours, report.published_qa(["musique", "hotpotqa"]))
    hip = [c for c in table.columns.levels[0] if c.startswith("published: HippoRAG 2")][0]
    assert table.loc["BM25", (hip, "musique", "EM")] == 20.3
    assert table.loc["BM25", ("ours (tiny, n=4)", "musique", "EM")] == 75.0  # ours untouched
    assert table.loc["GraphRAG", (hip, "hotpotqa", "F1")] == 68.6
    assert np.isnan(table.loc["GraphRAG", ("ours (tiny, n=4)", "musique", "EM")])
    assert list(table.index[:3]) == ["KGIR-RAG", "Naive RAG", "BM25"]
    assert "Naive Gen" in table.index  # the published "no retrieval" row, under our name for it
    recall = report.with_published(ev.summary_table(scores_frame(), ("R@2", "R@5")), report.published_recall(["musique"]))
    derived = [c for c in recall.columns.levels[0] if c.startswith("derived")][0]
    assert recall.loc["KGIR-RAG", (derived, "musique", "R@2")] == 49.7
    flat = report.flat_columns(table)
    assert "ours (tiny, n=4) / musique / EM" in flat.columns


def test_cost_table_per_question():
    runs = pd.DataFrame([{"dataset": "musique", "method": m, "n": 4, "wall_seconds": 8.0}
                         for m in ("KGIR-RAG", "Naive RAG", "BM25")])
    cost = ev.cost_table(scores_frame(), runs)
    assert cost.loc["BM25", "prompt tokens / q"] == 250.0
    assert cost.loc["BM25", "tokens / q"] == 260.0
    assert cost.loc["Naive RAG", "F1"] == 12.5
    assert cost.loc["KGIR-RAG", "wall seconds / q (this run)"] == 2.0
    assert ev.cost_table(scores_frame(), by_dataset=True).index.names == ["method", "dataset"]


def test_bootstrap_table_says_which_differences_the_sample_supports():
    bt = bootstrap_table(scores_frame(), reference="KGIR-RAG", metrics=("EM",), n_boot=500)
    row = bt.set_index("baseline").loc["BM25"]
    assert (row["mean diff"], row["CI lo"], row["CI hi"], row[SIDE_COLUMN]) == (0.0, 0.0, 0.0, CONTAINS)
    nrag = bt.set_index("baseline").loc["Naive RAG"]
    # differences (100, 0, 0, 100): a resample is all 0 or all 100 with probability 1/16 each, more than the
    # 2.5 % of either tail, so the percentile interval is the whole [0, 100], which contains 0
    assert (nrag["mean diff"], nrag["n"], nrag["CI lo"], nrag["CI hi"], nrag[SIDE_COLUMN]) == (50.0, 4, 0.0, 100.0,
                                                                                                CONTAINS)
    assert bootstrap_table(scores_frame(), reference="absent").empty


def test_indexing_cost_is_read_back_from_the_llm_cache(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(lambda req: "Compaq ## was ## PC maker")
    ws.kg = KnowledgeGraph()
    update_kg(ws.kg, ws.llm, tiny_dataset.corpus.passages[:3], max_tokens=ws.cfg.max_tokens("extract"))
    row = indexing_cost(ws)
    assert row["passages_extracted"] == 3 and row["extract_calls_found"] == 3
    assert row["extract_completion_tokens"] == 3 * len("Compaq ## was ## PC maker".split())
    assert row["source"].startswith("llm")


def test_indexing_cost_uses_the_profiles_extraction_budget(tiny_workspace, tiny_dataset):
    """The graph was built with cfg.max_tokens("extract"); the cost look-up must ask for the same requests."""
    ws = tiny_workspace(lambda req: "Compaq ## was ## PC maker")
    ws.cfg.max_tokens_extract = 77
    ws.kg = KnowledgeGraph()
    update_kg(ws.kg, ws.llm, tiny_dataset.corpus.passages[:2], max_tokens=ws.cfg.max_tokens("extract"))
    assert indexing_cost(ws)["extract_calls_found"] == 2


def test_indexing_cost_counts_the_replies_that_reached_the_extraction_budget(tiny_workspace, tiny_dataset):
    long_reply = "Compaq ## was ## PC maker\nCompaq ## in ## 1994"  # 11 completion tokens (words) by the script
    ws = tiny_workspace(lambda req: long_reply if "Compaq was" in req.messages[-1][1] else "Dell ## was ## founded")
    ws.cfg.max_tokens_extract = 11  # a reply cut by the backend has exactly the budget's tokens
    ws.kg = KnowledgeGraph()
    update_kg(ws.kg, ws.llm, tiny_dataset.corpus.passages[:3], max_tokens=ws.cfg.max_tokens("extract"))
    row = indexing_cost(ws)
    assert (row["extract_calls_found"], row["extract_at_budget"]) == (3, 1)
    assert row["extract_completion_tokens"] == 11 + 2 * 5


def test_figures_and_published_indexing():
    import matplotlib
    matplotlib.use("Agg")
    fig = viz.plot_f1_vs_tokens(ev.cost_table(scores_frame()))
    # KGIR-RAG and BM25 have the same tokens and F1: one shared label
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts[:2] == ["1", "2"] and texts[2] == "1  KGIR-RAG = BM25\n2  Naive RAG"
    from kgir_lib import report

    png = report.figure_png(fig)  # the key under the axes: narrow enough for a 1024-px page
    assert min(report.figure_text_px(png, w) for w in report.FIGURE_FITS.values()) >= report.MIN_TEXT_PX
    bt = bootstrap_table(scores_frame(), metrics=("F1",), n_boot=200)
    fig = viz.plot_bootstrap(bt, dataset="musique")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["Naive RAG", "BM25"]
    pub = report.published_indexing()
    assert pub.loc["GraphRAG"].tolist() == [115.5, 36.1]
    assert pub.columns.levels[0][0].startswith("published: HippoRAG 2 paper")


def test_cost_table_counts_truncations_and_kgir_seed_matches():
    df = scores_frame()
    df["truncated"] = [1, 0, 0, 1] + [0] * 8
    kgir = df["method"] == "KGIR-RAG"
    df["subgraph_rounds"] = np.where(kgir, 2.0, np.nan)      # 8 rounds over 4 questions
    df["rounds_with_seed"] = np.where(kgir, [2, 1, 0, 1] + [0] * 8, np.nan)
    cost = ev.cost_table(df)
    assert cost.loc["KGIR-RAG", "truncated / q"] == 0.5
    assert cost.loc["KGIR-RAG", "seed-match % of rounds"] == 50.0
    assert np.isnan(cost.loc["BM25", "seed-match % of rounds"])  # no evidence subgraph: no rate


def test_score_reads_seed_rounds_from_kgir_traces():
    from kgir_lib.data import Question
    from kgir_lib.methods.base import MethodOutput

    q = Question("q1", "Who?", ("X",), ("p1",), "musique")
    rounds = [{"t": 1, "subgraph": {"seeds": ["a"], "kept": [], "pruned": []}},
              {"t": 2, "subgraph": {"seeds": [], "kept": [], "pruned": []}}]
    kg = MethodOutput(qid="q1", answer="X", ranked_pids=["p1"], usage={}, trace={"rounds": rounds})
    plain = MethodOutput(qid="q1", answer="Y", ranked_pids=["p1"], usage={}, trace={})
    df = ev.score([kg, plain], [q])
    assert df.loc[0, "subgraph_rounds"] == 2 and df.loc[0, "rounds_with_seed"] == 1
    assert np.isnan(df.loc[1, "subgraph_rounds"])


def test_questions_per_dataset_names_each_n_only_when_they_differ():
    same = pd.DataFrame({"dataset": ["a", "a", "b", "b"], "qid": ["1", "2", "1", "2"]})
    assert ev.questions_per_dataset(same) == "2"
    capped = pd.DataFrame({"dataset": ["musique_train"] * 3 + ["hotpotqa"] * 2, "qid": ["1", "2", "3", "1", "2"]})
    assert ev.questions_per_dataset(capped) == "musique_train 3, hotpotqa 2"
    assert ev.ours_label(load_config("ci"), ev.questions_per_dataset(capped)).endswith("n=musique_train 3, hotpotqa 2)")


def test_answer_form_counts_words_and_partial_credit_per_method_and_dataset():
    scores = pd.DataFrame({
        "method": ["A", "A", "A", "B", "B"],
        "dataset": ["d", "d", "e", "d", "d"],
        "answer": ["Paris", "the city of Paris", None, "Rome", ""],
        "EM": [100.0, 0.0, 0.0, 0.0, 0.0],
        "F1": [100.0, 40.0, 0.0, 0.0, 0.0],
    })
    form = ev.answer_form(scores)
    assert list(form.index) == [("A", "d"), ("A", "e"), ("B", "d")]
    assert form.loc[("A", "d"), "questions"] == 2
    assert form.loc[("A", "d"), "answer words (mean)"] == 2.5  # 1 and 4 words
    assert form.loc[("A", "d"), "partial credit (F1 > 0, EM = 0)"] == 1
    assert form.loc[("A", "e"), "answer words (mean)"] == 0.0  # a missing answer has no words
    assert form.loc[("B", "d"), "partial credit (F1 > 0, EM = 0)"] == 0
    assert form.loc[("B", "d"), "answer words (mean)"] == 0.5
    assert form.loc[("A", "d"), "EM"] == 50.0 and form.loc[("A", "d"), "F1"] == 70.0


def test_answer_form_names_a_missing_column():
    with pytest.raises(KeyError, match="answer"):
        ev.answer_form(pd.DataFrame({"method": [], "dataset": [], "EM": [], "F1": []}))


def test_bootstrap_table_passes_its_resamples_and_seed_and_reads_every_metric():
    """Each row is paired_bootstrap of that pair with the table's n_boot and seed (defaults 2000 and 0); a
    metric without a paired question is skipped without ending the method's other metrics; pooled rows over
    two datasets by default; a CI above 0 by less than one point still supports the reference; an empty table
    keeps its columns."""
    a = np.array([60.0, 80.0, 70.0, 90.0, 50.0, 65.0, 75.0, 85.0, 55.0, 95.0, 62.0, 77.0])
    b = a - np.array([0.5, 0.7, 0.2, 0.9, 0.3, 0.6, 0.8, 0.1, 0.4, 0.55, 0.65, 0.35])
    scores = pd.DataFrame([{"dataset": "musique", "method": m, "qid": f"q{i}", "R@2": np.nan, "F1": f, "EM": 0.0}
                           for m, f1 in (("KGIR-RAG", a), ("Naive RAG", b)) for i, f in enumerate(f1)])
    bt = bootstrap_table(scores, metrics=("R@2", "F1", "EM"), n_boot=50, seed=3)
    assert bt[["dataset", "metric"]].values.tolist() == [["musique", "F1"], ["musique", "EM"]]
    f1 = bt.iloc[0]
    assert (f1["mean diff"], f1["CI lo"], f1["CI hi"]) == paired_bootstrap(a, b, n_boot=50, seed=3)
    assert 0 < f1["CI lo"] < 1 and f1[SIDE_COLUMN] == ABOVE
    default = bootstrap_table(scores, metrics=("F1",))
    assert tuple(default.iloc[0][["mean diff", "CI lo", "CI hi"]]) == paired_bootstrap(a, b, n_boot=2000, seed=0)
    assert paired_bootstrap(a, b, n_boot=2000, seed=0) != paired_bootstrap(a, b, n_boot=2000, seed=1)
    two = pd.concat([scores, scores.assign(dataset="hotpotqa")])
    assert bootstrap_table(two, metrics=("EM",), n_boot=20)["dataset"].tolist() == ["musique", "hotpotqa", "all"]
    assert bootstrap_table(two, metrics=("EM",), n_boot=20, pooled=False)["dataset"].tolist() == ["musique", "hotpotqa"]
    columns = ["dataset", "baseline", "metric", "n", "mean diff", "CI lo", "CI hi", SIDE_COLUMN]
    assert list(bootstrap_table(scores.iloc[:0])) == list(bootstrap_table(scores, reference="absent")) == columns
