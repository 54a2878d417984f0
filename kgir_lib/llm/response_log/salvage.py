"""A damaged LLM cache saved into the response log (``python -m kgir_lib.llm.response_log salvage``): every row
still readable merged into the log (:func:`salvage`), the damaged file moved aside, and what happened in words
(:func:`salvage_report`)."""
from __future__ import annotations

import os
from pathlib import Path

from ..cache import LLMCacheError, declared_size, salvage_rows
from .format import SQLITE_HEADER, LogConflictError, merge_into_log, read_log


def salvage(cache_file: Path, log: Path, move: bool = True) -> dict:
    """Save every row of the damaged cache ``cache_file`` that is still readable into the response log ``log``
    (merged: a row already logged is kept, a conflicting text is reported, not taken), then move the damaged
    file (and its ``-wal`` / ``-shm``) aside to ``<name>.damaged`` so the next run starts a fresh cache, which
    the log refills. A row that fails its checksum (:func:`kgir_lib.llm.cache.row_checksum`) is left out and
    reported. Returns ``{"saved", "unreadable", "altered", "conflict", "log_rows", "moved_to", "size",
    "declared"}`` (``altered``: the keys of the rows left out for their checksum):
    ``unreadable`` is ``None`` when the table's extent could not be read (how many rows were lost is unknown),
    ``size`` and ``declared`` the file's bytes and those its SQLite header declares (fewer: the file was cut)."""
    cache_file, log = Path(cache_file), Path(log)
    if not cache_file.is_file():
        raise LLMCacheError(f"LLM cache {cache_file}: no such file")
    with open(cache_file, "rb") as fh:
        header = fh.read(16)
    if header and header != SQLITE_HEADER:
        raise LLMCacheError(f"LLM cache {cache_file}: not an SQLite file (its first bytes are not SQLite's "
                            f"header), so it holds no row to save; nothing was changed. If it is a damaged "
                            f"cache, move it away by hand: the response log refills a fresh one")
    size, declared = cache_file.stat().st_size, declared_size(cache_file)
    rows, lost, altered = salvage_rows(cache_file)
    conflict = ""
    try:
        total = merge_into_log(rows, log, source=f"the damaged cache {cache_file}")
    except LogConflictError as exc:
        conflict, total = str(exc), sum(1 for _ in read_log(log))
    moved = None
    if move:
        moved = _free_name(cache_file.with_name(cache_file.name + ".damaged"))
        for suffix in ("-wal", "-shm"):
            side = cache_file.with_name(cache_file.name + suffix)
            if side.exists():
                os.replace(side, moved.with_name(moved.name + suffix))
        os.replace(cache_file, moved)
    return {"saved": len(rows), "unreadable": lost, "altered": altered, "conflict": conflict, "log_rows": total,
            "moved_to": moved, "size": size, "declared": declared}


def _free_name(path: Path) -> Path:
    n, candidate = 1, path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


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
