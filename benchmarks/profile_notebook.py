"""Where a notebook's ``--regenerate`` spends its CPU time: its code in one process under cProfile, every encoder
call timed.

    .venv/bin/python benchmarks/profile_notebook.py 05 [--profile local] [--keep DIR] [--out FILE]

In a fresh clone of this checkout's last commit (``benchmarks/_fresh_clone.py``, as ``regenerate_timing.py``), the
notebook's source (``notebooks/src/NN_*.py``) runs as a script with ``KGIR_LLM_CACHE_ONLY=1`` after the committed
response log is imported into the clone's cache (what the runner does before a ``--regenerate``), so every LLM
answer comes from the log and nothing else is warm. Each call of the encoder-calls store
(:class:`kgir_lib.encoder_calls.RememberedCalls`) and each call of the model (:class:`kgir_lib.encoders.Encoder`)
is logged with its texts and its CPU seconds (this process, all threads), beside the process's total.

Prints (and writes with ``--out``) the encoder's share, its calls by size, and cProfile's top functions by
cumulative time. A notebook run this way writes its tables and figures into the clone, not its ``.ipynb``; it
starts from what a fresh clone holds, so a notebook that reads an earlier one's traces (07 reads 04's and 05's)
computes them itself here, unlike in a whole ``--regenerate``.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _fresh_clone import clone_env, fresh_clone  # noqa: E402

SIZES = ((1, 9), (10, 99), (100, 999), (1000, 10**9))  # call sizes the summary groups by (texts)


def timed_encoders(log: list) -> None:
    """Wrap the store's and the model's ``encode`` so each call appends ``{kind, texts, cpu, wall}`` to ``log``."""
    from kgir_lib import encoder_calls, encoders

    def wrap(cls, kind: str) -> None:
        original = cls.encode

        def encode(self, texts, progress: bool = False):
            texts = list(texts)
            c0, t0 = time.process_time(), time.perf_counter()
            out = original(self, texts, progress)
            log.append({"kind": kind, "texts": len(texts), "chars": sum(len(t) for t in texts),
                        "cpu": time.process_time() - c0, "wall": time.perf_counter() - t0})
            return out
        cls.encode = encode

    wrap(encoder_calls.RememberedCalls, "store call")
    wrap(encoders.Encoder, "model call")


def inside(nb: str, profile: str, out: Path) -> None:
    """In the clone: import the response log, run the notebook's source under cProfile, write ``out`` (JSON)."""
    os.environ["KGIR_LLM_CACHE_ONLY"] = "1"
    os.environ["KGIR_PROFILE"] = profile
    from kgir_lib.config import load_config
    from kgir_lib.runner import sync_log

    log: list = []
    timed_encoders(log)
    sync_log(load_config(profile))
    src = next((Path.cwd() / "notebooks" / "src").glob(f"{nb}_*.py"))
    os.chdir(Path.cwd() / "notebooks")  # (the runner's kernels run there)
    prof = cProfile.Profile()
    c0, t0 = time.process_time(), time.perf_counter()
    prof.runcall(runpy.run_path, str(src), run_name="__main__")
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
    out.write_text(json.dumps({"notebook": src.stem, "cpu": cpu, "wall": wall, "calls": log,
                               "cumulative": text.getvalue()}), encoding="utf-8")


def summary(res: dict, load: tuple, command: str) -> str:
    model = [c for c in res["calls"] if c["kind"] == "model call"]
    store = [c for c in res["calls"] if c["kind"] == "store call"]
    enc_cpu = sum(c["cpu"] for c in model)
    out = [f"# Profile of `{res['notebook']}` (`--regenerate`, fresh clone)", "", f"Command: `{command}`", "",
           f"Load average (1 min) before → after: {load[0]:.2f} → {load[1]:.2f} on {os.cpu_count()} core(s).", "",
           f"Whole notebook: {res['cpu']:.0f} s CPU, {res['wall']:.0f} s wall. The model's calls: {len(model):,}, "
           f"{sum(c['texts'] for c in model):,} texts, {enc_cpu:.0f} s CPU ({100 * enc_cpu / res['cpu']:.0f} %); the "
           f"store's calls: {len(store):,}, {sum(c['texts'] for c in store):,} texts, "
           f"{sum(c['cpu'] for c in store):.0f} s CPU (the model's included).", "",
           "| model calls of | calls | texts | characters | CPU s | CPU ms / text |", "|---|---|---|---|---|---|"]
    for lo, hi in SIZES:
        part = [c for c in model if lo <= c["texts"] <= hi]
        n = sum(c["texts"] for c in part)
        if part:
            cpu = sum(c["cpu"] for c in part)
            label = f"{lo:,}-{hi:,}" if hi < SIZES[-1][1] else f"{lo:,} or more"
            out.append(f"| {label} texts | {len(part):,} | {n:,} | {sum(c['chars'] for c in part):,} | "
                       f"{cpu:.0f} | {1000 * cpu / n:.1f} |")
    out += ["", "cProfile, by cumulative time (the first 40 lines):", "", "```", res["cumulative"].strip(), "```"]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    from kgir_lib.config import default_data_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", help="the notebook's two-digit prefix, e.g. 05")
    ap.add_argument("--profile", default="local")
    ap.add_argument("--keep", type=Path, default=None, help="make the fresh clone here and keep it")
    ap.add_argument("--out", type=Path, default=None, help="write the summary here too")
    ap.add_argument("--inside", type=Path, default=None, help=argparse.SUPPRESS)  # (the clone's own process)
    args = ap.parse_args(argv)
    if args.inside is not None:
        inside(args.notebook, args.profile, args.inside)
        return 0
    data = Path(os.environ.get("KGIR_DATA_DIR") or default_data_dir()).resolve()
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="kgir-profile-") as tmp:
        if args.keep is not None:
            args.keep.mkdir(parents=True)
        repo = fresh_clone(args.keep or Path(tmp))
        result = Path(tmp) / "profile.json"
        cmd = [str(repo / ".venv" / "bin" / "python"), str(repo / "benchmarks" / "profile_notebook.py"),
               args.notebook, "--profile", args.profile, "--inside", str(result)]
        subprocess.run(cmd, cwd=repo, env=clone_env(repo, data, MPLBACKEND="Agg"), check=True)
        res = json.loads(result.read_text(encoding="utf-8"))
    command = "benchmarks/profile_notebook.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = summary(res, (before, os.getloadavg()[0]), command.strip())
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
