"""Old LLM caches and response logs given the checksum over every stored field, by one explicit command::

    python -m kgir_lib.llm.upgrade <cache.sqlite or llm_responses.jsonl.gz>... [--accept-unchecked]

Rows once carried a checksum over key, request and reply (the cache) or key and text (the log), or none at all
(written before checksums existed). Their token counts were never checked, so an edited count went unnoticed;
now every reader refuses such a row (:func:`kgir_lib.llm.cache.row_state`,
:func:`kgir_lib.llm.response_log.format.record_state`). This command rewrites the checksum of each row that
passes its older one, leaving every other field as it is, and says how many rows it rewrote. A row that fails
its checksum (altered) is refused: nothing of the file is written. A row without any checksum is refused too,
unless ``--accept-unchecked`` says that you trust the file as it is (e.g. a log as committed in git).
"""
from __future__ import annotations

import gzip
import io
import json
import sqlite3
import sys
import zlib
from pathlib import Path
from typing import Optional

from ..traces import atomic_write_bytes
from .cache import LLMCacheError, row_checksum, row_state, salvage_advice
from .response_log.format import FIELDS, SQLITE_HEADER, checksum, parse_record, record_state

_REFUSED_SHOWN = 3  # refused rows named in the error


def _counts(path: Path, kind: str) -> dict:
    return {"path": path, "kind": kind, "rows": 0, "current": 0, "older": 0, "unchecked": 0, "rewritten": 0}


def _refuse(path: Path, refused: list, accept_unchecked: bool) -> None:
    if not refused:
        return
    shown = "; ".join(f"{where}: {why}" for where, why in refused[:_REFUSED_SHOWN])
    more = f" (and {len(refused) - _REFUSED_SHOWN} more)" if len(refused) > _REFUSED_SHOWN else ""
    hint = ("" if accept_unchecked or not any(why == "no checksum" for _, why in refused) else
            "; rows without a checksum are upgraded only with --accept-unchecked (you trust the file as it is)")
    raise LLMCacheError(f"{path}: {len(refused)} row(s) refused, nothing was written: {shown}{more}{hint}")


def upgrade_log(path: Path, accept_unchecked: bool = False) -> dict:
    """Give every row of the response log ``path`` the checksum over every field (:func:`checksum`); the lines
    keep their order and every other field its value. Returns the counts (``rows``, ``current``: already
    upgraded, ``older``: had the older checksum, ``unchecked``: had none, ``rewritten``); a refused row is an
    :class:`LLMCacheError` naming the file, line and key, and nothing is written."""
    path = Path(path)
    try:
        raw = gzip.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise LLMCacheError(f"response log {path}: unreadable ({type(exc).__name__}: {exc}); nothing was "
                            f"written") from None
    if raw and not raw.endswith("\n"):
        raise LLMCacheError(f"response log {path}: its last line is cut (no newline); nothing was written")
    got, refused, out = _counts(path, "response log"), [], []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        rec = parse_record(line, path, n)
        state = record_state(rec)
        got["rows"] += 1
        if state == "ok":
            got["current"] += 1
        elif state == "older" or (state == "none" and accept_unchecked):
            got["older" if state == "older" else "unchecked"] += 1
            rec = {**rec, "checksum": checksum(*(rec[f] for f in FIELDS))}
        else:
            refused.append((f"line {n} (key {rec['key']})",
                            "no checksum" if state == "none" else "fails its checksum (altered)"))
        out.append(json.dumps(rec, sort_keys=True, ensure_ascii=False))
    _refuse(path, refused, accept_unchecked)
    if not got["rows"]:
        raise LLMCacheError(f"response log {path}: holds no response; nothing was written")
    got["rewritten"] = got["older"] + got["unchecked"]
    if got["rewritten"]:
        buf = io.BytesIO()  # as the log's own writer does: gzip without a timestamp, the same rows give the same bytes
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
            gz.write("".join(line + "\n" for line in out).encode("utf-8"))
        atomic_write_bytes(path, buf.getvalue())
    return got


def upgrade_cache(path: Path, accept_unchecked: bool = False) -> dict:
    """Give every row of the SQLite LLM cache ``path`` the checksum over every field
    (:func:`kgir_lib.llm.cache.row_checksum`), in one transaction; only the ``checksum`` column is written.
    Returns the counts as :func:`upgrade_log` does; a refused row (or a damaged file) is an
    :class:`LLMCacheError` naming the file and key, and nothing is written."""
    path = Path(path)
    conn = sqlite3.connect(str(path))
    try:
        if [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()] != ["ok"]:
            raise LLMCacheError(f"LLM cache {path} is damaged; nothing was written: {salvage_advice(path)}")
        if "checksum" not in {row[1] for row in conn.execute("PRAGMA table_info(calls)")}:
            conn.execute("ALTER TABLE calls ADD COLUMN checksum TEXT")
        rows = conn.execute("SELECT key, model, text, prompt_tokens, completion_tokens, seconds, request, checksum "
                            "FROM calls ORDER BY key").fetchall()
        got, refused, updates = _counts(path, "LLM cache"), [], []
        for row in rows:
            state = row_state(*row)
            got["rows"] += 1
            if state == "ok":
                got["current"] += 1
            elif state == "older" or (state == "none" and accept_unchecked):
                got["older" if state == "older" else "unchecked"] += 1
                key, model, text, ptok, ctok, secs, request, _ = row
                updates.append((row_checksum(key, model, request, text, ptok, ctok, secs), key))
            else:
                refused.append((f"key {row[0]}", "no checksum" if state == "none" else "fails its checksum (altered)"))
        _refuse(path, refused, accept_unchecked)
        got["rewritten"] = len(updates)
        conn.executemany("UPDATE calls SET checksum = ? WHERE key = ?", updates)
        conn.commit()
    except sqlite3.DatabaseError as exc:
        raise LLMCacheError(f"LLM cache {path}: SQLite error ({type(exc).__name__}: {exc}); nothing was written; "
                            f"{salvage_advice(path)}") from None
    finally:
        conn.close()
    return got


def upgrade(path: Path, accept_unchecked: bool = False) -> dict:
    """:func:`upgrade_cache` for an SQLite file, else :func:`upgrade_log`."""
    path = Path(path)
    if not path.is_file():
        raise LLMCacheError(f"{path}: no such file")
    with open(path, "rb") as fh:
        head = fh.read(16)
    return upgrade_cache(path, accept_unchecked) if head == SQLITE_HEADER else upgrade_log(path, accept_unchecked)


def report(got: dict) -> str:
    """What :func:`upgrade` did, in words."""
    return (f"{got['kind']} {got['path']}: {got['rewritten']} of {got['rows']} row(s) rewritten with the checksum "
            f"over every field ({got['older']} had the older checksum, {got['unchecked']} had none); "
            f"{got['current']} already had it" + ("" if got["rewritten"] else "; the file was left as it was"))


def main(argv: Optional[list] = None) -> int:
    """``python -m kgir_lib.llm.upgrade PATH... [--accept-unchecked]``: 0 when every file was upgraded (or was
    already), 2 when one was refused (the files after it are not touched)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m kgir_lib.llm.upgrade",
                                 description="Give the rows of old LLM caches and response logs the checksum over "
                                             "every stored field (key, model, request, text, token counts, seconds).")
    ap.add_argument("paths", nargs="+", type=Path, help="cache files (llm.sqlite) or response logs (.jsonl.gz)")
    ap.add_argument("--accept-unchecked", action="store_true",
                    help="also give a checksum to rows that have none (you trust the file as it is)")
    args = ap.parse_args(argv)
    for path in args.paths:
        try:
            print(report(upgrade(path, args.accept_unchecked)))
        except LLMCacheError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
