"""Ablation / sensitivity / robustness studies (kgir_lib.eval.ablation, notebook 06)."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from kgir_lib.eval import ablation, perturb
from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.methods.base import MethodBase
from kgir_lib.notebook import viz
from kgir_lib.report import KGIR_ABLATION_DROPS


def numbered_kg(n: int, per_passage: int = 4, empty: int = 2) -> KnowledgeGraph:
    triples = [Triple(f"h{i}", "r", f"t{i}", f"p{i // per_passage}") for i in range(n)]
    return KnowledgeGraph(triples, [f"p{i // per_passage}" for i in range(n)] + [f"e{j}" for j in range(empty)])


# ----------------------------------------------------------------------------- drop_triples
def test_drop_triples_exact_values():
    kg = numbered_kg(20)
    out = perturb.drop_triples(kg, 0.1, seed=7)
    expected_drop = set(random.Random(7).sample(range(20), 2))
    assert [t.head for t in out.triples] == [f"h{i}" for i in range(20) if i not in expected_drop]
    assert len(out) == 18
    assert out.extracted == kg.extracted  # passages without triples stay "extracted"
    assert len(kg) == 20  # input untouched


@pytest.mark.parametrize("n,fraction,expected", [(20, 0.05, 1), (20, 0.1, 2), (10, 0.05, 0), (30, 0.05, 2),
                                                 (7, 0.0, 0), (7, 1.0, 7), (0, 0.1, 0)])
def test_drop_triples_count_is_round_fraction_n(n, fraction, expected):
    out = perturb.drop_triples(numbered_kg(n), fraction, seed=0)
    assert len(out) == n - expected  # 30 * 0.05 = 1.5 -> 2 (half to even)


def test_drop_triples_seeded_and_seed_dependent():
    kg = numbered_kg(100)
    a = perturb.drop_triples(kg, 0.1, seed=1)
    b = perturb.drop_triples(kg, 0.1, seed=1)
    c = perturb.drop_triples(kg, 0.1, seed=2)
    assert a.triples == b.triples
    assert a.triples != c.triples
    assert set(a.triples) <= set(kg.triples)


def test_drop_triples_keeps_duplicates_apart():
    t = Triple("a", "r", "b", "p")
    kg = KnowledgeGraph([t, t, t, t], ["p"])
    assert len(perturb.drop_triples(kg, 0.5, seed=3)) == 2


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.1", None])
def test_drop_triples_rejects_bad_fraction(bad):
    with pytest.raises(ValueError, match="fraction"):
        perturb.drop_triples(numbered_kg(4), bad, seed=0)


def test_perturbed_workspace_extends_with_new_passages(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(lambda req: "")
    full = ws.kg
    pids = [p.pid for p in tiny_dataset.corpus.passages]
    # only the first three passages are extracted so far; the rest arrive on demand
    base = full.subset(pids[:3])
    calls = []

    def ensure(ps):
        calls.append(list(ps))
        for p in base.missing(ps):
            base.add(p, full.triples_of([p]))

    ws = ws.__class__(**{**ws.__dict__, "kg": base, "ensure_kg": ensure})
    pws = perturb.perturbed_workspace(ws, 0.5, seed=0)
    assert len(base) == 5 and len(pws.kg) == 5 - round(0.5 * 5)  # 2.5 -> 2 dropped
    got = pws.kg_for(pids)
    assert calls == [pids]
    assert got.extracted == set(pids)
    for p in pids[3:]:  # new passages: each triple kept or dropped by its own seeded hash
        assert got.triples_of([p]) == perturb._keep_by_hash(full.triples_of([p]), 0.5, 0)
    assert len(base) == len(full)  # the base graph is complete and untouched by the copy
    # the same scope on the now larger base graph gives the same perturbed graph
    again = perturb.perturbed_workspace(ws, 0.5, seed=0, scope=pids[:3]).kg_for(pids)
    assert again.triples == got.triples
    assert len(calls) == 1  # nothing missing: the base graph is not asked again


def test_keep_by_hash_rate_and_stability():
    kg = numbered_kg(4000)
    kept = perturb._keep_by_hash(kg.triples, 0.1, seed=5)
    assert 0.08 * 4000 < 4000 - len(kept) < 0.12 * 4000
    # a triple's fate does not depend on the others
    half = perturb._keep_by_hash(kg.triples[:2000], 0.1, seed=5)
    assert half == [t for t in kept if int(t.head[1:]) < 2000]
    assert perturb._keep_by_hash(kg.triples, 0.0, seed=5) == kg.triples


# ----------------------------------------------------------------------------- tables
def test_summarise_seeds_mean_and_std():
    runs = pd.DataFrame([
        {"dataset": "d", "fraction": 0.0, "seed": 0, "triples": 10, "EM": 50.0, "F1": 60.0},
        {"dataset": "d", "fraction": 0.1, "seed": 0, "triples": 9, "EM": 40.0, "F1": 50.0},
        {"dataset": "d", "fraction": 0.1, "seed": 1, "triples": 9, "EM": 20.0, "F1": 40.0},
    ])
    out = ablation.summarise_seeds(runs).set_index("fraction")
    assert out.loc[0.0, "seeds"] == 1 and out.loc[0.0, "EM std"] == 0.0
    assert out.loc[0.1, "seeds"] == 2
    assert out.loc[0.1, "EM mean"] == 30.0
    assert out.loc[0.1, "EM std"] == pytest.approx(np.std([40.0, 20.0], ddof=1))
    assert out.loc[0.1, "F1 mean"] == 45.0


def test_ablation_table_puts_paper_drops_in_own_columns():
    res = pd.DataFrame([
        {"dataset": "musique", "variant": "full", "n": 8, "EM": 25.0, "F1": 30.0},
        {"dataset": "musique", "variant": "no_subgraph", "n": 8, "EM": 12.5, "F1": 31.0},
        {"dataset": "musique", "variant": "no_reflection", "n": 8, "EM": 25.0, "F1": 20.0},
        {"dataset": "musique", "variant": "no_rewrite", "n": 8, "EM": 0.0, "F1": 10.0},
        {"dataset": "hotpotqa", "variant": "full", "n": 8, "EM": 50.0, "F1": 55.0},
        {"dataset": "hotpotqa", "variant": "no_rewrite", "n": 8, "EM": 37.5, "F1": 60.0},
    ])
    t = ablation.ablation_table(res)
    m = t[t.dataset == "musique"].set_index("variant")
    assert list(m.index) == ["KGIR-RAG (full)", "w/o subgraph", "w/o reflection", "w/o rewrite"]
    # full minus the variant (report.TABLE7_SIGN): what the removed part adds
    assert m.loc["w/o subgraph", "ΔEM (ours)"] == 12.5
    assert m.loc["w/o subgraph", "ΔF1 (ours)"] == -1.0
    assert m.loc["w/o rewrite", "ΔEM (ours)"] == 25.0
    for label, (dem, df1) in KGIR_ABLATION_DROPS.items():
        assert m.loc[label, "ΔEM (paper, Qwen2.5-72B)"] == dem
        assert m.loc[label, "ΔF1 (paper, Qwen2.5-72B)"] == df1
    assert m.loc["KGIR-RAG (full)", "ΔEM (paper, Qwen2.5-72B)"] == 0.0
    h = t[t.dataset == "hotpotqa"].set_index("variant")
    assert h.loc["w/o rewrite", "ΔF1 (ours)"] == -5.0
    assert h["ΔEM (paper, Qwen2.5-72B)"].isna().all()  # the paper reports MuSiQue only
    train = ablation.ablation_table(res.replace({"dataset": {"musique": "musique_train"}}))
    t_train = train[train.dataset == "musique_train"].set_index("variant")
    assert t_train.loc["w/o rewrite", "ΔEM (paper, Qwen2.5-72B)"] == KGIR_ABLATION_DROPS["w/o rewrite"][0]
    assert m.loc["w/o subgraph", "EM"] == 12.5  # our own columns hold our numbers


def test_ablation_table_errors_name_the_problem():
    with pytest.raises(ValueError, match="lack columns"):
        ablation.ablation_table(pd.DataFrame([{"dataset": "d", "variant": "full"}]))
    with pytest.raises(ValueError, match="no 'full' row"):
        ablation.ablation_table(pd.DataFrame([{"dataset": "d", "variant": "no_rewrite", "EM": 1.0, "F1": 1.0}]))


def test_ablation_table_without_paper_columns_and_plots():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = pd.DataFrame([
        {"dataset": "musique", "variant": "full", "EM": 10.0, "F1": 20.0, "R@2": 50.0, "R@5": 70.0},
        {"dataset": "musique", "variant": "no_expansion", "EM": 5.0, "F1": 25.0, "R@2": 40.0, "R@5": 60.0},
    ])
    t = ablation.ablation_table(res, labels=ablation.KG2RAG_VARIANT_LABELS, paper_drops=None)
    assert not any("paper" in c for c in t.columns)
    row = t.set_index("variant").loc["w/o expansion"]
    assert (row["ΔEM (ours)"], row["ΔF1 (ours)"], row["R@5"]) == (5.0, -5.0, 60.0)
    fig, ax = plt.subplots()
    viz.plot_ablation(ax, t, "musique", full_label=ablation.KG2RAG_VARIANT_LABELS["full"])
    assert [tl.get_text() for tl in ax.get_xticklabels()] == ["w/o expansion"]
    plt.close(fig)


def test_study_grid_defaults_and_checks():
    g = ablation.study_grid()
    assert g == ablation.GRID and g["drop_fractions"] == (0.05, 0.10)
    assert g["kgir"] == {"max_iterations": (1, 2, 3), "top_k": (5, 10, 15), "ngram_threshold": (0.5, 0.7, 1.0)}
    g = ablation.study_grid(kg2rag={"top_k": [3, 6.0]}, drop_fractions=0.2, kgir={"top_k": None})
    assert g["kg2rag"] == {"top_k": (3, 6), "m_hops": ablation.GRID["kg2rag"]["m_hops"]}  # the other knob kept
    assert g["drop_fractions"] == (0.2,) and g["kgir"] == ablation.GRID["kgir"]
    assert ablation.study_grid(kgir={"ngram_threshold": 1})["kgir"]["ngram_threshold"] == (1.0,)
    # each value is checked by the method's own check, which is the config's rule for the field it overrides
    for kw, match in [({"kg2rag": {"top_k": []}}, "at least one"), ({"kg2rag": {"top_k": [2.5]}}, "whole number"),
                      ({"drop_fractions": [1.5]}, "outside"), ({"kgir": {"top_k": ["five"]}}, "a number"),
                      ({"kg2rag": {"m_hops": [-1]}}, "'m_hops'.*kg2rag_m_hops.*>= 0"),
                      ({"kgir": {"top_k": [0]}}, "'top_k'.*>= 1"), ({"kgir": {"topk": [5]}}, "not a knob"),
                      ({"kgir": [5]}, "kgir_sweeps")]:
        with pytest.raises(ValueError, match=match):
            ablation.study_grid(**kw)
    with pytest.raises(TypeError):
        ablation.study_grid(nope=[1])


def test_grid_sentence_says_the_grid_in_words_not_as_a_dict():
    assert ablation.grid_sentence(ablation.study_grid()) == (
        "KG²RAG sweeps top_k over 5, 10, 15, 20; m_hops over 0, 1, 2. KGIR-RAG sweeps max_iterations over 1, 2, 3; "
        "top_k over 5, 10, 15; ngram_threshold over 0.5, 0.7, 1. The robustness study drops 5 %, 10 % of the triples.")
    g = ablation.study_grid(kg2rag={"top_k": [3]}, drop_fractions=0.2)
    assert ablation.grid_sentence(g) == (
        "KG²RAG sweeps top_k over 3; m_hops over 0, 1, 2. KGIR-RAG sweeps max_iterations over 1, 2, 3; "
        "top_k over 5, 10, 15; ngram_threshold over 0.5, 0.7, 1. The robustness study drops 20 % of the triples.")
    with pytest.raises(ValueError, match="grid: missing.*drop_fractions"):
        ablation.grid_sentence({"kg2rag": {}, "kgir": {}})


# ----------------------------------------------------------------------------- runners (scripted LLM)
@dataclass
class KGCounter(MethodBase):
    """A stand-in method: reads the KG of the top passages, answers how many triples it saw (1 LLM call)."""

    k: int = 6
    tag: str = "x"
    name: ClassVar[str] = "KG counter"
    key: ClassVar[str] = "kg_counter"
    uses_kg: ClassVar[bool] = True

    def run(self, ws, questions):
        from kgir_lib.llm import ChatRequest
        from kgir_lib.llm import LLMUsage
        from kgir_lib.methods.base import MethodOutput

        hits = ws.dense.search([q.question for q in questions], self.k)
        outs = []
        for q, h in zip(questions, hits):
            kg = ws.kg_for([p for p, _ in h])
            n = len(kg.triples_of([p for p, _ in h]))
            [res] = ws.llm.generate([ChatRequest.chat(None, f"count {n} {self.tag}")], stage="counter")
            u = LLMUsage()
            u.add(res)
            outs.append(MethodOutput(q.qid, res.text, [p for p, _ in h], u, {}))
        return outs


def echo(req):
    return req.messages[-1][1].split()[1]  # the count


def test_sweep_scores_each_value_and_resumes(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(echo)
    qs = tiny_dataset.questions
    df = ablation.sweep(ws, qs, lambda k: KGCounter(k=k), [1, 2, 6], "k")
    assert list(df["value"]) == [1, 2, 6] and set(df["param"]) == {"k"}
    assert list(df["n"]) == [1, 1, 1] and (df["calls"] == 1).all()
    assert set(df.columns) >= {"EM", "F1", "R@2", "R@5", "calls", "prompt_tokens"}
    # recall of the gold Compaq/HP passages grows with k (bag-of-words ranking: HP first, then Apple, and
    # both gold passages within the top 6)
    assert list(df["R@5"]) == [50.0, 50.0, 100.0] and list(df["R@2"]) == [50.0, 50.0, 50.0]
    for k in (1, 2, 6):
        assert (ws.cfg.run_dir / "traces" / "06_ablation" / f"kg_counter-k={k}" / "tiny.trace.jsonl").exists()
    assert not (ws.cfg.run_dir / "traces" / "kg_counter").exists()  # the method's own traces untouched
    calls = ws.llm.usage.total().calls
    again = ablation.sweep(ws, qs, lambda k: KGCounter(k=k), [1, 2, 6], "k")
    assert ws.llm.usage.total().calls == calls  # resumed from the traces: not even a cache lookup
    pd.testing.assert_frame_equal(df, again)


def test_sweep_each_concatenates_the_study_datasets_in_order(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(echo)
    qs = tiny_dataset.questions
    one = ablation.sweep(ws, qs, lambda k: KGCounter(k=k), [1, 6], "k")
    both = ablation.sweep_each({"first": (ws, qs), "second": (ws, qs)}, lambda k: KGCounter(k=k),
                               iter([1, 6]), "k")  # a one-pass iterable serves every dataset
    pd.testing.assert_frame_equal(both, pd.concat([one, one], ignore_index=True))
    with pytest.raises(ValueError, match="parameter 'values'"):
        ablation.sweep_each({"first": (ws, qs)}, lambda k: KGCounter(k=k), [], "k")


def test_robustness_runs_perturb_the_graph(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(echo)
    qs = tiny_dataset.questions
    runs = ablation.robustness_runs(ws, qs, lambda: KGCounter(k=6), [0.25, 0.5], seeds=[0, 1, 2], scope="all")
    assert list(zip(runs["fraction"], runs["seed"])) == [(0.0, 0), (0.25, 0), (0.25, 1), (0.25, 2),
                                                         (0.5, 0), (0.5, 1), (0.5, 2)]
    assert list(runs["triples"]) == [8, 6, 6, 6, 4, 4, 4]  # 8 - round(0.25 * 8), 8 - round(0.5 * 8)
    answers = [json.loads(l)["answer"] for l in open(ws.cfg.run_dir / "traces" / "06_ablation" /
                                                     "kg_counter-drop=0.5-seed=1" / "tiny.trace.jsonl")]
    assert answers == ["4"]  # the method saw the perturbed graph
    assert len(ws.kg) == 8  # the base graph is untouched
    summary = ablation.summarise_seeds(runs)
    assert list(summary["fraction"]) == [0.0, 0.25, 0.5] and list(summary["seeds"]) == [1, 3, 3]
    assert list(summary["triples"]) == [8, 6, 4]


def test_robustness_scope_read_perturbs_only_what_was_read(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(echo)
    runs = ablation.robustness_runs(ws, tiny_dataset.questions, lambda: KGCounter(k=2), [0.5], seeds=[0])
    hits = ws.dense.search([tiny_dataset.questions[0].question], 2)[0]
    n_read = len(ws.kg.triples_of([p for p, _ in hits]))
    assert list(runs["triples"]) == [n_read, n_read - round(0.5 * n_read)]


def test_variant_means_rows(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(echo)
    df = ablation.variant_means(ablation.variant_scores(ws, tiny_dataset.questions,
                                                        lambda v: KGCounter(k=int(v), tag=v), ["6", "1"],
                                                        {"6": "six"}))
    assert list(df["variant"]) == ["6", "1"] and list(df["label"]) == ["six", "1"]
    assert list(df["dataset"]) == ["tiny", "tiny"]


def test_robustness_is_the_seed_summary_of_the_runs(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(echo)
    summary = ablation.robustness(ws, tiny_dataset.questions, lambda: KGCounter(k=6), [0.5], seeds=[3, 4],
                                  scope="all")
    assert list(summary["fraction"]) == [0.0, 0.5] and list(summary["seeds"]) == [1, 2]
    assert list(summary["triples"]) == [8.0, 4.0]  # the whole graph, then half of it
    # the summary is exactly summarise_seeds of the runs (mean and std tested by hand above)
    runs = ablation.robustness_runs(ws, tiny_dataset.questions, lambda: KGCounter(k=6), [0.5], seeds=[3, 4],
                                    scope="all")
    pd.testing.assert_frame_equal(summary, ablation.summarise_seeds(runs))
    # the counter never answers the gold answer; the gold passages stay retrievable on half the graph
    assert list(summary["EM mean"]) == [0.0, 0.0] and list(summary["R@5 mean"]) == [100.0, 100.0]
    with pytest.raises(ValueError, match="seeds"):
        ablation.robustness(ws, tiny_dataset.questions, lambda: KGCounter(), [0.5], seeds=[])
    with pytest.raises(ValueError, match="scope"):
        ablation.robustness(ws, tiny_dataset.questions, lambda: KGCounter(), [0.5], seeds=[0], scope="x")


def test_plot_variant_scores_one_bar_per_dataset_and_variant():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = pd.DataFrame([{"dataset": d, "variant": v, "F1": f} for d, f0 in (("musique", 1.0), ("hotpotqa", 2.0))
                      for v, f in (("full", f0), ("w/o x", f0 + 1))])
    fig, ax = plt.subplots()
    viz.plot_variant_scores(ax, t, "F1")
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == [1.0, 2.0, 2.0, 3.0]
    assert [tl.get_text() for tl in ax.get_xticklabels()] == ["full", "w/o x"]
    plt.close(fig)


def test_variant_intervals_are_full_minus_variant_paired_by_question():
    from kgir_lib.eval.bootstrap import paired_bootstrap

    per_q = pd.DataFrame({
        "dataset": ["d"] * 8, "variant": ["full"] * 4 + ["no_rewrite"] * 4, "label": ["x"] * 8,
        "qid": ["q1", "q2", "q3", "q4"] * 2,
        "EM": [100.0, 100.0, 0.0, 100.0, 0.0, 100.0, 0.0, 0.0],
        "F1": [100.0, 100.0, 50.0, 100.0, 50.0, 100.0, 50.0, 0.0],
    })
    ci = ablation.variant_intervals(per_q, n_boot=500, seed=0).set_index("metric")
    assert list(ci.index) == ["EM", "F1"] and (ci["variant"] == "no_rewrite").all() and (ci["n"] == 4).all()
    assert ci.loc["EM", "diff"] == 50.0 and ci.loc["F1", "diff"] == pytest.approx(37.5)
    assert [ci.loc["EM", c] for c in ("diff", "CI lo", "CI hi")] == list(paired_bootstrap(
        [100.0, 100.0, 0.0, 100.0], [0.0, 100.0, 0.0, 0.0], n_boot=500, seed=0))
    # the table carries them beside our changes; the full row has none
    means = ablation.variant_means(per_q)
    assert list(means["n"]) == [4, 4] and list(means["EM"]) == [75.0, 25.0]
    t = ablation.ablation_table(means, intervals=ablation.variant_intervals(per_q, n_boot=500)).set_index("variant")
    assert t.loc["w/o rewrite", "ΔEM (ours)"] == 50.0
    assert t.loc["w/o rewrite", "ΔEM CI lo"] == ci.loc["EM", "CI lo"]
    assert t.loc["w/o rewrite", "ΔF1 CI hi"] == ci.loc["F1", "CI hi"]
    assert np.isnan(t.loc["KGIR-RAG (full)", "ΔEM CI lo"])
    with pytest.raises(ValueError, match="no 'full' variant"):
        ablation.variant_intervals(per_q[per_q["variant"] != "full"])
    assert ablation.variant_intervals(per_q[per_q["variant"] == "full"]).empty


def test_variant_scores_one_row_a_question_and_variant(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(echo)
    qs = tiny_dataset.questions
    per_q = ablation.variant_scores(ws, qs, lambda v: KGCounter(k=int(v), tag=v), ["6", "1"], {"6": "six"})
    assert len(per_q) == 2 * len(qs)
    assert list(per_q.columns[:4]) == ["dataset", "variant", "label", "qid"]
    assert list(per_q["qid"][: len(qs)]) == [q.qid for q in qs]
    means = ablation.variant_means(per_q)
    assert list(means["EM"]) == list(per_q.groupby("variant", sort=False)["EM"].mean())


@dataclass
class OtherCounter(KGCounter):
    key: ClassVar[str] = "kg_counter_other"


def test_a_study_lists_its_runs_so_its_usage_is_the_same_whether_it_ran_them_or_read_them_back(tiny_workspace,
                                                                                                 tiny_dataset):
    """Notebook 06's usage table: every helper appends each run's trace file to ``ran``, and the usage read from
    those runs' metas is what a cold execution called, and the same again when a second execution reads every run
    back (calling nothing)."""
    from kgir_lib.eval import evaluate as ev

    ws = tiny_workspace(echo)
    qs = tiny_dataset.questions

    def study(ran):
        ablation.variant_scores(ws, qs, lambda v: (KGCounter if v == "6" else OtherCounter)(k=int(v), tag=v),
                                ["6", "1"], ran=ran)
        ablation.run_and_score(ws, qs, KGCounter(k=2, tag="forced"), ws.cfg.run_dir / "forced.trace.jsonl",
                               ran=ran)
        ablation.sweep_each({"tiny": (ws, qs)}, lambda k: KGCounter(k=k), [1, 6], "k", ran)
        ablation.robustness_runs(ws, qs, lambda: KGCounter(k=6), [0.5], seeds=[0, 1], scope="all", ran=ran)

    first = []
    study(first)
    study_dir = ws.cfg.run_dir / "traces" / "06_ablation"
    assert first == [ws.cfg.run_dir / "traces" / "kg_counter" / "tiny.trace.jsonl",
                     ws.cfg.run_dir / "traces" / "kg_counter_other" / "tiny.trace.jsonl",
                     ws.cfg.run_dir / "forced.trace.jsonl",
                     *(study_dir / run / "tiny.trace.jsonl"
                       for run in ("kg_counter-k=1", "kg_counter-k=6", "kg_counter-drop=0",
                                   "kg_counter-drop=0.5-seed=0", "kg_counter-drop=0.5-seed=1"))]
    cold = ev.runs_usage(first).snapshot()
    assert cold == ws.llm.usage.snapshot() and cold["counter"]["calls"] == 8  # one question, one call a run
    calls = ws.llm.usage.total().calls
    second = []
    study(second)
    assert ws.llm.usage.total().calls == calls  # every run read back
    assert second == first and ev.runs_usage(second).snapshot() == cold
