"""How long the first minutes of a user take: the test tiers, the one-notebook rerun, the offline refusal.

    .venv/bin/python benchmarks/test_timing.py [--only fast full rerun offline] [--repeat 3] [--in-place]
                                               [--out results/benchmarks/tests.md]

**Where.** By default in a fresh clone of this checkout's last commit (a temporary folder, removed at the end), as a
new user would run it: its ``.venv`` is a link to this checkout's environment (set-up is the up-to-date check
only), ``KGIR_DATA_DIR`` names the samples this checkout reads (nothing is downloaded) and no other ``KGIR_*``
variable is set. ``--in-place`` measures this checkout as it is instead.

**What is warm**, and said in the record: the environment and the compiled modules of its packages
(``.venv/pycache``, shared with the clone through the link), mypy's incremental cache (``.venv/cache/mypy``, where
scripts/test.sh keeps it: the clone's modules, at a new path, are checked by content hash), the embedded models'
files, the encoder's files in the Hugging Face cache, the data samples and the operating system's file cache. What
is cold in a fresh clone: the library's and the tests' compiled modules (the cache prefix mirrors the source path,
and the clone's path is new), every result folder and cache of the suite. The first of the runs pays the cold part;
the others do not.

**How often.** Each step runs ``--repeat`` times (default 3) in the same clone; the record gives every run, the
minimum and the median, of the wall time and of the CPU time (user + system of the command and every process it
waited for: what a busy machine inflates least), with the 1-minute load average before and after each run. A
figure under load is not an idle figure and says so.

- ``fast``: ``bash scripts/test.sh --fast``; the count line, the ten slowest tests (setup, call and teardown
  together, from pytest's JUnit XML report of the last run) and the ten longest units of work (what one xdist
  worker runs whole: where the wall time of a run goes);
- ``full``: ``bash scripts/test.sh`` (the whole suite), the same;
- ``rerun``: ``bash scripts/main.sh --only 03 -p top_k 5``, run once to warm it (its scratch run's caches), then
  timed (a one-notebook rerun with a parameter: nothing else changed);
- ``offline``: ``bash scripts/main.sh`` in a fresh clone of the last commit with no data beside it and both
  upstream hosts unreachable (a closed local port): the time until it refuses, naming the ways out (always a new
  clone a run, whatever ``--in-place`` says).

Writes a Markdown record (default ``results/benchmarks/tests.md``) with the command, the date, the machine and
every figure. No test asserts a time: this script is where the performance claims come from.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _fresh_clone import clone_env, fresh_clone  # noqa: E402

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


def slowest_units(junit: Path, n: int = SLOWEST) -> list:
    """``[(seconds, unit, tests)]`` of the ``n`` longest units of work of a JUnit XML report, longest first: the
    seconds of a unit's tests added up, a unit being what the test suite's scheduler hands to one pytest-xdist worker
    whole (``tests/_notebook_checks.py``: every notebook cell and table check, else a test module, a group of
    modules or one long test). A run ends no sooner than its longest unit."""
    sys.path.insert(0, str(ROOT / "tests"))
    from _notebook_checks import _unit_of_work

    units: dict = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        cls = case.get("classname", "")  # tests.test_x (or tests.test_x.TestClass), notebooks.01_name.ipynb
        if cls.endswith(".ipynb"):
            path = cls[:-len(".ipynb")].replace(".", "/") + ".ipynb"
        else:
            parts = cls.split(".")
            module = next((i for i, part in enumerate(parts) if part.startswith("test_") or part.endswith("_test")),
                          len(parts) - 1)
            path = "/".join(parts[:module + 1]) + ".py"
        unit = _unit_of_work(f"{path}::{case.get('name')}")
        seconds, tests = units.get(unit, (0.0, 0))
        units[unit] = (seconds + float(case.get("time") or 0), tests + 1)
    return sorted(((sec, unit, k) for unit, (sec, k) in units.items()), reverse=True)[:n]


def added_up(junit: Path) -> float:
    """The seconds of every test case of a JUnit XML report added up (setup, call and teardown): what the run would
    take on one worker that never waited for anything."""
    return sum(float(case.get("time") or 0) for case in ET.parse(junit).getroot().iter("testcase"))


def worker_count(stdout: str) -> int | None:
    """The pytest-xdist workers scripts/test.sh started (its ``test: N pytest-xdist workers`` line), or None."""
    found = re.search(r"^test: (\d+) pytest-xdist workers$", stdout, re.M)
    return int(found.group(1)) if found else None


def summary_line(stdout: str) -> str:
    """pytest's last line (``1,492 passed, 2 skipped in 79.1s``), or what ended the run."""
    lines = [ln.strip() for ln in stdout.splitlines() if re.search(r"\b(passed|failed|error)", ln)]
    return lines[-1] if lines else "(no pytest summary)"


def tier(fast: bool, repo: Path, env: dict) -> dict:
    """One run of a tier of scripts/test.sh, with a JUnit report for the slowest tests."""
    with tempfile.TemporaryDirectory(prefix="kgir-timing-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = ["bash", "scripts/test.sh"] + (["--fast"] if fast else []) + [f"--junitxml={junit}", "-rfE"]
        res = timed(cmd, repo, env)
        res["slowest"] = slowest(junit) if junit.exists() else []
        res["units"] = slowest_units(junit) if junit.exists() else []
        res["added_up"] = added_up(junit) if junit.exists() else None
    res["workers"] = worker_count(res["stdout"])
    res["command"] = "bash scripts/test.sh" + (" --fast" if fast else "")
    res["summary"] = summary_line(res["stdout"])
    return res


RERUN = ["bash", "scripts/main.sh", "--only", "03", "-p", "top_k", "5"]


def rerun(repo: Path, env: dict) -> dict:
    """One timed run of the one-notebook rerun (the caller warms it first with :func:`warm_rerun`), with the
    notebook's own seconds as the runner logged them (:func:`notebook_seconds`)."""
    res = timed(RERUN, repo, env)
    res.update(command=" ".join(RERUN), summary=_last(res["stdout"]),
               notebook=notebook_seconds(res["stdout"], Path(env.get("KGIR_RESULTS_DIR") or repo / "results")))
    return res


def notebook_seconds(stdout: str, results: Path) -> float | None:
    """The seconds the runner logged for the last notebook of a run (``runtime/timings.tsv`` of the run directory
    its output names: the kernel's start, the cells and the log's export), or None where they cannot be read."""
    found = re.search(r"results go to (\S+?)/", stdout)
    tsv = results / found.group(1) / "runtime" / "timings.tsv" if found else None
    if tsv is None or not tsv.is_file():
        return None
    lines = [ln.split("\t") for ln in tsv.read_text(encoding="utf-8").splitlines() if "\t" in ln]
    return float(lines[-1][1]) if lines else None


def warm_rerun(repo: Path, env: dict) -> float:
    """The untimed first run of the one-notebook rerun (its scratch run's caches); its wall seconds."""
    return timed(RERUN, repo, env)["seconds"]


def offline(repo: Path, env: dict) -> dict:
    """``bash scripts/main.sh`` in a new fresh clone with both hosts unreachable (the clone shares this checkout's
    environment, as tests/test_fresh_clone.py does, so set-up is the up-to-date check only)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="kgir-timing-") as tmp:
        clone = fresh_clone(Path(tmp))
        env = {k: v for k, v in env.items() if not k.startswith("KGIR_")}
        url = f"http://127.0.0.1:{port}"
        env.update(KGIR_HF_ENDPOINT=url, KGIR_GITHUB_RAW_URL=url, PYTHONPATH=str(clone),
                   HF_HUB_CACHE=str(Path(tmp) / "hf"), HF_HUB_OFFLINE="0")
        res = timed(["bash", "scripts/main.sh"], cwd=clone, env=env)
        res["left"] = sorted(str(p.relative_to(clone)) for p in (clone / "data").rglob("*")) \
            if (clone / "data").exists() else []
    res.update(command="bash scripts/main.sh (fresh clone, no data beside it, both hosts unreachable)",
               summary=_last(res["stderr"])[:200])
    return res


def _last(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def warm_state(repo: Path, env: dict) -> list:
    """What was there before the first run, as sentences: the compiled-module cache and whose modules it holds,
    mypy's incremental cache (scripts/test.sh keeps it beside the environment), whether ``PYTHONDONTWRITEBYTECODE``
    is set (both scripts unset it and keep compiled modules beside the environment), the Hugging Face cache, the
    data folder."""
    prefix = Path(env.get("PYTHONPYCACHEPREFIX") or (repo / ".venv" / "pycache"))
    here = prefix / str(repo.resolve()).lstrip(os.sep)
    mypy = Path(env.get("MYPY_CACHE_DIR") or (repo / ".venv" / "cache" / "mypy"))
    no_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    hub = Path(env.get("HF_HUB_CACHE") or Path(env.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub")
    data = Path(env.get("KGIR_DATA_DIR") or ROOT.parent / "shared" / "data")
    return [f"compiled modules (`PYTHONPYCACHEPREFIX` {'present' if prefix.is_dir() else 'absent'}): the "
            f"environment's {'warm' if prefix.is_dir() and any(prefix.iterdir()) else 'cold'}; this checkout's "
            f"library and tests {'warm' if here.is_dir() else 'cold (first run compiles them)'}",
            "mypy's cache: " + ("warm (a new checkout path is checked by content hash)" if mypy.is_dir() else
                                "cold (the first type check fills it: about a minute of CPU)"),
            "`PYTHONDONTWRITEBYTECODE`: " + ("set (scripts/test.sh and scripts/main.sh unset "
                                             "it)" if no_bytecode else "unset"),
            f"Hugging Face cache: {'present' if hub.is_dir() else 'absent'}",
            f"data samples: {'present' if data.is_dir() else 'absent (fetched by the first run)'}",
            "the embedded models' files: in the environment's packages", "the operating system's file cache: as "
            "the machine left it"]


def summarise(runs: list) -> dict:
    """Every run of one step folded into one record: the last run's output, every wall and CPU time, their minimum
    and median, the load of each run, the worst exit code."""
    out = dict(runs[-1])
    walls, cpus = [r["seconds"] for r in runs], [r["cpu"] for r in runs]
    out.update(walls=walls, cpus=cpus, loads=[r["load"] for r in runs], rc=max(r["rc"] for r in runs),
               min_wall=min(walls), median_wall=statistics.median(walls), min_cpu=min(cpus),
               median_cpu=statistics.median(cpus), failed=sorted({f for r in runs for f in r.get("failed", [])}))
    return out


def markdown(results: dict, command: str, where: str, warm: list) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = ["# Test and first-run timings", "", f"Command: `{command}`", "",
           f"Run {now} on {os.cpu_count()} CPU core(s), Python {platform.python_version()}, {where}. The machine may "
           f"be shared with other work: each run carries the 1-minute load average before → after it, and a figure "
           f"measured under load is not an idle figure (on 2 cores, a load of 4 roughly doubles a wall time).", "",
           "Warm before the first run: " + "; ".join(warm) + ".", "",
           "| what | command | runs | wall: min / median | CPU: min / median | every run: wall (CPU) s, load "
           "before → after | exit | result |", "|---|---|---|---|---|---|---|---|"]
    for name in STEPS:
        r = results.get(name)
        if r is None:
            continue
        extra = f"; warm-up run {r['warm_up']:.1f} s" if "warm_up" in r else ""
        every = ", ".join(f"{w:.1f} ({c:.1f}), {a:.2f} → {b:.2f}" for w, c, (a, b) in zip(r["walls"], r["cpus"],
                                                                                          r["loads"]))
        out.append(f"| {name} | `{r['command']}` | {len(r['walls'])} | **{r['min_wall']:.1f} s** / "
                   f"{r['median_wall']:.1f} s | {r['min_cpu']:.1f} s / {r['median_cpu']:.1f} s | {every}{extra} | "
                   f"{r['rc']} | {r['summary'].replace('|', '/')} |")
    out += ["", "CPU time: user + system seconds of the command and every process it waited for (pytest's workers, "
                "notebook kernels, subprocesses), on all cores together; on an idle 2-core machine a wall time is "
                "at least half of it. The first run of a step in a fresh clone compiles the library and the tests; "
                "the minimum is a warm run's."]
    for name in ("fast", "full"):
        if results.get(name, {}).get("failed"):
            out += ["", f"Failed in `{results[name]['command']}`:", ""] + [f"- `{f}`" for f in results[name]["failed"]]
    r = results.get("rerun")
    if r and r.get("notebook") is not None:
        out += ["", f"Where the rerun's time goes, its last run ({r['walls'][-1]:.1f} s): the notebook "
                    f"{r['notebook']:.1f} s as the runner logs it (the kernel's start, the cells, the response log's "
                    f"export); before and after it {r['walls'][-1] - r['notebook']:.1f} s (bash, the set-up check, "
                    f"Python's start, the imports, the profile's and the data's validation, the log's import)."]
    if "offline" in results:
        left = results["offline"]["left"]
        out += ["", f"The offline refusal left {'nothing' if not left else ', '.join(left)} under the clone's "
                    f"`data/`."]
    for name in ("fast", "full"):
        r = results.get(name)
        if r and r.get("added_up") is not None:
            out += ["", f"`{r['command']}`, its last run: {r['workers']} pytest-xdist workers (scripts/test.sh's "
                        f"default on {os.cpu_count()} cores: one more than the cores); the tests' times added up "
                        f"(setup, call and teardown) {r['added_up']:.1f} s, against {r['cpus'][-1]:.1f} s of CPU "
                        f"time for the whole command (collection, lint and type check included), so at least "
                        f"{max(r['added_up'] - r['cpus'][-1], 0):.1f} s of the tests' time was spent waiting: for a "
                        f"local server, a timeout or a child process, or, with more workers than cores, for a "
                        f"core."]
    for name in ("fast", "full"):
        r = results.get(name)
        if r and r["slowest"]:
            out += ["", f"Ten slowest tests of `{r['command']}`, its last run (seconds: setup, call and teardown "
                        f"together; xdist runs {r.get('workers') or 'one'} at a time):", "", "| seconds | test |",
                    "|---|---|"]
            out += [f"| {sec:.1f} | `{test}` |" for sec, test in r["slowest"]]
        if r and r.get("units"):
            out += ["", f"Ten longest units of work of `{r['command']}`, its last run (a unit runs whole on one "
                        f"worker; seconds of its tests added up):", "", "| seconds | unit | tests |", "|---|---|---|"]
            out += [f"| {sec:.1f} | `{unit}` | {k} |" for sec, unit, k in r["units"]]
    return "\n".join(out) + "\n"


def positive(text: str) -> int:
    """``--repeat``: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--only", nargs="+", choices=STEPS, default=list(STEPS), help="what to measure (default: all)")
    ap.add_argument("--repeat", type=positive, default=3, help="runs of each step (default: 3; minimum and median)")
    ap.add_argument("--in-place", action="store_true", help="measure this checkout as it is, not a fresh clone")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "tests.md")
    return ap.parse_args(argv)


def command_line(args: argparse.Namespace) -> str:
    return ".venv/bin/python benchmarks/test_timing.py" + (
        f" --only {' '.join(args.only)}" if args.only != list(STEPS) else "") + (
        f" --repeat {args.repeat}" if args.repeat != 3 else "") + (" --in-place" if args.in_place else "")


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from kgir_lib.config import default_data_dir

    data = Path(default_data_dir()).resolve()
    with tempfile.TemporaryDirectory(prefix="kgir-timing-") as tmp:
        if args.in_place:
            repo, env, where = ROOT, dict(os.environ), "in place (this checkout as it is)"
        else:
            repo = fresh_clone(Path(tmp))
            env = clone_env(repo, data)
            where = "in a fresh clone of the last commit (the environment linked, the samples named by KGIR_DATA_DIR)"
        warm = warm_state(repo, env)
        results = {}
        for name in args.only:
            print(f"timing: {name} ...", flush=True)
            extra = {}
            if name == "rerun":
                extra["warm_up"] = warm_rerun(repo, env)
            step = {"fast": lambda: tier(True, repo, env), "full": lambda: tier(False, repo, env),
                    "rerun": lambda: rerun(repo, env), "offline": lambda: offline(repo, env)}[name]
            runs = []
            for i in range(args.repeat):
                runs.append(step())
                last = runs[-1]
                print(f"timing: {name} run {i + 1}: {last['seconds']:.1f} s wall, {last['cpu']:.1f} s CPU "
                      f"(exit {last['rc']}, load {last['load'][0]:.2f} → {last['load'][1]:.2f})", flush=True)
            results[name] = {**summarise(runs), **extra}
    args.out.write_text(markdown(results, command_line(args), where, warm), encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0 if all(r["rc"] == 0 or name == "offline" for name, r in results.items()) else 1


if __name__ == "__main__":
    sys.exit(main())
