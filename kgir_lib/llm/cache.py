"""The one persistent LLM cache: SQLite, one row per call, written as each result arrives.

Key = SHA-256 of the model id, the full messages and every sampling parameter,
so a rerun with the same inputs costs nothing and a changed prompt or parameter
misses. WAL mode and a busy timeout make it safe for two notebooks at once.

Each row carries a checksum of every field it stores: key, model, request, reply,
token counts and seconds (:func:`row_checksum`). A row altered after it was written
(through SQL, or by a damaged page that still reads) fails it: reading it is an
error that says how to salvage the cache, and salvage and export refuse it, so it
never reaches the committed response log. A row without a checksum, or with the
older one that covered key, request and reply only, is refused the same way (its
token counts were never checked): ``python -m kgir_lib.llm.upgrade <cache>`` gives
an old cache's rows the checksum, once, and says what it rewrote.
"""
from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Optional

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    created TEXT DEFAULT CURRENT_TIMESTAMP,
    checksum TEXT
);
CREATE TABLE IF NOT EXISTS synced (
    log TEXT NOT NULL,
    kind TEXT NOT NULL,
    digest TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (log, kind)
)
"""


def row_checksum(key: str, model: str, request: str, text: str, prompt_tokens: int, completion_tokens: int,
                 seconds: float) -> str:
    """The checksum of a cache row: the first 16 hex digits of SHA-256 over every field it stores (its key,
    model, stored request, reply, token counts and seconds, as one JSON list: no field can bleed into the next)."""
    blob = json.dumps([key, model, request, text, int(prompt_tokens), int(completion_tokens), float(seconds)],
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def older_row_checksum(key: str, request: str, text: str) -> str:
    """The checksum rows carried before it covered the model, token counts and seconds (key, request and reply
    only): recognised so that such a row is named as old (to upgrade) rather than as altered."""
    blob = f"{key}\n{request}\n{text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()[:16]


UPGRADE = "python -m kgir_lib.llm.upgrade"  # the command that gives old caches and logs the current checksum


def row_state(key: str, model: str, text: str, prompt_tokens: int, completion_tokens: int, seconds: float,
              request: Optional[str], stored: Optional[str]) -> str:
    """Whether a cache row passes its checksum: ``"ok"``; ``"none"`` (it has no checksum); ``"older"`` (it has
    the older checksum over key, request and reply only: written before the checksum covered the token counts);
    ``"altered"`` (it fails it: changed after it was written). Arguments in the order of :meth:`LLMCache._scan`."""
    if stored is None:
        return "none"
    if not isinstance(request, str) or not isinstance(text, str):
        return "altered"
    try:
        if row_checksum(key, model, request, text, prompt_tokens, completion_tokens, seconds) == stored:
            return "ok"
    except (TypeError, ValueError, OverflowError):
        return "altered"
    return "older" if older_row_checksum(key, request, text) == stored else "altered"


def state_words(state: str, path: Path | str) -> str:
    """Why a row in ``state`` (:func:`row_state`) is refused, and what to do, in words."""
    if state == "none":
        return (f"it has no checksum, so none of its fields can be checked; if the cache predates checksums and "
                f"you trust it, give its rows one with `{UPGRADE} {path} --accept-unchecked`")
    if state == "older":
        return (f"its checksum is the older one over key, request and reply only (its token counts are unchecked); "
                f"upgrade the cache once with `{UPGRADE} {path}`")
    return "altered after it was written"


def cache_key(model: str, request_payload: dict) -> str:
    """SHA-256 of the model id and the request payload (``surrogatepass``: a prompt quoting a lone surrogate
    still has a key; every other text hashes exactly as plain UTF-8)."""
    blob = json.dumps({"model": model, **request_payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


LOG_NAME = "llm_responses.jsonl.gz"  # the run's response log (:mod:`kgir_lib.llm.response_log`), the cache's backup


class LLMCacheError(RuntimeError):
    """The cache file cannot be opened or is not an LLM cache; the message names the file."""


def salvage_advice(path: Path | str) -> str:
    """What to do with a damaged cache at ``path``: the command that saves every row still readable into the
    run's response log and moves the file away (the next run starts a fresh cache from the log)."""
    path = Path(path)
    log = path.parent.parent / LOG_NAME if path.parent.name == "cache" else Path("<response log>")
    return (f"save every row still readable into the response log and move the damaged file away with "
            f"`python -m kgir_lib.llm.response_log salvage {path} {log}`, then rerun (the log refills a fresh "
            f"cache)")


class LLMCache:
    """SQLite-backed map from :func:`cache_key` to a finished call.

    One row is committed per result (WAL journal, ``synchronous=NORMAL``: a killed
    process loses nothing that was committed). Several processes may share the file:
    writers wait up to ``timeout_s`` for the lock.
    """

    def __init__(self, path: Path | str, timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.surrogates_replaced = 0  # lone surrogates replaced by U+FFFD in stored texts
        try:
            self._conn = sqlite3.connect(str(self.path), timeout=timeout_s, check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            self._set_up(timeout_s)
        except sqlite3.DatabaseError as exc:
            raise LLMCacheError(f"LLM cache {self.path}: cannot use it as an SQLite cache ({exc}); "
                                f"move the file away to start a fresh cache") from exc

    def _set_up(self, timeout_s: float) -> None:
        """WAL journal, schema, and a probe of the columns. Two processes opening a fresh file at once
        can deadlock on the switch to WAL, and SQLite then answers "locked" at once instead of calling
        the busy handler; so a locked set-up is retried until ``timeout_s`` has passed."""
        deadline, pause = time.monotonic() + timeout_s, 0.01
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(_SCHEMA)
                columns = {row[1] for row in self._conn.execute("PRAGMA table_info(calls)")}
                if "checksum" not in columns:  # a cache made before rows carried a checksum
                    self._conn.execute("ALTER TABLE calls ADD COLUMN checksum TEXT")
                self._conn.commit()
                self._conn.execute("SELECT key, text, prompt_tokens, completion_tokens, seconds FROM calls LIMIT 1")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= deadline:
                    raise
                self._conn.rollback()
                time.sleep(pause)
                pause = min(pause * 2, 0.5)

    def __bool__(self) -> bool:  # a cache is truthy even when empty (``__len__`` would say otherwise)
        return True

    def _db_error(self, exc: sqlite3.DatabaseError, what: str) -> LLMCacheError:
        return LLMCacheError(f"LLM cache {self.path}: SQLite error while {what} ({type(exc).__name__}: {exc}); "
                             f"if the file is damaged, {salvage_advice(self.path)}")

    def check_integrity(self) -> None:
        """SQLite's ``quick_check`` of every page; a damaged file is an :class:`LLMCacheError` that says how to
        save what is still readable (a damaged page may only show when a later read or export reaches it)."""
        try:
            with self._lock:
                found = [row[0] for row in self._conn.execute("PRAGMA quick_check").fetchall()]
        except sqlite3.DatabaseError as exc:
            found = [f"{type(exc).__name__}: {exc}"]
        if found != ["ok"]:
            raise LLMCacheError(f"LLM cache {self.path} is damaged ({'; '.join(found[:3])}); the run stops here so "
                                f"that nothing is built on it: {salvage_advice(self.path)}")

    def get(self, key: str) -> Optional[dict]:
        """The stored call for ``key`` (``text``, ``prompt_tokens``, ``completion_tokens``, ``seconds``), or None."""
        try:
            with self._lock:
                row = self._conn.execute(
                    "SELECT model, text, prompt_tokens, completion_tokens, seconds, request, checksum FROM calls "
                    "WHERE key=?",
                    (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc, "reading") from exc
        if row is None:
            return None
        if row_state(key, *row) != "ok":
            raise self.altered_error([key], "it is not used")
        return {"text": row[1], "prompt_tokens": row[2], "completion_tokens": row[3], "seconds": row[4]}

    def put(self, key: str, model: str, request_payload: dict, text: str,
            prompt_tokens: int, completion_tokens: int, seconds: float) -> None:
        """Store one finished call. Only a ``str`` completion is stored (anything else is an
        :class:`LLMCacheError`); lone surrogates are replaced by U+FFFD and counted
        (:attr:`surrogates_replaced`, and ``kgir_lib.traces.REPLACED["llm_cache"]``)."""
        if not isinstance(text, str):
            raise LLMCacheError(f"LLM cache {self.path}: refusing to store a {type(text).__name__} completion "
                                f"for key {key[:12]}… (only text completions are cached)")
        text = self._scrub(text)
        request = self._scrub(json.dumps(request_payload, ensure_ascii=False))
        try:
            with self._lock:
                self._conn.execute(
                    "INSERT OR REPLACE INTO calls (key, model, request, text, prompt_tokens, completion_tokens,"
                    " seconds, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (key, model, request, text, int(prompt_tokens), int(completion_tokens), float(seconds),
                     row_checksum(key, model, request, text, prompt_tokens, completion_tokens, seconds)),
                )
                self._conn.commit()
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc, "writing") from exc

    def _scrub(self, text: str) -> str:
        from ..traces import REPLACED, replace_surrogates

        clean, n = replace_surrogates(text)
        if n:
            self.surrogates_replaced += n
            REPLACED["llm_cache"] += n
        return clean

    # ------------------------------------------------------------------ bulk rows (the response log)
    def rows(self) -> list:
        """Every call that passes its checksum as ``(key, model, text, prompt_tokens, completion_tokens,
        seconds)``, sorted by key (:meth:`altered` lists the others)."""
        return [tuple(row[:6]) for row in self._scan() if row_state(*row) == "ok"]

    def altered(self) -> list:
        """The keys of the rows that fail their checksum (altered after they were written) or have none (or
        only the older one, :func:`row_state`), sorted."""
        return [row[0] for row in self._scan() if row_state(*row) != "ok"]

    def altered_error(self, keys: list, what: str) -> LLMCacheError:
        """The error for rows that fail or lack their checksum: how many, the first key and why it is refused,
        what was (not) done, and how to salvage (an altered row) or upgrade (a row without the checksum) the
        cache."""
        try:
            with self._lock:
                row = self._conn.execute("SELECT key, model, text, prompt_tokens, completion_tokens, seconds, "
                                         "request, checksum FROM calls WHERE key=?", (keys[0],)).fetchone()
        except sqlite3.DatabaseError:
            row = None
        state = row_state(*row) if row is not None else "altered"
        advice = (f"{salvage_advice(self.path)} (salvage leaves those rows out, so their calls are asked again)"
                  if state == "altered" else "nothing of such a row is trusted")
        return LLMCacheError(f"LLM cache {self.path}: {len(keys)} row(s) fail their checksum (first key "
                             f"{keys[0][:12]}…: {state_words(state, self.path)}); {what}; {advice}")

    def _scan(self) -> list:
        try:
            with self._lock:
                return self._conn.execute("SELECT key, model, text, prompt_tokens, completion_tokens, seconds, "
                                          "request, checksum FROM calls ORDER BY key").fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc, "reading every row") from exc

    def insert_missing(self, rows: list, request_note: str = "{}") -> int:
        """Insert ``(key, model, text, prompt_tokens, completion_tokens, seconds)`` rows whose key is not
        cached yet (one transaction); existing rows are never touched. Returns how many were inserted."""
        try:
            with self._lock:
                before = self._conn.total_changes
                clean = [(k, m, self._scrub(t), int(p), int(c), float(s)) for k, m, t, p, c, s in rows]
                self._conn.executemany(
                    "INSERT OR IGNORE INTO calls (key, model, request, text, prompt_tokens, completion_tokens,"
                    " seconds, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(k, m, request_note, t, p, c, s, row_checksum(k, m, request_note, t, p, c, s))
                     for k, m, t, p, c, s in clean])
                self._conn.commit()
                return self._conn.total_changes - before
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc, "importing rows") from exc

    # ------------------------------------------------------------------ what was synced with a log
    def state(self) -> str:
        """The largest row id and the row count: a new stored call changes it (a replaced row gets a new id)."""
        return "{}/{}".format(*self._one("SELECT MAX(rowid), COUNT(*) FROM calls", (), "counting rows"))

    def synced(self, log: str, kind: str) -> Optional[tuple]:
        """``(digest, state)`` recorded by :meth:`mark_synced` for ``log`` and ``kind``, or None."""
        row = self._one("SELECT digest, state FROM synced WHERE log=? AND kind=?", (log, kind), "reading a sync")
        return tuple(row) if row else None

    def mark_synced(self, log: str, kind: str, digest: str, state: str) -> None:
        """Record that the log ``log`` (its bytes' ``digest``) and this cache were synced (``kind``: imported or
        exported); ``state``: what the caller compares next time (:meth:`state`; an export adds ``|<log rows>``)."""
        self._one("INSERT OR REPLACE INTO synced VALUES (?, ?, ?, ?)", (log, kind, digest, state), "recording a sync",
                  commit=True)

    def _one(self, sql: str, args: tuple, what: str, commit: bool = False) -> Any:
        """The first row ``sql`` returns (None when none), committed when ``commit``; an SQLite error names ``what``."""
        try:
            with self._lock:
                row = self._conn.execute(sql, args).fetchone()
                if commit:
                    self._conn.commit()
                return row
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc, what) from exc

    def __len__(self) -> int:
        return self._one("SELECT COUNT(*) FROM calls", (), "counting rows")[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def salvage_rows(path: Path | str) -> tuple:
    """Every row of the cache file ``path`` that can still be read and passes its checksum, as ``(key, model,
    text, prompt_tokens, completion_tokens, seconds)`` sorted by key; how many rows could not be read: a number
    when the table's largest row id could be read, else ``None`` (the file is damaged where SQLite keeps the
    table's extent, e.g. cut short: how many rows it held is unknown); and the keys of the rows that fail their
    checksum or have none (:func:`row_state`: never salvaged).

    Rows are looked up one by one, by row id (up to the largest) and by key through the primary-key index,
    so a damaged page loses only the rows on it. A row whose fields have the wrong types is not kept."""
    conn = sqlite3.connect(str(path))  # (read only in effect: nothing is written)
    found: dict = {}
    altered: set = set()
    lost: Optional[int] = 0
    columns = "key, model, text, prompt_tokens, completion_tokens, seconds"
    try:
        if not _has_checksums(conn):
            columns += ", NULL, NULL"
        else:
            columns += ", request, checksum"
        row_ids = _row_ids(conn)
        if row_ids is None:
            lost, row_ids = None, range(0)
        for where, ids in (("rowid", row_ids), ("key", _index_keys(conn))):
            for ident in ids:
                try:
                    row = conn.execute(f"SELECT {columns} FROM calls WHERE {where} = ?", (ident,)).fetchone()
                except sqlite3.DatabaseError:
                    lost = None if lost is None else lost + (where == "rowid")
                    continue
                if row is not None and _sound(row[:6]) and row_state(*row) == "ok":
                    found.setdefault(row[0], tuple(row[:6]))
                elif row is not None and _sound(row[:6]):
                    altered.add(row[0])
                elif row is not None and lost is not None:
                    lost += where == "rowid"
    finally:
        conn.close()
    return [found[k] for k in sorted(found)], lost, sorted(altered)


def _has_checksums(conn: sqlite3.Connection) -> bool:
    try:
        return "checksum" in {row[1] for row in conn.execute("PRAGMA table_info(calls)")}
    except sqlite3.DatabaseError:
        return False


def _row_ids(conn: sqlite3.Connection) -> Optional[range]:
    """The table's row ids, 1 to the largest; ``None`` when even the largest cannot be read."""
    try:
        top = conn.execute("SELECT max(rowid) FROM calls").fetchone()[0]
    except sqlite3.DatabaseError:
        return None
    return range(1, (top or 0) + 1)


def declared_size(path: Path | str) -> Optional[int]:
    """The size in bytes the SQLite header of ``path`` declares (page size x page count, header bytes 16-17 and
    28-31), or ``None`` when the file has no SQLite header. A file shorter than this was cut."""
    with open(path, "rb") as fh:
        head = fh.read(32)
    if len(head) < 32 or not head.startswith(b"SQLite format 3\x00"):
        return None
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    return page * int.from_bytes(head[28:32], "big")


def _index_keys(conn: sqlite3.Connection) -> list:
    """The keys the primary-key index still yields, read until it hits a damaged page."""
    keys: list = []
    try:
        for (key,) in conn.execute("SELECT key FROM calls ORDER BY key"):
            keys.append(key)
    except sqlite3.DatabaseError:
        pass
    return keys


def _sound(row: tuple) -> bool:
    key, model, text, ptok, ctok, secs = row
    return (isinstance(key, str) and isinstance(model, str) and isinstance(text, str)
            and all(isinstance(v, int) and v >= 0 for v in (ptok, ctok))
            and isinstance(secs, (int, float)) and math.isfinite(secs))
