"""Reusing the fixed prompt prefix in the llama.cpp backend: time saved, and answers that do not depend on order.

Records the LLM requests of KGIR-RAG (full) on musique_train tuning questions and of triple
extraction on some of their passages, answered by the embedded model with the context cleared before
every request and flash attention off (the backend before prefix reuse). Then, in the same process, it
replays the same requests in the recorded order through a backend that keeps each prompt's fixed
prefix (system text + worked examples, :mod:`kgir_lib.llm.llamacpp`), first without and then with
flash attention (the backend's default), and through the default backend once more in a shuffled
order. Reports, per prompt: the seconds of each and their ratios; the share of answers equal between
the default backend and the cleared context (the prefix is evaluated in another batch split and the
attention kernel differs, so a greedy token may flip); and the share equal between the two orders
(must be 100 %). Writes ``results/benchmarks/prefix.md``.

    .venv/bin/python benchmarks/bench_prefix.py --questions 4 --passages 4
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgir_lib.config import load_config  # noqa: E402
from kgir_lib.data import SAMPLE_RESERVED, tuning_questions  # noqa: E402
from kgir_lib.kg.extract import extract_triples  # noqa: E402
from kgir_lib.kgir.variants import KGIRRAG  # noqa: E402
from kgir_lib.llm import LLM, LlamaCppBackend  # noqa: E402
from kgir_lib.pipeline import workspace  # noqa: E402
from kgir_lib.report import to_markdown  # noqa: E402


class Recorder:
    """A backend that passes requests to ``inner`` and keeps each request with its answer and seconds."""

    def __init__(self, inner):
        self.inner, self.model_id, self.calls = inner, inner.model_id, []

    def run(self, requests, on_result):
        def keep(i, result):
            self.calls.append((requests[i], result))
            on_result(i, result)

        self.inner.run(requests, keep)


def replay(backend, requests) -> list:
    got = {}
    backend.run(requests, lambda i, r: got.__setitem__(i, r))
    return [got[i] for i in range(len(requests))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="sample")
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--passages", type=int, default=4)
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "prefix.md"))
    args = ap.parse_args()
    cfg = load_config(args.profile, results_dir=Path(tempfile.gettempdir()) / "kgir_bench_prefix",
                      datasets=["musique_train"])

    def backend(reuse: bool, flash: bool) -> LlamaCppBackend:
        return LlamaCppBackend(cfg.llm_model, cfg.llm_model_path, cfg.llm_n_ctx, cfg.llm_n_threads,
                               cfg.llm_json_mode, cfg.llm_seed, reuse_prefix=reuse, flash_attn=flash)

    rec = Recorder(backend(False, False))
    llm = LLM(rec, None, progress=False)  # no cache: every request reaches the model
    ws = workspace(cfg, "musique_train", llm, progress=False)
    qs = tuning_questions(ws.dataset.questions, args.questions, cfg.seed)
    KGIRRAG(max_iterations=2).run(ws, qs)
    pids = [p for q in qs for p in q.gold_pids][: args.passages]
    extract_triples(llm, ws.passages(pids), stage="extract", max_tokens=cfg.max_tokens("extract"))
    requests = [r for r, _ in rec.calls]
    cleared = [res for _, res in rec.calls]

    reused = replay(backend(True, False), requests)
    fast = backend(True, True)
    t0 = time.perf_counter()
    flash = replay(fast, requests)
    t_fast = time.perf_counter() - t0
    order = list(range(len(requests)))
    random.Random(0).shuffle(order)
    shuffled = replay(fast, [requests[i] for i in order])
    back = [None] * len(requests)
    for pos, i in enumerate(order):
        back[i] = shuffled[pos]

    rows = defaultdict(lambda: defaultdict(float))
    for req, a, b, f, c in zip(requests, cleared, reused, flash, back):
        row = rows[req.prompt or "untagged"]
        row["requests"] += 1
        row["prompt tokens"] += a.prompt_tokens
        row["s, context cleared"] += a.seconds
        row["s, prefix reused"] += b.seconds
        row["s, prefix reused + flash attention"] += f.seconds
        row["same answer as cleared"] += a.text == f.text
        row["same answer, shuffled order"] += f.text == c.text
    import pandas as pd

    table = pd.DataFrame.from_dict(rows, orient="index")
    table.loc["total"] = table.sum()
    table["speed-up, prefix (x)"] = table["s, context cleared"] / table["s, prefix reused"]
    table["speed-up, both (x)"] = table["s, context cleared"] / table["s, prefix reused + flash attention"]
    for col in ("same answer as cleared", "same answer, shuffled order"):
        table[col] = 100 * table[col] / table["requests"]
    table = table.rename(columns={"same answer as cleared": "same answer as cleared %",
                                  "same answer, shuffled order": "same answer, shuffled order %"})
    lines = [f"# Prefix reuse in the llama.cpp backend ({cfg.llm_model}, {cfg.llm_n_threads} threads)", "",
             f"Command: `.venv/bin/python benchmarks/bench_prefix.py --questions {args.questions} "
             f"--passages {args.passages}`", "",
             f"{len(requests)} requests recorded from KGIR-RAG (full, 2 rounds) on {len(qs)} musique_train tuning "
             f"questions (outside the sample's first {SAMPLE_RESERVED}) and triple extraction on {len(pids)} of "
             f"their passages, answered with the context cleared before each request; then replayed in one "
             f"process with the fixed prefix reused, without and with flash attention (the backend's default: "
             f"{t_fast:.0f} s wall in order; {fast.prefix_hits} of {2 * len(requests)} requests replayed by it "
             f"found their prefix in the context), and by the default backend again in a shuffled order. Answers "
             f"are compared between the default backend and the cleared context, and between the two orders.", "",
             to_markdown(table.round(2).reset_index().rename(columns={"index": "prompt"})), ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
