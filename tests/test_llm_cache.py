"""The SQLite LLM cache: a run killed half way resumes without repeating a finished call; two processes share it."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kgir_lib.llm import ChatRequest, LLMCache, LLMCacheError, cache_key

REPO = Path(__file__).resolve().parents[1]

# A worker process: N requests through LLM.generate with a slow scripted backend. Every call the
# backend starts is appended to a log file, so the test can see exactly which calls were repeated.
WORKER = textwrap.dedent('''
    import json, sys, time
    from kgir_lib.llm import LLM, ChatRequest, LLMCache, ScriptedBackend

    cache_path, log_path, n, delay, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]

    def slow(req):
        with open(log_path, "a") as fh:
            fh.write(req.messages[-1][1] + "\\n")
        time.sleep(delay)
        return "answer to " + req.messages[-1][1]

    llm = LLM(ScriptedBackend(slow), LLMCache(cache_path), progress=False)
    out = llm.generate([ChatRequest.chat("sys", f"q{i}") for i in range(n)], stage="resume")
    assert [r.text for r in out] == [f"answer to q{i}" for i in range(n)], tag
    u = llm.usage.stages["resume"]
    print(json.dumps({"calls": u.calls, "hits": u.cache_hits, "backend": len(llm.backend.seen)}))
''')


def _worker(tmp_path: Path) -> Path:
    path = tmp_path / "worker.py"
    path.write_text(WORKER)
    return path


def _run(tmp_path, cache, log, n, delay, tag="run", **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(_worker(tmp_path)), str(cache), str(log), str(n), str(delay), tag],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _rows(cache: Path) -> set:
    if not cache.exists():
        return set()
    con = sqlite3.connect(str(cache), timeout=30)
    try:
        return {row[0] for row in con.execute("SELECT key FROM calls")}
    except sqlite3.OperationalError:  # table not created yet
        return set()
    finally:
        con.close()


def _key(i: int) -> str:
    return cache_key("scripted:scripted", ChatRequest.chat("sys", f"q{i}").payload())


def test_killed_run_resumes_without_repeating_finished_calls(tmp_path):
    cache, log1, log2 = tmp_path / "llm.sqlite", tmp_path / "calls1.log", tmp_path / "calls2.log"
    n = 30
    proc = _run(tmp_path, cache, log1, n, delay=0.15)
    try:
        deadline = time.time() + 120
        while len(_rows(cache)) < 6:
            assert proc.poll() is None, f"worker ended early: {proc.communicate()}"
            assert time.time() < deadline, "worker wrote no results"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    finished = _rows(cache)
    started = log1.read_text().split()
    assert 6 <= len(finished) < n, "kill it half way"
    assert finished == {_key(i) for i in range(len(finished))}  # the scripted backend runs in order
    assert len(started) in (len(finished), len(finished) + 1)  # at most one call was cut off

    rerun = _run(tmp_path, cache, log2, n, delay=0.0, tag="rerun")
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    repeated = log2.read_text().split()
    assert repeated == [f"q{i}" for i in range(len(finished), n)]  # only the unfinished ones
    assert f'"hits": {len(finished)}' in out and f'"backend": {n - len(finished)}' in out
    assert _rows(cache) == {_key(i) for i in range(n)}


def test_two_processes_share_one_cache(tmp_path):
    cache = tmp_path / "shared.sqlite"
    procs = [_run(tmp_path, cache, tmp_path / f"log{j}", 40, delay=0.01, tag=f"p{j}") for j in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        assert "database is locked" not in err
    assert _rows(cache) == {_key(i) for i in range(40)}
    calls = [len((tmp_path / f"log{j}").read_text().split()) for j in range(2)]
    assert sum(calls) >= 40  # every request answered by one process or both, none lost
    con = sqlite3.connect(str(cache))
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_cache_roundtrip_and_overwrite(tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite")
    assert cache.get("nope") is None
    cache.put("k", "m", {"messages": []}, "text", 3, 4, 0.5)
    assert cache.get("k") == {"text": "text", "prompt_tokens": 3, "completion_tokens": 4, "seconds": 0.5}
    cache.put("k", "m", {"messages": []}, "new", 1, 1, 0.1)
    assert cache.get("k")["text"] == "new" and len(cache) == 1
    cache.close()
    assert LLMCache(tmp_path / "c.sqlite").get("k")["text"] == "new"


def test_cache_uses_wal(tmp_path):
    LLMCache(tmp_path / "c.sqlite")
    con = sqlite3.connect(str(tmp_path / "c.sqlite"))
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_unusable_cache_file_is_named(tmp_path):
    bad = tmp_path / "llm.sqlite"
    bad.write_bytes(b"this is not an sqlite database" * 100)
    with pytest.raises(LLMCacheError, match="llm.sqlite"):
        LLMCache(bad)
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(str(other))
    con.execute("CREATE TABLE calls (x TEXT)")
    con.commit()
    con.close()
    with pytest.raises(LLMCacheError, match="other.sqlite"):
        LLMCache(other)


# ------------------------------------------------------------------ corrupt caches and odd text
def test_a_cache_corrupted_in_its_middle_pages_names_the_file(tmp_path):
    """Old behaviour: opening worked (the first page is fine) and a later read raised a bare sqlite3.DatabaseError."""
    path = tmp_path / "llm.sqlite"
    cache = LLMCache(path)
    for i in range(400):
        cache.put(f"key{i:04d}", "m", {"i": i}, f"answer {i} " + "x" * 900, 1, 1, 0.1)
    cache.close()
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # overwrite pages in the middle, keep the header and first pages
        fh.seek(size // 2)
        fh.write(b"\xa5" * 64 * 1024)
    cache = LLMCache(path)  # still opens
    with pytest.raises(LLMCacheError, match=r"llm\.sqlite.*SQLite error") as exc:
        for i in range(400):
            cache.get(f"key{i:04d}")
        len(cache)
    assert "python -m kgir_lib.llm.response_log salvage" in str(exc.value)


@pytest.mark.parametrize("text", [None, ["a", "b"], {"content": "x"}, 5])
def test_only_text_completions_are_cached(tmp_path, text):
    cache = LLMCache(tmp_path / "c.sqlite")
    with pytest.raises(LLMCacheError, match=r"c\.sqlite: refusing to store a .* completion"):
        cache.put("k", "m", {}, text, 1, 1, 0.1)
    assert len(cache) == 0


def test_lone_surrogates_are_replaced_and_counted_in_put(tmp_path):
    from kgir_lib.traces import REPLACED

    cache = LLMCache(tmp_path / "c.sqlite")
    before = REPLACED["llm_cache"]
    payload = {"messages": [{"role": "user", "content": "quote \udc80"}]}
    key = cache_key("m", payload)  # a prompt quoting a surrogate still has a key
    cache.put(key, "m", payload, "reply \ud800 here", 1, 1, 0.1)
    assert cache.get(key)["text"] == "reply \ufffd here"
    assert cache.surrogates_replaced == 2 and REPLACED["llm_cache"] == before + 2
    # plain text hashes as plain UTF-8, the key every committed response log is stored under (pinned)
    blob = json.dumps({"model": "m", "x": "plain"}, sort_keys=True, ensure_ascii=False).encode("utf-8")
    assert cache_key("m", {"x": "plain"}) == hashlib.sha256(blob).hexdigest() == (
        "916c926cfef09ec29d1a54118e6d0281528ec54d29e4f4a47efec6c0719c16cd")


def _open_fresh_cache(args) -> str:
    path, barrier = args
    barrier.wait()
    try:
        LLMCache(path, timeout_s=20).put("k", "m", {}, "t", 1, 1, 0.1)
        return "ok"
    except LLMCacheError as exc:
        return str(exc)


def test_processes_opening_a_fresh_cache_at_once_all_succeed(tmp_path):
    """Three processes create the same new file together, 30 times over: the switch to WAL can deadlock
    and SQLite then says "locked" without waiting (about one opening in ten before the retry)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with ctx.Manager() as manager, ctx.Pool(3) as pool:
        failures = []
        for trial in range(30):
            barrier = manager.Barrier(3)
            path = tmp_path / f"fresh{trial}.sqlite"
            failures += [r for r in pool.map(_open_fresh_cache, [(path, barrier)] * 3) if r != "ok"]
    assert failures == []
