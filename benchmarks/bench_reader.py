"""Reader check: can an embedded model answer when it is handed the gold passages?

The first ``--n`` HotpotQA questions of the shared sample (file order), only their gold passages as
context (full text, title first), the suite's shared reader prompt and parser (``kgir_lib.methods.reader``),
greedy decoding, SQuAD-normalised EM/F1 (``kgir_lib.eval.metrics``). Every embedded model that is
installed runs, one after another, with no LLM cache (so seconds per question are real).

This is an upper bound for what retrieval can give a model: a model that cannot answer from the
gold passages cannot exercise KGIR-RAG. Output: ``results/benchmarks/reader.md`` and ``.csv``.

    .venv/bin/python benchmarks/bench_reader.py            # every installed embedded model, n=30
    .venv/bin/python benchmarks/bench_reader.py --models Qwen2.5-Coder-0.5B-Instruct-Q4_K_M --n 10
"""
from __future__ import annotations

import argparse
import platform
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kgir_lib.data import load_dataset  # noqa: E402
from kgir_lib.eval.metrics import best_em, best_f1  # noqa: E402
from kgir_lib.llm import LlamaCppBackend  # noqa: E402
from kgir_lib.llm.build import cpu_flags  # noqa: E402
from kgir_lib.llm.embedded import installed_models  # noqa: E402
from kgir_lib.methods.reader import format_passages, parse_answer, reader_request  # noqa: E402
from kgir_lib.report import to_markdown  # noqa: E402


def run_model(name: str, questions, corpus, max_tokens: int, n_threads: int) -> dict:
    backend = LlamaCppBackend(name, None, n_ctx=4096, n_threads=n_threads)
    reqs = [reader_request(q.question, format_passages([corpus[p] for p in q.gold_pids]), max_tokens)
            for q in questions]
    results: dict = {}
    t0 = time.perf_counter()
    backend.run(reqs, lambda i, r: results.__setitem__(i, r))
    seconds = time.perf_counter() - t0
    backend.close()
    preds = [parse_answer(results[i].text) for i in range(len(reqs))]
    em = [best_em(p, q.answers) for p, q in zip(preds, questions)]
    f1 = [best_f1(p, q.answers) for p, q in zip(preds, questions)]
    return {"model": name, "n": len(questions), "EM": 100 * sum(em) / len(em), "F1": 100 * sum(f1) / len(f1),
            "s/question": seconds / len(questions),
            "prompt tokens/q": sum(results[i].prompt_tokens for i in results) / len(reqs),
            "completion tokens/q": sum(results[i].completion_tokens for i in results) / len(reqs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--models", nargs="*", help="embedded model names (default: every installed one)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "reader")
    args = ap.parse_args(argv)
    ds = load_dataset("hotpotqa")
    questions = ds.questions[: args.n]
    rows = []
    for name in args.models or installed_models():
        print(f"bench_reader: {name} on {len(questions)} questions ...", flush=True)
        rows.append(run_model(name, questions, ds.corpus, args.max_tokens, args.threads))
        print(f"  EM {rows[-1]['EM']:.1f}  F1 {rows[-1]['F1']:.1f}  {rows[-1]['s/question']:.2f} s/question", flush=True)
    table = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out.with_suffix(".csv"), index=False)
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx512f", "amx", "avx2"))))
    cmd = "python benchmarks/bench_reader.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    md = [f"# Reader check: gold passages as context, first {len(questions)} HotpotQA questions", "",
          f"Command: `{cmd.strip()}`  ",
          f"Machine: {platform.processor() or platform.machine()}, {args.threads} threads, CPU flags {flags}; "
          "llama-cpp-python built portably (kgir_lib/llm/build.py).  ",
          "Reader: the suite's shared prompt and parser (kgir_lib/methods/reader.py), greedy, "
          f"max {args.max_tokens} new tokens; EM/F1 SQuAD-normalised, max over aliases.", "",
          to_markdown(table)]
    args.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
