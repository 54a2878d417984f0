"""Extraction replies cut at their token budget are counted: in the extraction's drops (Table 3's
``replies_cut_at_token_limit``, notebook 01) and in the public API's index report."""
from __future__ import annotations

from collections import Counter

from kgir_lib import KGIRPipeline
from kgir_lib.kg.extract import extract_triples
from kgir_lib.kg.parse import CUT_REPLY
from kgir_lib.kg.stats import table3
from kgir_lib.kg.store import total_drops
from kgir_lib.llm import LLM, ScriptedBackend

from conftest import BagOfWordsEncoder


def cut_first(budget: int):
    """Extraction replies: the first passage's fills the whole budget (``budget`` words: cut), the others one triple."""
    seen = []

    def script(req) -> str:
        title = req.messages[-1][1].split("\n", 1)[0].strip()
        seen.append(title)
        if len(seen) == 1:
            line = f"{title} | is a | company\n"
            return line * budget
        return f"{title} | is a | company"
    return script


def test_a_reply_that_fills_its_budget_is_counted_as_cut(tiny_dataset):
    passages = tiny_dataset.corpus.passages[:3]
    llm = LLM(ScriptedBackend(cut_first(40)), None, progress=False)
    report = extract_triples(llm, passages, max_tokens=40)
    assert report.n_truncated == 1
    assert report.drops[CUT_REPLY] == 1
    assert [report.drops_by_pid[p.pid][CUT_REPLY] for p in passages] == [1, 0, 0]


def test_table3_shows_the_cut_replies_beside_the_drops_not_in_their_total(tiny_kg):
    t = table3({"g": (tiny_kg, Counter({"duplicate": 2, CUT_REPLY: 3}))})
    assert t.loc["g", "drops_total"] == 2 and t.loc["g", "replies_cut_at_token_limit"] == 3
    assert list(t.columns)[-2:] == ["drops_total", "replies_cut_at_token_limit"]
    assert table3({"g": (tiny_kg, Counter())}).loc["g", "replies_cut_at_token_limit"] == 0


def test_the_api_index_report_counts_the_cut_replies(cfg, tiny_dataset):
    budget = cfg.max_tokens("extract")
    rag = KGIRPipeline(cfg, llm=LLM(ScriptedBackend(cut_first(budget)), None, progress=False),
                       encoder=BagOfWordsEncoder())
    rag.index([(p.title, p.text) for p in tiny_dataset.corpus.passages])
    assert rag.index_report["drops"][CUT_REPLY] == 1
    assert rag.index_report["drops"] == dict(total_drops(rag.workspace.kg))
