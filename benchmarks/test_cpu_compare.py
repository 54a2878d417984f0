"""The CPU and wall time of some test files at an earlier commit and at this checkout's last commit, measured in turn.

    .venv/bin/python benchmarks/test_cpu_compare.py --base REV [--repeat 3] [--out FILE] TEST_PATH [TEST_PATH ...]

Clones this checkout twice into a temporary folder (removed at the end): one clone checked out at ``--base``, one at
the last commit, each with this checkout's environment linked in (``benchmarks/_fresh_clone.py``). Runs the given test
paths with pytest in one process (``-n 0``, the fast tier's marks and plugins, ``KGIR_PROFILE=ci``, the results in
the temporary folder), once in each clone untimed (a new clone's compiled modules are cold), then ``--repeat`` times
in each, alternating base and last commit, so that both sides see the same machine. Reports, per side, the minimum
and median of the CPU time (user + system of pytest and every process it waited for) and of the wall time, every
run with the 1-minute load average before and after, and the ratio of the median CPUs. Writes ``--out`` (default
``results/benchmarks/test_cpu_compare.md``). No test asserts a time: a performance claim about the tests comes from
a run of this script.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from _fresh_clone import clone_env, fresh_clone  # noqa: E402
from test_timing import summarise, timed  # noqa: E402

PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", "-p", "no:nbval", "-p", "no:anyio", "-n", "0", "-q",
          "-m", "not slow and not notebooks"]


def clones(folder: Path, base: str) -> dict:
    """``{"base": clone at base, "last": clone at the last commit}`` under ``folder``."""
    last = fresh_clone(folder / "last")
    old = fresh_clone(folder / "base")
    subprocess.run(["git", "-C", str(old), "checkout", "-q", base], check=True)
    return {"base": old, "last": last}


def run(repo: Path, paths: list, scratch: Path, data_dir: Path) -> dict:
    """One timed pytest run of ``paths`` in ``repo``."""
    scratch.mkdir(parents=True, exist_ok=True)
    env = clone_env(repo, data_dir, KGIR_PROFILE="ci", MPLBACKEND="Agg", KGIR_RESULTS_DIR=str(scratch / "results"),
                    KGIR_FIGURES_DIR=str(scratch / "figures"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = env.get("PYTHONPYCACHEPREFIX") or str(ROOT / ".venv" / "pycache")
    out = timed([str(repo / ".venv" / "bin" / "python"), *PYTEST, *paths, "--basetemp", str(scratch / "pytest")],
                cwd=repo, env=env)
    out["summary"] = (out["stdout"].strip().splitlines() or [""])[-1]
    return out


def render(base: str, paths: list, runs: dict, command: str) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# Test files' CPU: an earlier commit and the last one, measured in turn", "", f"Command: `{command}`", "",
             f"Run {when} on {os.cpu_count()} CPU core(s), Python {platform.python_version()}; tests: "
             f"{', '.join(f'`{p}`' for p in paths)}; base: `{base}`. The machine may be shared: each run carries the "
             "1-minute load average before → after it; the two sides alternate, so both see the same load.", "",
             "| side | CPU: min / median (s) | wall: min / median (s) | every run: wall (CPU) s, load | result |",
             "|---|---|---|---|---|"]
    folded = {side: summarise(rs) for side, rs in runs.items()}
    for side, s in folded.items():
        every = ", ".join(f"{r['seconds']:.1f} ({r['cpu']:.1f}), {r['load'][0]:.2f} → {r['load'][1]:.2f}"
                          for r in runs[side])
        lines.append(f"| {side} | {s['min_cpu']:.2f} / {s['median_cpu']:.2f} | {s['min_wall']:.2f} / "
                     f"{s['median_wall']:.2f} | {every} | {s['summary']} |")
    ratio = folded["base"]["median_cpu"] / folded["last"]["median_cpu"]
    lines += ["", f"Median CPU, base / last commit: **{ratio:.2f}x**. CPU is user + system time of pytest and every "
              "process it waited for; both clones share this checkout's environment and its compiled packages, and "
              "each side ran once untimed first.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="test files or node ids, relative to the repository")
    ap.add_argument("--base", required=True, help="the earlier commit (any git revision of this checkout)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs a side (default 3)")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "test_cpu_compare.md"))
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    from kgir_lib.config import default_data_dir

    data_dir = default_data_dir()
    with tempfile.TemporaryDirectory(prefix="kgir-cpu-") as tmp:
        repos = clones(Path(tmp), args.base)
        runs: dict = {"base": [], "last": []}
        for i in range(args.repeat + 1):
            for side, repo in repos.items():
                out = run(repo, args.paths, Path(tmp) / f"{side}-{i}", data_dir)
                if out["rc"] != 0:
                    print(out["stdout"][-3000:], out["stderr"][-3000:], file=sys.stderr)
                    raise SystemExit(f"test_cpu_compare: the tests failed at {side} ({out['summary']})")
                if i:
                    runs[side].append(out)
                print(f"{side} run {i}: {out['seconds']:.1f} s wall, {out['cpu']:.1f} s CPU", flush=True)
    command = ".venv/bin/python benchmarks/test_cpu_compare.py " + " ".join(
        [f"--base {args.base}", *([f"--repeat {args.repeat}"] if args.repeat != 3 else []), *args.paths])
    md = render(args.base, args.paths, runs, command)
    Path(args.out).write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
