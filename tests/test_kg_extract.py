"""LLM extraction: one batched call, incremental add, removal, the extraction pool."""
from __future__ import annotations

from collections import Counter

import pytest

from kgir_lib.data import Corpus, Dataset, Question
from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.kg.extract import (MAX_TOKENS, extract_triples, extraction_pool, extraction_requests,
                                 update_kg)
from kgir_lib.kg.store import drops_of, load_kg, save_kg
from kgir_lib.llm import LLM, LLMCache, ScriptedBackend
from kgir_lib.prompts import load_prompt
from kgir_lib.retrieval import DenseIndex

from conftest import BagOfWordsEncoder, make_passage


def passage_of(req) -> str:
    """The passage (title + text) a request asks about: the last example slot of the prompt."""
    user = req.messages[-1][1]
    return user.rsplit("Passage:\n", 1)[1].rsplit("\n\nTriples:", 1)[0]


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
    assert prompt.version == "1" and "KG²RAG" in prompt.source
    assert len(reqs) == 2
    assert [passage_of(r) for r in reqs] == [p.content for p in ps]
    assert all(r.max_tokens == MAX_TOKENS and r.temperature == 0.0 and r.stop for r in reqs)
    # the few-shot examples use the same line format the parser reads
    assert "## born in ##" in prompt.user


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
    pool = extraction_pool(ds, dense, ds.questions, k=3, cap=None)
    assert pool == ds.corpus.pids  # no cap: the whole corpus
    pool = extraction_pool(ds, dense, ds.questions, k=3, cap=100)
    expected = list(dict.fromkeys([hits[0][0][0], hits[1][0][0], hits[0][1][0], hits[1][1][0],
                                   hits[0][2][0], hits[1][2][0]]))
    assert pool == expected
    assert extraction_pool(ds, dense, ds.questions, k=3, cap=2) == expected[:2]
    assert extraction_pool(ds, dense, [], k=3, cap=5) == []
    with pytest.raises(ValueError, match="extract_max_passages"):
        extraction_pool(ds, dense, ds.questions, k=3, cap=-1)
