"""Benchmark: KG extraction throughput with the embedded model, and the cost of a warm rerun of notebooks 01-02.

1. **Cold extraction.** ``--n`` passages of ``--dataset`` (its first passages, in corpus order)
   through :func:`kgir_lib.kg.extract.extract_triples` with the profile's LLM and an empty LLM cache
   in a temporary directory: passages per minute, completion tokens per second (decode) and all
   tokens per second (prompt + completion), triples kept per passage.
2. **Warm rerun.** Notebooks 01 and 02 executed with papermill against one results directory
   (``--results-dir``; default a temporary one): if it holds no graph yet they run once cold first
   (timed, reported), then again warm. Reported: seconds of each warm run and the new LLM calls it made
   (rows added to ``cache/llm.sqlite``; must be 0).

Writes ``results/benchmarks/extraction.json`` and ``.md`` (with the command that made them).

Usage::

    .venv/bin/python benchmarks/bench_extraction.py --profile sample --n 20
    .venv/bin/python benchmarks/bench_extraction.py --profile ci --n 4 --results-dir results   # warm = the main job's dir
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kgir_lib.config import load_config  # noqa: E402
from kgir_lib.data import load_dataset  # noqa: E402
from kgir_lib.kg.extract import MAX_TOKENS, extract_triples  # noqa: E402
from kgir_lib.llm import build_llm  # noqa: E402
from kgir_lib.report import to_markdown  # noqa: E402

NOTEBOOKS = ("01_extract_kg", "02_index")


def cold_extraction(profile: str, dataset: str, n: int) -> dict:
    """Extract ``n`` passages with an empty cache; throughput figures."""
    with tempfile.TemporaryDirectory(prefix="bench_extract_") as tmp:
        cfg = load_config(profile, results_dir=tmp, figures_dir=tmp)
        ds = load_dataset(dataset, cfg.data_path)
        passages = ds.corpus.passages[:n]
        llm = build_llm(cfg, progress=True)  # model load is not timed: it happens once per process
        t0 = time.perf_counter()
        rep = extract_triples(llm, passages, stage="bench")
        wall = time.perf_counter() - t0
    return {
        "model": llm.model_id, "dataset": dataset, "passages": len(passages), "max_new_tokens": MAX_TOKENS,
        "wall_seconds": round(wall, 2), "passages_per_minute": round(60 * len(passages) / wall, 2),
        "seconds_per_passage": round(wall / len(passages), 2),
        "prompt_tokens": rep.prompt_tokens, "completion_tokens": rep.completion_tokens,
        "completion_tokens_per_second": round(rep.completion_tokens / wall, 2),
        "all_tokens_per_second": round((rep.prompt_tokens + rep.completion_tokens) / wall, 2),
        "triples_kept": rep.n_triples, "triples_per_passage": round(rep.n_triples / len(passages), 2),
        "drops": dict(rep.drops), "unparseable_passages": rep.n_unparseable,
    }


def _cache_rows(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(str(path)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])


def run_notebooks(profile: str, results_dir: Path, out_dir: Path) -> dict:
    """Execute notebooks 01 and 02 once; seconds each and LLM cache rows added."""
    import papermill as pm

    os.environ["KGIR_RESULTS_DIR"] = str(results_dir)
    os.environ["KGIR_FIGURES_DIR"] = str(results_dir.parent / "figures")
    os.environ.setdefault("MPLBACKEND", "Agg")
    cache = load_config(profile).run_dir / "cache" / "llm.sqlite"
    out = {}
    for name in NOTEBOOKS:
        before = _cache_rows(cache)
        t0 = time.perf_counter()
        pm.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out_dir / f"{name}.ipynb"),
                            parameters={"profile": profile}, cwd=str(ROOT / "notebooks"), progress_bar=False,
                            kernel_name="python3")
        out[name] = {"seconds": round(time.perf_counter() - t0, 1), "new_llm_calls": _cache_rows(cache) - before}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="sample")
    ap.add_argument("--dataset", default="musique")
    ap.add_argument("--n", type=int, default=20, help="passages for the cold extraction")
    ap.add_argument("--results-dir", default=None, help="results directory of the warm rerun (default: a temporary one)")
    ap.add_argument("--skip-notebooks", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks"))
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("--n must be >= 1")
    command = "python benchmarks/bench_extraction.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    result = {"command": command, "profile": args.profile, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
              "cold_extraction": cold_extraction(args.profile, args.dataset, args.n)}
    print(json.dumps(result["cold_extraction"], indent=2))
    if not args.skip_notebooks:
        with tempfile.TemporaryDirectory(prefix="bench_nb_") as tmp:
            results_dir = Path(args.results_dir).resolve() if args.results_dir else Path(tmp) / "results"
            kg_present = (results_dir / args.profile / "kg").exists()
            if not kg_present:
                result["notebooks_cold"] = run_notebooks(args.profile, results_dir, Path(tmp))
            result["notebooks_warm"] = run_notebooks(args.profile, results_dir, Path(tmp))
            result["warm_results_dir"] = str(results_dir) if args.results_dir else "(temporary)"
        print(json.dumps({k: v for k, v in result.items() if k.startswith("notebooks")}, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "extraction.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "extraction.md").write_text(render_markdown(result))
    print(f"wrote {out / 'extraction.json'} and {out / 'extraction.md'}")
    warm = result.get("notebooks_warm", {})
    return 1 if any(v["new_llm_calls"] for v in warm.values()) else 0


def render_markdown(result: dict) -> str:
    import pandas as pd

    c = result["cold_extraction"]
    lines = ["# Benchmark: KG extraction and warm rerun of notebooks 01-02", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']}; load average at start "
             f"{result['load_average_at_start']} (other processes slow llama.cpp a lot on 2 cores).", "",
             f"## Cold extraction ({c['model']}, {c['passages']} {c['dataset']} passages, max {c['max_new_tokens']} new tokens)",
             "", to_markdown(pd.DataFrame([{k: v for k, v in c.items() if k not in ("drops", "model", "dataset")}]),
                             floatfmt=".2f"), "", f"Drops: {c['drops']}", ""]
    for key, title in (("notebooks_cold", "Notebooks, first (cold) run"), ("notebooks_warm", "Notebooks, warm rerun")):
        if key in result:
            df = pd.DataFrame(result[key]).T.rename_axis("notebook")
            df = df.astype({"seconds": float, "new_llm_calls": int}).astype({"new_llm_calls": str})
            lines += [f"## {title}", "", to_markdown(df), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
