"""Upstream HippoRAG 2 (PyPI ``hipporag`` 2.0.0a4) on one of the suite's datasets, per question on record.

Runs in the peer environment (``benchmarks/peers/.venv-hipporag``, made by ``setup.sh``) with
``benchmarks/peers/stubs`` on ``sys.path`` (the vLLM stand-in); ``hipporag2_crosscheck.sh`` starts the
servers and calls it. Inputs are the suite's:

- corpus: ``<data>/<dataset>/<dataset>_corpus.json``, each passage indexed as ``"title\\ntext"`` (the
  suite's :attr:`Passage.content`, and the ``passage`` field of HippoRAG's OpenIE file);
- OpenIE: the dataset's published ``openie_<dataset>_results_*.json``, copied into the save dir under the
  name upstream looks for (``openie_results_ner_<llm_name>.json``, ``HippoRAG.__init__``); upstream keys its
  docs by the MD5 of ``passage`` (``load_existing_openie``), so every corpus passage is found there and
  nothing is extracted (checked: the run stops if a passage is missing from the file);
- embedder: an OpenAI-compatible endpoint (``embed_server.py``) serving the suite's encoder; upstream picks
  its OpenAI embedding class for a model name containing ``text-embedding`` (``_get_embedding_model_class``);
- LLM: an OpenAI-compatible ``llama_cpp.server``; temperature 0 (upstream's default) and repeat penalty 1.0
  (sent as ``extra_body``: the server's default is 1.1, the suite's in-process llama.cpp uses 1.0).

Upstream's own code runs unchanged: ``HippoRAG.index``, ``retrieve``, ``qa``. Two wrappers only record what
``retrieve`` computes and drops (``rerank_facts``' candidate and kept facts). Then, per question, upstream's
``graph_search_with_fact_entities`` is run once more seeded with the *suite's* kept facts (``--inject``), to
compare graph + PPR given identical facts. Upstream's LLM cache lives in ``<save dir>/llm_cache``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "stubs"))


def load_corpus(path: Path) -> list:
    docs = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or "title" not in d or "text" not in d:
            raise SystemExit(f"{path}: record {i} lacks 'title' or 'text'")
        out.append(f"{d['title']}\n{d['text']}")
    return list(dict.fromkeys(out))


def load_questions(path: Path) -> list:
    """``[{id, question, answers, gold_docs}]`` from a raw MuSiQue file (gold: ``is_supporting`` paragraphs)."""
    out = []
    for i, r in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        try:
            answers = [r["answer"], *r.get("answer_aliases", [])]
            gold = [f"{p['title']}\n{p['paragraph_text']}" for p in r["paragraphs"] if p.get("is_supporting")]
            out.append({"id": str(r["id"]), "question": r["question"], "answers": answers, "gold_docs": gold})
        except (KeyError, TypeError) as exc:
            raise SystemExit(f"{path}: record {i} is not a MuSiQue question ({exc})") from None
    return out


def place_openie(data: Path, dataset: str, save_dir: Path, llm_name: str, docs: list) -> Path:
    """Copy the published OpenIE file to where upstream looks; stop if a corpus passage is not in it."""
    found = sorted((data / dataset).glob(f"openie_{dataset}_results_*.json"))
    if not found:
        raise SystemExit(f"no openie_{dataset}_results_*.json in {data / dataset}")
    target = save_dir / f"openie_results_ner_{llm_name.replace('/', '_')}.json"
    if not target.exists() or target.stat().st_size != found[0].stat().st_size:
        save_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found[0], target)
    have = {d.get("passage") for d in json.loads(target.read_text(encoding="utf-8"))["docs"]}
    missing = [d for d in docs if d not in have]
    if missing:
        raise SystemExit(f"{found[0]}: {len(missing)} corpus passage(s) have no OpenIE doc, e.g. {missing[0][:80]!r}")
    return target


def graph_dump(hr) -> dict:
    """Upstream's graph by phrase text: phrase-phrase edges (weights of parallel edges summed, as the
    undirected PPR sees them), passages per phrase, node and edge counts."""
    g = hr.graph
    names, contents = g.vs["name"], g.vs["content"]
    pair: dict = {}
    for e in g.es:
        a, b = names[e.source], names[e.target]
        if a.startswith("entity-") and b.startswith("entity-"):
            key = tuple(sorted((contents[e.source], contents[e.target])))
            pair[key] = pair.get(key, 0.0) + float(e["weight"])
    by_id = dict(zip(names, contents))
    occurs = {by_id[k]: len(v) for k, v in hr.ent_node_to_chunk_ids.items() if k in by_id}
    return {"nodes": g.vcount(), "edges": g.ecount(), "phrase_edges": [[a, b, w] for (a, b), w in pair.items()],
            "phrase_passages": occurs, "info": hr.get_graph_info()}


def injected_ranking(hr, query: str, facts: list, top: int) -> dict:
    """Upstream's PPR seeded with ``facts`` (raw ``[h, r, t]``), as ``retrieve`` does with its own kept facts."""
    from hipporag.utils.misc_utils import compute_mdhash_id, text_processing

    key_to_index = getattr(hr, "_fact_index", None)
    if key_to_index is None:
        key_to_index = hr._fact_index = {k: i for i, k in enumerate(hr.fact_node_keys)}
    scores = hr.get_fact_scores(query)
    idx, kept, missing = [], [], []
    for f in facts:
        proc = tuple(text_processing(list(f)))
        i = key_to_index.get(compute_mdhash_id(str(proc), prefix="fact-"))
        if i is None:
            missing.append(list(f))
        elif i not in idx:
            idx.append(i)
            kept.append(proc)
    if kept:
        ids, vals = hr.graph_search_with_fact_entities(query=query, link_top_k=hr.global_config.linking_top_k,
                                                       query_fact_scores=scores, top_k_facts=kept,
                                                       top_k_fact_indices=idx,
                                                       passage_node_weight=hr.global_config.passage_node_weight)
    else:
        ids, vals = hr.dense_passage_retrieval(query)
    docs = [hr.chunk_embedding_store.get_row(hr.passage_node_keys[i])["content"] for i in ids[:top]]
    return {"docs": docs, "scores": [float(v) for v in vals[:top]], "missing_facts": missing,
            "fallback": not kept}


def write_records(path: Path, records: list) -> None:
    """One JSON line a question, written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)


def record_rerank(hr) -> dict:
    """Wrap ``hr.rerank_facts`` so each question's candidate and kept facts are kept (upstream drops them)."""
    log: dict = {}
    original = hr.rerank_facts

    def wrapped(query, query_fact_scores):
        out = original(query, query_fact_scores)
        log[query] = {"candidates": [list(f) for f in out[2].get("facts_before_rerank", [])],
                      "kept": [list(f) for f in out[1]], "error": out[2].get("error")}
        return out
    hr.rerank_facts = wrapped
    return log


def main() -> None:
    ap = argparse.ArgumentParser(description="upstream HippoRAG 2 on a suite dataset")
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--dataset", default="musique_train")
    ap.add_argument("--save-dir", type=Path, required=True, help="upstream's save_dir (caches, graph, LLM cache)")
    ap.add_argument("--llm-base-url", required=True)
    ap.add_argument("--llm-name", required=True)
    ap.add_argument("--embed-base-url", required=True)
    ap.add_argument("--embed-name", default="text-embedding-all-MiniLM-L6-v2")
    ap.add_argument("--max-new-tokens", type=int, default=256, help="QA reader budget (upstream default 2048)")
    ap.add_argument("--synonymy-threshold", type=float, default=0.8)
    ap.add_argument("--inject", type=Path, help="JSONL of the suite's kept facts: {qid, kept: [[h, r, t], ...]}")
    ap.add_argument("--top", type=int, default=20, help="passages recorded per ranking")
    ap.add_argument("--n", type=int, help="only the first n questions (a smoke test)")
    ap.add_argument("--no-qa", action="store_true", help="retrieval only: no QA reader calls")
    ap.add_argument("--qa-n", type=int, help="answer only the first n questions (CPU time); default all")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-local")  # the openai client needs a key; the servers ignore it

    from hipporag import HippoRAG
    from hipporag.utils.config_utils import BaseConfig

    docs = load_corpus(args.data_dir / args.dataset / f"{args.dataset}_corpus.json")
    questions = load_questions(args.data_dir / args.dataset / f"{args.dataset}.json")[:args.n]
    place_openie(args.data_dir, args.dataset, args.save_dir, args.llm_name, docs)
    cfg = BaseConfig(save_dir=str(args.save_dir), llm_name=args.llm_name, llm_base_url=args.llm_base_url,
                     embedding_model_name=args.embed_name, embedding_base_url=args.embed_base_url,
                     embedding_batch_size=64, max_new_tokens=args.max_new_tokens, save_openie=False,
                     synonymy_edge_sim_threshold=args.synonymy_threshold, force_index_from_scratch=True)
    hr = HippoRAG(global_config=cfg)
    hr.llm_model.llm_config.generate_params["extra_body"] = {"repeat_penalty": 1.0}
    t0 = time.time()
    hr.index(docs)
    hr.prepare_retrieval_objects()
    t_index = time.time() - t0
    log = record_rerank(hr)
    t0 = time.time()
    sols = hr.retrieve([q["question"] for q in questions], num_to_retrieve=args.top)
    t_retrieve = time.time() - t0
    inject = {}
    if args.inject:
        for line in args.inject.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                inject[rec["qid"]] = rec["kept"]
    records = []
    for q, sol in zip(questions, sols):
        rec = {"qid": q["id"], "question": q["question"], **log.get(q["question"], {}), "docs": list(sol.docs),
               "doc_scores": [float(x) for x in sol.doc_scores], "answer": None}
        if q["id"] in inject:
            rec["injected"] = injected_ranking(hr, q["question"], inject[q["id"]], args.top)
        records.append(rec)
    write_records(args.out, records)  # retrieval on record before the (slow) reader
    with gzip.open(args.out.with_name(args.out.stem + ".graph.json.gz"), "wt", encoding="utf-8") as fh:
        json.dump(graph_dump(hr), fh)
    t0 = time.time()
    n_qa = 0 if args.no_qa else len(sols) if args.qa_n is None else min(args.qa_n, len(sols))
    if n_qa:
        answered, raw, meta = hr.qa(sols[:n_qa])
        for rec, sol, r, m in zip(records, answered, raw, meta):
            rec.update({"answer": sol.answer, "reader_raw": r, "finish_reason": (m or {}).get("finish_reason")})
        write_records(args.out, records)
    t_qa = time.time() - t0
    print(json.dumps({"questions": len(questions), "answered": n_qa, "index_s": round(t_index, 1), "retrieve_s": round(t_retrieve, 1),
                      "qa_s": round(t_qa, 1), "out": str(args.out)}))


if __name__ == "__main__":
    main()
