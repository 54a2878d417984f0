"""What the response log's commands say (``python -m kgir_lib.llm.response_log salvage | stats``), as pure
functions of their results: :func:`salvage_report` (rows saved, lost or of unknown number, a cut file, the exit
code) and :func:`log_stats` / :func:`stats_report` (how many answers a log gained and at what pace).
:mod:`kgir_lib.llm.response_log` reads and writes the log and re-exports these."""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Iterable, Optional


def salvage_report(got: dict, cache_file: Path, log: Path) -> tuple:
    """``(lines, exit code)`` of :func:`kgir_lib.llm.response_log.salvage`'s result, in words: how many rows
    were saved, how many could not be read (or that their number is unknown), whether the file was cut. Exit
    code 1 when rows were lost and none could be saved; else 0."""
    lines = [f"salvaged {got['saved']} row(s) from {cache_file} into {log} ({got['log_rows']} rows in the log)"]
    if got["unreadable"] is None:
        lines.append("the table of calls could not be read where SQLite keeps its extent, so how many rows the cache "
                     "held, and how many are lost, is unknown")
    elif got["unreadable"]:
        lines.append(f"{got['unreadable']} row(s) could not be read")
    if got.get("altered"):
        lines.append(f"{len(got['altered'])} row(s) fail their checksum (altered after they were written) and were "
                     f"not salvaged; those calls will be asked again (first key {got['altered'][0][:12]}…)")
    if got.get("declared") and got["size"] < got["declared"]:
        lines.append(f"the file was cut: it holds {got['size']:,} of the {got['declared']:,} bytes its header "
                     f"declares")
    lost = got["unreadable"] is None or got["unreadable"] > 0
    if got["saved"] == 0 and lost:
        lines.append("nothing could be salvaged: the rows of this cache are only in the response log (if they were "
                     "exported) or must be asked again")
        return lines, 1
    return lines, 0


# ---------------------------------------------------------------------------- the pace of a run
def log_stats(rows: Iterable[tuple], since_keys: Iterable[str] = (), paused_over: Optional[float] = None) -> dict:
    """How many answers a log holds beyond an earlier one, and how long the model took for them.

    ``rows`` are log rows (:func:`kgir_lib.llm.response_log.read_log`); ``since_keys`` the keys of the earlier
    log, whose rows are not counted as new. An answer that was in flight while its run was paused
    (``kill -STOP``) records the pause in its ``seconds``; with ``paused_over`` set, new answers that took longer
    than that many seconds are reported apart (``paused``, ``paused_seconds``) and left out of the pace
    (``mean``, ``median``).
    ``seconds`` is the sum over every new answer, the paused ones included."""
    since = set(since_keys)
    all_rows = list(rows)
    secs = [float(r[5]) for r in all_rows if r[0] not in since]
    paused = [s for s in secs if paused_over is not None and s > paused_over]
    pace = [s for s in secs if paused_over is None or s <= paused_over]
    return {"rows": len(all_rows), "new": len(secs), "seconds": sum(secs),
            "paused": len(paused), "paused_seconds": sum(paused),
            "mean": sum(pace) / len(pace) if pace else math.nan,
            "median": statistics.median(pace) if pace else math.nan}


def stats_report(stats: dict, since: Optional[str] = None, paused_over: Optional[float] = None) -> str:
    """:func:`log_stats` in words (the lines ``python -m kgir_lib.llm.response_log stats`` prints)."""
    base = f" not in the log at {since}" if since else ""
    lines = [f"{stats['rows']:,} answers in the log; {stats['new']:,}{base}",
             f"their LLM seconds: {stats['seconds']:,.0f} s ({stats['seconds'] / 3600:.1f} h)"]
    if paused_over is not None:
        lines.append(f"{stats['paused']} of them took over {paused_over:g} s (in flight during a pause): "
                     f"{stats['paused_seconds']:,.0f} s ({stats['paused_seconds'] / 3600:.1f} h)")
    left = " without them" if paused_over is not None else ""
    lines.append(f"pace{left}: {stats['mean']:.1f} s an answer on average, median {stats['median']:.1f} s")
    return "\n".join(lines)
