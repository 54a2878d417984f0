"""What the library pays again and again for the same inputs, and what keeping them once a process saves.

The fast test tier (and a run: validation, table rebuilds, downloads) builds the same config, opens HTTP clients and
loads the same datasets many times in one process. Three things are kept once a process; for each, this script
measures in one run the CPU of one call without the kept copy (emptied before every call, as before the change) and
with it:

- ``load_config``: the profile files' YAML, parsed once per text (``kgir_lib.config.profiles``);
- an httpx client: the TLS context (certificate authorities loaded), built once per process (``kgir_lib.tls``);
- ``load_dataset``: a dataset's parsed and checked files, kept while they are unchanged (``kgir_lib.filecache``).

CPU is ``time.process_time`` of this process (user + system), the median of ``--repeat`` rounds of ``--calls`` calls.
Writes ``results/benchmarks/setup_costs.md``.

    .venv/bin/python benchmarks/bench_setup_costs.py
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_ms(call: Callable[[], object], before: Callable[[], object], calls: int, repeat: int) -> float:
    """Median over ``repeat`` rounds of the CPU milliseconds of one ``call`` (``before`` runs, untimed, before each)."""
    rounds = []
    for _ in range(repeat):
        spent = 0.0
        for _ in range(calls):
            before()
            start = time.process_time()
            call()
            spent += time.process_time() - start
        rounds.append(spent / calls * 1000)
    return statistics.median(rounds)


def measure(calls: int, repeat: int, dataset: str) -> list:
    """``[(what, cold ms, kept ms)]`` of the three kept inputs."""
    import httpx

    from kgir_lib import data, tls
    from kgir_lib.config import load_config, profiles
    from kgir_lib.filecache import FileMemo

    def nothing() -> None:
        return None

    def empty_memo() -> None:
        data._LOADED = FileMemo()

    def client(verify) -> None:
        httpx.Client(verify=verify() if verify else True).close()

    load_config("ci")
    data.load_dataset(dataset)
    rows = [("load_config('ci')", cpu_ms(lambda: load_config("ci"), profiles._parse_profile_text.cache_clear,
                                         calls, repeat), cpu_ms(lambda: load_config("ci"), nothing, calls, repeat)),
            ("httpx.Client() opened and closed", cpu_ms(lambda: client(None), nothing, calls, repeat),
             cpu_ms(lambda: client(tls.ssl_context), nothing, calls, repeat))]
    kept = data._LOADED
    cold = cpu_ms(lambda: data.load_dataset(dataset), empty_memo, max(1, calls // 4), repeat)
    data._LOADED = kept
    data.load_dataset(dataset)
    rows.append((f"load_dataset('{dataset}')", cold,
                 cpu_ms(lambda: data.load_dataset(dataset), nothing, max(1, calls // 4), repeat)))
    return rows


def render(rows: list, calls: int, repeat: int, load: tuple) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# Inputs kept once a process: CPU of one call", "",
             "Command: `.venv/bin/python benchmarks/bench_setup_costs.py"
             f"{'' if (calls, repeat) == (40, 5) else f' --calls {calls} --repeat {repeat}'}`", "",
             f"Run {when} on {os.cpu_count()} CPU core(s), Python {platform.python_version()}; 1-minute load average "
             f"{load[0]:.2f} before, {load[1]:.2f} after (the machine may be shared: the ratios come from one run, "
             "the two columns of a row measured one after the other).", "",
             "| call | without the kept copy (ms CPU) | with it (ms CPU) | ratio |", "|---|---|---|---|"]
    lines += [f"| `{what}` | {cold:.2f} | {kept:.2f} | {cold / kept:.1f}x |" for what, cold, kept in rows]
    lines += ["", f"Median of {repeat} rounds of {calls} calls ({max(1, calls // 4)} for `load_dataset`); CPU is "
              "this process's user + system time. \"Without\" empties the kept copy before every call, which is "
              "what every call cost before the library kept it.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=40, help="calls a round (a quarter of them for load_dataset)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds; the median is reported")
    ap.add_argument("--dataset", default="musique", help="the sample set to load (default musique)")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "setup_costs.md"))
    args = ap.parse_args(argv)
    if args.calls < 1 or args.repeat < 1:
        ap.error("--calls and --repeat must be at least 1")
    before = os.getloadavg()[0]
    rows = measure(args.calls, args.repeat, args.dataset)
    md = render(rows, args.calls, args.repeat, (before, os.getloadavg()[0]))
    Path(args.out).write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
