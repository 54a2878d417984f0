"""How many answers a response log gained and at what pace (``python -m kgir_lib.llm.response_log stats``): the
log as committed at a git revision (:func:`logged_at`), the counts (:func:`log_stats`) and their words
(:func:`stats_report`)."""
from __future__ import annotations

import math
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable, Optional

from ..cache import LOG_NAME, LLMCacheError
from .format import read_log


def logged_at(path: Path, rev: str) -> list:
    """The rows of the response log at ``path`` as committed at git revision ``rev`` (``[]`` if the log did
    not exist then; its rows may predate the current checksum, they are only counted). A revision git does not
    know is an :class:`LLMCacheError` naming it."""
    path = Path(path).resolve()
    top = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True)
    if top.returncode != 0:
        raise LLMCacheError(f"response log {path}: not inside a git checkout, so --since {rev} has no meaning")
    rel = path.relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    if subprocess.run(["git", "-C", top.stdout.strip(), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                      capture_output=True).returncode != 0:
        raise LLMCacheError(f"--since {rev}: not a git revision of {top.stdout.strip()}")
    shown = subprocess.run(["git", "-C", top.stdout.strip(), "show", f"{rev}:{rel}"], capture_output=True)
    if shown.returncode != 0:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / LOG_NAME
        old.write_bytes(shown.stdout)
        return list(read_log(old, accept_older=True))  # it may predate the checksum; only its keys count


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
