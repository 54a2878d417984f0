"""The suite's side of the FlashRAG cross-check, and its report (main environment).

    .venv/bin/python benchmarks/peers/flashrag_compare.py questions --work DIR [--profile local]
    .venv/bin/python benchmarks/peers/flashrag_compare.py suite     --work DIR [--profile local]
    .venv/bin/python benchmarks/peers/flashrag_compare.py reading   --work DIR [--out ...md]
    .venv/bin/python benchmarks/peers/flashrag_compare.py report    --work DIR --llm-log F [--out ...md] [--command C]
    .venv/bin/python benchmarks/peers/flashrag_compare.py rescore   --work DIR [--out ...md] [--command C]
    .venv/bin/python benchmarks/peers/flashrag_compare.py report-kept --work DIR [--kept DIR/ircot_kept] [--out ...md]

``questions``: the profile's questions of the dataset (``DIR/questions.jsonl``: qid and question only; FlashRAG's
side sees no gold).

``suite``: the suite's :class:`~kgir_lib.baselines.ircot.IRCoT` and :class:`~kgir_lib.baselines.iter_retgen.IterRetGen`
on those questions, **cache only** (``KGIR_LLM_CACHE_ONLY=1``) from the committed response log
``results/<profile>/llm_responses.jsonl.gz`` (copied into ``DIR/results/<profile>/``, so the repository's run
directory is not touched): a request missing from the log is an error, never an LLM call. Writes
``DIR/suite_ircot.jsonl`` and ``DIR/suite_iter_retgen.jsonl`` and, in ``DIR/suite.meta.json``, the LLM calls
the run made (zero) and the cache hits.

``report``: FlashRAG's records (``DIR/flashrag_ircot.jsonl``, ``DIR/flashrag_iter_retgen.jsonl``, from
``flashrag_pipelines.py``) against the suite's, per method (:mod:`kgir_lib.eval.peer_iterative`), to ``--out``
(markdown), its CSV (one row a method and question) and FlashRAG's records compressed beside them
(``peers_flashrag_outputs.jsonl.gz``: they are not in the suite's response log). ``--llm-log``: the caching
proxy's file, for the LLM seconds and calls of FlashRAG's side.

``reading``: ITER-RETGEN's last round read again by the suite's reader over the same final retrieval, shown as
FlashRAG shows it (every retrieved passage, whole): one LLM call a question, with the profile's model, cached in
``DIR/reading`` (a killed run resumes). The answers go beside the report (``peers_flashrag_reading.jsonl.gz``), so
the report, a re-score and a fresh clone read them with no call; with that file complete the step makes none.

``rescore``: the suite's side again (the ``suite`` step, this code, cache only) against FlashRAG's committed
records (``peers_flashrag_outputs.jsonl.gz``): no peer environment, no server, no LLM call. It re-scores the second
FlashRAG IRCoT row (below) too when its records are committed.

``report-kept``: the second FlashRAG IRCoT row, FlashRAG's IRCoT with its earlier thoughts kept through the OpenAI
client (``flashrag_pipelines.py --ircot-thoughts kept``, run into ``--kept``; its proxy's file
``--kept``/``llm_cache.jsonl`` holds only the calls the as-run answers did not) against the ``suite`` step's IRCoT:
its records, LLM answers and rows beside the report (``peers_flashrag_ircot_kept*``), then the report rendered again
from the committed files. The as-run files are not touched.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # peer_run and records, beside this script
from peer_run import cache_only_config, checkout_commit  # noqa: E402
from records import read_jsonl, write_gzip, write_jsonl  # noqa: E402

METHODS = ("ircot", "iter_retgen")


def profile_questions(profile: str, dataset: str, results_dir: Path) -> list:
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset, sample_questions

    cfg = load_config(profile, results_dir=str(results_dir))
    return sample_questions(load_dataset(dataset, cfg.data_path).questions, cfg.n_questions, cfg.seed)


def write_questions(work: Path, profile: str, dataset: str) -> None:
    qs = profile_questions(profile, dataset, work / "results")
    write_jsonl(work / "questions.jsonl", [{"qid": q.qid, "question": q.question} for q in qs])
    print(f"questions: {len(qs)} of {dataset} (profile {profile}) -> {work / 'questions.jsonl'}")


def open_suite(work: Path, profile: str, dataset: str):
    """``(cfg, ws, questions)`` for a cache-only run in ``work/results`` seeded with the committed log."""
    from kgir_lib.data import sample_questions
    from kgir_lib.pipeline import workspace

    cfg = cache_only_config(work, profile)
    ws = workspace(cfg, dataset, progress=False)
    return cfg, ws, sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)


class RecordedSearch:
    """The suite's dense search as a committed run recorded it (``peers_flashrag_suite_searches.jsonl.gz``): the same
    ``search(queries, k)`` as :class:`kgir_lib.retrieval.DenseIndex`, with no encoder. A query or a ``k`` the record
    does not hold is an error (this code asks what that run did not: run the ``suite`` step with the encoder)."""

    def __init__(self, path: Path):
        self.path = path
        self.hits: dict = {}
        for r in read_jsonl(path):
            self.hits[(r["query"], int(r["k"]))] = [(p, float(s)) for p, s in r["hits"]]

    def search(self, queries, k: int) -> list:
        missing = [q for q in queries if (q, int(k)) not in self.hits]
        if missing:
            raise SystemExit(f"{self.path}: no recorded top-{k} search for {len(missing)} quer(ies), e.g. "
                             f"{missing[0][:80]!r}; run the suite step with the encoder (no --recorded-searches)")
        return [self.hits[(q, int(k))] for q in queries]


def write_searches(work: Path, out: Path, k: int) -> None:
    """Every dense search of the suite's side (``DIR/suite_*.jsonl``), once each, compressed."""
    seen: dict = {}
    for m in METHODS:
        for r in read_jsonl(work / f"suite_{m}.jsonl"):
            for s in r["searches"]:
                seen.setdefault(s["query"], s["hits"])
    write_gzip(out, "".join(json.dumps({"query": q, "k": k, "hits": h}, ensure_ascii=False) + "\n"
                            for q, h in seen.items()))


def recorded_workspace(work: Path, profile: str, dataset: str, searches: Path):
    """``(cfg, ws, questions)`` like :func:`open_suite`, with the dense search replayed from ``searches`` and no
    graph (IRCoT and ITER-RETGEN read none): no encoder or model is loaded."""
    from kgir_lib.data import load_dataset, sample_questions
    from kgir_lib.kg import KnowledgeGraph
    from kgir_lib.llm import build_llm
    from kgir_lib.methods.base import Workspace

    cfg = cache_only_config(work, profile)
    ds = load_dataset(dataset, cfg.data_path)
    ws = Workspace(cfg=cfg, dataset=ds, llm=build_llm(cfg, progress=False), dense=RecordedSearch(searches),
                   kg=KnowledgeGraph())
    return cfg, ws, sample_questions(ds.questions, cfg.n_questions, cfg.seed)


def run_suite(work: Path, profile: str, dataset: str, searches: Optional[Path] = None) -> None:
    """The suite's IRCoT and ITER-RETGEN, cache only; their per-question records and the LLM calls made.
    ``searches``: replay the dense search from that record instead of encoding the queries."""
    from kgir_lib.baselines.ircot import IRCoT
    from kgir_lib.baselines.iter_retgen import IterRetGen
    from kgir_lib.eval.peer_iterative import suite_record
    from kgir_lib.llm import CacheMissError

    cfg, ws, questions = (recorded_workspace(work, profile, dataset, searches) if searches
                          else open_suite(work, profile, dataset))
    meta = {"code": checkout_commit(), "profile": profile, "dataset": dataset, "model": cfg.llm_model,
            "top_k": cfg.top_k, "context_passages": cfg.context_passages, "passage_chars": cfg.passage_chars,
            "ircot_max_steps": cfg.ircot_max_steps, "iter_retgen_rounds": cfg.iter_retgen_rounds,
            "dense_search": f"replayed from {searches.name}" if searches else "the suite's encoder and index"}
    for key, method in (("ircot", IRCoT()), ("iter_retgen", IterRetGen())):
        try:
            outs = method.run(ws, questions)
        except CacheMissError as exc:
            raise SystemExit(f"{exc}\nThe committed response log does not hold this code's {method.name} "
                             f"requests: rerun it on the '{profile}' profile (KGIR_PROFILE={profile} bash "
                             f"scripts/main.sh) before comparing.") from None
        write_jsonl(work / f"suite_{key}.jsonl", [suite_record(key, q, o) for q, o in zip(questions, outs)])
    stages = {name: {"calls": s.calls, "cache_hits": s.cache_hits} for name, s in ws.llm.usage.stages.items()}
    meta["llm_stages"] = stages
    meta["llm_calls_made"] = sum(s["calls"] - s["cache_hits"] for s in stages.values())
    (work / "suite.meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    print(f"suite: IRCoT and ITER-RETGEN on {len(questions)} questions of {dataset} (profile {profile}, cache only: "
          f"{meta['llm_calls_made']} LLM calls made) -> {work}")


def run_reading(work: Path, profile: str, dataset: str, out: Path) -> None:
    """The ``reading`` step (module docstring): the suite's shared reader over each question's last ITER-RETGEN
    retrieval (``DIR/suite_iter_retgen.jsonl``, from the ``suite`` step), every passage of it whole."""
    import time
    from dataclasses import replace

    from flashrag_report import READING, read_reading

    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.kg import KnowledgeGraph
    from kgir_lib.llm import build_llm
    from kgir_lib.methods.base import Workspace
    from kgir_lib.methods.context import read

    target = out.parent / READING
    records = read_jsonl(work / "suite_iter_retgen.jsonl")
    if records and {r["qid"] for r in records} <= set(read_reading(target)[1]):
        print(f"reading: every question already read again ({target}); no LLM call")
        return
    cfg = load_config(profile, results_dir=str(work / "reading"))
    cfg = replace(cfg, context_passages=cfg.top_k, passage_chars=None)  # FlashRAG's context: every hit, whole
    os.environ.pop("KGIR_LLM_CACHE_ONLY", None)  # this step asks the model (the suite step ran cache only)
    ws = Workspace(cfg=cfg, dataset=load_dataset(dataset, cfg.data_path), llm=build_llm(cfg), dense=None,
                   kg=KnowledgeGraph())
    contexts = [[p for p, _ in r["searches"][-1]["hits"]][: cfg.context_passages] for r in records]
    t0 = time.time()
    answered = read(ws, [r["question"] for r in records], contexts, stage="iter_retgen_reader")
    stage = ws.llm.usage.stages["iter_retgen_reader"]
    meta = {"model": cfg.llm_model, "context_passages": cfg.context_passages, "passage_chars": cfg.passage_chars,
            "calls": stage.calls, "calls_made": stage.calls - stage.cache_hits, "llm_seconds": round(stage.seconds, 1),
            "prompt_tokens": stage.prompt_tokens, "truncated": stage.truncated,
            "wall_seconds": round(time.time() - t0, 1)}
    write_jsonl(target, [{"meta": meta}] + [{"qid": r["qid"], "context_pids": c, "answer": a, "raw": res.text}
                                            for r, c, (a, res) in zip(records, contexts, answered)])
    print(f"reading: {len(records)} questions read again over {cfg.context_passages} whole passages "
          f"({meta['calls_made']} LLM calls made) -> {target}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["questions", "suite", "reading", "report", "rescore", "report-kept"])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--profile", default="local")
    ap.add_argument("--dataset", default="musique_train")
    ap.add_argument("--recorded-searches", type=Path, default=None,
                    help="suite: replay the dense search from this record (no encoder load)")
    ap.add_argument("--llm-log", type=Path, default=None, help="report: the caching proxy's file")
    ap.add_argument("--kept", type=Path, default=None,
                    help="report-kept: the shim's run folder (default: WORK/ircot_kept)")
    ap.add_argument("--wall", type=float, default=None, help="report: wall seconds of FlashRAG's run")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "peers_flashrag.md")
    ap.add_argument("--command", default="bash benchmarks/peers/flashrag_crosscheck.sh",
                    help="the command shown in the report")
    args = ap.parse_args()
    if args.step == "questions":
        write_questions(args.work, args.profile, args.dataset)
    elif args.step == "suite":
        run_suite(args.work, args.profile, args.dataset, args.recorded_searches)
    elif args.step == "reading":
        run_reading(args.work, args.profile, args.dataset, args.out)
    elif args.step == "report-kept":
        from flashrag_report import write_kept

        write_kept(args.work, args.kept or args.work / "ircot_kept", args.profile, args.dataset, args.out,
                   args.command, llm_log=args.llm_log)
    else:
        from flashrag_report import SEARCHES, write_report

        write_report(args.work, args.profile, args.dataset, args.out, args.command,
                     llm_log=args.llm_log, wall=args.wall, rescore=args.step == "rescore")
        if args.step == "report":  # the suite's searches recorded beside the report, so a re-score needs no encoder
            top_k = json.loads((args.work / "suite.meta.json").read_text(encoding="utf-8"))["top_k"]
            write_searches(args.work, args.out.parent / SEARCHES, int(top_k))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
