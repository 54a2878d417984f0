"""LightRAG as a method of the suite (kgir_lib.baselines.lightrag_*.py): its index of the tiny Fig. 6 dataset in
both modes, the query through the suite's LLM, the ranked-list rule, malformed keyword replies, the cache."""
from __future__ import annotations

import asyncio
import copy
import json
import re
import sys

import pytest

pytest.importorskip("lightrag", reason="the 'peers' extra (lightrag-hku) is not installed")

from kgir_lib.data import Question  # noqa: E402
from kgir_lib.kg import KnowledgeGraph, Triple  # noqa: E402
from kgir_lib.registry import DEFAULT_METHODS, LABELS, build_method  # noqa: E402
from kgir_lib.baselines import lightrag_index as li  # noqa: E402
from kgir_lib.baselines.lightrag_bridge import RegexTokenizer, stage_of  # noqa: E402
from kgir_lib.baselines.lightrag_graph import SENTENCE, custom_kg, parse_stats  # noqa: E402
from kgir_lib.baselines.lightrag_method import (LightRAGMethod, chunk_ranking, keyword_counts, keyword_table,  # noqa: E402
                                               kg_lines, parse_keywords)

KEYWORDS = json.dumps({"high_level_keywords": ["company merger"], "low_level_keywords": ["Compaq", "Hewlett-Packard"]})
SEP = "<SEP>"


@pytest.fixture(autouse=True)
def _close_indexes():
    yield
    li.close_all()


def script(keywords: str = KEYWORDS):
    def reply(req):
        if req.prompt == "lightrag_keywords":
            return keywords
        if req.prompt == "lightrag_extract":  # LightRAG's delimiter format: the passage's title as an entity
            title = re.search(r"---Input Text---\n```\n(.+)\n", req.messages[-1][1]).group(1)
            return f"entity<|#|>{title}<|#|>organization<|#|>{title} is named in the text.\n<|COMPLETE|>"
        if req.prompt == "lightrag_gleaning":
            return "<|COMPLETE|>"
        return "Answer: Hewlett-Packard"
    return reply


def stages(ws) -> dict:
    return {k: v.calls for k, v in ws.llm.usage.stages.items() if v.calls}


# ----------------------------------------------------------------------------- pieces
def test_regex_tokenizer_is_reversible_shared_and_counts_words_and_marks():
    tok = RegexTokenizer()
    text = "In 2002, Hewlett-Packard merged with Compaq.\n"
    ids = tok.encode(text)
    assert tok.decode(ids) == text and len(ids) == 11  # In 2002 , Hewlett - Packard merged with Compaq . \n
    assert copy.deepcopy(tok) is tok and tok.encode("Compaq") == tok.encode("Compaq")


def test_each_lightrag_call_gets_its_stage():
    assert stage_of("extract", "system", ()) == "lightrag_extract"
    assert stage_of("extract", "system", [{"role": "user", "content": "x"}]) == "lightrag_gleaning"
    assert stage_of("extract", None, ()) == "lightrag_summary"
    assert (stage_of("keyword", None, ()), stage_of("query", "s", ())) == ("lightrag_keywords", "lightrag_answer")


def test_custom_kg_from_the_suite_triples(tiny_dataset, tiny_kg):
    p = {x.title: x.pid for x in tiny_dataset.corpus.passages}
    pool = [p["Compaq"], p["Hewlett-Packard"]]
    kg = KnowledgeGraph(tiny_kg.triples + [Triple("Compaq", "is", "compaq", p["Compaq"]),
                                           Triple("Compaq", "sold", "12", p["Compaq"])], tiny_kg.extracted)
    payload, sources, drops = custom_kg(kg, pool, tiny_dataset.corpus, lambda s: s.strip() if s != "12" else "",
                                        SEP)
    assert [c["source_id"] for c in payload["chunks"]] == pool
    assert payload["chunks"][1]["content"] == "Hewlett-Packard\nIn 2002 Hewlett-Packard merged with Compaq."
    ents = {e["entity_name"]: e for e in payload["entities"]}
    assert ents["Compaq"]["description"] == ("Compaq was top PC maker of 1994; Compaq is a PC supplier; "
                                             "Compaq is compaq" + SEP + "Hewlett-Packard merged with Compaq")
    assert (ents["Compaq"]["source_id"], sources["entities"]["Compaq"]) == (p["Compaq"], pool)
    rels = {(r["src_id"], r["tgt_id"]): r for r in payload["relationships"]}
    assert rels[("Hewlett-Packard", "Compaq")] == {
        "src_id": "Hewlett-Packard", "tgt_id": "Compaq", "description": "Hewlett-Packard merged with Compaq",
        "keywords": "merged with", "weight": 1.0, "source_id": p["Hewlett-Packard"], "file_path": p["Hewlett-Packard"]}
    assert len(rels) == 5 and dict(drops) == {"empty_name": 1}  # "Compaq is compaq" is no self-loop here
    assert SENTENCE.format(head="a", relation="b", tail="c") == "a b c"


def test_custom_kg_drops_self_loops_and_merges_a_pair(tiny_dataset):
    p = {x.title: x.pid for x in tiny_dataset.corpus.passages}
    kg = KnowledgeGraph([Triple("HP", "merged with", "Compaq", p["Compaq"]),
                         Triple("Compaq", "bought by", "HP", p["IBM"]), Triple("HP", "is", "hp", p["IBM"])],
                        [p["Compaq"], p["IBM"]])
    payload, sources, drops = custom_kg(kg, [p["Compaq"], p["IBM"]], tiny_dataset.corpus, str.lower, SEP)
    [rel] = payload["relationships"]
    assert (rel["src_id"], rel["tgt_id"], rel["weight"]) == ("hp", "compaq", 2.0)
    assert rel["keywords"] == "merged with, bought by"
    assert rel["description"] == "HP merged with Compaq" + SEP + "Compaq bought by HP"
    assert sources["relationships"][("hp", "compaq")] == [p["Compaq"], p["IBM"]] and dict(drops) == {"self_loop": 1}


def test_keyword_replies_are_classified_never_raised():
    assert parse_keywords(KEYWORDS) == ("ok", ["company merger"], ["Compaq", "Hewlett-Packard"])
    assert parse_keywords('{"high_level_keywords": ["a"], "low_level_keywords": ["b"],}')[0] == "repaired"
    assert parse_keywords('{"high_level_keywords": [], "low_level_keywords": []}') == ("empty", [], [])
    assert parse_keywords("The keywords are Compaq and HP.") == ("malformed", [], [])
    assert parse_keywords("")[0] == "malformed"


def test_ranked_list_is_lightrags_chunks_in_order_each_once():
    chunks = [{"file_path": p} for p in ("b", "a", "elsewhere", "b", "c")]
    assert chunk_ranking(chunks, {"a", "b", "c"}) == (["b", "a", "c"], 1)
    lines = kg_lines([{"entity_name": "E1", "entity_type": "T", "description": "one two three"}, {"entity_name": "E2"}],
                     [{"src_id": "A", "tgt_id": "B", "description": "d"}] * 3, cap=3, chars=8)
    assert [json.loads(x) for x in lines] == [{"entity": "E1", "type": "T", "description": "one two ..."},
                                              {"entity": "E2", "type": "", "description": ""},
                                              {"entity1": "A", "entity2": "B", "description": "d"}]


def test_native_output_parse_stats_count_kept_and_dropped_records():
    outs = ["entity<|#|>Alice<|#|>person<|#|>Alice is a person.\nentity<|#|>Bob\n"
            "relation<|#|>Alice<|#|>Carol<|#|>knows<|#|>Alice knows Carol.\n<|COMPLETE|>",
            "Here are the entities:\nentity<|#|>Dana<|#|>person<|#|>Dana paints.\nrelation<|#|>Dana<|#|>Paris",
            "I cannot help with that."]
    assert asyncio.run(parse_stats(outs)) == {
        "outputs": 3, "candidate_records": 5, "kept_records": 3, "kept_entities": 2, "kept_relationships": 1,
        "dropped_records": 2, "no_completion_delimiter": 2, "no_record_kept": 1}


def test_registry_and_profiles():
    assert LABELS["lightrag"] == build_method("lightrag").name
    assert DEFAULT_METHODS[-2:] == ["lightrag", "lightrag_naive"]


def test_the_label_says_when_lightrag_reads_the_suite_graph():
    """On the CPU profiles LightRAG's index is the suite's graph, not its own extraction: every row label says so."""
    from types import SimpleNamespace

    from kgir_lib.config import load_config
    from kgir_lib.registry import method_label

    suite, native = SimpleNamespace(lightrag_index="suite_graph"), SimpleNamespace(lightrag_index="native")
    assert method_label("lightrag", suite) == "LightRAG (hybrid; suite graph; shared reader)"
    assert method_label("lightrag_naive", suite) == "LightRAG (naive; suite graph; shared reader)"
    assert method_label("lightrag", native) == "LightRAG (hybrid; shared reader)" == LABELS["lightrag"]
    assert build_method("lightrag", index="native").label(suite) == LABELS["lightrag"]  # its own knob wins
    for profile in ("sample", "local"):
        cfg = load_config(profile)
        assert cfg.lightrag_index == "suite_graph" and "suite graph" in method_label("lightrag", cfg)
    assert method_label("kgir", suite) == "KGIR-RAG"  # the other methods keep their names


def test_readme_names_lightrags_index_as_the_local_rows_do():
    """The README's sentence about LightRAG quotes the label of the local run's rows."""
    from kgir_lib.config import PROJECT_ROOT, load_config
    from kgir_lib.registry import method_label

    readme = " ".join((PROJECT_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"“{method_label('lightrag', load_config('local'))}”" in readme
    assert "LightRAG is the upstream package itself" not in readme


def test_registry_variants():
    assert build_method("lightrag_naive").key == "lightrag_naive" and LABELS["lightrag_naive"].startswith("LightRAG")
    with pytest.raises(ValueError, match="unknown variant"):
        LightRAGMethod(variant="mix")


# ----------------------------------------------------------------------------- the method on the Fig. 6 dataset
def test_suite_graph_index_and_hybrid_query(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(script())
    q = tiny_dataset.questions[0]
    [out] = build_method("lightrag").run(ws, [q])
    assert out.answer == "Hewlett-Packard"
    assert stages(ws) == {"lightrag_keywords": 1, "lightrag_reader": 1}  # the index called no LLM
    t = out.trace
    assert t["keywords"]["status"] == "ok" and t["lightrag_status"] == "success" and t["unmapped_chunks"] == 0
    assert out.ranked_pids == t["chunk_pids"] and t["context_pids"] == out.ranked_pids[: ws.cfg.context_passages]
    assert set(q.gold_pids) <= set(out.ranked_pids[:2])  # both Fig. 6 passages come first
    assert {"Compaq", "Hewlett-Packard"} <= set(t["entities"]) and t["kg_lines"] > 0
    index = li._OPEN[str(li.index_dir(ws.cfg, "tiny", "suite_graph"))]
    m = index.manifest
    assert (m["mode"], m["passages"], m["chunks"], m["llm_usage"]["calls"]) == ("suite_graph", 6, 6, 0)
    assert m["entities_with_several_sources"] == 2  # Compaq and Lenovo are named in two passages each
    node = index.loop.run(index.rag.chunk_entity_relation_graph.get_node("Compaq"))
    assert len(node["source_id"].split(SEP)) == 2 and set(node["file_path"].split(SEP)) == set(q.gold_pids)
    reader_prompt = ws.llm.backend.seen[-1].messages[-1][1]
    assert "Knowledge Graph Data (Relationship):" in reader_prompt and "In 2002 Hewlett-Packard merged" in reader_prompt


def test_naive_mode_retrieves_what_the_dense_index_ranks(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(script())
    q = tiny_dataset.questions[0]
    [out] = build_method("lightrag_naive").run(ws, [q])
    dense = [p for p, s in ws.dense.search([q.question], ws.cfg.top_k)[0] if s >= 0.2]  # LightRAG's cosine floor
    assert out.ranked_pids == dense and stages(ws) == {"lightrag_naive_reader": 1}
    assert out.trace["keywords"] is None and out.trace["kg_lines"] == 0


def test_malformed_keywords_are_counted_and_skipped(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(script("The keywords are Compaq and Hewlett-Packard."))
    long_q = tiny_dataset.questions[0]
    short_q = Question("q2", "Who merged with Compaq?", ("Hewlett-Packard",), (), "tiny")
    method = build_method("lightrag")
    long_out, short_out = method.run(ws, [long_q, short_q])
    assert long_out.trace["keywords"]["status"] == "malformed" and long_out.trace["lightrag_status"] == "skipped"
    assert long_out.ranked_pids == [] and "(none)" in ws.llm.backend.seen[-2].messages[-1][1]
    assert short_out.trace["keywords"]["low_level"] == [short_q.question]  # LightRAG's rule for a short query
    assert short_out.ranked_pids and method.stats == {"keywords_malformed": 2, "no_context": 1}
    assert long_out.usage.calls == 2 and stages(ws) == {"lightrag_keywords": 2, "lightrag_reader": 2}


def test_keyword_table_counts_a_runs_replies_by_status(tiny_workspace, tiny_dataset, tmp_path):
    from kgir_lib.traces import trace_file, write_jsonl

    long_q = tiny_dataset.questions[0]
    short_q = Question("q2", "Who merged with Compaq?", ("Hewlett-Packard",), (), "tiny")
    bad = build_method("lightrag").run(tiny_workspace(script("The keywords are Compaq.")), [long_q, short_q])
    other_q = Question("q3", "Which company did Hewlett-Packard merge with in 2002?", ("Compaq",), (), "tiny")
    good = build_method("lightrag").run(tiny_workspace(script()), [other_q])
    records = [o.to_json() for o in bad + good]
    row = keyword_counts("tiny", records)
    assert {k: row[k] for k in ("questions", "ok", "repaired", "empty", "malformed")} == \
        {"questions": 3, "ok": 1, "repaired": 0, "empty": 0, "malformed": 2}
    assert (row["unusable %"], row["question as keyword"], row["no context"]) == (200 / 3, 1, 1)
    write_jsonl(records, trace_file(tmp_path, "lightrag", "tiny"))
    table = keyword_table(tmp_path, ["tiny", "absent"])
    assert table["dataset"].tolist() == ["tiny"] and table.loc[0, "malformed"] == 2


def test_a_second_run_reads_the_cached_index_and_makes_no_llm_call(tiny_workspace, tiny_dataset):
    q = tiny_dataset.questions[0]
    first = build_method("lightrag").run(tiny_workspace(script()), [q])[0]
    fingerprint = li._OPEN[next(iter(li._OPEN))].fingerprint
    li.close_all()  # as in a new process: the index comes from disk
    ws = tiny_workspace(script())
    second = build_method("lightrag").run(ws, [q])[0]
    index = li._OPEN[str(li.index_dir(ws.cfg, "tiny", "suite_graph"))]
    assert not index.built and index.fingerprint == fingerprint
    assert ws.llm.backend.seen == [] and ws.llm.usage.total().cache_hits == 2
    assert (second.answer, second.ranked_pids) == (first.answer, first.ranked_pids)


def test_runs_where_the_callers_thread_already_runs_an_event_loop(tiny_workspace, tiny_dataset):
    async def in_a_kernel():  # a notebook cell runs inside the kernel's event loop
        return build_method("lightrag").run(tiny_workspace(script()), tiny_dataset.questions)
    [out] = asyncio.run(in_a_kernel())
    assert out.answer == "Hewlett-Packard" and out.ranked_pids


def test_a_changed_pool_rebuilds_the_index(tiny_workspace, tiny_dataset, tiny_kg):
    q = tiny_dataset.questions[0]
    ws = tiny_workspace(script())
    build_method("lightrag").run(ws, [q])
    before = li._OPEN[str(li.index_dir(ws.cfg, "tiny", "suite_graph"))].fingerprint
    ws.kg.remove([tiny_dataset.corpus.passages[-1].pid])  # the graph no longer holds the Apple passage
    build_method("lightrag").run(ws, [q])
    index = li._OPEN[str(li.index_dir(ws.cfg, "tiny", "suite_graph"))]
    assert index.built and index.fingerprint != before and index.manifest["passages"] == 5


def test_native_index_extracts_through_the_suite_llm(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(script())
    q = tiny_dataset.questions[0]
    [out] = build_method("lightrag", index="native").run(ws, [q])
    n = len(tiny_dataset.corpus)
    assert stages(ws) == {"lightrag_extract": n, "lightrag_gleaning": n, "lightrag_keywords": 1, "lightrag_reader": 1}
    m = li._OPEN[str(li.index_dir(ws.cfg, "tiny", "native"))].manifest
    assert (m["mode"], m["entities"], m["documents"], m["llm_usage"]["calls"]) == ("native", n, {"processed": n}, 2 * n)
    assert m["parse"]["kept_entities"] == n and m["parse"]["dropped_records"] == 0
    assert out.usage.calls == 2 and out.trace["index"] == "native"  # indexing is not charged to the question
    assert "Compaq" in out.trace["entities"]


def test_a_native_build_that_cannot_reach_the_llm_fails_clearly_and_saves_no_index(tiny_workspace, tiny_dataset):
    def broken(req):
        if req.prompt == "lightrag_extract":
            raise ConnectionError("LLM server unreachable")
        return script()(req)
    ws = tiny_workspace(broken)
    with pytest.raises(RuntimeError, match=r"could not index 6 of 6 passages of 'tiny' \(first error: .*unreachable"):
        build_method("lightrag", index="native").run(ws, tiny_dataset.questions)
    assert not (li.index_dir(ws.cfg, "tiny", "native") / "index.json").exists() and not li._OPEN


def test_lightrags_unused_dependencies_stay_unimported(tiny_workspace, tiny_dataset):
    build_method("lightrag").run(tiny_workspace(script()), tiny_dataset.questions)
    for name in ("aiohttp", "tiktoken", "google.genai", "pipmaster", "xlsxwriter", "pypinyin"):
        assert name not in sys.modules, name


def test_the_index_cost_row_comes_from_the_trace_meta_when_the_cache_is_gone(tiny_workspace, tiny_dataset):
    import shutil

    from kgir_lib.eval.evaluate import run_method

    ws = tiny_workspace(script())
    run_method(ws, build_method("lightrag"), tiny_dataset.questions)
    meta = json.loads((ws.cfg.run_dir / "traces" / "lightrag" / "tiny.trace.meta.json").read_text())
    m = meta["lightrag_index"]
    assert (m["mode"], m["passages"], m["llm_usage"]["calls"]) == ("suite_graph", 6, 0) and "workspace" not in m
    li.close_all()
    shutil.rmtree(li.index_dir(ws.cfg, "tiny", "suite_graph"))  # a clone: traces committed, cache not
    table = li.indexing_table(ws.cfg, ["tiny"])
    row = table.loc[("tiny", "LightRAG (suite_graph)")]
    assert row["passages"] == 6 and row["LLM calls"] == 0 and row["build wall seconds"] == m["build_seconds"]
    assert li.index_manifest(ws.cfg, "other") is None  # no trace, no cache: no row
