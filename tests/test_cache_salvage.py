"""A damaged LLM cache stops the run (it used to warn after every notebook and exit 0), and the salvage
command saves every row still readable into the response log before the file is moved away."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kgir_lib.llm import LLMCache, LLMCacheError
from kgir_lib.llm.cache import salvage_rows
from kgir_lib.llm.response_log import LOG_NAME, main as log_main, read_log, salvage

from _probe import probe_notebook

REPO = Path(__file__).resolve().parents[1]
ROWS = {f"{i:064x}": f"answer {i} " + "x" * 900 for i in range(400)}


def fill(path: Path) -> None:
    cache = LLMCache(path)
    for key, text in ROWS.items():
        cache.put(key, "scripted:m", {}, text, 3, 2, 0.5)
    cache.close()


def damage(path: Path) -> None:
    """Overwrite 64 KiB in the middle of the file: the header and the first pages stay readable."""
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\xa5" * 64 * 1024)


def probe_notebooks(folder: Path) -> Path:
    return probe_notebook(folder, "print('probe ran')")


def runner(tmp_path: Path, nbs: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs")}
    env.pop("KGIR_PROFILE", None)
    return subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs)],
                          cwd=REPO, env=env, text=True, capture_output=True, timeout=300)


def test_check_integrity_names_the_salvage_command(tmp_path):
    path = tmp_path / "run" / "cache" / "llm.sqlite"
    path.parent.mkdir(parents=True)
    fill(path)
    LLMCache(path).check_integrity()  # a sound cache passes
    damage(path)
    with pytest.raises(LLMCacheError, match=r"llm\.sqlite is damaged") as exc:
        LLMCache(path).check_integrity()
    assert (f"python -m kgir_lib.llm.response_log salvage {path} {tmp_path / 'run' / LOG_NAME}"
            in str(exc.value))


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_a_damaged_cache_stops_the_run_and_salvage_recovers_the_readable_rows(tmp_path):
    run = tmp_path / "results" / "ci"
    cache = run / "cache" / "llm.sqlite"
    cache.parent.mkdir(parents=True)
    fill(cache)
    damage(cache)
    nbs = probe_notebooks(tmp_path / "nbs")

    out = runner(tmp_path, nbs)
    assert out.returncode != 0, out.stdout
    assert "is damaged" in out.stderr and f"response_log salvage {cache} {run / LOG_NAME}" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (run / "notebooks" / "00_probe.ipynb").exists()  # nothing ran on the damaged cache

    assert log_main(["salvage", str(cache), str(run / LOG_NAME)]) == 0
    saved = {row[0]: row[2] for row in read_log(run / LOG_NAME)}
    assert 0.5 * len(ROWS) < len(saved) < len(ROWS)  # the damaged pages' rows are lost, the rest kept
    assert all(ROWS[key] == text for key, text in saved.items())
    assert not cache.exists() and (cache.parent / "llm.sqlite.damaged").exists()

    out = runner(tmp_path, nbs)  # the rerun starts a fresh cache from the log
    assert out.returncode == 0, out.stderr
    assert f"{len(saved)} response(s) imported" in out.stdout
    assert len(LLMCache(cache)) == len(saved)


def test_salvage_refuses_a_file_that_is_not_sqlite_and_leaves_it_in_place(tmp_path):
    notes = tmp_path / "notes.sqlite"
    notes.write_text("my notes, not a cache")
    with pytest.raises(LLMCacheError, match=r"notes\.sqlite: not an SQLite file.*nothing was changed"):
        salvage(notes, tmp_path / "llm_responses.jsonl.gz")
    assert notes.read_text() == "my notes, not a cache" and not (tmp_path / "notes.sqlite.damaged").exists()
    assert not (tmp_path / "llm_responses.jsonl.gz").exists()


def test_a_cache_cut_in_half_is_reported_as_lost_not_as_zero_unreadable(tmp_path, capsys):
    """A cache cut to half its size used to report "salvaged 0 row(s) ... 0 row(s) could not be read", exit 0,
    and write an empty log."""
    cache, log = tmp_path / "llm.sqlite", tmp_path / LOG_NAME
    c = LLMCache(cache)
    for i in range(44):
        c.put(f"{i:064x}", "scripted:m", {}, f"answer {i} " + "x" * 900, 3, 2, 0.5)
    c.close()
    size = cache.stat().st_size
    os.truncate(cache, size // 2)
    assert log_main(["salvage", str(cache), str(log)]) == 1
    out, err = capsys.readouterr()
    assert "salvaged 0 row(s)" in out and "0 row(s) could not be read" not in out
    assert "how many rows the cache held, and how many are lost, is unknown" in out
    assert f"the file was cut: it holds {size // 2:,} of the {size:,} bytes its header declares" in out
    assert "error: nothing could be salvaged" in err
    assert not log.exists()  # no empty log written
    assert (tmp_path / "llm.sqlite.damaged").exists()


def test_salvage_report_counts_and_exit_codes():
    from kgir_lib.llm.response_log import salvage_report

    base = {"saved": 3, "unreadable": 2, "log_rows": 3, "size": 10, "declared": 10}
    lines, code = salvage_report(base, Path("c"), Path("l"))
    assert code == 0 and lines == ["salvaged 3 row(s) from c into l (3 rows in the log)", "2 row(s) could not be read"]
    assert salvage_report({**base, "saved": 0}, Path("c"), Path("l"))[1] == 1
    assert salvage_report({**base, "saved": 0, "unreadable": 0}, Path("c"), Path("l")) == (
        ["salvaged 0 row(s) from c into l (3 rows in the log)"], 0)  # an intact, empty cache: nothing lost


def test_a_reply_altered_through_sql_is_refused_by_reading_export_and_salvage(tmp_path, capsys):
    """Each cache row carries a checksum of its request and reply: a reply changed through SQL after it was
    written is an error when read or exported, and salvage saves every other row but never that one."""
    path = tmp_path / "run" / "cache" / "llm.sqlite"
    path.parent.mkdir(parents=True)
    cache = LLMCache(path)
    cache.put("a" * 64, "scripted:m", {"messages": [["user", "q1"]]}, "Paris", 3, 1, 0.5)
    cache.put("b" * 64, "scripted:m", {"messages": [["user", "q2"]]}, "Rome", 3, 1, 0.5)
    cache.insert_missing([("c" * 64, "scripted:m", "Oslo", 3, 1, 0.5)])  # an imported row is checked too
    cache.close()
    conn = sqlite3.connect(str(path))
    conn.execute("UPDATE calls SET text = 'Berlin' WHERE key = ?", ("a" * 64,))
    conn.execute("UPDATE calls SET text = 'Bergen' WHERE key = ?", ("c" * 64,))
    conn.commit()
    conn.close()
    cache = LLMCache(path)
    assert cache.get("b" * 64)["text"] == "Rome"
    with pytest.raises(LLMCacheError, match=r"1 row\(s\) fail their checksum \(first key aaaaaaaaaaaa….*salvage"):
        cache.get("a" * 64)
    assert [r[0] for r in cache.rows()] == ["b" * 64] and cache.altered() == ["a" * 64, "c" * 64]
    cache.close()
    log = tmp_path / "run" / LOG_NAME
    got = salvage(path, log)
    assert got["saved"] == 1 and got["altered"] == ["a" * 64, "c" * 64]
    assert [(row[0], row[2]) for row in read_log(log)] == [("b" * 64, "Rome")]
    assert log_main(["salvage", str(got["moved_to"]), str(log)]) == 0
    assert "2 row(s) fail their checksum" in capsys.readouterr().out


def test_a_cache_made_before_rows_carried_checksums_gains_the_column_and_its_rows_are_refused(tmp_path):
    """A row without a checksum used to be read as it was (and exported with a fresh one); now it is refused,
    naming the cache and the upgrade command, until that command gives it one."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL, text TEXT "
                 "NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, seconds REAL NOT "
                 "NULL, created TEXT DEFAULT CURRENT_TIMESTAMP)")
    conn.execute("INSERT INTO calls (key, model, request, text, prompt_tokens, completion_tokens, seconds) "
                 "VALUES ('k', 'm', '{}', 'old', 1, 1, 0.1)")
    conn.commit()
    conn.close()
    cache = LLMCache(path)
    with pytest.raises(LLMCacheError, match=r"old\.sqlite: 1 row\(s\) fail their checksum \(first key k…: it has "
                                            r"no checksum.*python -m kgir_lib\.llm\.upgrade .*--accept-unchecked"):
        cache.get("k")
    cache.put("n", "m", {}, "new", 1, 1, 0.1)
    assert cache.rows() == [("n", "m", "new", 1, 1, 0.1)] and cache.altered() == ["k"]
    cache.close()
    rows, lost, altered = salvage_rows(path)  # the old row has no checksum: not salvaged
    assert [r[0] for r in rows] == ["n"] and lost == 0 and altered == ["k"]
