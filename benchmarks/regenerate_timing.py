"""How long ``--regenerate`` takes, notebook by notebook, and whether it leaves the committed run as it was.

    .venv/bin/python benchmarks/regenerate_timing.py [--profile local] [--only 03 04] [--out FILE] [--in-place]
                                                     [--keep DIR]

By default in a fresh clone of this checkout's last commit (in a temporary folder, removed at the end; its
``.venv`` is a link to this checkout's environment, as in ``tests/test_fresh_clone.py``), so nothing the committed
files do not hold is warm: no knowledge graph, no LLM or embedding cache, no traces (what a reader who clones the
repository and runs ``KGIR_PROFILE=local bash scripts/main.sh --regenerate`` starts from). What stays warm is
named in the record: the Python environment and its compiled modules, the embedded models' files, the data
samples (``KGIR_DATA_DIR``: the folder this checkout reads) and the operating system's file cache.

Each notebook runs as its own ``python -m kgir_lib.runner --profile P --only NN --regenerate``, in order, so each
gets its own figures: wall seconds, and CPU seconds (user + system of the runner and every process it waited for:
the notebook's kernel and its children). The machine may be shared: the 1-minute load average before and after
each notebook is recorded beside it, and the CPU time is the figure a busy machine inflates least. After the last
notebook, ``git status --porcelain`` of the clone says whether every committed file came out byte for byte.

Writes a Markdown record (default ``results/benchmarks/regenerate.md``) with the command, the date and the machine.
No test asserts a time: this script is where the README's figure comes from.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _fresh_clone import clone_env, fresh_clone  # noqa: E402


def load() -> float:
    return os.getloadavg()[0]


def notebook_ids(only: list | None) -> list:
    """The two-digit prefixes of the suite's notebooks (``notebooks/NN_*.ipynb``), or those of ``only``, in order;
    a prefix that names no notebook is an error naming it."""
    found = [p.name[:2] for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    if only:
        unknown = [o for o in only if o not in found]
        if unknown:
            raise SystemExit(f"error: --only {' '.join(unknown)}: no such notebook (there are {', '.join(found)})")
        return [n for n in found if n in only]
    return found


def timed(cmd: list, cwd: Path, env: dict, timeout: float) -> dict:
    """Run ``cmd``: wall seconds, CPU seconds of it and every process it waited for, exit code, output, load."""
    before, cpu0 = load(), os.times()
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout)
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    return {"seconds": wall, "cpu": cpu, "rc": out.returncode, "stdout": out.stdout, "stderr": out.stderr,
            "load": (before, load())}


def changed(repo: Path) -> list:
    """The committed files the run changed (``git status --porcelain`` lines)."""
    out = subprocess.run(["git", "status", "--porcelain"], cwd=repo, text=True, capture_output=True, check=True)
    return [ln for ln in out.stdout.splitlines() if ln.strip()]


def encoder_calls(repo: Path, profile: str) -> tuple:
    """``(calls, texts)`` of the run's encoder-calls store (``results/<profile>/cache/embeddings/calls.sqlite``): the
    calls it holds (the seeded calls and every call asked since that no stored call answered) and the texts the
    encoder computed for them; before the store exists, the calls its seed will bring (the committed
    ``results/<profile>/embeddings/calls.sqlite.xz``) and no text, so that the first notebook is not credited with
    computing them."""
    store = repo / "results" / profile / "cache" / "embeddings" / "calls.sqlite"
    if store.exists():
        return store_calls(store)
    packed = repo / "results" / profile / "embeddings" / "calls.sqlite.xz"
    if not packed.exists():
        return 0, 0
    from kgir_lib.embedding_seed import unpack_calls

    with tempfile.TemporaryDirectory(prefix="kgir-seed-") as tmp:
        unpack_calls(packed, Path(tmp) / "calls.sqlite")
        return store_calls(Path(tmp) / "calls.sqlite")


def store_calls(store: Path) -> tuple:
    """``(calls, texts)`` of an encoder-calls store: its calls, and the texts the encoder computed (its table of
    single texts, those not copied from a stored call)."""
    import sqlite3

    from kgir_lib.encoder_calls import TEXTS, has_table

    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=60)
    try:
        calls = con.execute("SELECT count(*) FROM calls").fetchone()[0]
        texts = con.execute(f"SELECT count(*) FROM {TEXTS} WHERE computed = 1").fetchone()[0] \
            if has_table(con, TEXTS) else 0
    finally:
        con.close()
    return int(calls), int(texts)


def run(profile: str, ids: list, repo: Path, env: dict, timeout: float) -> list:
    rows = []
    for nb in ids:
        cmd = [str(repo / ".venv" / "bin" / "python"), "-m", "kgir_lib.runner", "--profile", profile, "--only", nb,
               "--regenerate"]
        print(f"regenerate: {nb} ...", flush=True)
        before = encoder_calls(repo, profile)
        res = timed(cmd, repo, env, timeout)
        after = encoder_calls(repo, profile)
        res["encoded"] = (after[0] - before[0], after[1] - before[1])
        res["notebook"] = next((m.group(1) for m in re.finditer(r"==> (\S+)\.ipynb", res["stdout"])), nb)
        rows.append(res)
        print(f"regenerate: {res['notebook']}: {res['seconds']:.0f} s wall, {res['cpu']:.0f} s CPU, exit {res['rc']}, "
              f"load {res['load'][0]:.2f} -> {res['load'][1]:.2f}, encoder: {res['encoded'][1]} texts in "
              f"{res['encoded'][0]} new calls", flush=True)
        if res["rc"] != 0:
            print(res["stdout"][-2000:] + res["stderr"][-2000:], file=sys.stderr)
            break
    return rows


def machine() -> str:
    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("model name")), "")
    except OSError:
        pass
    return f"{os.cpu_count()} CPU core(s){f' ({model})' if model else ''}, Python {platform.python_version()}"


def markdown(profile: str, rows: list, dirty: list | None, command: str, where: str) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    wall, cpu = sum(r["seconds"] for r in rows), sum(r["cpu"] for r in rows)
    out = [f"# `--regenerate` timings, profile `{profile}`", "", f"Command: `{command}`", "",
           f"Run {now} on {machine()}; {where}. The machine may be shared with other work: each notebook carries the "
           f"1-minute load average before → after it; a wall time measured under load is not an idle one (on 2 "
           f"cores, a load of 4 roughly doubles it), the CPU time (user + system of the runner, the notebook's "
           f"kernel and every process they waited for, on all cores together) is the figure load inflates least.",
           ""]
    counted = all("encoded" in r for r in rows)  # (a record of a run before the column was counted has none)
    out += ["| notebook | wall seconds | CPU seconds | exit | load avg (before → after) |"
            + (" encoder: texts computed (new calls) |" if counted else ""),
            "|---|---|---|---|---|" + ("---|" if counted else "")]
    for r in rows:
        out.append(f"| {r['notebook']} | {r['seconds']:.0f} | {r['cpu']:.0f} | {r['rc']} | "
                   f"{r['load'][0]:.2f} → {r['load'][1]:.2f} |"
                   + (f" {r['encoded'][1]:,} ({r['encoded'][0]:,}) |" if counted else ""))
    calls, texts = (sum(r["encoded"][i] for r in rows) if counted else 0 for i in (0, 1))
    out.append(f"| **all** | **{wall:.0f}** ({wall / 60:.1f} min) | **{cpu:.0f}** ({cpu / 60:.1f} min) | | |"
               + (f" {texts:,} ({calls:,}) |" if counted else ""))
    note = ("Each notebook is its own runner invocation (validation and the response log's import paid each time), "
            "so the sum is a little above one `--regenerate` of them all.")
    if counted:
        note += (" The last column counts the texts the encoder computed in the notebook and, in brackets, its calls "
                 "that no stored call answered (seeded from `results/<profile>/embeddings/` or made earlier in the "
                 "run; each such call is assembled from the texts earlier calls held, and only the others are "
                 "encoded): MiniLM's forward passes over those texts, and loading the encoder in a kernel that "
                 "computes any, are what a cold notebook spends its CPU time on besides its own work.")
    out += ["", note]
    if dirty is not None:
        out += ["", "Committed files after the run: " + (
            "**unchanged** (`git status --porcelain` empty: every table, figure, notebook, config and usage record "
            "came out byte for byte)." if not dirty else
            f"**{len(dirty)} changed**: " + ", ".join(f"`{d.strip()}`" for d in dirty[:20]))]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    from kgir_lib.config import default_data_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--profile", default="local", help="the profile to regenerate (default: local, the headline run)")
    ap.add_argument("--only", nargs="+", metavar="NN", help="notebook prefixes, e.g. 03 04 (default: every notebook)")
    ap.add_argument("--out", type=Path, default=None,
                    help="the record to write (default: results/benchmarks/regenerate.md for a whole run; a run "
                         "with --only writes nothing unless given --out)")
    ap.add_argument("--in-place", action="store_true",
                    help="regenerate this checkout's run directory as it is (warm: its graph, caches and traces) "
                         "instead of a fresh clone")
    ap.add_argument("--keep", type=Path, default=None,
                    help="make the fresh clone here and keep it (default: a temporary folder, removed at the end)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds a notebook may take (default: 3600)")
    args = ap.parse_args(argv)
    ids = notebook_ids(args.only)
    out = args.out if args.out is not None else (None if args.only else ROOT / "results" / "benchmarks" /
                                                  "regenerate.md")
    command = ".venv/bin/python benchmarks/regenerate_timing.py" + "".join(
        f" {flag}" for flag in ([f"--profile {args.profile}"] if args.profile != "local" else [])
        + ([f"--only {' '.join(args.only)}"] if args.only else []) + (["--in-place"] if args.in_place else []))
    data = Path(os.environ.get("KGIR_DATA_DIR") or default_data_dir()).resolve()
    with tempfile.TemporaryDirectory(prefix="kgir-regenerate-") as tmp:
        if args.in_place:
            repo, env = ROOT, {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
            where = "in place (this checkout's run directory, warm)"
        else:
            if args.keep is not None and args.keep.exists():
                raise SystemExit(f"error: --keep {args.keep}: already exists (a fresh clone needs a new folder)")
            args.keep.mkdir(parents=True) if args.keep is not None else None
            repo = fresh_clone(args.keep or Path(tmp))
            env = clone_env(repo, data, MPLBACKEND="Agg")
            where = ("in a fresh clone of the last commit: no graph, cache or traces; warm: the environment and its "
                     "compiled modules, the embedded models' files, the data samples, the file cache")
        rows = run(args.profile, ids, repo, env, args.timeout)
        dirty = changed(repo) if not args.in_place else None
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(markdown(args.profile, rows, dirty, command, where), encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if dirty:
        print(f"{len(dirty)} committed file(s) changed:\n" + "\n".join(dirty), file=sys.stderr)
    return 0 if rows and all(r["rc"] == 0 for r in rows) and len(rows) == len(ids) and not dirty else 1


if __name__ == "__main__":
    sys.exit(main())
