"""The suite's side of the HippoRAG 2 cross-check, and the comparison report (main environment).

    .venv/bin/python benchmarks/peers/hipporag2_compare.py suite  --work DIR [--profile local] [--synonymy]
    .venv/bin/python benchmarks/peers/hipporag2_compare.py report --work DIR [--out results/benchmarks/peers_hipporag2.md]

``suite``: the suite's :class:`kgir_lib.methods.hipporag2.HippoRAG2` on the profile's questions of the
dataset, **cache only** (``KGIR_LLM_CACHE_ONLY=1``) from the committed response log
``results/<profile>/llm_responses.jsonl.gz`` (copied into ``DIR/results/<profile>/``, so the repository's
run directory is not touched): no LLM call. Writes ``DIR/suite.jsonl`` (per question: linked and kept
facts, ranking, context, answer) and ``DIR/inject.jsonl`` (the kept facts, for upstream's PPR).
``--synonymy`` adds the ranking of the same method with synonymy edges (retrieval only: the filter's
requests do not depend on the graph, so they are cache hits too) as ``DIR/suite_synonymy.jsonl``.

``report``: reads ``DIR/suite.jsonl`` and ``DIR/upstream.jsonl`` (from ``hipporag2_upstream.py``) and
writes the agreement tables (:mod:`kgir_lib.peer_agreement`) to ``--out``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _jsonl(path: Path) -> list:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _write_jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def open_suite(work: Path, profile: str, dataset: str):
    """``(cfg, ws, questions)`` for a cache-only run in ``work/results`` seeded with the committed log."""
    os.environ["KGIR_LLM_CACHE_ONLY"] = "1"
    from kgir_lib.config import load_config
    from kgir_lib.data import sample_questions
    from kgir_lib.llm.response_log import LOG_NAME
    from kgir_lib.pipeline import workspace

    log = ROOT / "results" / profile / LOG_NAME
    if not log.exists():
        raise SystemExit(f"{log}: no committed response log for profile {profile!r}")
    cfg = load_config(profile, results_dir=str(work / "results"))
    target = cfg.run_dir / LOG_NAME
    if not target.exists() or target.stat().st_size != log.stat().st_size:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, target)
    ws = workspace(cfg, dataset, progress=False)
    return cfg, ws, sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)


def run_suite(work: Path, profile: str, dataset: str, synonymy: bool) -> None:
    from kgir_lib.methods.hipporag2 import HippoRAG2

    cfg, ws, questions = open_suite(work, profile, dataset)
    outs = HippoRAG2().run(ws, questions)
    rows = [{"qid": o.qid, "question": q.question, "candidates": o.trace.get("candidates", []),
             "kept": o.trace.get("kept", []), "filter": o.trace.get("filter"),
             "fallback": bool(o.trace.get("fallback")), "ranking": [p for p, _ in o.trace["ranking"]],
             "context_pids": o.trace["context_pids"], "ranked_pids": o.ranked_pids, "answer": o.answer,
             "reader_raw": o.trace.get("reader_raw", "")} for q, o in zip(questions, outs)]
    _write_jsonl(work / "suite.jsonl", rows)
    _write_jsonl(work / "inject.jsonl", [{"qid": r["qid"], "kept": r["kept"]} for r in rows])
    hg = HippoRAG2().graph(ws, ws.kg)[0]
    edges = [[a.removeprefix("entity:"), b.removeprefix("entity:"), float(d["weight"])]
             for a, b, d in hg.graph.edges(data=True) if d.get("kind") == "fact"]
    with gzip.open(work / "suite.graph.json.gz", "wt", encoding="utf-8") as fh:
        json.dump({"nodes": hg.graph.number_of_nodes(), "edges": hg.graph.number_of_edges(),
                   "facts": len(hg.facts), "phrase_edges": edges}, fh)
    if synonymy:
        rankings = HippoRAG2(synonymy=True).retrieve(ws, questions)[0]
        _write_jsonl(work / "suite_synonymy.jsonl",
                     [{"qid": q.qid, "ranking": [p for p, _ in r]} for q, r in zip(questions, rankings)])
    print(f"suite: {len(rows)} questions of {dataset} (profile {profile}, cache only) -> {work / 'suite.jsonl'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["suite", "report"])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--profile", default="local")
    ap.add_argument("--dataset", default="musique_train")
    ap.add_argument("--synonymy", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "peers_hipporag2.md")
    ap.add_argument("--command", default="bash benchmarks/peers/hipporag2_crosscheck.sh",
                    help="the command shown in the report")
    args = ap.parse_args()
    if args.step == "suite":
        run_suite(args.work, args.profile, args.dataset, args.synonymy)
    else:
        from hipporag2_report import write_report

        write_report(args.work, args.profile, args.dataset, args.out, args.command)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
