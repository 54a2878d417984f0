"""In process or through ``llama_cpp.server``: which way runs a profile's model faster on this machine?

The ``local`` profile's model (Qwen2.5-Coder-1.5B-Instruct) to run in process or
behind ``llama_cpp.server``, whichever is faster on 2 cores. This records the LLM requests of KGIR-RAG
(full, 2 rounds) on musique_train tuning questions (never in a sample's first 30,
:func:`kgir_lib.data.tuning_questions`) answered by the in-process backend (the suite's default:
prompt-prefix reuse, flash attention), then replays the same requests in the same order through the
``openai`` backend against one ``llama_cpp.server`` running the same GGUF with the same threads,
context and flash attention (llama-cpp-python reuses the longest common prefix of its context there).
Reports the seconds of each per prompt, the ratio, and the share of equal answers. Writes
``results/benchmarks/backend.md``.

    .venv/bin/python benchmarks/bench_backend.py --profile local --questions 3
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_concurrency import start_servers, stop_servers, wait_ready  # noqa: E402
from bench_prefix import Recorder, replay  # noqa: E402

from kgir_lib.config import load_config  # noqa: E402
from kgir_lib.data import SAMPLE_RESERVED, tuning_questions  # noqa: E402
from kgir_lib.kgir.variants import KGIRRAG  # noqa: E402
from kgir_lib.llm import LLM, LlamaCppBackend  # noqa: E402
from kgir_lib.llm.backends import OpenAIBackend  # noqa: E402
from kgir_lib.llm.llamacpp import embedded_model_path  # noqa: E402
from kgir_lib.pipeline import workspace  # noqa: E402
from kgir_lib.report import to_markdown  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="local")
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "backend.md"))
    args = ap.parse_args()
    cfg = load_config(args.profile, results_dir=Path(tempfile.gettempdir()) / "kgir_bench_backend",
                      datasets=["musique_train"])
    model = Path(cfg.llm_model_path) if cfg.llm_model_path else embedded_model_path(cfg.llm_model)

    inproc = LlamaCppBackend(cfg.llm_model, cfg.llm_model_path, cfg.llm_n_ctx, cfg.llm_n_threads,
                             cfg.llm_json_mode, cfg.llm_seed)
    rec = Recorder(inproc)
    llm = LLM(rec, None, progress=False)  # no cache: every request reaches the model
    ws = workspace(cfg, "musique_train", llm, progress=False)
    qs = tuning_questions(ws.dataset.questions, args.questions, cfg.seed)
    t0 = time.perf_counter()
    KGIRRAG(max_iterations=2).run(ws, qs)
    t_inproc = time.perf_counter() - t0
    requests = [r for r, _ in rec.calls]
    local = [res for _, res in rec.calls]
    del inproc, rec, llm  # free the in-process model before the server loads its own copy

    with tempfile.TemporaryDirectory() as logs:
        servers = start_servers(model, 1, cfg.llm_n_threads, cfg.llm_n_ctx, Path(logs),
                                extra=("--flash_attn", "true"))
        try:
            wait_ready(servers, timeout_s=300)
            server = OpenAIBackend("smollm2", [servers[0][1]], max_concurrency=1, timeout_s=600,
                                   json_mode="llamacpp")
            t0 = time.perf_counter()
            remote = replay(server, requests)
            t_server = time.perf_counter() - t0
        finally:
            stop_servers(servers)

    rows = defaultdict(lambda: defaultdict(float))
    for req, a, b in zip(requests, local, remote):
        row = rows[req.prompt or "untagged"]
        row["requests"] += 1
        row["prompt tokens"] += a.prompt_tokens
        row["s, in process"] += a.seconds
        row["s, llama_cpp.server"] += b.seconds
        row["same answer"] += a.text == b.text
    import pandas as pd

    table = pd.DataFrame.from_dict(rows, orient="index")
    table.loc["total"] = table.sum()
    table["server / in process (x)"] = table["s, llama_cpp.server"] / table["s, in process"]
    table["same answer %"] = 100 * table.pop("same answer") / table["requests"]
    s_in, s_srv = table.loc["total", "s, in process"], table.loc["total", "s, llama_cpp.server"]
    faster = "in process" if s_in <= s_srv else "llama_cpp.server"
    lines = [f"# In process or llama_cpp.server ({cfg.llm_model}, {cfg.llm_n_threads} threads, n_ctx "
             f"{cfg.llm_n_ctx})", "",
             f"Command: `.venv/bin/python benchmarks/bench_backend.py --profile {args.profile} "
             f"--questions {args.questions}`", "",
             f"{len(requests)} requests of KGIR-RAG (full, 2 rounds) on {len(qs)} musique_train tuning questions "
             f"(outside a sample's first {SAMPLE_RESERVED}), answered in process (prefix reuse, flash attention: "
             f"{t_inproc:.0f} s wall, retrieval included), then replayed in the same order through the openai "
             f"backend against one llama_cpp.server with the same GGUF, threads, context and flash attention "
             f"({t_server:.0f} s wall). One run on this machine; seconds per request as each backend measured "
             f"them; **faster: {faster}** ({max(s_in, s_srv) / min(s_in, s_srv):.2f}× over all requests).", "",
             to_markdown(table.round(2).reset_index().rename(columns={"index": "prompt"})), ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
