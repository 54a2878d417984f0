"""Platform benchmark: dense encoding throughput, warm-cache LLM calls per second, llama.cpp tokens per second.

    .venv/bin/python benchmarks/bench_platform.py [--passages 400] [--cached-calls 500] [--llama-requests 10]
                                                  [--omp-compare] [--out results/benchmarks]

1. Dense encoding: :class:`kgir_lib.retrieval.DenseIndex` built cold (no cache file) over the first
   N MuSiQue corpus passages, against a bare ``SentenceTransformer(...).encode`` of the same texts with
   the same batch size and normalisation. Both models are loaded and warmed first; the two are timed
   alternately, best of ``--repeats``; the ratio is library / bare throughput (1.0 = no overhead).
2. LLM calls per second on a warm cache: ``LLM.generate`` over ``--cached-calls`` requests that are all
   in the SQLite cache (scripted backend, never called), best of ``--repeats``.
3. llama.cpp: ``--llama-requests`` reader prompts (the shared reader prompt over 3 MuSiQue passages)
   through :class:`kgir_lib.llm.LlamaCppBackend` (SmolLM2-135M-Instruct Q4_1, 2 threads). Prompt and
   completion rates come from llama.cpp's own counters (``llama_perf_context``). It runs in a fresh
   subprocess; ``--omp-compare`` runs it once more with ``OMP_WAIT_POLICY=ACTIVE`` (the library sets
   PASSIVE by default).

Figures go to ``<out>/platform.json`` and ``<out>/platform.md`` with the command and machine facts.
The machine is shared: the load average before and after each part is recorded next to its numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


def machine() -> dict:
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    except OSError:
        pass
    import importlib.metadata as md

    versions = {}
    for pkg in ("torch", "sentence-transformers", "llama-cpp-python", "numpy"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "platform": platform.platform(), "versions": versions,
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}


# ---------------------------------------------------------------- 1. dense encoding
def bench_encoding(n: int, repeats: int) -> dict:
    from sentence_transformers import SentenceTransformer

    from kgir_lib.data import load_dataset
    from kgir_lib.retrieval import DenseIndex, Encoder, _resolve_model

    passages = load_dataset("musique").corpus.passages[:n]
    texts = [p.content for p in passages]
    enc = Encoder("all-MiniLM-L6-v2", batch_size=64)
    bare = SentenceTransformer(_resolve_model("all-MiniLM-L6-v2"), device="cpu")
    enc.encode(texts[:64])
    bare.encode(texts[:64], batch_size=64, normalize_embeddings=True)
    lib_t, bare_t = [], []
    load0 = loadavg()
    for r in range(repeats):
        order = ("lib", "bare") if r % 2 == 0 else ("bare", "lib")
        for which in order:
            t0 = time.perf_counter()
            if which == "lib":
                with tempfile.TemporaryDirectory() as tmp:  # cold: no cache file
                    index = DenseIndex(passages, enc, cache_dir=Path(tmp), progress=False)
                    lib_t.append(time.perf_counter() - t0)
                lib_emb = index.embeddings
            else:
                bare_emb = bare.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
                bare_t.append(time.perf_counter() - t0)
    import numpy as np

    max_diff = float(np.abs(lib_emb - bare_emb).max())
    lib_rate, bare_rate = n / min(lib_t), n / min(bare_t)
    return {"passages": n, "model": "all-MiniLM-L6-v2", "batch_size": 64, "repeats": repeats,
            "library_seconds": [round(t, 3) for t in lib_t], "bare_seconds": [round(t, 3) for t in bare_t],
            "library_passages_per_s": round(lib_rate, 1), "bare_passages_per_s": round(bare_rate, 1),
            "ratio_library_over_bare": round(lib_rate / bare_rate, 3),
            "max_abs_embedding_difference": max_diff, "loadavg_before": load0, "loadavg_after": loadavg()}


# ---------------------------------------------------------------- 2. warm cache
def bench_warm_cache(n: int, repeats: int) -> dict:
    from kgir_lib.llm import LLM, ChatRequest, LLMCache, ScriptedBackend

    reqs = [ChatRequest.chat("You answer questions.", f"Question {i}: who founded company {i}?", max_tokens=32)
            for i in range(n)]
    load0 = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cache = LLMCache(Path(tmp) / "llm.sqlite")
        LLM(ScriptedBackend(lambda r: "Answer: someone"), cache, progress=False).generate(reqs)
        backend = ScriptedBackend(lambda r: "never called")
        llm = LLM(backend, cache, progress=False)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = llm.generate(reqs, stage="warm")
            times.append(time.perf_counter() - t0)
            assert all(r.cached for r in out) and not backend.seen
        cache.close()
    return {"requests": n, "repeats": repeats, "seconds": [round(t, 4) for t in times],
            "calls_per_s": round(n / min(times), 1), "loadavg_before": load0, "loadavg_after": loadavg()}


# ---------------------------------------------------------------- 3. llama.cpp (in a subprocess)
def llama_worker(n: int) -> dict:
    import llama_cpp

    from kgir_lib.data import load_dataset
    from kgir_lib.llm import LlamaCppBackend
    from kgir_lib.methods.reader import format_passages, reader_request

    ds = load_dataset("musique")
    reqs = [reader_request(q.question, format_passages([ds.corpus[p] for p in q.gold_pids[:3]], 600), max_tokens=32)
            for q in ds.questions[:n]]
    t_load = time.perf_counter()
    backend = LlamaCppBackend("SmolLM2-135M-Instruct-Q4_1", n_ctx=4096, n_threads=2)
    t_load = time.perf_counter() - t_load
    ctx = backend._llm._ctx.ctx
    llama_cpp.llama_perf_context_reset(ctx)
    results = []
    load0 = loadavg()
    t0 = time.perf_counter()
    backend.run(reqs, lambda i, r: results.append(r))
    wall = time.perf_counter() - t0
    perf = llama_cpp.llama_perf_context(ctx)
    return {"requests": n, "max_tokens": 32, "model_load_s": round(t_load, 2), "wall_s": round(wall, 2),
            "prompt_tokens": sum(r.prompt_tokens for r in results),
            "completion_tokens": sum(r.completion_tokens for r in results),
            "prompt_tokens_evaluated": perf.n_p_eval, "prompt_eval_s": round(perf.t_p_eval_ms / 1000, 3),
            "completion_tokens_evaluated": perf.n_eval, "completion_eval_s": round(perf.t_eval_ms / 1000, 3),
            "prompt_tokens_per_s": round(perf.n_p_eval / (perf.t_p_eval_ms / 1000), 1),
            "completion_tokens_per_s": round(perf.n_eval / (perf.t_eval_ms / 1000), 1),
            "requests_per_s": round(n / wall, 3), "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
            "loadavg_before": load0, "loadavg_after": loadavg()}


def bench_llama(n: int, policy: str) -> dict:
    env = {**os.environ, "OMP_WAIT_POLICY": policy}
    out = subprocess.run([sys.executable, __file__, "--llama-worker", str(n)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return {"error": out.stderr[-2000:], "OMP_WAIT_POLICY": policy}
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- report
def markdown(res: dict) -> str:
    m, e, c = res["machine"], res["encoding"], res["warm_cache"]
    lines = ["# Platform benchmark", "", f"Command: `{res['command']}`", "",
             f"Run {res['date']} on {m['nproc']} CPU core(s) ({m['cpu']}), Python {m['python']}, "
             f"torch {m['versions']['torch']}, sentence-transformers {m['versions']['sentence-transformers']}, "
             f"llama-cpp-python {m['versions']['llama-cpp-python']}. The machine is shared with other work: "
             f"the 1-minute load average is given next to each figure.", "",
             "| measure | value | load avg (before → after) |", "|---|---|---|",
             f"| dense encoding, `DenseIndex` cold, {e['passages']} MuSiQue passages (MiniLM, batch 64) "
             f"| {e['library_passages_per_s']} passages/s | {e['loadavg_before']} → {e['loadavg_after']} |",
             f"| dense encoding, bare `SentenceTransformer.encode`, same passages | {e['bare_passages_per_s']} "
             f"passages/s | |",
             f"| ratio library / bare | **{e['ratio_library_over_bare']}** (max embedding difference "
             f"{e['max_abs_embedding_difference']:.1e}) | |",
             f"| `LLM.generate` on a warm cache, {c['requests']} requests | **{c['calls_per_s']} calls/s** "
             f"| {c['loadavg_before']} → {c['loadavg_after']} |"]
    for ll in res["llama"]:
        if "error" in ll:
            lines.append(f"| llama.cpp (OMP_WAIT_POLICY={ll['OMP_WAIT_POLICY']}) | failed: see platform.json | |")
            continue
        lines.append(f"| llama.cpp SmolLM2-135M Q4_1, {ll['requests']} reader prompts, 2 threads, "
                     f"OMP_WAIT_POLICY={ll['OMP_WAIT_POLICY']} | prompt **{ll['prompt_tokens_per_s']} tok/s**, "
                     f"completion **{ll['completion_tokens_per_s']} tok/s** ({ll['prompt_tokens']} prompt / "
                     f"{ll['completion_tokens']} completion tokens, {ll['wall_s']} s) "
                     f"| {ll['loadavg_before']} → {ll['loadavg_after']} |")
    lines += ["", "Encoding times (s), library: " + ", ".join(map(str, e["library_seconds"])) +
              "; bare: " + ", ".join(map(str, e["bare_seconds"])) + ".",
              "Prompt rates count the prompt tokens llama.cpp evaluated; a prefix shared with the previous "
              "request (the reader's few-shot examples) is reused from its KV cache and not re-evaluated.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=400)
    ap.add_argument("--cached-calls", type=int, default=500)
    ap.add_argument("--llama-requests", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--omp-compare", action="store_true", help="also run llama.cpp with OMP_WAIT_POLICY=ACTIVE")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    ap.add_argument("--llama-worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.llama_worker:
        print(json.dumps(llama_worker(args.llama_worker)))
        return 0
    command = ".venv/bin/python benchmarks/bench_platform.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    import kgir_lib  # noqa: F401  (sets the OpenMP default before torch loads)

    res = {"command": command.strip(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine()}
    print("1/3 dense encoding ...", flush=True)
    res["encoding"] = bench_encoding(args.passages, args.repeats)
    print(json.dumps(res["encoding"]), flush=True)
    print("2/3 warm-cache LLM calls ...", flush=True)
    res["warm_cache"] = bench_warm_cache(args.cached_calls, max(args.repeats, 3))
    print(json.dumps(res["warm_cache"]), flush=True)
    print("3/3 llama.cpp ...", flush=True)
    policies = ["PASSIVE"] + (["ACTIVE"] if args.omp_compare else [])
    res["llama"] = []
    for policy in policies:
        res["llama"].append(bench_llama(args.llama_requests, policy))
        print(json.dumps(res["llama"][-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "platform.json").write_text(json.dumps(res, indent=2) + "\n")
    (args.out / "platform.md").write_text(markdown(res))
    print(f"wrote {args.out / 'platform.json'} and {args.out / 'platform.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
