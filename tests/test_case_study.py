"""The KGIR-RAG case study (kgir_lib.notebook.case, notebook 07) on the paper's Fig. 6 case (Compaq / HP)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import BagOfWordsEncoder
from kgir_lib.config import PROJECT_ROOT
from kgir_lib.kg import Triple
from kgir_lib.kgir.subgraph import EvidenceSubgraph
from kgir_lib.notebook.case import display as case_display
from kgir_lib.notebook.case.baselines import baseline_answers, default_baselines
from kgir_lib.notebook.case.bridges import bridge_entities, bridge_summary, find_bridge_cases
from kgir_lib.api import KGIRPipeline
from kgir_lib.notebook.case.build import (case_from_pipeline, checked_passages, find_question, load_example,
                                          run_case)
from kgir_lib.notebook.case.display import display_case, repeated_rounds
from kgir_lib.notebook.case.records import FREE_DATASET, CaseStudyError, load_kgir_traces
from kgir_lib.traces import write_traces

REWRITE_1 = "Which company merged in 2002 with Compaq?"


def fig6_script(req) -> str:
    """A scripted LLM that walks through Fig. 6: bridge Compaq in round 1, answer in round 2."""
    user = req.messages[-1][1]
    last_q = user.rsplit("Question:", 1)[-1]
    if req.prompt == "kgir_ner":
        return "Entities: Compaq; 2002" if "Compaq" in last_q else "Entities: PC maker; 1994"
    if req.prompt == "kgir_rewrite":
        return REWRITE_1
    if req.prompt == "kgir_reflect":
        if "Earlier rewrite 1" in user:
            return " Hewlett-Packard merged with Compaq in 2002.\nAnswer: Hewlett-Packard"
        return " The top PC maker of 1994 was Compaq.\nMissing: the company that merged with Compaq in 2002"
    if req.prompt == "kg_extract":  # triple extraction of a free corpus
        passage = user
        if "Compaq was" in passage:
            return "Compaq ## was top PC maker of ## 1994"
        if "merged" in passage:
            return "Hewlett-Packard ## merged with ## Compaq\nHewlett-Packard ## merged in ## 2002"
        return "nothing useful"
    if req.prompt == "reader" and "(Hewlett-Packard, merged with, Compaq)" in user:  # KGIR-RAG's round-2 evidence
        return "Answer: Hewlett-Packard"
    return "Answer: unknown"


def free_case(cfg, question, passages, answers=(), *, llm, method=None, decomposition=()):
    """A free question over user-supplied passages, as notebook 07 runs it: the passages checked, indexed through the
    public API, then the case."""
    rag = KGIRPipeline(cfg, llm=llm, encoder=BagOfWordsEncoder(), method=method)
    rag.index(checked_passages(passages), name=FREE_DATASET)
    return case_from_pipeline(rag, question, answers, decomposition=decomposition)


@pytest.fixture
def fig6_case(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(fig6_script)
    return run_case(ws, tiny_dataset.questions[0])


def test_case_follows_every_stage(fig6_case, tiny_dataset):
    case = fig6_case
    assert case.answer == "Hewlett-Packard" and case.em == 1.0 and case.f1 == 1.0
    assert case.answered_by == "reflection"
    assert [r.iteration for r in case.rounds] == [1, 2]
    r1, r2 = case.rounds
    # round 1: retrieval over the whole tiny corpus, G_q = triples of those passages (eq. 3)
    assert {p for p, _ in r1.retrieved} == {p.pid for p in tiny_dataset.corpus.passages}
    assert len(r1.G_q) == 8
    # NER (eq. 4): "PC maker" is in the question but matches no graph entity; "1994" matches exactly
    assert r1.llm_entities == ["PC maker", "1994"]
    assert ("1994", 1.0) in r1.matches["1994"]
    assert "1994" in r1.seeds
    assert ("Compaq", "was top PC maker of", "1994") in {(t.head, t.relation, t.tail) for t in r1.G_tmp}
    assert set(r1.G_Ans) <= set(r1.G_tmp) <= set(r1.G_q)
    assert r1.rewrite == REWRITE_1
    assert r1.verdict() == "missing" and "merged with Compaq" in r1.reflection.missing
    assert "Compaq" in r1.reflection.reasoning
    # round 2 asks the rewritten question and answers it
    assert r2.query == REWRITE_1
    assert r2.verdict() == "answer" and r2.reflection.answer == "Hewlett-Packard"
    assert case.recall["R@5"] == 100.0


def test_case_tables(fig6_case):
    case = fig6_case
    steps = case.steps_frame()
    assert list(steps.index) == [1, 2]
    assert steps.loc[1, "verdict"] == "missing" and steps.loc[2, "verdict"] == "answer"
    assert steps.loc[1, "gold retrieved"] == "2/2"
    ps = case.passages_frame(1)
    assert len(ps) == 6 and ps["gold"].sum() == 2
    assert set(case.triples_frame(1, "G_Ans")["in G_Ans"]) == {True}
    assert len(case.triples_frame(1, "G_q")) == 8
    m = case.matches_frame(1)
    assert list(m["question entity"]) == ["PC maker", "1994"]
    res = case.result_frame()
    assert res.loc[0, "EM"] == 100.0 and res.loc[0, "gold"] == "Hewlett-Packard | HP"
    # the reflection stopped the loop in round 2; the shared reader worded the answer
    assert (res.loc[0, "loop stopped by"], res.loc[0, "worded by"]) == ("the reflection's verdict", "reader")
    assert res.loc[0, "reflection's answer"] == "Hewlett-Packard"
    with pytest.raises(CaseStudyError, match="round 3"):
        case.round(3)
    with pytest.raises(CaseStudyError, match="which"):
        case.triples_frame(1, "G_x")


def test_subgraph_roundtrip_through_trace(fig6_case):
    r1 = fig6_case.rounds[0]
    d = fig6_case.output.trace["rounds"][0]["subgraph"]
    sub = EvidenceSubgraph.from_dict(json.loads(json.dumps(d)), r1.G_q)
    assert sub.kept == r1.G_Ans and sub.seeds == r1.seeds
    assert [c.seeds for c in sub.components] == [c["seeds"] for c in d["components"]]


def test_find_bridge_cases_ranks_figure6_first(fig6_case, tiny_workspace, tiny_dataset, tmp_path):
    good = fig6_case.output
    # a second question answered at once in round 1 (no bridge), and an ablation trace that must be ignored
    direct = json.loads(json.dumps(good.to_json()))
    direct["qid"] = direct["trace"]["qid"] = "q2"
    direct["trace"]["rounds"] = direct["trace"]["rounds"][:1]
    direct["trace"]["rounds"][0]["reflection"] = {"answerable": True, "answer": "Compaq", "missing": None,
                                                   "reasoning": "", "malformed": False}
    direct["trace"]["rounds"][0]["rewrite"]["question"] = direct["trace"]["question"]
    direct["answer"] = "Compaq"
    ablated = json.loads(json.dumps(good.to_json()))
    ablated["trace"]["variant"] = "no_rewrite"
    ablated["trace"]["method"] = "KGIR-RAG w/o rewrite"
    df = find_bridge_cases([direct, good.to_json(), ablated], dataset="tiny")
    assert list(df["qid"]) == ["q1", "q2"]
    top = df.iloc[0]
    assert top["figure6"] and top["figure6_correct"]
    assert top["bridge_entities"] == ["Compaq"]
    assert top["answered_round"] == 2 and top["EM"] == 100.0
    low = df.iloc[1]
    assert not low["figure6"] and not low["bridge_rewrite"] and low["answered_round"] == 1
    assert low["rewrite_unchanged"] and not top["rewrite_unchanged"]
    summary = bridge_summary(df)
    assert list(summary.index) == ["tiny"]
    assert summary.loc["tiny"].to_dict() == {
        "questions": 2, "not answered in round 1": 1, "round-1 rewrite names a bridge entity": 1,
        "round-1 rewrite = the question": 1, "answered in round 2": 1, "whole Fig. 6 pattern": 1,
        "whole pattern, EM = 100": 1, "answered in round 1": 1}
    assert bridge_summary(df.iloc[0:0]).empty
    # the same through trace files in a run directory
    cfg = fig6_case.ws.cfg
    write_traces([good], cfg.path("traces", "kgir_rag", "tiny.trace.jsonl"))
    write_traces([good], cfg.path("traces", "kgir", "tiny.trace.jsonl"))  # the same question from another notebook
    write_traces([good], cfg.path("traces", "06_ablation", "kgir-top_k=5", "tiny.trace.jsonl"))  # a sweep point: not read
    recs = load_kgir_traces(cfg)
    assert [r["dataset"] for r in recs] == ["tiny"]
    assert find_bridge_cases(recs).loc[0, "figure6_correct"]


def test_bridge_entities():
    g = [["Compaq", "was top PC maker of", "1994", "p", 0.9]]
    assert bridge_entities("Which company merged in 2002 with the top PC maker of 1994?",
                              "Which company merged in 2002 with Compaq?", g) == ["Compaq"]
    assert bridge_entities("Who founded Compaq?", "Who founded Compaq?", g) == []
    assert bridge_entities("q", None, g) == []


def test_a_free_case_extracts_and_answers(cfg, make_llm):
    passages = [("Compaq", "Compaq was the largest supplier of personal computers in 1994."),
                ("Hewlett-Packard", "In 2002 Hewlett-Packard merged with Compaq."),
                ("Apple", "Apple released the Macintosh in 1984.")]
    llm = make_llm(fig6_script)
    case = free_case(cfg, "Which company merged in 2002 with the top PC maker of 1994?", passages,
                     ["Hewlett-Packard", "HP"], llm=llm)
    assert case.dataset == "free" and case.qid == "free"
    assert len(case.ws.kg) == 3 and case.ws.kg.extracted == {p.pid for p in case.ws.dataset.corpus.passages}
    assert llm.usage.stages["extract"].calls == 3
    assert case.answer == "Hewlett-Packard" and case.em == 1.0
    assert case.recall == {}  # no gold passages for a free question
    # a rerun costs no new LLM call (cache)
    llm2 = make_llm(fig6_script)
    again = free_case(cfg, "Which company merged in 2002 with the top PC maker of 1994?", passages,
                      ["Hewlett-Packard", "HP"], llm=llm2)
    assert llm2.usage.total().cache_hits == llm2.usage.total().calls
    assert again.answer == case.answer


@pytest.mark.parametrize("bad,match", [([], "at least one"), ([("t",)], "item 0"), ([("t", "  ")], "non-empty"),
                                       ([("t", 3)], "non-empty"), (5, "a list of .title, text. pairs, got int"),
                                       ("text", "got str")])
def test_free_passages_are_checked(bad, match):
    with pytest.raises(CaseStudyError, match="parameter 'free_passages': .*" + match):
        checked_passages(bad)


@pytest.mark.parametrize("bad", [5, ["HP", 3], {"HP"}])
def test_free_answers_are_checked(cfg, make_llm, bad):
    with pytest.raises(CaseStudyError, match="parameter 'free_answers': a list of answer strings"):
        free_case(cfg, "q?", [("t", "x")], answers=bad, llm=make_llm(fig6_script))


def test_unknown_qid_names_it(tiny_dataset):
    with pytest.raises(CaseStudyError, match="no question 'nope'.*q1"):
        find_question(tiny_dataset, "nope")


def test_display_case_shows_every_stage(fig6_case, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    shown = []
    monkeypatch.setattr(case_display, "_show", lambda *objs: shown.extend(objs))
    fig = display_case(fig6_case)
    text = "\n".join(o for o in shown if isinstance(o, str))
    for needle in ("Retrieval (eq. 2)", "NER and its matches in G_q", "G_Ans and the bridge", "Rewrites (eq. 8)",
                   "Reflection (Fig. 5)", "Result", REWRITE_1, "missing: *the company that merged with Compaq",
                   "answer **Hewlett-Packard**", "entities of G_Ans the rewrite introduces: Compaq"):
        assert needle in text
    assert [a.get_title(loc="left") for a in fig.axes] == [fig6_case.question]  # the Fig. 6 drawing
    assert any(isinstance(o, pd.DataFrame) and "KGIR-RAG answer" in o.columns for o in shown)
    assert sum(isinstance(o, pd.DataFrame) and "reader read it" in o.columns for o in shown) == 2  # every round
    gans = next(o for o in shown if isinstance(o, pd.DataFrame) and "by weight" in o.columns)
    assert list(gans["by weight"]) == list(range(1, len(gans) + 1)) and gans["weight"].is_monotonic_decreasing


def test_baseline_answers_from_traces_and_runs(fig6_case):
    from kgir_lib.methods.base import MethodOutput

    case = fig6_case
    cfg = case.ws.cfg
    # notebook 05 answered Naive Gen for this question already: read from its trace, no run
    write_traces([MethodOutput("q1", "Compaq", [], trace={})], cfg.path("traces", "naive_gen", "tiny.trace.jsonl"))
    calls_before = case.ws.llm.usage.total().calls
    df = baseline_answers(case, methods=["naive_gen", "naive_rag"])
    assert list(df.index) == ["KGIR-RAG", "Naive Gen", "Naive RAG"]
    assert df.loc["Naive Gen", "source"] == "trace" and df.loc["Naive Gen", "answer"] == "Compaq"
    assert df.loc["Naive Gen", "EM"] == 0.0
    assert df.loc["Naive RAG", "source"] == "run"
    assert df.loc["KGIR-RAG", "EM"] == 100.0 and df.loc["KGIR-RAG", "R@2"] == 100.0
    assert case.ws.llm.usage.total().calls == calls_before + 1  # only Naive RAG's reader call
    assert default_baselines(["naive_gen", "kgir", "kg2rag", "kg2rag_no_expansion", "kgir_no_rewrite"]) == \
        ["naive_gen", "kg2rag"]


def test_triple_echo_is_not_a_bridge_rewrite():
    q = "What country was the author of Brand a citizen of?"
    g = [["Brand", "is a play by", "Henrik Ibsen", "p", 0.5]]
    assert bridge_entities(q, "(Brand, is a play by Henrik Ibsen)?", g) == []
    assert bridge_entities(q, "(Brand, is a play by, Henrik Ibsen)?", g) == []
    assert bridge_entities(q, "Who is Henrik Ibsen?", g) == []  # keeps no content word of the question
    assert bridge_entities(q, "What country was Henrik Ibsen a citizen of?", g) == ["Henrik Ibsen"]


def test_repeated_rounds_are_shown_once(tiny_workspace, tiny_dataset, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")

    def stuck(req):  # a model that never rewrites usefully nor answers: every round repeats round 1
        if req.prompt == "kgir_ner":
            return "Entities: 1994"
        if req.prompt == "kgir_rewrite":
            return "(Compaq, was top PC maker of, 1994)"
        return "(Compaq, was top PC maker of, 1994)"

    case = run_case(tiny_workspace(stuck), tiny_dataset.questions[0])
    assert [r.iteration for r in case.rounds] == [1, 2]
    assert repeated_rounds(case) == {2: 1}
    shown = []
    monkeypatch.setattr(case_display, "_show", lambda *objs: shown.extend(objs))
    fig = display_case(case)
    text = "\n".join(o for o in shown if isinstance(o, str))
    assert "**Round 2** — the same query and passages as round 1" in text
    assert len(fig.axes) == 1


def test_figure6_example_loads_from_the_package():
    ex = load_example("figure6")
    assert ex["question"].startswith("Which company merged in 2002") and "Hewlett-Packard" in ex["answers"]
    assert len(ex["passages"]) == 6 and all(isinstance(p, tuple) and len(p) == 2 for p in ex["passages"])
    assert ex["bridge"] == "Compaq" and ex["next_hop"] == ["Hewlett-Packard"]
    assert set(ex["next_hop"]) <= {title for title, _ in ex["passages"]}


def test_case_chain_reads_a_case_in_the_funnels_terms(fig6_case):
    from kgir_lib.notebook.case.choice import WHOLE, case_chain, case_chain_note

    chain = case_chain(fig6_case, "Compaq", ["Hewlett-Packard"])
    assert list(chain["round"]) == [1, 2]
    r1 = chain.iloc[0]
    # round 1: seed "1994" matched, G_Ans holds Compaq, the rewrite names it; but D_1 (the whole six-passage
    # corpus) already held the Hewlett-Packard passage, so D'_1 had no next hop left to find
    assert (r1["1 seed matched"], r1["2 bridge in G_Ans"], r1["3 rewrite names it"]) == (True, True, True)
    assert not r1["4 D'_t finds next hop"] and r1["next hop already in D_t"]
    assert r1["breaks at"] == "4 D'_t finds next hop"
    assert list(chain["breaks at"]) == ["4 D'_t finds next hop"] * 2  # round 2 asks the rewrite: the same corpus
    # the scripted reader answers right in round 1: step 5 judged alone is taken, the chain is not
    assert list(chain["5 answer correct"]) == [True, True]
    assert case_chain_note(chain) == ("Furthest round (1): the chain breaks at 4 D'_t finds next hop; the next hop "
                                      "was already in D_t. The answer is correct all the same (round 1), from a "
                                      "retrieval that already held the next hop, so the chain had nothing to add.")
    wrong = chain.assign(**{"5 answer correct": False})
    assert case_chain_note(wrong) == ("Furthest round (1): the chain breaks at 4 D'_t finds next hop; "
                                      "the next hop was already in D_t.")
    fresh = wrong.assign(**{"next hop already in D_t": False})
    fresh.loc[1, "5 answer correct"] = True
    assert case_chain_note(fresh) == ("Furthest round (1): the chain breaks at 4 D'_t finds next hop. The answer "
                                      "is correct all the same (round 2), without the chain's steps.")
    whole = chain.copy()
    whole.loc[1, ["4 D'_t finds next hop", "5 answer correct", "next hop already in D_t"]] = [True, True, False]
    whole.loc[1, "breaks at"] = WHOLE
    assert case_chain_note(whole) == "Round 2 takes the whole chain, from the seed to a correct answer."
    assert case_chain_note(chain.iloc[:0]) == "The case has no round to read."
    with pytest.raises(ValueError, match=r"next-hop titles \['HP Inc'\] are not titles"):
        case_chain(fig6_case, "Compaq", ["HP Inc"])
    # without a bridge given, the question's own gold bridges: none here, so no chain; with them, the same table
    assert case_chain(fig6_case).empty
    from dataclasses import replace

    from kgir_lib.gold import Bridge, bridge_aliases
    from kgir_lib.notebook.case.choice import gold_bridge_names

    ds = fig6_case.ws.dataset
    hp = next(p.pid for p in ds.corpus.passages if p.title == "Hewlett-Packard")
    ds.questions[0] = replace(ds.questions[0], gold_bridges=(Bridge("Compaq", bridge_aliases("Compaq"), (hp,)),))
    assert case_chain(fig6_case).equals(chain) and gold_bridge_names(fig6_case) == ["Compaq"]
    with pytest.raises(ValueError, match="'bridge' needs an entity name"):
        case_chain(fig6_case, " ", ["Hewlett-Packard"])


def test_free_question_with_the_oracle_rewrite(cfg, make_llm):
    """Notebook 07 §9's second run: the Fig. 6 example's decomposition gives round 1 the ideal rewrite
    "Which company did Compaq merge with in 2002?" (no rewrite call); next_hop_reading puts both runs side by side."""
    from kgir_lib.notebook.case.choice import next_hop_reading
    from kgir_lib.registry import build_method

    ex = load_example("figure6")
    assert ex["decomposition"][1] == {"question": "Which company did #1 merge with in 2002?",
                                      "answer": "Hewlett-Packard", "support": "Hewlett-Packard"}
    llm = make_llm(fig6_script)
    model = free_case(cfg, ex["question"], ex["passages"], ex["answers"], llm=llm)
    oracle = free_case(cfg, ex["question"], ex["passages"], ex["answers"], llm=llm,
                       method=build_method("kgir_oracle_rewrite"), decomposition=ex["decomposition"])
    r = oracle.rounds[0]
    assert (r.rewrite, r.rewrite_note.get("form")) == ("Which company did Compaq merge with in 2002?", "oracle")
    titles = {p.pid: p.title for p in oracle.ws.dataset.corpus.passages}
    assert [titles[p] for p in oracle.gold_pids] == ["Compaq", "Hewlett-Packard"]  # the hops' supports are gold
    assert set(oracle.recall) == {"R@2", "R@5"} and model.gold_pids == [] and model.recall == {}
    read = oracle.reading_frame(1)
    assert "Hewlett-Packard" in set(read["passage"])
    assert read["gold"].tolist() == [t in ("Compaq", "Hewlett-Packard") for t in read["passage"]]
    calls = oracle.output.trace["llm"].get("kgir_rewrite", {}).get("calls", 0)
    assert calls == oracle.output.trace["iterations_used"] - 1 and "rewrite" not in r.usable  # none in round 1
    hp = next(p.pid for p in oracle.ws.dataset.corpus.passages if p.title == "Hewlett-Packard")
    assert r.rewrite_retrieved[0][0] == hp  # D'_1 ranks the next hop first
    table = next_hop_reading({"model": model, "oracle": oracle}, ex["next_hop"]).set_index("run")
    assert table.loc["oracle", ["rewrite by", "next hop's rank in D'_1", "reflection read it (P_1)"]].tolist() == \
        ["the gold (oracle)", 1, True]
    assert table.loc["model", "rewrite by"] == "the model" and table.loc["model", "round-1 rewrite"] == REWRITE_1
    with pytest.raises(CaseStudyError, match="decomposition.*'HP Inc'"):
        free_case(cfg, ex["question"], ex["passages"], llm=llm,
                  decomposition=[{"question": "q", "answer": "a", "support": "HP Inc"}])


def test_reading_frame_puts_what_the_reflection_and_the_reader_read_side_by_side(fig6_case):
    r1, r2 = fig6_case.rounds
    first = fig6_case.reading_frame(1)
    assert list(first.columns) == ["passage", "gold", "reflection read it", "reader read it", "text"]
    assert set(first["reader read it"]) == {"not called"}  # round 1 went on: no reader call
    assert list(first["passage"]) == [fig6_case.title(p) for p in dict.fromkeys(r1.evidence_pids + r1.reflection_passages)]
    last = fig6_case.reading_frame(2)
    assert r2.final is not None and r2.final.context_pids
    read = last.set_index("passage")
    for pid in r2.final.context_pids:
        assert read.loc[fig6_case.title(pid), "reader read it"] == "yes"
    assert read["gold"].any() == bool(set(r2.final.context_pids + (r2.reflection_passages or [])) & set(fig6_case.gold_pids))
    assert fig6_case.reading_note(2).startswith("Round 2: the reflection and the reader both read")
    assert "the reader was not called" in fig6_case.reading_note(1)


def test_notebook_07_reading_of_the_two_fig6_runs_is_each_profiles_table():
    """The sentence under the two Fig. 6 runs says what each committed profile's table holds."""
    def runs(profile: str) -> pd.DataFrame:
        return pd.read_csv(PROJECT_ROOT / "results" / profile / "tables" / "07_free_question_runs.csv")

    local, sample = runs("local"), runs("sample")
    for t in (local, sample):
        assert t["rewrite by"].tolist() == ["the model", "the gold (oracle)"]
        assert t["round-1 rewrite"].iloc[1] == "Which company did Compaq merge with in 2002?"
        assert (t["next hop's rank in D_1"] == 2).all()  # six passages: the first retrieval holds the HP passage
    assert local["answer"].tolist() == ["Hewlett-Packard"] * 2 and (local["EM"] == 1).all()
    assert "Compaq" not in local["round-1 rewrite"].iloc[0]
    assert sample["answer"].tolist() == ["Gateway"] * 2 and (sample["EM"] == 0).all()
    assert sample["reflection read it (P_1)"].all() and sample["in the reader's context"].all()
    source = " ".join((PROJECT_ROOT / "notebooks" / "src" / "07_case_study.py").read_text(encoding="utf-8")
                      .replace("# ", " ").split())
    assert ("With the `local` profile's 1.5B model both runs answer Hewlett-Packard" in source
            and "With the `sample` profile's 0.5B model both runs answer Gateway, although its reflection and "
                "reader read the HP passage" in source)


def test_the_chain_drawing_reads_each_step_off_the_case(fig6_case):
    """Round 1 of the Fig. 6 case, step by step as notebook 07 draws it: the seed, the triple that puts Compaq in
    G_Ans, the rewrite naming it, no next hop new to D'_1 (the six-passage D_1 held it: the step is red and says so),
    the right answer; every step's text and tick come from the case, and the figure is legible when projected."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kgir_lib import report
    from kgir_lib.gold import Bridge, bridge_aliases
    from kgir_lib.notebook.case.chain_draw import chain_steps, draw_chain, passage_snippet

    hp = next(p.pid for p in fig6_case.ws.dataset.corpus.passages if p.title == "Hewlett-Packard")
    steps = chain_steps(fig6_case, 1, bridges=[Bridge("Compaq", bridge_aliases("Compaq"), (hp,))])
    assert [s.holds for s in steps] == [True, True, True, False, True]
    assert steps[1].text.startswith("Compaq, by (") and REWRITE_1 in steps[2].text
    assert steps[3].text == 'the next hop "Hewlett-Packard" was already in D_1'
    assert steps[4].text.startswith("Hewlett-Packard")
    fig = draw_chain(steps, "round 1")
    assert report.figure_text_px(report.figure_png(fig)) >= report.MIN_TEXT_PX
    assert sum("✗" in t.get_text() for t in fig.axes[0].texts) == 1
    plt.close(fig)
    text = "It began. In 2002 Hewlett-Packard completed its merger with Compaq, the maker. Later news."
    assert passage_snippet(text, ["Hewlett-Packard"]) == ("… In 2002 Hewlett-Packard completed its merger with "
                                                          "Compaq, the maker. …")
    assert passage_snippet(text, ["IBM"], width=12) == "It began. In …"
