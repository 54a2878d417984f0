"""The suite's side of the HippoRAG 2 cross-check, and the comparison report (main environment).

    .venv/bin/python benchmarks/peers/hipporag2_compare.py suite  --work DIR [--profile local] [--trace F]
    .venv/bin/python benchmarks/peers/hipporag2_compare.py seeded --work DIR [--profile local] [--synonymy]
    .venv/bin/python benchmarks/peers/hipporag2_compare.py report --work DIR [--out results/benchmarks/peers_hipporag2.md]
    .venv/bin/python benchmarks/peers/hipporag2_compare.py rescore --work DIR [--out results/benchmarks/peers_hipporag2.md]

``suite``: the suite's :class:`kgir_lib.baselines.hipporag2.HippoRAG2` on the profile's questions of the
dataset, **cache only** (``KGIR_LLM_CACHE_ONLY=1``) from the committed response log
``results/<profile>/llm_responses.jsonl.gz`` (copied into ``DIR/results/<profile>/``, so the repository's
run directory is not touched): no LLM call. ``--trace F`` reads the answers from a run's trace file instead
(``traces/hipporag2/<dataset>.trace.jsonl``), e.g. of a run made before a change to the method's requests.
Writes ``DIR/suite.jsonl`` (per question: linked and kept facts, ranking, context, answer),
``DIR/inject.jsonl`` (the kept facts, for upstream's PPR) and ``DIR/suite_links.jsonl`` (this code's
linked facts, no LLM).

``seeded``: this code's graph + PPR seeded with upstream's kept facts (``DIR/upstream.jsonl``), no LLM:
``DIR/suite_seeded.jsonl``; ``--synonymy`` also with synonymy edges (``DIR/suite_seeded_synonymy.jsonl``, to
compare with upstream run with synonymy edges).

``report``: reads ``DIR/suite.jsonl`` and ``DIR/upstream.jsonl`` (from ``hipporag2_upstream.py``) and
writes the agreement tables (:mod:`kgir_lib.eval.peer_agreement`) to ``--out``.

``rescore``: reads ``DIR/suite.jsonl`` (the ``suite`` step, cache only: this code) and upstream's per-question
scores from the committed ``--out`` CSV, and rewrites ``--out`` and its CSV with the suite side re-scored
(``hipporag2_report.write_rescored_report``): no LLM call and no peer environment. What needs upstream's
ranked passages, facts or environment (top-5 overlap, fact agreement, both seeded runs) is carried from the
committed run, labelled so.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # peer_run and records, beside this script
from peer_run import cache_only_config, checkout_commit  # noqa: E402
from records import read_jsonl, write_jsonl  # noqa: E402


def open_suite(work: Path, profile: str, dataset: str):
    """``(cfg, ws, questions)`` for a cache-only run in ``work/results`` seeded with the committed log."""
    from kgir_lib.data import sample_questions
    from kgir_lib.pipeline import workspace

    cfg = cache_only_config(work, profile)
    ws = workspace(cfg, dataset, progress=False)
    return cfg, ws, sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)


def suite_rows(questions, outputs) -> list:
    """The per-question record of the suite's side from its method outputs (or trace lines)."""
    rows = []
    for q, o in zip(questions, outputs):
        if o.qid != q.qid:
            raise SystemExit(f"suite outputs out of order: {o.qid} where {q.qid} was expected")
        t = o.trace
        rows.append({"qid": o.qid, "question": q.question, "candidates": t.get("candidates", []),
                     "kept": t.get("kept", []), "filter": t.get("filter"), "unmatched": int(t.get("unmatched") or 0),
                     "fallback": bool(t.get("fallback")),
                     "ranking": [p for p, _ in t["ranking"]], "context_pids": t["context_pids"],
                     "ranked_pids": o.ranked_pids, "answer": o.answer, "reader_raw": t.get("reader_raw", "")})
    return rows


def run_suite(work: Path, profile: str, dataset: str, trace: Optional[Path]) -> None:
    """The suite's HippoRAG 2 per question: read from ``trace`` (a run's trace file), else run cache only."""
    from kgir_lib.eval.evaluate import load_outputs
    from kgir_lib.llm import CacheMissError
    from kgir_lib.baselines.hipporag2 import HippoRAG2

    cfg, ws, questions = open_suite(work, profile, dataset)
    if trace is not None:
        outs = load_outputs(trace)
        by_qid = {o.qid: o for o in outs}
        outs = [by_qid[q.qid] for q in questions if q.qid in by_qid]
        if len(outs) != len(questions):
            raise SystemExit(f"{trace}: {len(outs)} of the {len(questions)} questions")
    else:
        try:
            outs = HippoRAG2().run(ws, questions)
        except CacheMissError as exc:
            raise SystemExit(f"{exc}\nThe committed response log does not hold this code's HippoRAG 2 requests: "
                             f"rerun HippoRAG 2 on the '{profile}' profile (KGIR_PROFILE={profile} bash "
                             f"scripts/main.sh), or pass the trace file of a run (SUITE_TRACE=...).") from None
    rows = suite_rows(questions, outs)
    write_jsonl(work / "suite.jsonl", rows)
    (work / "suite.meta.json").write_text(json.dumps({"trace": str(trace) if trace else None, "code": checkout_commit()}))
    write_jsonl(work / "inject.jsonl", [{"qid": r["qid"], "kept": r["kept"]} for r in rows])
    method = HippoRAG2()
    hg, fact_emb = method.graph(ws, ws.kg)
    edges = [[a.removeprefix("entity:"), b.removeprefix("entity:"), float(d["weight"])]
             for a, b, d in hg.graph.edges(data=True) if d.get("kind") == "fact"]
    with gzip.open(work / "suite.graph.json.gz", "wt", encoding="utf-8") as fh:
        json.dump({"nodes": hg.graph.number_of_nodes(), "edges": hg.graph.number_of_edges(),
                   "facts": len(hg.facts), "phrase_edges": edges}, fh)
    # this code's query-to-fact linking (no LLM), whatever run the rows above came from
    from kgir_lib.baselines.hippo_graph import link_facts

    cands, _ = link_facts(hg, fact_emb, ws.dense.embed_queries([q.question for q in questions]),
                          method.settings(ws)["link_top_k"])
    write_jsonl(work / "suite_links.jsonl", [{"qid": q.qid, "candidates": [list(f) for f in c]}
                                              for q, c in zip(questions, cands)])
    print(f"suite: {len(rows)} questions of {dataset} (profile {profile}, "
          f"{'from ' + str(trace) if trace else 'cache only'}) -> {work / 'suite.jsonl'}")


def run_seeded(work: Path, profile: str, dataset: str, synonymy: bool) -> None:
    """The suite's graph + PPR seeded with upstream's kept facts (no LLM): ``DIR/suite_seeded.jsonl``, and
    with synonymy edges ``DIR/suite_seeded_synonymy.jsonl`` (upstream's filter requests do not depend on its
    graph, so its kept facts are the same with and without synonymy edges)."""
    from kgir_lib.baselines.hipporag2 import HippoRAG2

    cfg, ws, questions = open_suite(work, profile, dataset)
    upstream = {r["qid"]: r for r in read_jsonl(work / "upstream.jsonl")}
    qs = [q for q in questions if q.qid in upstream]
    kept = [upstream[q.qid].get("kept", []) for q in qs]
    for name, syn in (("suite_seeded", False), ("suite_seeded_synonymy", True))[:2 if synonymy else 1]:
        method = HippoRAG2(synonymy=syn)
        rankings, missing = method.rank_given_facts(ws, qs, kept)
        write_jsonl(work / f"{name}.jsonl", [{"qid": q.qid, "ranking": [p for p, _ in r], "missing_facts": m}
                                              for q, r, m in zip(qs, rankings, missing)])
        hg = method.graph(ws, ws.kg)[0]
        (work / f"{name}.meta.json").write_text(json.dumps({"synonym_edges": hg.n_synonym_edges,
                                                            "edges": hg.graph.number_of_edges()}))
        print(f"seeded: {len(qs)} questions -> {work / (name + '.jsonl')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["suite", "seeded", "report", "rescore"])
    ap.add_argument("--trace", type=Path, help="suite step: read the suite's answers from this trace file")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--profile", default="local")
    ap.add_argument("--dataset", default="musique_train")
    ap.add_argument("--synonymy", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "peers_hipporag2.md")
    ap.add_argument("--command", default="bash benchmarks/peers/hipporag2_crosscheck.sh",
                    help="the command shown in the report")
    args = ap.parse_args()
    if args.step == "suite":
        run_suite(args.work, args.profile, args.dataset, args.trace)
    elif args.step == "seeded":
        run_seeded(args.work, args.profile, args.dataset, args.synonymy)
    elif args.step == "rescore":
        from hipporag2_report import write_rescored_report

        write_rescored_report(args.work, args.profile, args.dataset, args.out, args.command)
    else:
        from hipporag2_report import write_report

        write_report(args.work, args.profile, args.dataset, args.out, args.command)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
