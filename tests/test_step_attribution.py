"""Step attribution (kgir_lib.eval.mechanism.step_attribution): exact values on hand-made traces."""
from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pandas as pd
import pytest

from kgir_lib.config import PROJECT_ROOT
from kgir_lib.data import passage_id
from kgir_lib.eval.mechanism import headroom as hr
from kgir_lib.eval.mechanism import step_attribution as sa
from kgir_lib.eval.mechanism.tables import mechanism_tables
from kgir_lib.llm.response_log import log_stats
from kgir_lib.llm.response_log import logged_at, read_log
from kgir_lib.registry import STUDY_METHODS
from kgir_lib.traces import trace_filename, write_jsonl

from _mech_traces import COMPAQ, QUESTION, record, rnd

QIDS = [f"q{i}" for i in range(1, 7)]
GOLD = ("pCompaq", "pHP")


def full_run() -> list:
    """The full method: right on q1 only; R@5 50 (one of two gold passages in its top 5)."""
    return [record(q, answer="Hewlett-Packard" if q == "q1" else "IBM", ranked_pids=["pCompaq", "pIBM", "pDell"])
            for q in QIDS]


def seeds_run() -> list:
    """Oracle seeds: right on q1 and q2, R@5 100 on q2; the oracle applied except on q6."""
    return [record(q, answer="Hewlett-Packard" if q in ("q1", "q2") else "IBM", variant="oracle_seeds",
                   ranked_pids=["pCompaq", "pHP"] if q == "q2" else ["pCompaq", "pIBM"],
                   oracle={"parts": ["seeds"], "not_applied": {"seeds": "the gold names no entity"} if q == "q6" else {}})
            for q in QIDS]


def context_run() -> list:
    """The context oracle: right everywhere, no retrieval, the gold passages as the reader's context."""
    final = {"raw": "", "question": QUESTION, "answer": "Hewlett-Packard", "forced": False, "context_pids": list(GOLD)}
    return [record(q, rounds=[{"iteration": 1, "query": QUESTION, "retrieved": [], "usable": {}, "truncated": {},
                               "final": final}], answer="Hewlett-Packard", variant="oracle_context",
                   answered_by="reader", ranked_pids=list(GOLD), no_retrieval=True,
                   oracle={"parts": ["context"], "not_applied": {}, "context_pids": list(GOLD)}) for q in QIDS]


def bridge_run() -> list:
    """Ours: the same answers and ranked lists as the full method."""
    return [dict(r, trace=dict(r["trace"], variant="bridge_rewrite")) for r in full_run()]


RUNS = {"kgir": full_run(), "kgir_oracle_seeds": seeds_run(), "kgir_oracle_context": context_run(),
        "kgir_bridge_rewrite": bridge_run()}
BRIDGES = {"q1": (COMPAQ,), "q2": (COMPAQ,), **{q: () for q in QIDS[2:]}}


@pytest.fixture
def table():
    return sa.step_attribution_table(RUNS, BRIDGES, "d", n_ctx=5, labels={"kgir": "KGIR-RAG"})


def test_family_is_declared_before_the_run():
    assert sa.FAMILY[:3] == (("kgir_oracle_seeds", "EM"), ("kgir_oracle_seeds", "F1"), ("kgir_oracle_seeds", "R@5"))
    assert len(sa.FAMILY) == len(sa.ROWS) * 3 and set(sa.ROWS) >= {"kgir_oracle_context", *sa.OURS}


def test_scores_tests_and_holm_known_values(table):
    t = table.set_index("key")
    assert list(t.index) == ["kgir", "kgir_oracle_seeds", "kgir_oracle_context", "kgir_bridge_rewrite"]
    assert t["n"].tolist() == [6, 6, 6, 6] and t.loc["kgir", "method"] == "KGIR-RAG"
    assert t.loc["kgir_oracle_seeds", "oracle applied"] == 5 and np.isnan(t.loc["kgir_bridge_rewrite", "oracle applied"])
    assert t["EM"].round(4).tolist() == [16.6667, 33.3333, 100.0, 16.6667]
    assert t.loc["kgir_oracle_seeds", ["EM full", "ΔEM"]].round(4).tolist() == [16.6667, 16.6667]
    assert t.loc["kgir_oracle_seeds", ["R@5", "R@5 full"]].round(4).tolist() == [58.3333, 50.0]
    assert np.isnan(t.loc["kgir_oracle_context", "R@5"]) and np.isnan(t.loc["kgir_oracle_context", "p R@5"])
    # McNemar: seeds 1 only-variant question (p 1), context 5 (p 2 / 2^5); sign-flip: F1 alike, R@5 one difference
    assert t.loc["kgir_oracle_seeds", ["EM discordant", "p EM"]].tolist() == ["1/0", 1.0]
    assert t.loc["kgir_oracle_context", ["EM discordant", "p EM", "p F1"]].tolist() == ["5/0", 0.0625, 0.0625]
    assert t.loc["kgir_oracle_seeds", "p R@5"] == 1.0 and t.loc["kgir_bridge_rewrite", "p EM"] == 1.0
    # 8 tests made (seeds 3, context 2, bridge 3), but Holm adjusts for the declared family of 23 (the 15 tests of
    # the variants not run count as p = 1): 23 x 0.0625 > 1
    assert sa.FAMILY_SIZE == 23
    assert t.loc["kgir_oracle_context", ["p EM (Holm)", "p F1 (Holm)"]].tolist() == [1.0, 1.0]
    assert t.loc["kgir_oracle_seeds", ["p EM (Holm)", "p F1 (Holm)", "p R@5 (Holm)"]].tolist() == [1.0, 1.0, 1.0]
    assert np.isnan(t.loc["kgir", "p EM (Holm)"])
    # at level 0.05 / 23 six questions detect nothing: even 5 of 5 discordant ones give p = 0.0625
    assert t.loc["kgir_bridge_rewrite", sa.MDE_COLUMN] == t.loc["kgir_oracle_context", sa.MDE_COLUMN] == np.inf
    assert sa.MDE_COLUMN == "MDE EM (80% power, α = 0.05 / family size)"


def test_funnel_steps_each_variant_passes(table):
    t = table.set_index("key")
    steps = ["bridge questions", "1 seed matched", "2 bridge in G_Ans", "3 rewrite names it", "4 D'_t finds next hop",
             "5 answer correct", "next hop read"]
    assert t.loc["kgir", steps].tolist() == [2, 2, 2, 2, 2, 1, 2]
    assert t.loc["kgir_oracle_seeds", steps].tolist() == [2, 2, 2, 2, 2, 2, 2]
    assert t.loc["kgir_oracle_context", steps].tolist() == [2, 0, 0, 0, 0, 0, 2]  # no chain, the gold read


def test_headroom_sentence(table):
    assert hr.headroom_sentence(table, "d") == (
        "d (n = 6): EM of the full method 16.7; oracle seeds 33.3 (+16.7; gold given on 5 of 6); the shared reader "
        "over the gold passages "
        "alone 100.0 (+83.3); ours: the bridge rewrite 16.7 (+0.0, p(Holm) 1).")
    with pytest.raises(ValueError, match="no 'kgir' row"):
        hr.headroom_sentence(table, "other")


def test_headroom_figure(table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = hr.plot_headroom(table)
    [ax] = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["full", "+ seeds", "gold\ncontext", "bridge\nrewrite"]
    assert [round(p.get_height(), 4) for p in ax.patches] == [16.6667, 16.6667, 100.0, 16.6667]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("no published KGIR-RAG EM" in t for t in legend)
    assert legend[:4] == [hr.STYLES[k]["label"] for k in ("full", "rise", "ceiling", "ours")]  # every style drawn
    assert hr.STYLES["baseline"]["label"] in legend  # the dotted line at the full method's EM is named
    plt.close(fig)
    fig = hr.plot_headroom(table, published_em={"d": 40.0})
    assert "KGIR-RAG EM as published" in [t.get_text() for t in fig.legends[0].get_texts()]
    plt.close(fig)


def test_no_reference_is_an_error():
    with pytest.raises(ValueError, match="no 'kgir' traces"):
        sa.step_attribution_table({"kgir_oracle_seeds": seeds_run()}, BRIDGES, "d", 5)


def test_mechanism_tables_carry_the_step_attribution(tmp_path):
    paras = [("Compaq", "Compaq was the top PC maker of 1994."), ("Hewlett-Packard", "HP merged with Compaq in 2002.")]
    p = [passage_id(t, x) for t, x in paras]
    rec = {"id": "q1", "question": QUESTION, "answer": "Hewlett-Packard", "answer_aliases": ["HP"],
           "paragraphs": [{"idx": i, "title": t, "paragraph_text": x, "is_supporting": True}
                          for i, (t, x) in enumerate(paras)],
           "question_decomposition": [{"question": "top PC maker of 1994", "answer": "Compaq", "paragraph_support_idx": 0},
                                      {"question": "Who merged with #1 in 2002?", "answer": "Hewlett-Packard",
                                       "paragraph_support_idx": 1}]}
    data = tmp_path / "data" / "mq"
    data.mkdir(parents=True)
    (data / "mq.json").write_text(json.dumps([rec]))
    (data / "mq_corpus.json").write_text(json.dumps([{"title": t, "text": x} for t, x in paras]))
    run = tmp_path / "run"
    for key, answer in (("kgir", "IBM"), ("kgir_oracle_next_hop", "HP")):
        r = record("q1", rounds=[rnd(retrieved=[p[0]], rewrite_retrieved=[p[0]])], answer=answer, gold_pids=p,
                   ranked_pids=p, oracle={"parts": ["next_hop"], "not_applied": {}} if key != "kgir" else None)
        write_jsonl([r], run / "traces" / key / trace_filename("mq"))
    t = mechanism_tables(run, ["mq"], data_dir=tmp_path / "data")["step_attribution"].set_index("key")
    assert list(t.index) == ["kgir", "kgir_oracle_next_hop"]
    assert t["EM"].tolist() == [0.0, 100.0] and t.loc["kgir_oracle_next_hop", "method"] == "KGIR-RAG + oracle next hop"
    assert t["bridge questions"].tolist() == [1, 1]


def test_notebook_04_flow_on_the_tiny_workspace(tmp_path, cfg, tiny_dataset, tiny_kg, make_llm):
    """Notebook 04's §3b on the tiny Fig. 6 corpus with a scripted LLM: every study variant runs through
    run_method (traces written), mechanism_tables reads them into the step attribution, its sentence and figure."""
    import matplotlib

    matplotlib.use("Agg")
    from conftest import BagOfWordsEncoder
    from kgir_lib.data import load_dataset
    from kgir_lib.eval import evaluate as ev
    from kgir_lib.methods.base import Workspace
    from kgir_lib.registry import build_method
    from kgir_lib.retrieval import DenseIndex

    ps = {p.title: p for p in tiny_dataset.corpus.passages}
    rec = {"id": "q1", "question": tiny_dataset.questions[0].question, "answer": "Hewlett-Packard",
           "answer_aliases": ["HP"],
           "paragraphs": [{"idx": i, "title": t, "paragraph_text": ps[t].text, "is_supporting": t in ("Compaq",
                                                                                                      "Hewlett-Packard")}
                          for i, t in enumerate(ps)],
           "question_decomposition": [
               {"question": "Which company was the top PC maker of 1994?", "answer": "Compaq", "paragraph_support_idx": 0},
               {"question": "Which company merged with #1 in 2002?", "answer": "Hewlett-Packard",
                "paragraph_support_idx": 1}]}
    data = tmp_path / "data" / "tiny"
    data.mkdir(parents=True)
    (data / "tiny.json").write_text(json.dumps([rec]))
    (data / "tiny_corpus.json").write_text(json.dumps([{"title": p.title, "text": p.text} for p in ps.values()]))
    ds = load_dataset("tiny", tmp_path / "data")

    def script(req):
        return {"kgir_ner": '{"named_entities": ["1994"]}', "kgir_rewrite": "Rewritten question: Who founded Dell?",
                "kgir_bridge_rewrite": "Bridge: Compaq\nQuestion: Which company merged with Compaq in 2002?",
                "kgir_reflect": "Reasoning: r.\nAnswer: HP", "reader": "Answer: Hewlett-Packard"
                if "In 2002 Hewlett-Packard" in req.messages[-1][1] else "Answer: IBM"}.get(req.prompt, "Answer: x")
    ws = Workspace(cfg=cfg, dataset=ds, llm=make_llm(script), dense=DenseIndex(ds.corpus.passages, BagOfWordsEncoder(),
                                                                                 progress=False), kg=tiny_kg)
    for key in ["kgir", *STUDY_METHODS]:
        ev.run_method(ws, build_method(key), ds.questions)
    attr = mechanism_tables(cfg.run_dir, ["tiny"], data_dir=tmp_path / "data")["step_attribution"]
    assert attr["key"].tolist() == ["kgir", *sa.ROWS] and (attr["n"] == 1).all()
    assert attr.set_index("key").loc["kgir_oracle_context", "EM"] == 100.0  # the gold passages hold the answer
    assert hr.headroom_sentence(attr, "tiny").startswith("tiny (n = 1): EM of the full method ")
    hr.plot_headroom(attr)


def _p(value: float) -> str:
    """A p value as the documents write it: two significant digits, 1 as "1"."""
    return "1" if value >= 1 else f"{value:#.2g}"


def hotpotqa_reading(hp: pd.DataFrame) -> list:
    """The phrases of the results page's reading of the local hotpotqa attribution, from its rows."""
    full, seeds, hop = hp.loc["kgir"], hp.loc["kgir_oracle_seeds"], hp.loc["kgir_oracle_next_hop"]
    ceiling, every, ours = hp.loc["kgir_oracle_context"], hp.loc["kgir_all_passages"], hp.loc["kgir_bridge_rewrite"]
    n = int(full["bridge questions"])
    gained, lost = (int(x) for x in hop["EM discordant"].split("/"))
    # no ideal rewrite on HotpotQA: both variants with it repeat the requests of the row before them
    assert int(hp.loc["kgir_oracle_rewrite", "gold given: rewrite"]) == 0
    assert hp.loc["kgir_oracle_rewrite", "EM discordant"] == "0/0"
    assert hp.loc["kgir_oracle_seeds_rewrite", "EM"] == seeds["EM"]
    # the words around the numbers: nothing survives Holm; the next hop and the gold passages gain
    assert hp["p EM (Holm)"].dropna().min() >= 0.05 and min(hop["ΔEM"], ceiling["ΔEM"]) > 0
    assert seeds["2 bridge in G_Ans"] < full["2 bridge in G_Ans"]
    return [
        f"On hotpotqa ({int(full['n'])} questions, {n} of them with a gold bridge) the gold seeds "
        f"(given on {int(seeds['gold given: seeds'])}) change EM by {seeds['ΔEM']:+.1f}",
        f"holds the bridge less often than the model's own seeds' ({int(seeds['2 bridge in G_Ans'])} of {n} against "
        f"{int(full['2 bridge in G_Ans'])})",
        f"the gold next hop, handed to the reflection and the reader on the {int(hop['gold given: next hop'])} bridge "
        f"questions only, turns {gained} wrong answers right and {lost} right ones wrong ({hop['ΔEM']:+.1f} EM, "
        f"Holm p {_p(hop['p EM (Holm)'])})",
        f"the gold passages alone reach {ceiling['EM']:.1f} ({ceiling['ΔEM']:+.1f}, Holm p "
        f"{_p(ceiling['p EM (Holm)'])})",
        f"all of D'_t puts the next hop in the reader's context on {int(every['next hop read'])} of {n} "
        f"(the full method: {int(full['next hop read'])}) and gains {every['ΔEM']:+.1f} EM (Holm p "
        f"{_p(every['p EM (Holm)'])})",
        f"our bridge rewrite names the bridge on {int(ours['3 rewrite names it'])} of {n} (the faithful rewrite: "
        f"{int(full['3 rewrite names it'])}) and changes EM by {ours['ΔEM']:+.1f} (Holm p {_p(ours['p EM (Holm)'])})",
    ]


def test_results_page_reading_of_the_local_attribution_quotes_its_table():
    readme = " ".join((PROJECT_ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    t = pd.read_csv(PROJECT_ROOT / "results/local/tables/04_step_attribution.csv")
    row = t[t["dataset"] == "musique_train"].set_index("key")
    full, rewrite, chain = row.loc["kgir"], row.loc["kgir_oracle_rewrite"], row.loc["kgir_oracle_seeds_rewrite_next_hop"]
    ceiling, ours, n = row.loc["kgir_oracle_context"], row.loc["kgir_bridge_rewrite"], int(full["bridge questions"])
    hop = row.loc["kgir_oracle_next_hop"]
    quoted = [
        f"it already matches a seed on {int(full['1 seed matched'])} of {n} bridge questions",
        f"from {int(full['3 rewrite names it'])} to {int(rewrite['3 rewrite names it'])} of {n} questions (step 2 "
        f"counting a graph entity whose name contains the bridge's) and R@5 up "
        f"by {rewrite['ΔR@5']:.1f} points (Holm p {_p(rewrite['p R@5 (Holm)'])})",
        f"so is the gold next hop's alone ({hop['ΔEM']:+.1f} EM, Holm p {_p(hop['p EM (Holm)'])}). Both together, "
        f"after the gold seeds, lift EM to {chain['EM']:.1f} ({chain['ΔEM']:+.1f} over the full method, Holm p {_p(chain['p EM (Holm)'])})",
        f"alone reach {ceiling['EM']:.1f} ({ceiling['ΔEM']:+.1f}, Holm p {_p(ceiling['p EM (Holm)'])})",
        f"names the bridge on {int(ours['3 rewrite names it'])} of {n} questions (the faithful rewrite: "
        f"{int(full['3 rewrite names it'])}) and gains {ours['ΔEM']:+.1f} EM (Holm p {_p(ours['p EM (Holm)'])})",
    ]
    assert sorted(row.index) == sorted(["kgir", *STUDY_METHODS])  # every variant
    assert len(STUDY_METHODS) == 8
    hp = t[t["dataset"] == "hotpotqa"].set_index("key")
    assert sorted(hp.index) == sorted(["kgir", *STUDY_METHODS])  # every variant on both datasets
    results_page = " ".join((PROJECT_ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    assert (f"has every variant on musique_train's {int(full['n'])} and hotpotqa's {int(hp.loc['kgir', 'n'])} "
            f"questions") in results_page
    quoted += hotpotqa_reading(hp)
    everything = row.loc["kgir_all_passages"]
    quoted.append(f"puts the next hop in the reader's context on {int(everything['next hop read'])} of {n} questions "
                  f"(the full method: {int(full['next hop read'])}) and gains {everything['ΔEM']:+.1f} EM (Holm p "
                  f"{_p(everything['p EM (Holm)'])})")
    for phrase in quoted:
        assert phrase in readme, phrase
    # the words around the numbers: the rewrite alone, the next hop alone and both together after the gold seeds are
    # within noise, the seeds change nothing; the gold passages and the rewrite's recall pass Holm
    assert min(rewrite["p EM (Holm)"], hop["p EM (Holm)"], chain["p EM (Holm)"]) >= 0.05
    assert row.loc["kgir_oracle_seeds", "ΔEM"] == 0
    assert max(ceiling["p EM (Holm)"], rewrite["p R@5 (Holm)"]) < 0.05
    assert min(hop["ΔEM"], ceiling["ΔEM"]) > 0  # the way hotpotqa's point too


def _forty(right: set, variant: str = "full", parts=None, pids=("pCompaq", "pIBM")) -> list:
    """Forty questions, right on ``right``; an oracle variant's trace says every step in ``parts`` applied."""
    oracle = {"parts": list(parts), "not_applied": {}} if parts else None
    return [record(q, answer="Hewlett-Packard" if q in right else "IBM", variant=variant, ranked_pids=list(pids),
                   oracle=oracle) for q in (f"q{i}" for i in range(40))]


def test_cumulative_oracles_finite_mde_holm_ranks_and_the_level_known_values():
    """The full method right on 10 of 40 questions, the cumulative oracles on 30, 34 and 36 (all the full
    method's among them), ours on 10 others: McNemar's p = 2 / 2^b, Holm's factor (the declared 23 tests) by rank,
    and the MDE of each row from its own discordance on the questions the full method answered, at level
    alpha / 23 -- and at another alpha. A question only the variant answered is not paired; a variant without a common question has no
    test and no MDE."""
    from kgir_lib.eval.stats import mde_mcnemar

    q = [f"q{i}" for i in range(40)]
    runs = {"kgir": _forty(set(q[:10])),
            "kgir_oracle_seeds": _forty(set(q[:30]), "oracle_seeds", ["seeds"], ("pCompaq", "pHP"))
            + [record("q40", variant="oracle_seeds", oracle={"parts": ["seeds"], "not_applied": {}})],
            "kgir_oracle_rewrite": [record("z1", answer="IBM", variant="oracle_rewrite",
                                           oracle={"parts": ["rewrite"], "not_applied": {}})],
            "kgir_oracle_seeds_rewrite": _forty(set(q[:34]), "oracle_seeds_rewrite", ["seeds", "rewrite"]),
            "kgir_oracle_seeds_rewrite_next_hop": _forty(set(q[:36]), "oracle_seeds_rewrite_next_hop",
                                                         ["seeds", "rewrite", "next_hop"]),
            "kgir_all_passages": _forty(set(q[5:15]), "all_passages")}
    bridges = {x: (COMPAQ,) for x in q}
    t = sa.step_attribution_table(runs, bridges, "d", n_ctx=5).set_index("key")
    assert list(t.index) == ["kgir", *sa.CUMULATIVE, "kgir_oracle_rewrite", "kgir_all_passages"]
    assert t["n"].tolist() == [40, 40, 40, 40, 0, 40]
    t = t.drop(index="kgir_oracle_rewrite")  # no common question: no test, no MDE
    assert t["EM"].tolist() == [25.0, 75.0, 85.0, 90.0, 25.0] and (t["EM full"] == 25.0).all()
    assert t["oracle applied"].fillna(-1).tolist() == [-1, 41, 40, 40, -1]
    assert t["EM discordant"].tolist() == ["", "20/0", "24/0", "26/0", "5/5"]
    assert t.loc["kgir_oracle_seeds", "p EM"] == 2 * 0.5 ** 20 and t.loc["kgir_all_passages", "p EM"] == 1.0
    # 12 tests made (4 rows x 3 metrics) in the declared family of 23; the three smallest p are the oracles' EM:
    # factors 23, 22, 21
    assert t.loc["kgir_oracle_seeds_rewrite_next_hop", "p EM (Holm)"] == pytest.approx(23 * 2 * 0.5 ** 26, rel=1e-12)
    assert t.loc["kgir_oracle_seeds_rewrite", "p EM (Holm)"] == pytest.approx(22 * 2 * 0.5 ** 24, rel=1e-12)
    assert t.loc["kgir_oracle_seeds", "p EM (Holm)"] == pytest.approx(21 * 2 * 0.5 ** 20, rel=1e-12)
    assert t.loc["kgir_oracle_seeds", ["R@5", "R@5 full", "R@5 discordant"]].tolist() == [100.0, 50.0, "40"]
    mde = t[sa.MDE_COLUMN]
    assert np.isnan(mde["kgir"]) and mde.iloc[1:].tolist() == [42.5, 47.5, 50.0, np.inf]
    assert mde.iloc[1:4].tolist() == [100 * mde_mcnemar(40, b / 40, 0.05 / 23, 0.8) for b in (20, 24, 26)]
    strict = sa.step_attribution_table(runs, bridges, "d", n_ctx=5, alpha=0.01).set_index("key")[sa.MDE_COLUMN]
    assert strict.iloc[1:4].tolist() == pytest.approx([45.0, 52.5, 55.0], rel=1e-12)
    no_common = sa.step_attribution_table(runs, bridges, "d", n_ctx=5).set_index("key").loc["kgir_oracle_rewrite"]
    assert np.isnan(no_common[sa.MDE_COLUMN]) and np.isnan(no_common["p EM"]) and np.isnan(no_common["EM"])
    assert t.loc["kgir_oracle_seeds", ["5 answer correct", "next hop read"]].tolist() == [30, 40]
    assert hr.headroom_sentence(t.reset_index(), "d") == (
        "d (n = 40): EM of the full method 25.0; oracle seeds 75.0 (+50.0), + the ideal rewrite 85.0 (+10.0), "
        "+ the gold next hop 90.0 (+5.0); ours: the reflection reading all of D'_t 25.0 (+0.0, p(Holm) 1).")


def test_question_scores_and_funnel_counts_known_values():
    """F1 of a partial answer, R@5 cut at five, the funnel of no bridge question, the default containment rule,
    the any-round count over two rounds, and "next hop read" within the context of n_ctx passages."""
    from _mech_traces import rnd

    r = record("q1", answer="Hewlett", gold_answers=("Hewlett Packard",),
               ranked_pids=["pCompaq", "p2", "p3", "p4", "p5", "pHP"])
    s = sa.question_scores([r])
    assert list(s.columns) == list(sa.question_scores([]).columns) == ["qid", "EM", "F1", "R@5"]
    assert s.iloc[0].tolist()[:2] == ["q1", 0.0] and round(s.loc[0, "F1"], 4) == 66.6667 and s.loc[0, "R@5"] == 50.0
    empty = {"bridge questions": 0, **{step: 0 for step in sa.STEPS[1:]}, "next hop read": 0}
    assert sa.funnel_counts([r], {}, 5) == empty and list(sa.funnel_counts([r], {}, 5)) == list(empty)
    # a G_Ans name that contains the bridge: counted by the default rule only
    loose = record("q1", rounds=[rnd(gans=(("Compaq Computer Corporation", "was top PC maker of", "1994", "pCompaq",
                                            0.9),))])
    assert sa.funnel_counts([loose], {"q1": (COMPAQ,)}, 5)["2 bridge in G_Ans"] == 1
    assert sa.funnel_counts([loose], {"q1": (COMPAQ,)}, 5, mode="equal")["2 bridge in G_Ans"] == 0
    # two rounds, the bridge reached in the second: counted once, any round
    two = record("q1", rounds=[rnd(1, gans=(), verdict="missing"), rnd(2)])
    got = sa.funnel_counts([two], {"q1": (COMPAQ,)}, 5)
    assert [got[step] for step in sa.STEPS[1:]] == [1, 1, 1, 1, 1] and got["bridge questions"] == 1
    assert list(got) == list(empty) and all(type(v) is int for v in got.values())  # the table's counts, as ints
    # w/o reflection reads the first n_ctx passages of D'_1: the next hop (pHP, second) only from two on
    short = record("q1", variant="no_reflection", rounds=[rnd(rewrite_retrieved=("pCompaq", "pHP", "pX"))])
    assert [sa.funnel_counts([short], {"q1": (COMPAQ,)}, n)["next hop read"] for n in (1, 2)] == [0, 1]


def test_headroom_sentence_without_oracles_and_with_both_repairs():
    runs = {"kgir": full_run(), "kgir_bridge_rewrite": bridge_run(),
            "kgir_all_passages": [dict(r, trace=dict(r["trace"], variant="all_passages")) for r in full_run()]}
    t = sa.step_attribution_table(runs, BRIDGES, "d", n_ctx=5)
    assert hr.headroom_sentence(t[t["key"] == "kgir"], "d") == "d (n = 6): EM of the full method 16.7."
    assert hr.headroom_sentence(t, "d") == (
        "d (n = 6): EM of the full method 16.7; ours: the bridge rewrite 16.7 (+0.0, p(Holm) 1), "
        "the reflection reading all of D'_t 16.7 (+0.0, p(Holm) 1).")


def test_single_step_oracles_in_the_sentence_and_the_figure():
    """An oracle of one step alone (here the ideal rewrite, right on q1-q3, its gold given on four questions) is
    said with its difference and Holm p, apart from the waterfall; one that ran on fewer questions says its n, one
    with no question in common says so; the figure draws it outlined between the ceiling and ours."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rewrite = [record(q, answer="Hewlett-Packard" if q in ("q1", "q2", "q3") else "IBM", variant="oracle_rewrite",
                      ranked_pids=["pCompaq", "pIBM"],
                      oracle={"parts": ["rewrite"], "not_applied": {"rewrite": "no sub-questions"} if q in ("q5", "q6")
                              else {}}) for q in QIDS]
    runs = {"kgir": full_run(), "kgir_oracle_rewrite": rewrite, "kgir_oracle_context": context_run()}
    t = sa.step_attribution_table(runs, BRIDGES, "d", n_ctx=5)
    # 5 tests made (rewrite 3, context 2) of the declared 23: the rewrite's McNemar 2/0 gives p 0.5, Holm raises it to 1
    assert hr.headroom_sentence(t, "d") == (
        "d (n = 6): EM of the full method 16.7; the shared reader over the gold passages alone 100.0 (+83.3); "
        "one step alone: the ideal rewrite 50.0 (+33.3, p(Holm) 1; gold given on 4 of 6).")
    short = sa.step_attribution_table({**runs, "kgir_oracle_rewrite": rewrite[:3]}, BRIDGES, "d", n_ctx=5)
    assert "the ideal rewrite 100.0 (n = 3, +66.7, p(Holm) " in hr.headroom_sentence(short, "d")
    none = sa.step_attribution_table({**runs, "kgir_oracle_next_hop": [
        record("z9", variant="oracle_next_hop", oracle={"parts": ["next_hop"], "not_applied": {}})]}, BRIDGES, "d", 5)
    assert "the answer-bearing gold next hop (no question answered by both)" in hr.headroom_sentence(none, "d")
    fig = hr.plot_headroom(t)
    [ax] = fig.axes
    assert [x.get_text() for x in ax.get_xticklabels()] == ["full", "gold\ncontext", "rewrite\nalone"]
    assert [round(b.get_height(), 4) for b in ax.patches] == [16.6667, 100.0, 50.0]
    assert ax.get_xticks().tolist() == [0, 1, 2.6]
    plt.close(fig)


def test_a_cumulative_oracle_without_its_predecessor_names_every_step_it_adds():
    """Without the seeds-only row, the seeds-and-rewrite row's rise over the full method is both steps: the
    sentence and the figure's label say so; the next-hop row then adds the next hop only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    q = [f"q{i}" for i in range(40)]
    runs = {"kgir": _forty(set(q[:10])),
            "kgir_oracle_seeds_rewrite": _forty(set(q[:34]), "oracle_seeds_rewrite", ["seeds", "rewrite"]),
            "kgir_oracle_seeds_rewrite_next_hop": _forty(set(q[:36]), "oracle_seeds_rewrite_next_hop",
                                                         ["seeds", "rewrite", "next_hop"])}
    t = sa.step_attribution_table(runs, {x: (COMPAQ,) for x in q}, "d", n_ctx=5)
    assert hr.headroom_sentence(t, "d") == (
        "d (n = 40): EM of the full method 25.0; oracle seeds + the ideal rewrite 85.0 (+60.0), "
        "+ the gold next hop 90.0 (+5.0).")
    only_next = t[t["key"] != "kgir_oracle_seeds_rewrite"]
    sentence = hr.headroom_sentence(only_next, "d")
    assert "; oracle seeds + the ideal rewrite + the gold next hop 90.0 (+65.0)." in sentence
    fig = hr.plot_headroom(t)
    assert [x.get_text() for x in fig.axes[0].get_xticklabels()] == ["full", "+ seeds\n+ rewrite", "+ next\nhop"]
    assert [round(b.get_height(), 4) for b in fig.axes[0].patches] == [25.0, 60.0, 5.0]
    plt.close(fig)



def _hotpot(right: set, variant: str, parts: tuple, bridged: set) -> list:
    """Forty HotpotQA-shaped traces: no sub-questions, so the rewrite oracle never applies; the next hop only on
    the ``bridged`` questions; the seeds everywhere."""
    def oracle(q):
        missing = {"rewrite": "no sub-questions (HotpotQA): no ideal rewrite"} if "rewrite" in parts else {}
        if "next_hop" in parts and q not in bridged:
            missing["next_hop"] = "no gold bridge"
        return {"parts": list(parts), "not_applied": missing}
    return [record(q, answer="Hewlett-Packard" if q in right else "IBM", variant=variant,
                   ranked_pids=["pCompaq", "pIBM"], oracle=oracle(q)) for q in (f"q{i}" for i in range(40))]


def test_a_step_with_no_gold_on_the_dataset_is_said_and_not_drawn():
    """On HotpotQA the ideal rewrite has no gold: its rows repeat the row before them, so the waterfall goes from
    the seeds straight to the next hop (whose gold count is its own step's, 20 of 40, not the all-steps count 0),
    the rewrite alone is not listed as a step that adds nothing, and the sentence and figure say it has no gold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    q = [f"q{i}" for i in range(40)]
    bridged = set(q[:20])
    runs = {"kgir": _forty(set(q[:10])),
            "kgir_oracle_seeds": _hotpot(set(q[:12]), "oracle_seeds", ("seeds",), bridged),
            "kgir_oracle_seeds_rewrite": _hotpot(set(q[:12]), "oracle_seeds_rewrite", ("seeds", "rewrite"), bridged),
            "kgir_oracle_seeds_rewrite_next_hop": _hotpot(set(q[:16]), "oracle_seeds_rewrite_next_hop",
                                                          ("seeds", "rewrite", "next_hop"), bridged),
            "kgir_oracle_rewrite": _hotpot(set(q[:10]), "oracle_rewrite", ("rewrite",), bridged),
            "kgir_oracle_next_hop": _hotpot(set(q[:14]), "oracle_next_hop", ("next_hop",), bridged)}
    t = sa.step_attribution_table(runs, {x: (COMPAQ,) for x in q}, "hp", n_ctx=5)
    given = t.set_index("key")[["oracle applied", *sa.GIVEN.values()]].fillna(-1).astype(int)
    assert list(sa.GIVEN.values()) == ["gold given: seeds", "gold given: rewrite", "gold given: next hop",
                                       "gold given: context"]
    assert given.to_dict("index") == {
        "kgir": {"oracle applied": -1, "gold given: seeds": -1, "gold given: rewrite": -1,
                 "gold given: next hop": -1, "gold given: context": -1},
        "kgir_oracle_seeds": {"oracle applied": 40, "gold given: seeds": 40, "gold given: rewrite": -1,
                              "gold given: next hop": -1, "gold given: context": -1},
        "kgir_oracle_seeds_rewrite": {"oracle applied": 0, "gold given: seeds": 40, "gold given: rewrite": 0,
                                      "gold given: next hop": -1, "gold given: context": -1},
        "kgir_oracle_seeds_rewrite_next_hop": {"oracle applied": 0, "gold given: seeds": 40, "gold given: rewrite": 0,
                                               "gold given: next hop": 20, "gold given: context": -1},
        "kgir_oracle_rewrite": {"oracle applied": 0, "gold given: seeds": -1, "gold given: rewrite": 0,
                                "gold given: next hop": -1, "gold given: context": -1},
        "kgir_oracle_next_hop": {"oracle applied": 20, "gold given: seeds": -1, "gold given: rewrite": -1,
                                 "gold given: next hop": 20, "gold given: context": -1}}
    assert hr.headroom_sentence(t, "hp") == (
        "hp (n = 40): EM of the full method 25.0; oracle seeds 30.0 (+5.0), + the gold next hop 40.0 (+10.0; gold "
        "given on 20 of 40); one step alone: the answer-bearing gold next hop 35.0 (+10.0, "
        "p(Holm) 1; gold given on 20 of 40); no gold for the ideal rewrite on any question here, so of "
        "the family's 23 declared tests 3 cannot differ by construction (a variant with nothing but that step ran "
        "as the full method) and 3 repeat another variant's.")
    assert hr.inert_tests(t, "hp") == (3, 3)  # oracle rewrite = the full method; seeds + rewrite = oracle seeds
    fig = hr.plot_headroom(t)
    [ax] = fig.axes
    assert [x.get_text() for x in ax.get_xticklabels()] == ["full", "+ seeds", "+ next\nhop", "next hop\nalone"]
    assert [round(b.get_height(), 4) for b in ax.patches] == [25.0, 5.0, 10.0, 35.0]
    assert "no gold here for: rewrite" in [x.get_text() for x in ax.texts]
    plt.close(fig)
    # without the seeds row the rewrite is still named nowhere: the first rise is the seeds and the next hop
    sentence = hr.headroom_sentence(t[t["key"] != "kgir_oracle_seeds"], "hp")
    assert "; oracle seeds 30.0 (+5.0), + the gold next hop 40.0" in sentence
    both = t[~t["key"].isin(["kgir_oracle_seeds", "kgir_oracle_seeds_rewrite"])]
    assert "; oracle seeds + the gold next hop 40.0 (+15.0; gold given: next hop on 20 of 40);" in \
        hr.headroom_sentence(both, "hp")

@pytest.mark.skipif(not (PROJECT_ROOT / ".git").exists(), reason="not a git checkout: the log's history is git's")
def test_results_page_cost_of_the_local_attribution_is_what_the_log_says():
    readme = " ".join((PROJECT_ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    found = re.search(r"The study cost ([\d,]+) answers of the 1\.5B model in all, ([\d.]+) hours of LLM time "
                      r"on two cores \(`python -m kgir_lib\.llm\.response_log stats (\S+) --since (\S+)` run on the "
                      r"log as committed at (\w+)", readme)
    assert found, "docs/results.md: no cost sentence for the local step attribution"
    log = PROJECT_ROOT / found.group(3)
    for rev in (found.group(4), found.group(5)):
        known = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "--verify", "--quiet",
                                f"{rev}^{{commit}}"], capture_output=True)
        if known.returncode != 0:
            pytest.skip(f"revision {rev} is not in this clone's history (a shallow clone)")
    # the log as it stood after the study's last answers (later runs grow it), against the log before its first
    stats = log_stats(logged_at(log, found.group(5)), (r[0] for r in logged_at(log, found.group(4))))
    assert (f"{stats['new']:,}", f"{stats['seconds'] / 3600:.1f}") == (found.group(1), found.group(2))
