"""LLM extraction: one batched call, incremental add, removal, the extraction pool."""
from __future__ import annotations

import json
from collections import Counter
from typing import ClassVar

import pytest

from kgir_lib.data import Corpus, Dataset, Question
from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.kg.extract import MAX_TOKENS, extract_triples, extraction_pool, extraction_requests, update_kg
from kgir_lib.kg.parse import parse_triples
from kgir_lib.kg.store import drops_of, load_kg, save_kg
from kgir_lib.llm import LLM, LLMCache, ScriptedBackend
from kgir_lib.llm.prompts import load_prompt
from kgir_lib.methods.base import MethodBase
from kgir_lib.retrieval import DenseIndex

from conftest import BagOfWordsEncoder, make_passage


def passage_of(req) -> str:
    """The passage (title + text) a request asks about: its last user turn."""
    assert req.messages[-1][0] == "user"
    return req.messages[-1][1]


def title_script(req) -> str:
    """Two triples naming the passage's title, one malformed line, one head == tail."""
    title = passage_of(req).split("\n", 1)[0]
    return (f"{title} ## is described in ## passage {title}\n{title} ## has ## first word "
            f"{passage_of(req).split()[1]}\n{title} ## broken\n{title} ## same as ## {title}")


class CountingBackend(ScriptedBackend):
    """Counts ``run`` invocations (batches) besides the requests it saw."""

    def __init__(self, script):
        super().__init__(script)
        self.batches = 0

    def run(self, requests, on_result):
        self.batches += 1
        super().run(requests, on_result)


@pytest.fixture
def llm(tmp_path):
    return LLM(CountingBackend(title_script), LLMCache(tmp_path / "llm.sqlite"), progress=False)


def test_requests_follow_the_versioned_prompt(tiny_dataset):
    ps = tiny_dataset.corpus.passages[:2]
    reqs = extraction_requests(ps)
    prompt = load_prompt("kg_extract")
    assert prompt.version == "2" and "KG²RAG" in prompt.source
    assert len(reqs) == 2
    assert [passage_of(r) for r in reqs] == [p.content for p in ps]
    assert all(r.max_tokens == MAX_TOKENS and r.temperature == 0.0 for r in reqs)
    roles = [role for role, _ in reqs[0].messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert reqs[0].messages[:-1] == reqs[1].messages[:-1]  # same two-shot history for every passage
    # the worked examples are in the format the parser reads: 5 clean triples each
    for role, text in reqs[0].messages[2:5:2]:
        kept, drops = parse_triples(text)
        assert len(kept) == 5 and not drops
    assert reqs[0].messages[1][1].startswith("Marie Curie\n")


def test_passage_text_cannot_break_the_turns():
    p = make_passage("Odd", "A text with Passage:\n and\n\nTriples:\n inside, and {braces}.")
    req = extraction_requests([p])[0]
    assert len(req.messages) == 6 and passage_of(req) == p.content


def test_extract_triples_one_batch_with_provenance(llm, tiny_dataset):
    ps = tiny_dataset.corpus.passages
    rep = extract_triples(llm, ps)
    assert llm.backend.batches == 1 and len(llm.backend.seen) == len(ps)
    assert rep.n_passages == len(ps) and rep.new_calls == len(ps) and rep.n_unparseable == 0
    for p in ps:
        assert [t.pid for t in rep.triples[p.pid]] == [p.pid, p.pid]
        assert rep.triples[p.pid][0] == Triple(p.title, "is described in", f"passage {p.title}", p.pid)
    assert rep.drops == Counter(wrong_arity=len(ps), head_equals_tail=len(ps))
    assert rep.n_triples == 2 * len(ps)


def test_unparseable_outputs_are_counted(make_llm, tiny_dataset):
    llm = make_llm(lambda req: "Sorry, I can't help with that.")
    rep = extract_triples(llm, tiny_dataset.corpus.passages[:3])
    assert rep.n_unparseable == 3 and rep.drops == Counter(unparseable=3) and rep.n_triples == 0


def test_incremental_add_extracts_only_new_passages(llm, tiny_dataset):
    ps = tiny_dataset.corpus.passages
    kg = KnowledgeGraph()
    first = update_kg(kg, llm, ps[:4])
    assert first.n_passages == 4 and len(llm.backend.seen) == 4 and len(kg) == 8
    second = update_kg(kg, llm, ps)  # 2 new passages
    assert second.n_passages == 2 and len(llm.backend.seen) == 6 and llm.backend.batches == 2
    assert {passage_of(r) for r in llm.backend.seen[4:]} == {p.content for p in ps[4:]}
    assert kg.extracted == {p.pid for p in ps} and len(kg) == 12
    calls_before = llm.usage.stage("extract").calls
    third = update_kg(kg, llm, ps)  # nothing new: no LLM call at all, not even a cache lookup
    assert third.n_passages == 0 and third.new_calls == 0
    assert llm.usage.stage("extract").calls == calls_before and llm.backend.batches == 2
    assert set(drops_of(kg)) == {p.pid for p in ps}


def test_rerun_on_a_fresh_graph_is_answered_by_the_cache(tmp_path, tiny_dataset):
    ps = tiny_dataset.corpus.passages
    first = LLM(CountingBackend(title_script), LLMCache(tmp_path / "c.sqlite"), progress=False)
    kg1 = KnowledgeGraph()
    update_kg(kg1, first, ps)
    again = LLM(CountingBackend(title_script), LLMCache(tmp_path / "c.sqlite"), progress=False)
    kg2 = KnowledgeGraph()
    rep = update_kg(kg2, again, ps)
    assert again.backend.seen == [] and rep.new_calls == 0
    assert again.usage.stage("extract").cache_hits == len(ps)
    assert kg2.to_frame().equals(kg1.to_frame())


def test_removal_drops_exactly_that_passages_triples(llm, tiny_dataset, tmp_path):
    ps = tiny_dataset.corpus.passages
    kg = KnowledgeGraph()
    update_kg(kg, llm, ps)
    gone = ps[1].pid
    before = kg.to_frame()
    assert kg.remove([gone]) == 2
    after = kg.to_frame()
    assert after.equals(before[before.pid != gone].reset_index(drop=True))
    assert gone not in kg.extracted and gone not in drops_of(kg)
    save_kg(kg, tmp_path / "kg")
    loaded = load_kg(tmp_path / "kg")
    assert loaded.extracted == kg.extracted and loaded.to_frame().equals(after)
    # re-adding extracts that one passage only (answered by the cache)
    seen = len(llm.backend.seen)
    rep = update_kg(loaded, llm, ps)
    assert rep.n_passages == 1 and len(llm.backend.seen) == seen and rep.new_calls == 0
    assert len(loaded) == len(before)


def test_empty_passage_output_still_marks_the_passage_processed(make_llm, tiny_dataset):
    kg = KnowledgeGraph()
    rep = update_kg(kg, make_llm(lambda r: ""), tiny_dataset.corpus.passages[:2])
    assert len(kg) == 0 and kg.extracted == {p.pid for p in tiny_dataset.corpus.passages[:2]}
    assert rep.n_unparseable == 0 and rep.drops == Counter()


# ---------------------------------------------------------------------------- the extraction pool
def _pool_dataset():
    ps = [make_passage(f"P{i}", f"alpha{i} beta{i} gamma{i}") for i in range(8)]
    qs = [Question("a", "alpha0 alpha1 alpha2", ("x",), (), "t"), Question("b", "beta5 beta6", ("y",), (), "t")]
    return Dataset("pool", qs, Corpus(ps))


def test_extraction_pool_is_rank_major_union_capped():
    ds = _pool_dataset()
    dense = DenseIndex(ds.corpus.passages, BagOfWordsEncoder(), progress=False)
    hits = dense.search([q.question for q in ds.questions], 3)
    pool = extraction_pool(ds, dense, ds.questions, top_k=3, cap=None)
    assert pool == ds.corpus.pids  # no cap: the whole corpus
    pool = extraction_pool(ds, dense, ds.questions, top_k=3, cap=100)
    expected = list(dict.fromkeys([hits[0][0][0], hits[1][0][0], hits[0][1][0], hits[1][1][0],
                                   hits[0][2][0], hits[1][2][0]]))
    assert pool == expected
    assert extraction_pool(ds, dense, ds.questions, top_k=3, cap=2) == expected[:2]
    assert extraction_pool(ds, dense, [], top_k=3, cap=5) == []
    with pytest.raises(ValueError, match="extract_max_passages"):
        extraction_pool(ds, dense, ds.questions, top_k=3, cap=-1)


# ---------------------------------------------------------------------------- notebook 01's build step
def _write_dataset(root, name, passages, questions):
    import json

    folder = root / name
    folder.mkdir(parents=True)
    (folder / f"{name}_corpus.json").write_text(json.dumps([{"title": p.title, "text": p.text} for p in passages]))
    recs = [{"id": q.qid, "question": q.question, "answer": q.answers[0], "answer_aliases": [],
             "paragraphs": [{"idx": i, "title": p.title, "paragraph_text": p.text,
                             "is_supporting": p.pid in q.gold_pids} for i, p in enumerate(passages)]}
            for q in questions]
    (folder / f"{name}.json").write_text(json.dumps(recs))


def test_build_kg_extracts_the_pool_once(tmp_path, tiny_dataset):
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.kg.extract import build_kg
    from kgir_lib.kg.store import kg_dir, load_base
    from kgir_lib.pipeline import open_kg

    _write_dataset(tmp_path / "data", "tiny", tiny_dataset.corpus.passages, tiny_dataset.questions)
    cfg = load_config("ci", data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"),
                      llm_backend="scripted", extract_max_passages=3, top_k=4)
    ds = load_dataset("tiny", cfg.data_path)
    dense = DenseIndex(ds.corpus.passages, BagOfWordsEncoder(), progress=False)
    llm = LLM(CountingBackend(title_script), LLMCache(tmp_path / "llm.sqlite"), progress=False)
    first = build_kg(cfg, ds, llm, dense)
    assert first.source == "llm" and len(first.pool) == 3 and first.report.new_calls == 3
    assert first.kg.extracted == set(first.pool) and len(first.kg) == 6
    assert first.drops == Counter(wrong_arity=3, head_equals_tail=3)
    assert load_kg(kg_dir(cfg, "tiny")).to_frame().equals(first.kg.to_frame())
    assert set(load_base(kg_dir(cfg, "tiny"))) == set(first.pool)  # every method run starts from the pool
    _, ensure = open_kg(cfg, ds, llm)
    extra = [p for p in ds.corpus.pids if p not in first.pool][0]
    ensure([extra])  # a method extracts a passage on demand into the stored graph
    again = build_kg(cfg, ds, llm, dense)  # warm rerun: everything already in the stored KG
    assert again.report.n_passages == 0 and len(llm.backend.seen) == 4
    assert set(load_base(kg_dir(cfg, "tiny"))) == set(first.pool)  # the on-demand passage is not base
    assert again.kg.to_frame().equals(first.kg.to_frame()) and again.drops == first.drops
    with pytest.raises(ValueError, match="needs an LLM"):
        build_kg(cfg, ds, None, None)


def test_one_rule_opens_a_graph_stored_else_imported_else_empty(tmp_path, tiny_dataset):
    """``open_graph`` is the rule of both notebook 01 (``build_kg``) and every workspace (``pipeline.open_kg``)."""
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.kg.extract import build_kg, open_graph
    from kgir_lib.kg.store import kg_dir, openie_file, save_kg
    from kgir_lib.pipeline import open_kg

    _write_dataset(tmp_path / "data", "tiny", tiny_dataset.corpus.passages, tiny_dataset.questions)
    cfg = load_config("ci", data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"))
    ds = load_dataset("tiny", cfg.data_path)
    empty = open_graph(cfg, ds)
    assert (empty.how, len(empty.kg), empty.drops) == ("empty", 0, Counter())
    assert openie_file(cfg, "tiny") is None and not kg_dir(cfg, "tiny").exists()  # nothing stored for an empty graph

    p0, p1 = ds.corpus.passages[:2]
    docs = [{"title": p0.title, "text": p0.text, "extracted_triples": [["A", "r", "B"], ["A"]]},
            {"title": p1.title, "text": p1.text, "extracted_triples": [["C", "s", "D"]]}]
    (tmp_path / "data" / "tiny" / "openie_tiny_results_test.json").write_text(json.dumps({"docs": docs}))
    imported = open_graph(cfg, ds)
    assert imported.how == "imported" and len(imported.kg) == 2 and imported.drops == Counter(wrong_arity=1)
    assert load_kg(kg_dir(cfg, "tiny")).to_frame().equals(imported.kg.to_frame())  # and stored

    stored = KnowledgeGraph()
    stored.add(p0.pid, [Triple("X", "r", "Y", p0.pid)])
    save_kg(stored, kg_dir(cfg, "tiny"))
    for kg in (open_graph(cfg, ds).kg, open_kg(cfg, ds, None)[0], build_kg(cfg, ds, None).kg):
        assert [t.text() for t in kg.triples] == ["(X, r, Y)"]  # the stored graph wins, for every caller
    assert build_kg(cfg, ds, None).source == "openie"
    assert len(open_kg(cfg, ds, None, store=False)[0]) == 0  # a graph kept in memory starts empty


def test_workspace_base_is_notebook_01s_pool_else_empty_and_none_for_a_graph_kept_in_memory(tmp_path, tiny_dataset):
    """The graph each method run starts from (``Workspace.method_view``)."""
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.kg.extract import build_kg
    from kgir_lib.pipeline import open_kg, workspace

    _write_dataset(tmp_path / "data", "tiny", tiny_dataset.corpus.passages, tiny_dataset.questions)
    cfg = load_config("ci", data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"),
                      llm_backend="scripted", extract_max_passages=3, top_k=4)
    llm = LLM(CountingBackend(title_script), LLMCache(tmp_path / "llm.sqlite"), progress=False)
    ds = load_dataset("tiny", cfg.data_path)
    _, ensure = open_kg(cfg, ds, llm)
    ensure([ds.corpus.pids[0]])  # a graph grown on demand only, before notebook 01 built any pool
    ws = workspace(cfg, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder())
    assert ws.kg_base == () and len(ws.kg.extracted) == 1 and ws.method_view().kg.extracted == set()
    built = build_kg(cfg, ds, llm, ws.dense)
    ws = workspace(cfg, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder())
    assert set(ws.kg_base) == set(built.pool) and ws.method_view().kg.extracted == set(built.pool)
    assert workspace(cfg, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder(), store=False).kg_base is None


def test_build_sentence_says_what_notebook_01_built(monkeypatch):
    from pathlib import Path
    from types import SimpleNamespace

    from kgir_lib.kg import extract

    kg = KnowledgeGraph([Triple("Compaq", "merged with", "HP", "p1"), Triple("HP", "based in", "Palo Alto", "p2")],
                        extracted=["p1", "p2", "p3"])
    run = extract.KGBuild("hotpotqa", "llm", kg, Counter(), ["p1", "p2", "p3"],
                          extract.ExtractionReport(n_passages=2), 5)
    cfg = SimpleNamespace()
    files = {"musique_train": Path("openie_musique_train_results_x.json")}
    monkeypatch.setattr(extract, "openie_file", lambda cfg, name: files.get(name))
    assert extract.build_sentence(cfg, run) == "hotpotqa: extracted the pool of 3 passages; 2 triples from 3 passages"
    imported = extract.KGBuild("musique_train", "openie", kg, Counter(), [], None, 3)
    assert extract.build_sentence(cfg, imported) == ("musique_train: imported openie_musique_train_results_x.json; "
                                                     "2 triples from 3 passages")


def test_a_workspace_builds_notebook_01s_graph_when_the_run_lacks_it(tmp_path, tiny_dataset):
    """A notebook rerun alone on a fresh clone (no stored graph) starts from the graph notebook 01 builds, so its
    methods' fingerprints are the main job's; the extraction calls stay out of the notebook's usage."""
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.eval import evaluate as ev
    from kgir_lib.kg.extract import build_kg
    from kgir_lib.kg.store import kg_dir, load_base
    from kgir_lib.pipeline import build_base, workspace

    _write_dataset(tmp_path / "data", "tiny", tiny_dataset.corpus.passages, tiny_dataset.questions)
    cfg = load_config("ci", data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"),
                      llm_backend="scripted", extract_max_passages=3, top_k=4, extract_datasets=["tiny"])
    ds = load_dataset("tiny", cfg.data_path)
    llm = LLM(CountingBackend(title_script), LLMCache(tmp_path / "llm.sqlite"), progress=False)
    llm.usage.stage("kgir_ner").calls = 2  # what the notebook counted before opening the workspace
    ws = workspace(cfg, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder())
    assert len(llm.backend.seen) == 3  # the pool of three passages, extracted
    assert list(llm.usage.stages) == ["kgir_ner"] and llm.usage.total().calls == 2  # not counted here
    pool = load_base(kg_dir(cfg, "tiny"))
    assert len(pool) == 3 and ws.kg_base == tuple(pool) and ws.method_view().kg.extracted == set(pool)

    main_job = tmp_path / "main"  # the same run with notebook 01 first: the same graph, the same fingerprint
    cfg01 = load_config("ci", data_dir=str(tmp_path / "data"), results_dir=str(main_job), llm_backend="scripted",
                        extract_max_passages=3, top_k=4, extract_datasets=["tiny"])
    built = build_kg(cfg01, ds, llm, ws.dense)
    ws01 = workspace(cfg01, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder())
    assert ws01.kg_base == ws.kg_base and built.pool == pool
    assert ev.run_fingerprint(ws01.method_view(), ReadsKG()) == ev.run_fingerprint(ws.method_view(), ReadsKG())
    assert not build_base(cfg, ds, llm, ws.dense) and len(llm.backend.seen) == 3  # built once, from the cache
    other = load_config("ci", data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "r2"),
                        llm_backend="scripted", extract_max_passages=3, top_k=4)
    assert workspace(other, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder()).kg_base == ()  # not extracted


class ReadsKG(MethodBase):
    name: ClassVar[str] = "reads kg"
    key: ClassVar[str] = "reads_kg"
    uses_kg: ClassVar[bool] = True

    def run(self, ws, questions):
        return []


def test_notebook_01s_usage_counts_the_whole_pool_whether_extracted_now_or_found_stored(tmp_path, tiny_dataset):
    """A rerun of notebook 01 finds the graph stored; its usage record must still be the pool's calls (asked of
    the cache, no model call), or a second rerun would rewrite the committed record."""
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.kg.extract import build_kg

    _write_dataset(tmp_path / "data", "tiny", tiny_dataset.corpus.passages, tiny_dataset.questions)
    cfg = load_config("ci", data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"),
                      llm_backend="scripted", extract_max_passages=3, top_k=4)
    ds = load_dataset("tiny", cfg.data_path)
    dense = DenseIndex(ds.corpus.passages, BagOfWordsEncoder(), progress=False)
    backend = CountingBackend(title_script)
    cold = LLM(backend, LLMCache(tmp_path / "llm.sqlite"), progress=False)
    build_kg(cfg, ds, cold, dense)
    warm = LLM(backend, LLMCache(tmp_path / "llm.sqlite"), progress=False)
    again = build_kg(cfg, ds, warm, dense)
    assert again.report.n_passages == 0 and len(backend.seen) == 3  # nothing extracted, no model call
    counts = [{k: v for k, v in u.snapshot()["extract"].items() if k not in ("cache_hits", "seconds")}
              for u in (cold.usage, warm.usage)]
    assert counts[0] == counts[1] and counts[0]["calls"] == 3


def test_a_notebook_reads_the_graph_and_counts_its_calls_as_on_a_fresh_run_whatever_the_stored_graph_holds(
        tmp_path, tiny_dataset):
    """``pipeline.fresh_view``: notebook 03 on a run whose stored graph a later notebook of an earlier run grew (the
    main job run twice in one checkout) sees notebook 01's graph and the passages it needs, as on a fresh clone, and
    counts the same extraction calls (those the stored graph held asked of the cache)."""
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.kg.extract import build_kg
    from kgir_lib.pipeline import fresh_view, workspace

    _write_dataset(tmp_path / "data", "tiny", tiny_dataset.corpus.passages, tiny_dataset.questions)
    cfg = load_config("ci", data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"),
                      llm_backend="scripted", extract_max_passages=2, top_k=2, extract_datasets=["tiny"])
    ds = load_dataset("tiny", cfg.data_path)
    llm = LLM(CountingBackend(title_script), LLMCache(tmp_path / "llm.sqlite"), progress=False)
    base = build_kg(cfg, ds, llm, workspace(cfg, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder()).dense).pool
    beyond = [p for p in ds.corpus.pids if p not in base]
    needed, later = beyond[:2], beyond[2:]

    def notebook_03(extra_ids: list) -> tuple:
        """The stored graph as the run leaves it (plus ``extra_ids``, a later notebook's), then the notebook."""
        ws = workspace(cfg, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder())
        ws.ensure_kg(extra_ids)
        llm.usage.stages.clear()
        view = fresh_view(ws)
        kg = view.kg_for(base[:1] + needed)
        return sorted(kg.extracted), len(kg), llm.usage.total().calls, llm.usage.total().prompt_tokens

    first = notebook_03([])  # the first run: the stored graph is notebook 01's
    assert first[0] == sorted(base + needed) and first[2] == len(needed)
    again = notebook_03(later)  # the second run: the stored graph holds those and a later notebook's passages
    assert again == first
    seen = len(llm.backend.seen)
    assert notebook_03([]) == first and len(llm.backend.seen) == seen  # the cache answers: no model call
    plain = workspace(cfg, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder())
    llm.usage.stages.clear()
    plain.method_view().kg_for(base[:1] + needed)
    assert llm.usage.total().calls == 0  # (what the plain method view would have counted: the cause)
    kept = workspace(cfg, ds, llm=llm, progress=False, encoder=BagOfWordsEncoder(), store=False)
    assert fresh_view(kept) is kept  # a graph kept in memory has no base: read as it is
