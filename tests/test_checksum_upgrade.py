"""Every stored field of the LLM cache and the response log is under its row's checksum, a row without one is
refused, and old files are upgraded by one command (``python -m kgir_lib.llm.upgrade``) that says what it did.

The probes that found it: 900,000 added to ``prompt_tokens`` (in the cache or in a log row) gave rc 0 and an
indexing cost 18 million tokens higher; a text altered with its checksum set to NULL (cache) or removed (log)
was read, then exported with a fresh checksum."""
from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kgir_lib.llm import LLMCache, LLMCacheError
from kgir_lib.llm.cache import older_row_checksum, row_checksum
from kgir_lib.llm.response_log import LOG_NAME, checksum, export_log, import_log, read_log
from kgir_lib.llm.response_log.format import FIELDS, older_checksum
from kgir_lib.llm.upgrade import main as upgrade_main, upgrade

REPO = Path(__file__).resolve().parents[1]
KEYS = [c * 64 for c in "abc"]


def cache_with_rows(path: Path) -> Path:
    cache = LLMCache(path)
    for i, key in enumerate(KEYS):
        cache.put(key, "scripted:m", {"messages": [["user", f"q{i}"]]}, f"answer {i}", 110, 10, 0.5)
    cache.close()
    return path


def sql(path: Path, statement: str, *args) -> None:
    conn = sqlite3.connect(str(path))
    conn.execute(statement, args)
    conn.commit()
    conn.close()


def write_log(path: Path, recs: list) -> None:
    path.write_bytes(gzip.compress("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs).encode()))


def log_records(path: Path) -> list:
    return [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]


def a_log(tmp_path: Path) -> Path:
    log = tmp_path / LOG_NAME
    cache = LLMCache(cache_with_rows(tmp_path / "src.sqlite"))
    export_log(cache, log)
    cache.close()
    return log


# ------------------------------------------------------------------ the cache
@pytest.mark.parametrize("statement, why", [
    ("UPDATE calls SET prompt_tokens = prompt_tokens + 900000 WHERE key = ?", "altered after it was written"),
    ("UPDATE calls SET completion_tokens = 0 WHERE key = ?", "altered after it was written"),
    ("UPDATE calls SET seconds = 99 WHERE key = ?", "altered after it was written"),
    ("UPDATE calls SET model = 'other:m' WHERE key = ?", "altered after it was written"),
    ("UPDATE calls SET text = 'TAMPERED | x | y', checksum = NULL WHERE key = ?", "it has no checksum"),
])
def test_a_cache_row_with_an_altered_field_or_a_null_checksum_is_refused_by_read_and_export(tmp_path, statement, why):
    path = cache_with_rows(tmp_path / "cache" / "llm.sqlite")
    sql(path, statement, KEYS[1])
    cache = LLMCache(path)
    assert cache.get(KEYS[0])["prompt_tokens"] == 110
    with pytest.raises(LLMCacheError, match=rf"llm\.sqlite: 1 row\(s\) fail their checksum \(first key "
                                            rf"{KEYS[1][:12]}…: {why}"):
        cache.get(KEYS[1])
    assert [r[0] for r in cache.rows()] == [KEYS[0], KEYS[2]] and cache.altered() == [KEYS[1]]
    log = tmp_path / LOG_NAME
    with pytest.raises(LLMCacheError, match=f"first key {KEYS[1][:12]}"):
        export_log(cache, log)
    assert [r[0] for r in read_log(log)] == [KEYS[0], KEYS[2]]  # the refused row never reaches the log
    cache.close()


def test_a_cache_row_with_the_older_checksum_is_refused_naming_the_upgrade(tmp_path):
    path = cache_with_rows(tmp_path / "llm.sqlite")
    conn = sqlite3.connect(str(path))
    for key, request, text in conn.execute("SELECT key, request, text FROM calls").fetchall():
        conn.execute("UPDATE calls SET checksum = ? WHERE key = ?", (older_row_checksum(key, request, text), key))
    conn.commit()
    conn.close()
    cache = LLMCache(path)
    with pytest.raises(LLMCacheError, match=r"its checksum is the older one over key, request and reply only.*"
                                            rf"python -m kgir_lib\.llm\.upgrade {path}"):
        cache.get(KEYS[0])
    cache.close()


def test_the_cache_checksum_covers_every_field_exactly():
    base = ("k", "m", "{}", "text", 1, 2, 0.5)
    assert len(row_checksum(*base)) == 16 and row_checksum(*base) == row_checksum("k", "m", "{}", "text", 1.0, 2, 0.5)
    for i, other in enumerate(("j", "n", "[]", "txt", 3, 4, 0.25)):
        assert row_checksum(*base[:i], other, *base[i + 1:]) != row_checksum(*base)
    assert row_checksum("k", "m", "{}", "a\n1", 2, 3, 0.5) != row_checksum("k", "m", "{}", "a", 1, 2, 3.5)


# ------------------------------------------------------------------ the log
def test_a_log_row_with_an_altered_token_count_is_refused_naming_file_and_line(tmp_path):
    log = a_log(tmp_path)
    recs = log_records(log)
    recs[1]["prompt_tokens"] += 900000
    write_log(log, recs)
    with pytest.raises(LLMCacheError, match=rf"{LOG_NAME}: line 2 \(key {recs[1]['key']}\): the row does not "
                                            r"match its checksum \(its key, model, text, token counts or seconds"):
        list(read_log(log))
    fresh = LLMCache(tmp_path / "fresh.sqlite")
    with pytest.raises(LLMCacheError, match="line 2"):
        import_log(fresh, log)
    assert len(fresh) == 0


def test_a_log_row_with_its_checksum_removed_is_refused(tmp_path):
    log = a_log(tmp_path)
    recs = log_records(log)
    recs[2]["text"] = "TAMPERED | x | y"
    del recs[2]["checksum"]
    write_log(log, recs)
    with pytest.raises(LLMCacheError, match=rf"{LOG_NAME}: line 3 \(key {recs[2]['key']}\): the row has no "
                                            r"checksum.*and it is refused.*--accept-unchecked"):
        list(read_log(log))


def test_a_log_row_with_the_older_checksum_is_refused_naming_the_upgrade(tmp_path):
    log = a_log(tmp_path)
    recs = log_records(log)
    recs[0]["checksum"] = older_checksum(recs[0]["key"], recs[0]["text"])
    write_log(log, recs)
    with pytest.raises(LLMCacheError, match=rf"line 1 \(key {recs[0]['key']}\): the row carries the older checksum"
                                            rf".*python -m kgir_lib\.llm\.upgrade {log}`"):
        list(read_log(log))
    assert len(list(read_log(log, accept_older=True))) == 3  # counting an earlier revision's rows only


# ------------------------------------------------------------------ the upgrade command
def older_log(tmp_path: Path) -> tuple:
    """A log as the older code wrote it (every row with the checksum over key and text), and its rows."""
    log = a_log(tmp_path)
    current = log.read_bytes()
    recs = log_records(log)
    for rec in recs:
        rec["checksum"] = older_checksum(rec["key"], rec["text"])
    log.write_bytes(gzip.compress("".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n"
                                          for r in recs).encode(), mtime=0))
    return log, current


def test_the_upgrade_rewrites_an_older_log_to_exactly_what_the_current_export_writes(tmp_path, capsys):
    log, current = older_log(tmp_path)
    before = log_records(log)
    assert upgrade_main([str(log)]) == 0
    assert capsys.readouterr().out == (f"response log {log}: 3 of 3 row(s) rewritten with the checksum over every "
                                       f"field (3 had the older checksum, 0 had none); 0 already had it\n")
    assert log.read_bytes() == current
    after = log_records(log)
    assert [{k: r[k] for k in FIELDS} for r in after] == [{k: r[k] for k in FIELDS} for r in before]
    assert all(r["checksum"] == checksum(*(r[f] for f in FIELDS)) for r in after)
    assert upgrade_main([str(log)]) == 0  # a second run finds nothing to do and leaves the file as it was
    assert "0 of 3 row(s) rewritten" in capsys.readouterr().out and log.read_bytes() == current


def test_the_upgrade_refuses_an_altered_row_and_a_row_without_checksum_unless_told_and_writes_nothing(tmp_path,
                                                                                                       capsys):
    log, _ = older_log(tmp_path)
    recs = log_records(log)
    recs[0]["prompt_tokens"] = 5  # the older checksum did not cover it: only the current one catches this
    del recs[1]["checksum"]
    write_log(log, recs)
    recs[2]["text"] = "edited"
    altered = tmp_path / "altered.jsonl.gz"
    write_log(altered, recs)
    untouched = log.read_bytes()
    assert upgrade_main([str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{log}: 1 row(s) refused, nothing was written: line 2 (key {recs[1]['key']}): no checksum" in err
    assert "--accept-unchecked" in err and log.read_bytes() == untouched
    assert upgrade_main([str(log), "--accept-unchecked"]) == 0
    assert "3 of 3 row(s) rewritten with the checksum over every field (2 had the older checksum, 1 had none)" in \
        capsys.readouterr().out
    assert [r[3] for r in read_log(log)] == [5, 110, 110]  # what an upgrade takes as it is, it says it took
    before = altered.read_bytes()
    assert upgrade_main([str(altered), "--accept-unchecked"]) == 2
    assert f"line 3 (key {recs[2]['key']}): fails its checksum (altered)" in capsys.readouterr().err
    assert altered.read_bytes() == before


def test_the_upgrade_gives_an_old_cache_the_checksum_and_refuses_an_altered_one(tmp_path):
    path = cache_with_rows(tmp_path / "llm.sqlite")
    conn = sqlite3.connect(str(path))
    rows = conn.execute("SELECT key, request, text FROM calls ORDER BY key").fetchall()
    conn.execute("UPDATE calls SET checksum = ? WHERE key = ?", (older_row_checksum(*rows[0]), rows[0][0]))
    conn.execute("UPDATE calls SET checksum = NULL WHERE key = ?", (rows[1][0],))
    conn.commit()
    conn.close()
    got = upgrade(path, accept_unchecked=True)
    assert {k: got[k] for k in ("rows", "current", "older", "unchecked", "rewritten")} == {
        "rows": 3, "current": 1, "older": 1, "unchecked": 1, "rewritten": 2}
    cache = LLMCache(path)
    assert [(r[0], r[2], r[3]) for r in cache.rows()] == [(k, f"answer {i}", 110) for i, k in enumerate(KEYS)]
    cache.close()
    sql(path, "UPDATE calls SET prompt_tokens = 900110 WHERE key = ?", KEYS[2])
    with pytest.raises(LLMCacheError, match=rf"1 row\(s\) refused, nothing was written: key {KEYS[2]}: fails its "
                                            r"checksum \(altered\)"):
        upgrade(path, accept_unchecked=True)


def test_the_upgrade_runs_as_a_module(tmp_path):
    log, current = older_log(tmp_path)
    out = subprocess.run([sys.executable, "-m", "kgir_lib.llm.upgrade", str(log)], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"response log {log}: 3 of 3 row(s) rewritten") and log.read_bytes() == current


@pytest.mark.parametrize("profile", ["ci", "sample", "local"])
def test_every_committed_log_carries_the_checksum_over_every_field(profile):
    log = REPO / "results" / profile / LOG_NAME
    recs = log_records(log)
    assert recs and all(r["checksum"] == checksum(*(r[f] for f in FIELDS)) for r in recs)
    assert len(list(read_log(log))) == len(recs)
