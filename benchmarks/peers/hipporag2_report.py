"""The HippoRAG 2 cross-check report: ``results/benchmarks/peers_hipporag2.md`` (+ a per-question CSV).

Called by ``hipporag2_compare.py report`` in the main environment; reads the work folder written by
``hipporag2_compare.py suite`` and ``hipporag2_upstream.py``. Measures: :mod:`kgir_lib.eval.peer_agreement`.
"""
from __future__ import annotations

import gzip
import json
import platform
from pathlib import Path

import pandas as pd

from kgir_lib.config import load_config
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.report import to_markdown
from kgir_lib.eval.peer_agreement import (Side, compare_question, fact_key, graph_agreement, pids_of_docs, seeded_agreement,
                                     side_by_side, summary, top_overlap)


def _jsonl(path: Path) -> list:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _by_qid(path: Path) -> dict:
    return {r["qid"]: r for r in _jsonl(path)} if path.exists() else {}


def _edges(path: Path) -> tuple:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        dump = json.load(fh)
    edges: dict = {}
    for a, b, w in dump["phrase_edges"]:
        key = (min(a, b), max(a, b))
        edges[key] = edges.get(key, 0.0) + float(w)
    return dump, edges


def question_rows(work: Path, profile: str, dataset: str) -> pd.DataFrame:
    """One agreement row a question (suite vs upstream), in the profile's question order."""
    cfg = load_config(profile, results_dir=str(work / "results"))
    ds = load_dataset(dataset, cfg.data_path)
    questions = sample_questions(ds.questions, cfg.n_questions, cfg.seed)
    suite, upstream = _by_qid(work / "suite.jsonl"), _by_qid(work / "upstream.jsonl")
    links, seeded = _by_qid(work / "suite_links.jsonl"), _by_qid(work / "suite_seeded.jsonl")
    both = [q for q in questions if q.qid in suite and q.qid in upstream]
    if not both:
        raise SystemExit(f"no question has both a suite and an upstream record in {work} "
                         f"(run the 'suite' step and hipporag2_upstream.py first)")
    rows = []
    for q in both:
        s, u = suite[q.qid], upstream[q.qid]
        inj = u.get("injected")
        row = compare_question(
            Side(s["ranked_pids"], s["candidates"], s["kept"], s["answer"], s["fallback"]),
            Side(pids_of_docs(u["docs"], ds.corpus), u.get("candidates", []), u.get("kept", []),
                 u.get("answer"), not u.get("kept")),
            q.answers, q.gold_pids, k=5, injected=pids_of_docs(inj["docs"], ds.corpus) if inj else None)
        up_ranked = pids_of_docs(u["docs"], ds.corpus)
        if q.qid in links:
            row["links_now_same"] = ({fact_key(f) for f in links[q.qid]["candidates"]}
                                     == {fact_key(f) for f in u.get("candidates", [])})
        if q.qid in seeded:
            row.update(seeded_agreement(seeded[q.qid]["ranking"], up_ranked))
            row["seeded_missing_facts"] = len(seeded[q.qid]["missing_facts"])
        rows.append({"qid": q.qid, **row, "upstream_finish": u.get("finish_reason"),
                     "upstream_answer_parsed": "Answer:" in (u.get("reader_raw") or ""),
                     "injected_missing_facts": len(inj["missing_facts"]) if inj else None})
    return pd.DataFrame(rows)


def synonymy_rows(work: Path, dataset: str, profile: str) -> pd.DataFrame:
    """Top-5 overlap with synonymy edges on both sides (retrieval only), if both files exist."""
    s, u = _by_qid(work / "suite_seeded_synonymy.jsonl"), _by_qid(work / "upstream_synonymy.jsonl")
    if not s or not u:
        return pd.DataFrame()
    cfg = load_config(profile, results_dir=str(work / "results"))
    corpus = load_dataset(dataset, cfg.data_path).corpus
    rows = []
    for q in s:
        if q in u:
            up = pids_of_docs(u[q]["docs"], corpus)
            rows.append({"qid": q, "top5_overlap": top_overlap(s[q]["ranking"], up, 5),
                         "same_order": list(s[q]["ranking"][:5]) == up[:5]})
    return pd.DataFrame(rows)


def _suite_source(work: Path) -> str:
    meta = work / "suite.meta.json"
    if not meta.exists():
        return ""
    m = json.loads(meta.read_text(encoding="utf-8"))
    src = f"the trace file `{m['trace']}`" if m.get("trace") else "a cache-only run of this code"
    return (f"Suite side: {src}; the rows marked *this code* and *the suite's graph + PPR* use the code at "
            f"{m.get('code', 'this checkout')} (no LLM call).")


def _suite_filter(work: Path) -> str:
    rows = _jsonl(work / "suite.jsonl")
    bad = sum(str(r.get("filter", "")).startswith("malformed") for r in rows)
    return (f"{bad} malformed of {len(rows)}, {sum(int(r.get('unmatched') or 0) for r in rows)} reply items "
            f"that matched no candidate")


def _md(df: pd.DataFrame) -> str:
    return to_markdown(df)


def write_report(work: Path, profile: str, dataset: str, out: Path, command: str) -> None:
    rows = question_rows(work, profile, dataset)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out.with_suffix(".csv"), index=False)
    table = summary(rows)
    parts = [f"# HippoRAG 2: the suite's reimplementation against upstream's code\n",
             f"Command: `{command}` (machine: {platform.machine()}, Python {platform.python_version()}).\n",
             f"Dataset `{dataset}`: {len(rows)} of the `{profile}` profile's questions. Per-question rows: "
             f"`{out.with_suffix('.csv').name}`. {_suite_source(work)}\n",
             "## Agreement, per question\n", _md(table), "", "## Each system, same questions\n",
             _md(side_by_side(rows)), ""]
    g_suite, e_suite = _edges(work / "suite.graph.json.gz")
    g_up, e_up = _edges(work / "upstream.graph.json.gz")
    ga = graph_agreement(e_suite, e_up)
    parts += ["## Graphs\n",
              f"Suite: {g_suite['nodes']:,} nodes, {g_suite['edges']:,} edges, {g_suite['facts']:,} facts. "
              f"Upstream: {g_up['nodes']:,} nodes, {g_up['edges']:,} igraph edges (a fact edge is held once per "
              f"direction), {g_up['info'].get('num_extracted_triples', 0):,} facts. Phrase-phrase edges keyed by "
              f"upstream's phrase folding: {ga['suite_edges']:,} (suite) and {ga['upstream_edges']:,} (upstream), "
              f"{ga['shared']:,} shared, {ga['shared_equal_weight']:,} of them with equal weight; "
              f"{ga['only_suite']:,} only in the suite, {ga['only_upstream']:,} only upstream.\n"]
    answered = rows[rows["answer_upstream"].notna()]
    parts += ["## Upstream's LLM stages\n",
              f"- QA reader: {len(answered)} of {len(rows)} questions answered; "
              f"{int((answered['upstream_finish'] == 'length').sum())} replies cut by the token budget; "
              f"{int((~answered['upstream_answer_parsed'].astype(bool)).sum())} without an `Answer:` line (upstream "
              f"then takes the whole reply as the answer).",
              f"- Recognition filter: upstream kept no fact (dense fallback) for "
              f"{int(rows['fallback_upstream'].sum())} questions, the suite for {int(rows['fallback_suite'].sum())}.",
              f"- The suite's filter replies (as its run recorded them): {_suite_filter(work)}.",
              f"- Suite kept facts not found among upstream's facts (injection): "
              f"{int(rows['injected_missing_facts'].fillna(0).sum())}.\n"]
    syn = synonymy_rows(work, dataset, profile)
    if len(syn):
        counts = ""
        meta, up_syn = work / "suite_seeded_synonymy.meta.json", work / "upstream_synonymy.graph.json.gz"
        if meta.exists() and up_syn.exists():
            with gzip.open(up_syn, "rt", encoding="utf-8") as fh:
                up_edges = json.load(fh)["edges"]
            counts = (f" Synonym edges: {json.loads(meta.read_text())['synonym_edges']:,} pairs in the suite's graph "
                      f"(pairs without a fact edge); upstream's igraph holds {up_edges - g_up['edges']:,} more "
                      f"edges than without synonymy (one per ordered pair not already a fact direction).")
        parts += ["## With synonymy edges (retrieval only)\n",
                  f"Both graphs with synonymy edges (cosine ≥ 0.8 among each phrase's top 2047), both seeded with "
                  f"upstream's kept facts: top-5 overlap {100 * syn['top5_overlap'].mean():.1f} % (mean), same top-5 "
                  f"order on {100 * syn['same_order'].mean():.0f} % of {len(syn)} questions.{counts}\n"]
    notes = Path(__file__).resolve().parent / "hipporag2_differences.md"  # the explained differences (prose)
    if notes.exists():
        parts += [notes.read_text(encoding="utf-8")]
    out.write_text("\n".join(parts), encoding="utf-8")
    print(f"report: {out}")
