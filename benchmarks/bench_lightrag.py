"""Benchmark: what LightRAG's indexing costs with the profile's model, in both index modes.

1. **native** (LightRAG's own extraction, :mod:`kgir_lib.baselines.lightrag_index`): the first ``--passages``
   passages of each dataset's graph pool, in the order notebook 01 extracts them
   (:func:`kgir_lib.kg.extract.extraction_pool` over the profile's sampled questions: every question's
   rank-1 passage, then every rank-2 passage, ...), indexed by LightRAG's ``ainsert`` with the profile's
   LLM through the suite (in-process llama.cpp on the CPU profiles) and an empty LLM cache. Reported per
   passage: LLM calls, prompt and completion tokens, LLM seconds (backend time), wall seconds (embedding
   and LightRAG's own work included), completions cut at the budget; and the parse-failure rate of
   LightRAG's delimiter format with this model (LightRAG's own parser re-run on every extraction and
   gleaning output, :func:`kgir_lib.baselines.lightrag_graph.parse_stats`).
2. **suite_graph** (``--suite-graph``): the same LightRAG index built from the suite's graph of
   musique_train (the published OpenIE, all 1,890 passages: no LLM call), wall seconds.

Beside them, LightRAG's published indexing cost on MuSiQue (HippoRAG 2 paper: 68.5 M input / 18.3 M output
tokens) divided by the 11,656 passages of that corpus: a DERIVED per-passage figure, not a measurement.

Writes ``results/benchmarks/lightrag_indexing.json`` and ``.md`` (with the command). The LLM work goes to
``--results-dir`` (default: a temporary directory), never to the profile's own run directory.

Usage::

    .venv/bin/python benchmarks/bench_lightrag.py --profile local --passages 20 --threads 1 --suite-graph
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kgir_lib.config import load_config  # noqa: E402
from kgir_lib.eval.cost import PAPER_CORPUS_PASSAGES  # noqa: E402
from kgir_lib.data import sample_questions  # noqa: E402
from kgir_lib.eval.evaluate import StoredTimeLLM  # noqa: E402
from kgir_lib.kg.extract import extraction_pool  # noqa: E402
from kgir_lib.llm import build_llm  # noqa: E402
from kgir_lib.baselines import lightrag_index as li  # noqa: E402
from kgir_lib.pipeline import workspace  # noqa: E402
from kgir_lib.report import INDEXING_TOKENS_M, to_markdown  # noqa: E402


def native(cfg, llm, dataset: str, n: int) -> dict:
    ws = workspace(cfg, dataset, llm, progress=False)
    questions = sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)
    pool = extraction_pool(ws.dataset, ws.dense, questions, cfg.top_k, n)
    t0 = time.perf_counter()
    index = li.LightRAGIndex(ws, "native", pool).open()
    wall = time.perf_counter() - t0
    m = index.manifest
    index.close()
    u, parse, k = m["llm_usage"], m["parse"], len(pool)
    calls = {s: v["calls"] for s, v in m["llm_stages"].items()}
    return {"dataset": dataset, "passages": k, "corpus passages": len(ws.dataset.corpus),
            "LLM calls / passage": u["calls"] / k,
            "extraction + gleaning calls": f"{calls.get('lightrag_extract', 0)} + {calls.get('lightrag_gleaning', 0)}",
            "summary calls": calls.get("lightrag_summary", 0),
            "prompt tokens / passage": u["prompt_tokens"] / k,
            "completion tokens / passage": u["completion_tokens"] / k,
            "LLM seconds / passage": u["seconds"] / k, "wall seconds / passage": wall / k,
            "truncated completions": u["truncated"], "entities": m["entities"], "relationships": m["relationships"],
            "documents": m["documents"], "outputs parsed": parse.get("outputs", 0),
            "record lines": parse.get("candidate_records", 0), "records kept": parse.get("kept_records", 0),
            "records dropped or malformed": parse.get("dropped_records", 0),
            "dropped %": 100 * parse.get("dropped_records", 0) / max(parse.get("candidate_records", 0), 1),
            "outputs without completion marker": parse.get("no_completion_delimiter", 0),
            "outputs with no record kept": parse.get("no_record_kept", 0)}


def suite_graph(cfg, llm) -> dict:
    ws = workspace(cfg, "musique_train", llm, progress=False)
    pool = [p for p in ws.dataset.corpus.pids if p in ws.kg.extracted]
    t0 = time.perf_counter()
    index = li.LightRAGIndex(ws, "suite_graph", pool).open()
    wall = time.perf_counter() - t0
    m = index.manifest
    index.close()
    return {"dataset": "musique_train", "passages": m["passages"], "triples": len(ws.kg), "entities": m["entities"],
            "relationships": m["relationships"], "LLM calls": m["llm_usage"]["calls"], "wall seconds": wall,
            "wall seconds / passage": wall / max(m["passages"], 1), "dropped triples": m["dropped_triples"]}


def published() -> dict:
    tin, tout = INDEXING_TOKENS_M["LightRAG"]
    n = PAPER_CORPUS_PASSAGES["musique"]
    return {"source": "HippoRAG 2 paper, LightRAG on MuSiQue (1000-question corpus)", "input tokens (M)": tin,
            "output tokens (M)": tout, "corpus passages": n, "input tokens / passage (derived)": tin * 1e6 / n,
            "output tokens / passage (derived)": tout * 1e6 / n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="local")
    ap.add_argument("--datasets", nargs="*", default=["hotpotqa", "musique_train"])
    ap.add_argument("--passages", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None, help="llm_n_threads (default: the profile's)")
    ap.add_argument("--budget", type=int, default=None,
                    help="max_tokens_lightrag_extract, new tokens a LightRAG index call (default: the profile's)")
    ap.add_argument("--suite-graph", action="store_true", help="also time the suite_graph index of musique_train")
    ap.add_argument("--results-dir", default=None, help="where the LLM cache and indexes go (default: a temp dir)")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "lightrag_indexing"))
    args = ap.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="bench_lightrag_")
    where = args.results_dir or tmp.name
    cfg = load_config(args.profile, results_dir=where, figures_dir=where, llm_n_threads=args.threads,
                      max_tokens_lightrag_extract=args.budget)
    llm = StoredTimeLLM(build_llm(cfg, progress=False))  # a call answered by the cache counts its stored seconds
    load = [round(os.getloadavg()[0], 1)]
    rows = [native(cfg, llm, d, args.passages) for d in args.datasets]
    sg = suite_graph(cfg, llm) if args.suite_graph else None
    load.append(round(os.getloadavg()[0], 1))
    args_shown = shown_args(sys.argv[1:] if argv is None else argv)
    run = {"command": "python benchmarks/bench_lightrag.py " + shlex.join(args_shown),
           "profile": cfg.profile, "model": llm.model_id, "llm_n_threads": cfg.llm_n_threads, "n_ctx": cfg.llm_n_ctx,
           "budget": cfg.max_tokens("lightrag_extract"), "encoder": cfg.embed_model,
           "machine": f"{platform.machine()}, {platform.system()}", "load average (start, end)": load,
           "native": rows, "suite_graph": sg}
    path = Path(args.out).with_suffix(".json")
    old = json.loads(path.read_text(encoding="utf-8")).get("runs", []) if path.exists() else []
    out = {"runs": [r for r in old if r["command"] != run["command"]] + [run], "published": published()}
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    path.with_suffix(".md").write_text(render(out), encoding="utf-8")
    print(render(out))
    return 0


def shown_args(argv) -> list:
    """The arguments as recorded: without ``--results-dir`` / ``--out`` and their values (scratch locations)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--results-dir", "--out"):
            skip = True
        elif not a.startswith(("--results-dir=", "--out=")):
            out.append(a)
    return out


def render(out: dict) -> str:
    """Every run of the JSON file (one per command), then the published figure."""
    import pandas as pd

    lines = ["# LightRAG indexing cost", "", "Written by `benchmarks/bench_lightrag.py`; one section a command. A call "
             "answered by the LLM cache counts the backend seconds stored with it (LLM seconds); wall seconds are "
             "the run's own, so a command run again after an interruption shows more LLM than wall seconds.", ""]
    for run in out["runs"]:
        load = run.get("load average (start, end)")
        busy = f" (1-minute load average {load[0]} at the start, {load[1]} at the end)" if load else ""
        lines += [f"## `{run['command']}`", "",
                  f"Model {run['model']} (profile `{run['profile']}`, {run['llm_n_threads']} llama.cpp thread(s), "
                  f"context {run['n_ctx']} tokens, at most {run['budget']} new tokens a LightRAG call), encoder "
                  f"{run['encoder']}; {run['machine']}, 2 cores shared with other runs{busy}.", ""]
        if run["native"]:
            lines += ["**native**: LightRAG's own extraction (its entity/relation prompt and 1 gleaning a chunk)", "",
                      to_markdown(pd.DataFrame(run["native"]).set_index("dataset").T.rename_axis("quantity"),
                                  floatfmt=".2f"), ""]
            lines += ["At these LLM seconds a passage, one process indexing a whole corpus would take (arithmetic, "
                      "not a measurement): " + "; ".join(
                          f"{r['dataset']} ({r['corpus passages']:,} passages) "
                          f"{r['LLM seconds / passage'] * r['corpus passages'] / 86_400:.1f} days"
                          for r in run["native"] if r.get("corpus passages")) + ".", ""]
        if run.get("suite_graph"):
            lines += ["**suite_graph**: the suite's triples inserted as LightRAG's custom KG (no LLM call)", "",
                      to_markdown(pd.Series({k: round(v, 2) if isinstance(v, float) else v
                                             for k, v in run["suite_graph"].items()}).astype(str)
                                  .to_frame("value").rename_axis("quantity")),
                      ""]
    pub = out["published"]
    lines += ["## Published (not our measurement)", "",
              f"{pub['source']}: {pub['input tokens (M)']} M input / {pub['output tokens (M)']} M output tokens. "
              f"Divided by the corpus's {pub['corpus passages']:,} passages (DERIVED, not printed in the paper): "
              f"{pub['input tokens / passage (derived)']:.0f} input / {pub['output tokens / passage (derived)']:.0f} "
              f"output tokens a passage (the paper's LLM, not ours).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
