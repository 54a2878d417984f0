"""How long the first minutes of a user take: the test tiers, the one-notebook rerun, the offline refusal.

    .venv/bin/python benchmarks/test_timing.py [--only fast full rerun offline] [--out results/benchmarks/tests.md]

Measures, on this machine as it is (wall time, with the 1-minute load average before and after each, since the
machine may be shared: a figure under load is not an idle figure and says so):

- ``fast``: ``bash scripts/test.sh --fast``; the count line and the ten slowest tests (setup, call and teardown
  together, from pytest's JUnit XML report);
- ``full``: ``bash scripts/test.sh`` (the whole suite), the same;
- ``rerun``: ``bash scripts/main.sh --only 03 -p top_k 5`` run once to warm it, then timed (a one-notebook rerun
  with a parameter: the scratch run's caches are warm, nothing else changed);
- ``offline``: ``bash scripts/main.sh`` in a fresh clone of this checkout's last commit with no data beside it,
  both upstream hosts unreachable (a closed local port): the time until it refuses, naming the ways out.

Writes a Markdown record (default ``results/benchmarks/tests.md``) with the command, the date, the machine and
every figure. No test asserts a time: this script is where the performance claims come from.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("fast", "full", "rerun", "offline")
SLOWEST = 10


def load() -> float:
    return os.getloadavg()[0]


def timed(cmd: list, cwd: Path = ROOT, env: dict | None = None, timeout: float = 3600) -> dict:
    """Run ``cmd``; its wall seconds, the CPU seconds of it and every process it waited for (user + system: what
    a busy machine inflates least), exit code, output and the load average before and after."""
    before, cpu0 = load(), os.times()
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout)
    cpu1 = os.times()
    cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    return {"seconds": time.perf_counter() - t0, "cpu": cpu, "rc": out.returncode, "stdout": out.stdout,
            "stderr": out.stderr, "load": (before, load()),
            "failed": [ln.strip() for ln in out.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]}


def slowest(junit: Path, n: int = SLOWEST) -> list:
    """``[(seconds, test id)]`` of the ``n`` slowest test cases of a JUnit XML report, slowest first."""
    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        if case.get("classname", "").startswith("notebooks."):
            name = f"{case.get('classname').replace('.', '/')}.ipynb::{case.get('name')}"
        cases.append((float(case.get("time") or 0), name))
    return sorted(cases, reverse=True)[:n]


def summary_line(stdout: str) -> str:
    """pytest's last line (``1,492 passed, 2 skipped in 79.1s``), or what ended the run."""
    lines = [ln.strip() for ln in stdout.splitlines() if re.search(r"\b(passed|failed|error)", ln)]
    return lines[-1] if lines else "(no pytest summary)"


def tier(fast: bool) -> dict:
    """One tier of scripts/test.sh, with a JUnit report for the slowest tests."""
    with tempfile.TemporaryDirectory(prefix="kgir-timing-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = ["bash", "scripts/test.sh"] + (["--fast"] if fast else []) + [f"--junitxml={junit}", "-rfE"]
        res = timed(cmd)
        res["slowest"] = slowest(junit) if junit.exists() else []
    res["command"] = "bash scripts/test.sh" + (" --fast" if fast else "")
    res["summary"] = summary_line(res["stdout"])
    return res


def rerun() -> dict:
    cmd = ["bash", "scripts/main.sh", "--only", "03", "-p", "top_k", "5"]
    warm = timed(cmd)
    res = timed(cmd)
    res.update(command=" ".join(cmd), warm_up=warm["seconds"], summary=_last(res["stdout"]))
    return res


def offline() -> dict:
    """``bash scripts/main.sh`` in a fresh clone with both hosts unreachable (the clone shares this checkout's
    environment, as tests/test_fresh_clone.py does, so set-up is the up-to-date check only)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="kgir-timing-") as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
        (repo / ".venv").symlink_to(ROOT / ".venv")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KGIR_")}
        url = f"http://127.0.0.1:{port}"
        env.update(KGIR_HF_ENDPOINT=url, KGIR_GITHUB_RAW_URL=url, PYTHONPATH=str(repo),
                   HF_HUB_CACHE=str(Path(tmp) / "hf"), HF_HUB_OFFLINE="0")
        res = timed(["bash", "scripts/main.sh"], cwd=repo, env=env)
        res["left"] = sorted(str(p.relative_to(repo)) for p in (repo / "data").rglob("*")) if (repo / "data").exists() \
            else []
    res.update(command="bash scripts/main.sh (fresh clone, no data beside it, both hosts unreachable)",
               summary=_last(res["stderr"])[:200])
    return res


def _last(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def markdown(results: dict, command: str) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = ["# Test and first-run timings", "", f"Command: `{command}`", "",
           f"Run {now} on {os.cpu_count()} CPU core(s), Python {platform.python_version()}. The machine may be shared "
           f"with other work: each figure carries the 1-minute load average before → after it, and a figure "
           f"measured under load is not an idle figure (on 2 cores, a load of 4 roughly doubles a wall time).", "",
           "| what | command | wall time | CPU time | exit | load avg (before → after) | result |",
           "|---|---|---|---|---|---|---|"]
    for name in STEPS:
        r = results.get(name)
        if r is None:
            continue
        extra = f" (warm-up run {r['warm_up']:.1f} s)" if "warm_up" in r else ""
        out.append(f"| {name} | `{r['command']}` | **{r['seconds']:.1f} s**{extra} | {r['cpu']:.1f} s | {r['rc']} | "
                   f"{r['load'][0]:.2f} → {r['load'][1]:.2f} | {r['summary'].replace('|', '/')} |")
    out += ["", "CPU time: user + system seconds of the command and every process it waited for (pytest's workers, "
                "notebook kernels, subprocesses), on all cores together; on an idle 2-core machine a wall time is "
                "at least half of it."]
    for name in ("fast", "full"):
        if results.get(name, {}).get("failed"):
            out += ["", f"Failed in `{results[name]['command']}`:", ""] + [f"- `{f}`" for f in results[name]["failed"]]
    if "offline" in results:
        left = results["offline"]["left"]
        out += ["", f"The offline refusal left {'nothing' if not left else ', '.join(left)} under the clone's "
                    f"`data/`."]
    for name in ("fast", "full"):
        r = results.get(name)
        if r and r["slowest"]:
            out += ["", f"Ten slowest tests of `{r['command']}` (seconds: setup, call and teardown together; "
                        f"xdist runs two at a time):", "", "| seconds | test |", "|---|---|"]
            out += [f"| {sec:.1f} | `{test}` |" for sec, test in r["slowest"]]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--only", nargs="+", choices=STEPS, default=list(STEPS), help="what to measure (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "tests.md")
    args = ap.parse_args(argv)
    results = {}
    for name in args.only:
        print(f"timing: {name} ...", flush=True)
        results[name] = {"fast": lambda: tier(True), "full": lambda: tier(False), "rerun": rerun,
                         "offline": offline}[name]()
        r = results[name]
        print(f"timing: {name}: {r['seconds']:.1f} s (exit {r['rc']}, load {r['load'][0]:.2f} → {r['load'][1]:.2f}): "
              f"{r['summary']}", flush=True)
    command = ".venv/bin/python benchmarks/test_timing.py" + (
        f" --only {' '.join(args.only)}" if args.only != list(STEPS) else "")
    args.out.write_text(markdown(results, command), encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0 if all(r["rc"] == 0 or name == "offline" for name, r in results.items()) else 1


if __name__ == "__main__":
    sys.exit(main())
