"""The committed response log: the LLM cache as compact, deterministic, gzipped JSONL -- its format, and the
sync of a run's cache with it.

``results/<profile>/llm_responses.jsonl.gz`` holds one line per cached call, sorted by
request key::

    {"checksum": "<16 hex>", "completion_tokens": 12, "key": "<sha256>", "model": "openai:...",
     "prompt_tokens": 431, "seconds": 0.84, "text": "..."}

No prompt is stored (the key is the SHA-256 of model + messages + sampling
parameters, :func:`kgir_lib.llm.cache_key`), so the log stays small. The cache
(``cache/llm.sqlite``) is not committed; the log is. :func:`import_log` fills a
fresh cache from it (rows already cached are left alone), so a run continues on
a new machine, and ``--regenerate`` (cache only) rebuilds every table from it.
:func:`export_log` merges the cache into it atomically (gzip with a zero timestamp,
sorted keys: the same rows give the same bytes, and a longer run gives a small diff).
Each row carries a :func:`checksum` over every field it stores (key, model, text,
token counts and seconds; the key is the hash of the request): an altered row is an
error at import, and a row already logged is never replaced by another text (a
conflict is an error naming the key). A row without a checksum, or with the older one
over key and text only, is refused too, naming the file and line: ``python -m
kgir_lib.llm.upgrade <log>`` gives an old log's rows the checksum, once, and says
what it rewrote.

The runner (:mod:`kgir_lib.runner`) imports the log before the first notebook and
exports it after every notebook, so a crash still leaves a log of what was done.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import warnings
import zlib
from pathlib import Path
from typing import Iterable, Iterator, Optional

from ...traces import atomic_write_bytes, replace_surrogates
from ..cache import LOG_NAME, UPGRADE, LLMCache, LLMCacheError

FIELDS = ("key", "model", "text", "prompt_tokens", "completion_tokens", "seconds")
SQLITE_MAX_INT = 2 ** 63 - 1
SQLITE_HEADER = b"SQLite format 3\x00"
IMPORTED_NOTE = json.dumps({"imported_from": LOG_NAME})  # the ``request`` column of an imported row


def log_path(cfg) -> Path:
    """Where the run's response log lives: ``<run directory>/llm_responses.jsonl.gz``."""
    return cfg.run_dir / LOG_NAME


def logs_to_import(cfg) -> list:
    """The logs a run starts from: its own, and for a scratch run (``run_name`` set) the profile's committed
    log too (``<results>/<profile>/llm_responses.jsonl.gz``), so a rerun with other parameters calls the
    model only for requests no run of the profile has made. Only those that exist."""
    paths = [log_path(cfg)]
    reference = cfg.reference_dir / LOG_NAME
    if reference != paths[0]:
        paths.append(reference)
    return [p for p in paths if p.exists()]


def cache_path(cfg) -> Path:
    """The run's SQLite LLM cache: ``<results>/<profile>/cache/llm.sqlite``."""
    return cfg.path("cache", "llm.sqlite")


def checksum(key: str, model: str, text: str, prompt_tokens: int, completion_tokens: int, seconds: float) -> str:
    """The ``checksum`` of a log row: the first 16 hex digits of SHA-256 over every field it stores (key,
    model, text, token counts, seconds, as one JSON list), so a row whose text or token counts were altered (in
    the log, or in the cache it was exported from) is caught."""
    blob = json.dumps([key, model, text, int(prompt_tokens), int(completion_tokens), float(seconds)],
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def older_checksum(key: str, text: str) -> str:
    """The checksum log rows carried before it covered the model, token counts and seconds (key and text only):
    recognised so that such a row is named as old (to upgrade) rather than as altered."""
    return hashlib.sha256(f"{key}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


def record_state(rec: dict) -> str:
    """Whether a parsed log record passes its checksum: ``"ok"``, ``"none"`` (no checksum), ``"older"`` (the
    older checksum over key and text only) or ``"altered"`` (it fails it)."""
    if rec.get("checksum") is None:
        return "none"
    if rec["checksum"] == checksum(*(rec[f] for f in FIELDS)):
        return "ok"
    return "older" if rec["checksum"] == older_checksum(rec["key"], rec["text"]) else "altered"


SECONDS_DIGITS = 3  # a call's seconds as the log keeps them (milliseconds)


def logged_seconds(seconds) -> float:
    """A call's seconds as the response log records them, so a sum over calls is the same from a warm cache as
    from a clone that imported the log."""
    return round(float(seconds or 0.0), SECONDS_DIGITS)


def _line(row: tuple) -> str:
    rec = dict(zip(FIELDS, row))
    rec["seconds"] = logged_seconds(rec["seconds"])
    rec["checksum"] = checksum(*(rec[f] for f in FIELDS))
    return json.dumps(rec, sort_keys=True, ensure_ascii=False)


class LogConflictError(LLMCacheError):
    """The cache (or salvaged rows) hold a text for a key that the log already holds with another text."""


def export_log(cache: LLMCache, path: Path) -> int:
    """Merge every row of ``cache`` into the log at ``path`` (gzipped JSONL, sorted by key), atomically;
    returns the rows of the log. See :func:`merge_into_log`. A cached row that fails its checksum is not
    merged: the others are, then it is an :class:`~kgir_lib.llm.cache.LLMCacheError` naming it.

    The cache records each export: the log's SHA-256 as written and the cache's own state (largest row id, rows).
    When neither changed since and no row fails its checksum, every cached row is in the log already, and the log
    is neither read nor written (a rerun that calls no model would otherwise rewrite the same log after every
    notebook)."""
    path = Path(path)
    log, state, altered = str(path.resolve()), cache.state(), cache.altered()
    mark = cache.synced(log, "exported")
    if mark is not None and path.exists() and not altered:
        at, rows = mark[1].split("|")
        if at == state and _digest(path) == mark[0]:
            return int(rows)  # no call was stored since the cache was merged into these very bytes
    total = merge_into_log(cache.rows(), path, source=f"LLM cache {cache.path}")
    if altered:
        raise cache.altered_error(altered, f"every other row was exported to {path}, those were not")
    if path.exists():
        cache.mark_synced(log, "exported", _digest(path), f"{state}|{total}")
    return total


def _digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def merge_into_log(rows: Iterable[tuple], path: Path, source: str = "the cache") -> int:
    """Add ``rows`` (``(key, model, text, prompt_tokens, completion_tokens, seconds)``) to the log at ``path``.

    A row already in the log is never replaced: the same key with the same text keeps the log's row, and the
    same key with another text is a conflict. Rows in the log but not in ``rows`` are kept (exporting never
    loses a logged response); a log that cannot be read (:func:`read_log`: damaged, or empty) is an error and
    is not written over. The merged log is written (sorted by key, gzip without a timestamp: the same
    rows give the same bytes, every row with its :func:`checksum`); then a conflict raises
    :class:`LogConflictError` naming the key(s). With no row at all nothing is written (a log always holds
    rows). Returns the number of rows in the log.
    """
    path = Path(path)
    merged = {row[0]: tuple(row) for row in read_log(path)} if path.exists() else {}
    conflicts = []
    for row in rows:
        have = merged.get(row[0])
        if have is None:
            merged[row[0]] = tuple(row)
        elif have[2] != row[2]:
            conflicts.append(row[0])
    if not merged:
        return 0
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        for key in sorted(merged):
            gz.write((_line(merged[key]) + "\n").encode("utf-8"))
    atomic_write_bytes(path, buf.getvalue())
    if conflicts:
        raise LogConflictError(
            f"response log {path}: {source} holds another text than the log for {len(conflicts)} key(s), first "
            f"{conflicts[0]}; the log's rows were kept (each is checked against its checksum). The cache row was "
            f"altered or comes from another run: move the cache away and rerun (the log refills it)")
    return len(merged)


def read_log(path: Path, accept_older: bool = False) -> Iterator[tuple]:
    """The rows of a response log as ``(key, model, text, prompt_tokens, completion_tokens, seconds)``.

    A bad line raises :class:`LLMCacheError` naming the file and line; a log torn by a
    kill of an old, non-atomic writer (the gzip stream ends early, or the last line has no
    newline and is not a record) is cut at its last complete line, with a warning. A log that holds
    no response at all (an empty file, or a stream without one record) is an :class:`LLMCacheError` naming
    it: a log is only ever written with rows (:func:`merge_into_log`), so it was emptied or truncated, and
    reading it as "no answers yet" would send every request to the server and export over it.

    Every row must pass its checksum (:func:`record_state`). ``accept_older``: a row without one, or with the older
    one, is read too (only for counting the rows of a log as committed at an earlier revision, never to fill a
    cache).
    """
    path = Path(path)
    lines, torn = [], False
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                lines.append(line)
    except EOFError:  # the stream ends before its end marker: a torn write
        torn = True
    except (OSError, UnicodeDecodeError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError;
        # a stream damaged mid-way fails in zlib
        raise LLMCacheError(f"response log {path}: unreadable ({type(exc).__name__}: {exc}); "
                            f"restore it from git (git checkout -- {path.name})") from None
    if lines and not lines[-1].endswith("\n"):
        try:
            parse_record(lines[-1], path, len(lines))
        except LLMCacheError:
            lines.pop()  # a torn last line
            torn = True
    if not any(line.strip() for line in lines):
        size = path.stat().st_size if path.exists() else 0
        raise LLMCacheError(f"response log {path}: holds no response ({size} bytes{', torn' if torn else ''}); a "
                            f"log is only written with rows, so this one was emptied or cut. Restore it from git "
                            f"(git checkout -- {path.name}) or move it away to start without it")
    if torn:
        warnings.warn(f"response log {path}: torn by an interrupted write; read up to its last complete line "
                      f"({len(lines)} lines)", stacklevel=2)
    for n, line in enumerate(lines, 1):
        if line.strip():
            yield _row(line, path, n, accept_older)


def _row(line: str, path: Path, n: int, accept_older: bool = False) -> tuple:
    """One log line as a row; its ``checksum`` must match every field (a row without one, or with the older one
    over key and text only, is refused: :func:`record_state`). Lone surrogates in the text become U+FFFD, as in
    the cache."""
    rec = parse_record(line, path, n)
    state = record_state(rec)
    if state != "ok" and not (accept_older and state in ("none", "older")):
        raise LLMCacheError(f"response log {path}: line {n} (key {rec['key']}): {_STATE_WORDS[state]}"
                            .replace("<log>", str(path)))
    return (rec["key"], rec["model"], replace_surrogates(rec["text"])[0], rec["prompt_tokens"],
            rec["completion_tokens"], rec["seconds"])


_STATE_WORDS = {
    "altered": "the row does not match its checksum (its key, model, text, token counts or seconds were altered); "
               "restore the log from git (git checkout -- <log>)",
    "none": "the row has no checksum, so none of its fields can be checked, and it is refused; if the log predates "
            f"checksums and you trust it, give its rows one with `{UPGRADE} <log> --accept-unchecked`",
    "older": "the row carries the older checksum over key and text only (its token counts are unchecked), and it is "
             f"refused; upgrade the log once with `{UPGRADE} <log>`",
}


def parse_record(line: str, path: Path, n: int) -> dict:
    """One log line as its record, every field checked for its type and range (not its checksum: :func:`_row`
    and the upgrade do that); a bad line is an :class:`LLMCacheError` naming the file and line."""
    try:
        rec = json.loads(line)
        row = tuple(rec[f] for f in FIELDS)
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise LLMCacheError(f"response log {path}: line {n} is not a response record ({exc})") from None
    key, model, text, ptok, ctok, secs = row
    if not (isinstance(key, str) and isinstance(model, str) and isinstance(text, str)):
        raise LLMCacheError(f"response log {path}: line {n}: 'key', 'model' and 'text' must be strings")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (ptok, ctok, secs)):
        raise LLMCacheError(f"response log {path}: line {n}: token counts and seconds must be numbers")
    for name, value in (("prompt_tokens", ptok), ("completion_tokens", ctok), ("seconds", secs)):
        whole = name == "seconds" or float(value).is_integer()
        too_big = name != "seconds" and value > SQLITE_MAX_INT  # the cache stores counts as SQLite integers
        if not math.isfinite(value) or value < 0 or not whole or too_big:
            what = ("a finite number >= 0" if name == "seconds" else
                    f"a finite whole number between 0 and {SQLITE_MAX_INT}")
            raise LLMCacheError(f"response log {path}: line {n}: {name!r} must be {what}, got {value!r}")
    return rec


def import_log(cache: LLMCache, path: Path) -> int:
    """Insert the rows of the log at ``path`` that ``cache`` does not hold yet; how many were inserted.

    A missing log imports nothing (returns 0). A key the cache already holds with another text than the
    log's is a :class:`LogConflictError` naming the key (the cached text was altered or comes from another
    run; nothing would tell them apart later). The cache records the SHA-256 of each log it imported whole, and
    the same bytes are not read again (a changed or damaged log has other bytes, and is read and checked)."""
    path = Path(path)
    if not path.exists():
        return 0
    digest = _digest(path)
    if (cache.synced(str(path.resolve()), "imported") or ("",))[0] == digest:
        return 0  # every row of these very bytes was imported into this cache before
    rows = list(read_log(path))
    texts: dict = {}
    for row in rows:
        if texts.setdefault(row[0], row[2]) != row[2]:
            raise LLMCacheError(f"response log {path}: holds key {row[0]} twice with different texts (each row "
                                f"matches its checksum, so two logs were merged by hand); restore the log from "
                                f"git (git checkout -- {path.name})")
    inserted = cache.insert_missing(rows, request_note=IMPORTED_NOTE)
    altered = cache.altered()
    if altered:
        raise cache.altered_error(altered, f"the log {path} was imported around them")
    if inserted < len(rows):
        cached = {row[0]: row[2] for row in cache.rows()}
        conflicts = [row[0] for row in rows if cached.get(row[0], row[2]) != row[2]]
        if conflicts:
            raise LogConflictError(
                f"LLM cache {cache.path}: holds another text than the response log {path} for {len(conflicts)} "
                f"key(s), first {conflicts[0]}; the log is checked against its checksums, so the cache row was "
                f"altered or comes from another run: move the cache away and rerun (the log refills it)")
    cache.mark_synced(str(path.resolve()), "imported", digest, cache.state())
    return inserted


def sync_run_cache(cfg, cache: Optional[LLMCache] = None) -> tuple:
    """Import the run's logs (:func:`logs_to_import`) into its cache; ``(inserted, cache path, logs)``."""
    own = cache is None
    cache = cache if cache is not None else LLMCache(cache_path(cfg))
    try:
        logs = logs_to_import(cfg)
        return sum(import_log(cache, path) for path in logs), cache.path, logs
    finally:
        if own:
            cache.close()


_IMPORTED: set = set()  # (cache file, log file, log size, log mtime) already imported by this process


def import_once(cfg, cache: LLMCache) -> int:
    """:func:`import_log` of the run's logs (:func:`logs_to_import`) into ``cache``, once per process and
    log version (so building the LLM in every notebook cell costs a ``stat``); how many rows were inserted."""
    inserted = 0
    for path in logs_to_import(cfg):
        st = path.stat()
        token = (str(Path(cache.path).resolve()), str(path.resolve()), st.st_size, st.st_mtime_ns)
        if token not in _IMPORTED:
            inserted += import_log(cache, path)
            _IMPORTED.add(token)
    return inserted


def export_run_cache(cfg, cache: Optional[LLMCache] = None) -> tuple:
    """Export the run's cache to its log; ``(rows, log path)``. No cache file: nothing is written."""
    path = cache_path(cfg)
    if cache is None and not path.exists():
        return 0, log_path(cfg)
    own = cache is None
    cache = cache if cache is not None else LLMCache(path)
    try:
        cache.check_integrity()  # a damaged page that the export's table scan would not reach
        return export_log(cache, log_path(cfg)), log_path(cfg)
    finally:
        if own:
            cache.close()
