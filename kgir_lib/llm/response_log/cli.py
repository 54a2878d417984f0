"""The response log's commands: ``python -m kgir_lib.llm.response_log salvage <cache> <log> [--keep]`` and
``python -m kgir_lib.llm.response_log stats <log> [--since REV] [--paused-over SECONDS]``."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from ..cache import LLMCacheError
from .format import read_log
from .salvage import salvage, salvage_report
from .stats import log_stats, logged_at, stats_report


def main(argv: Optional[list] = None) -> int:
    """``python -m kgir_lib.llm.response_log salvage <cache> <log> [--keep]`` or
    ``python -m kgir_lib.llm.response_log stats <log> [--since REV] [--paused-over SECONDS]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m kgir_lib.llm.response_log",
                                 description="Save the readable rows of a damaged LLM cache into a response log, "
                                             "or report how many answers a log gained and at what pace.")
    sub = ap.add_subparsers(dest="command", required=True)
    sv = sub.add_parser("salvage", help="merge every readable row of CACHE into LOG, then move CACHE aside")
    sv.add_argument("cache", type=Path)
    sv.add_argument("log", type=Path)
    sv.add_argument("--keep", action="store_true", help="leave the damaged cache where it is")
    st = sub.add_parser("stats", help="answers in LOG (new since a git revision) and the LLM seconds they took")
    st.add_argument("log", type=Path)
    st.add_argument("--since", metavar="REV", help="count as new only the answers not in the log at this revision")
    st.add_argument("--paused-over", metavar="SECONDS", type=float,
                    help="report apart the new answers that took longer (in flight while the run was paused)")
    args = ap.parse_args(argv)
    if args.command == "stats":
        try:
            since = [row[0] for row in logged_at(args.log, args.since)] if args.since else []
            got = log_stats(read_log(args.log), since, args.paused_over)
        except (LLMCacheError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(stats_report(got, args.since, args.paused_over))
        return 0
    try:
        got = salvage(args.cache, args.log, move=not args.keep)
    except LLMCacheError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lines, code = salvage_report(got, args.cache, args.log)
    print("; ".join(lines[:-1] if code else lines))
    if code:
        print(f"error: {lines[-1]}", file=sys.stderr)
    if got["conflict"]:
        print(f"note: {got['conflict']}", file=sys.stderr)
    if got["moved_to"] is not None:
        print(f"the damaged cache was moved to {got['moved_to']}: the next run starts a fresh cache from the log")
    return code
