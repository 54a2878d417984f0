"""The suite's knowledge graph in LightRAG's custom-KG form (index mode ``suite_graph``), and LightRAG's own
extraction output measured (mode ``native``).

**suite_graph** (:func:`custom_kg`): no LLM call. For the pool's passages (every triple has a source
passage, KGIR-RAG eq. 1):

- **chunks**: one a passage, its text as the suite shows it (``title\\ntext``), ``source_id`` and
  ``file_path`` = the passage id;
- **entities**: every head and tail, named as LightRAG names what it extracts
  (``lightrag.utils.normalize_entity_name``; a name that comes out empty is dropped and counted, e.g. a one-
  or two-digit number). Type ``UNKNOWN`` (the triples carry none). **Description**: per source passage, the
  passage's triples that name the entity, each written ``head relation tail``, joined by ``"; "``; the
  passages' parts joined by LightRAG's ``GRAPH_FIELD_SEP`` (``<SEP>``), as LightRAG joins an entity's
  per-chunk descriptions when it merges them without an LLM summary;
- **relationships**: one per unordered entity pair (LightRAG's graph is undirected and keeps one edge a
  pair), oriented as its first triple. Description: its triples as sentences (deduplicated, graph order)
  joined by ``<SEP>``; keywords: their relation phrases joined by ``", "`` (LightRAG's extraction writes
  relation keywords there); weight: the number of triples (LightRAG sums one per extracted record). A triple
  whose head and tail name the same entity is dropped and counted (LightRAG refuses self-loops).

LightRAG's custom-KG insertion takes ONE source chunk per entity and per relationship; native extraction
records every chunk an entity came from. :func:`source_lists` keeps every source passage, and the index
writes them into LightRAG's graph store after the insertion (chunk ids joined by ``<SEP>``, LightRAG's
own caps on source ids and file paths applied), so an entity leads to every passage that names it, as
after LightRAG's own merge.

**native** (:func:`parse_stats`): LightRAG's delimiter-format output re-read with LightRAG's own parser,
to count the records it keeps and those it drops or that are malformed.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

SENTENCE = "{head} {relation} {tail}"


def _dedup(items) -> list:
    return list(dict.fromkeys(items))


def custom_kg(kg, pool: Sequence[str], corpus, normalize: Callable[[str], str], sep: str) -> tuple:
    """``(payload, sources, drops)``: LightRAG's ``custom_kg`` dict for ``pool`` (see the module docstring),
    every entity's and relationship's source passages (``{"entities": {name: [pid]}, "relationships":
    {(src, tgt): [pid]}}``, pool order) and the dropped triples by reason."""
    drops: Counter = Counter()
    ent: dict = {}   # name -> {pid: [sentences]}
    rel: dict = {}   # (a, b) sorted -> {"pair": (src, tgt), "by_pid": {pid: [sentences]}, "keywords": [...]}
    for t in kg.triples_of(pool):
        head, tail = normalize(t.head), normalize(t.tail)
        if not head or not tail:
            drops["empty_name"] += 1
            continue
        if head == tail:
            drops["self_loop"] += 1
            continue
        sentence = SENTENCE.format(head=t.head, relation=t.relation, tail=t.tail)
        for name in (head, tail):
            ent.setdefault(name, {}).setdefault(t.pid, []).append(sentence)
        r = rel.setdefault(tuple(sorted((head, tail))), {"pair": (head, tail), "by_pid": {}, "keywords": []})
        r["by_pid"].setdefault(t.pid, []).append(sentence)
        r["keywords"].append(t.relation)
    chunks = [{"content": corpus[p].content, "source_id": p, "file_path": p, "chunk_order_index": 0} for p in pool]
    entities = [{"entity_name": name, "entity_type": "UNKNOWN",
                 "description": sep.join("; ".join(_dedup(s)) for s in by_pid.values()),
                 "source_id": next(iter(by_pid)), "file_path": next(iter(by_pid))} for name, by_pid in ent.items()]
    relationships = []
    for r in rel.values():
        sentences = _dedup(s for ss in r["by_pid"].values() for s in ss)
        first = next(iter(r["by_pid"]))
        relationships.append({"src_id": r["pair"][0], "tgt_id": r["pair"][1], "description": sep.join(sentences),
                              "keywords": ", ".join(_dedup(r["keywords"])),
                              "weight": float(sum(len(ss) for ss in r["by_pid"].values())),
                              "source_id": first, "file_path": first})
    sources = {"entities": {n: list(b) for n, b in ent.items()},
               "relationships": {(r["pair"][0], r["pair"][1]): list(r["by_pid"]) for r in rel.values()}}
    return {"chunks": chunks, "entities": entities, "relationships": relationships}, sources, drops


def joined_sources(pids: Sequence[str], chunk_id: dict, sep: str, max_ids: int, max_paths: int,
                   more: str) -> dict:
    """The ``source_id`` and ``file_path`` LightRAG keeps for an entity or relationship from passages ``pids``:
    their chunk ids (the first ``max_ids``, as LightRAG's default ``KEEP`` limit keeps the earliest) and
    their passage ids as file paths (the first ``max_paths``, then LightRAG's placeholder ``more``)."""
    kept = list(pids)[:max_ids]
    paths = kept[:max_paths] + ([more] if len(kept) > max_paths else [])
    return {"source_id": sep.join(chunk_id[p] for p in kept), "file_path": sep.join(paths)}


async def write_sources(rag, sources: dict, chunk_id: dict) -> dict:
    """Every entity's and relationship's full source list written into ``rag``'s graph store (see the module
    docstring); returns how many nodes and edges got more than one source."""
    from lightrag.constants import GRAPH_FIELD_SEP

    graph = rag.chunk_entity_relation_graph
    caps = dict(sep=GRAPH_FIELD_SEP, max_paths=rag.max_file_paths, more=rag.file_path_more_placeholder)
    multi_nodes = {n: p for n, p in sources["entities"].items() if len(p) > 1}
    multi_edges = {e: p for e, p in sources["relationships"].items() if len(p) > 1}
    nodes = await graph.get_nodes_batch(list(multi_nodes)) if multi_nodes else {}
    await graph.upsert_nodes_batch([
        (n, {**nodes[n], **joined_sources(p, chunk_id, max_ids=rag.max_source_ids_per_entity, **caps)})
        for n, p in multi_nodes.items() if n in nodes])
    edges = await graph.get_edges_batch([{"src": a, "tgt": b} for a, b in multi_edges]) if multi_edges else {}
    await graph.upsert_edges_batch([
        (a, b, {**edges[(a, b)], **joined_sources(p, chunk_id, max_ids=rag.max_source_ids_per_relation, **caps)})
        for (a, b), p in multi_edges.items() if (a, b) in edges])
    await graph.index_done_callback()
    return {"entities_with_several_sources": len(multi_nodes), "relationships_with_several_sources": len(multi_edges)}


# ----------------------------------------------------------------------------- native extraction output
def candidate_records(text: str, tuple_delimiter: str, completion_delimiter: str) -> int:
    """Lines of an extraction output that the model meant as records: those holding the tuple delimiter or
    starting with ``entity`` / ``relation`` (the format LightRAG's prompt asks for)."""
    n = 0
    for line in (text or "").replace(completion_delimiter, "\n").splitlines():
        s = line.strip().lower()
        if s and (tuple_delimiter in line or s.startswith(("entity", "relation"))):
            n += 1
    return n


async def parse_stats(outputs: Sequence[str]) -> dict:
    """LightRAG's parser (``lightrag.operate._process_extraction_result``) over extraction outputs: outputs,
    candidate record lines, records kept (entities + relationships), records dropped (candidates minus kept,
    at least 0), outputs without the completion delimiter, outputs with no record kept."""
    from lightrag.operate import _process_extraction_result
    from lightrag.prompt import PROMPTS

    tup, done = PROMPTS["DEFAULT_TUPLE_DELIMITER"], PROMPTS["DEFAULT_COMPLETION_DELIMITER"]
    out: Counter[str] = Counter()
    for i, text in enumerate(outputs):
        nodes, edges = await _process_extraction_result(text or "", f"chunk-{i}", 0, "benchmark", tup, done,
                                                        warn_on_missing_completion_delimiter=False)
        kept = sum(len(v) for v in nodes.values()) + sum(len(v) for v in edges.values())
        cand = candidate_records(text, tup, done)
        out.update(outputs=1, candidate_records=cand, kept_records=kept, kept_entities=sum(map(len, nodes.values())),
                   kept_relationships=sum(map(len, edges.values())), dropped_records=max(cand - kept, 0),
                   no_completion_delimiter=int(done not in (text or "")), no_record_kept=int(kept == 0))
    return dict(out)
