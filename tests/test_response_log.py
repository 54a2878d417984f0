"""The committed response log: export -> fresh cache -> import -> a cache-only LLM answers everything."""
from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from kgir_lib.llm import LLM, CacheMissError, ChatRequest, LLMCache, LLMCacheError, ScriptedBackend
from kgir_lib.llm.response_log import (LOG_NAME, LogConflictError, checksum, export_log, export_run_cache,
                                       import_log, log_path, read_log, sync_run_cache)

REQUESTS = [ChatRequest.chat("sys", f"question {i}", max_tokens=16) for i in range(6)]


def answer(req: ChatRequest) -> str:
    return "answer to " + req.messages[-1][1]


def fill(path) -> LLM:
    llm = LLM(ScriptedBackend(answer), LLMCache(path), progress=False)
    llm.generate(REQUESTS, stage="fill")
    return llm


def test_round_trip_answers_every_request_with_zero_backend_calls(tmp_path):
    first = fill(tmp_path / "a.sqlite")
    log = tmp_path / "llm_responses.jsonl.gz"
    assert export_log(first.cache, log) == 6
    fresh = LLMCache(tmp_path / "fresh.sqlite")
    assert import_log(fresh, log) == 6
    backend = ScriptedBackend(lambda req: pytest.fail("the backend must not be called"))
    replay = LLM(backend, fresh, progress=False, cache_only=True)
    out = replay.generate(REQUESTS, stage="replay")
    assert [r.text for r in out] == [answer(r) for r in REQUESTS]
    assert all(r.cached for r in out) and backend.seen == []
    before = first.generate(REQUESTS, stage="again")
    assert [(r.prompt_tokens, r.completion_tokens) for r in out] == [(r.prompt_tokens, r.completion_tokens)
                                                                     for r in before]
    assert import_log(fresh, log) == 0  # idempotent: rows already cached are left alone


def test_the_log_holds_no_prompt_and_is_deterministic(tmp_path):
    llm = fill(tmp_path / "a.sqlite")
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    export_log(llm.cache, a)
    export_log(llm.cache, b)
    assert a.read_bytes() == b.read_bytes()  # gzip without a timestamp, rows sorted by key
    lines = gzip.decompress(a.read_bytes()).decode().splitlines()
    recs = [json.loads(x) for x in lines]
    assert [r["key"] for r in recs] == sorted(r["key"] for r in recs)
    assert set(recs[0]) == {"key", "model", "text", "prompt_tokens", "completion_tokens", "seconds", "checksum"}
    assert not any("question 1" in x and "answer" not in x for x in lines)
    assert all(list(json.loads(x)) == sorted(json.loads(x)) for x in lines)  # sorted keys: small diffs


def test_export_never_drops_logged_rows_missing_from_the_cache(tmp_path):
    log = tmp_path / "log.jsonl.gz"
    export_log(fill(tmp_path / "a.sqlite").cache, log)
    other = LLMCache(tmp_path / "other.sqlite")
    other.put("f" * 64, "m", {}, "another", 1, 1, 0.1)
    assert export_log(other, log) == 7


def test_run_level_sync_and_export(cfg):
    cache = LLMCache(cfg.path("cache", "llm.sqlite"))
    cache.put("a" * 64, "scripted:x", {}, "one", 2, 1, 0.25)
    cache.close()
    rows, path = export_run_cache(cfg)
    assert rows == 1 and path == log_path(cfg) == cfg.run_dir / "llm_responses.jsonl.gz"
    cfg.path("cache", "llm.sqlite").unlink()
    inserted, cache_file, _ = sync_run_cache(cfg)
    assert inserted == 1 and LLMCache(cache_file).get("a" * 64)["text"] == "one"


def test_a_damaged_log_is_an_error_naming_it(tmp_path):
    bad = tmp_path / "llm_responses.jsonl.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(LLMCacheError, match=r"llm_responses\.jsonl\.gz: unreadable"):
        import_log(LLMCache(tmp_path / "c.sqlite"), bad)
    bad.write_bytes(gzip.compress(b'{"key": "k", "model": "m", "text": null, "prompt_tokens": 1, '
                                  b'"completion_tokens": 1, "seconds": 0}\n'))
    with pytest.raises(LLMCacheError, match="line 1: 'key', 'model' and 'text' must be strings"):
        list(read_log(bad))


def _log_of(tmp_path, n=50):
    cache = LLMCache(tmp_path / "src.sqlite")
    for i in range(n):
        cache.put(f"{i:064x}", "m", {}, f"answer {i}", 3, 2, 0.1)
    log = tmp_path / "llm_responses.jsonl.gz"
    export_log(cache, log)
    return log


def test_a_log_cut_mid_stream_is_read_up_to_its_last_complete_line(tmp_path):
    """A kill of a non-atomic writer leaves a gzip stream without its end: the rows before the cut import,
    with a warning, instead of none."""
    log = _log_of(tmp_path)
    data = log.read_bytes()
    log.write_bytes(data[: len(data) // 2])
    with pytest.warns(UserWarning, match="torn by an interrupted write"):
        rows = list(read_log(log))
    assert 0 < len(rows) < 50
    assert [r[0] for r in rows] == [f"{i:064x}" for i in range(len(rows))]  # a prefix, every row whole


def test_a_log_whose_last_line_is_cut_drops_that_line_only(tmp_path):
    log = _log_of(tmp_path, 5)
    text = gzip.decompress(log.read_bytes()).decode()
    log.write_bytes(gzip.compress(text[: len(text) - 20].encode()))  # the last record loses its end
    with pytest.warns(UserWarning, match="torn"):
        assert [r[2] for r in read_log(log)] == [f"answer {i}" for i in range(4)]
    with pytest.warns(UserWarning, match="torn"):
        assert import_log(LLMCache(tmp_path / "c.sqlite"), log) == 4
    # a broken line that is not the last is damage, not a torn write: an error naming the line
    lines = text.splitlines(keepends=True)
    log.write_bytes(gzip.compress(("".join(lines[:2]) + lines[2][:30] + "\n" + "".join(lines[3:])).encode()))
    with pytest.raises(LLMCacheError, match="line 3 is not a response record"):
        list(read_log(log))


def test_a_log_holding_one_key_twice_with_two_texts_blames_the_log(tmp_path):
    rows = [{"key": "a" * 64, "model": "m", "text": t, "checksum": checksum("a" * 64, "m", t, 1, 1, 0.1),
             "prompt_tokens": 1, "completion_tokens": 1, "seconds": 0.1} for t in ("one", "two")]
    log = tmp_path / "llm_responses.jsonl.gz"
    log.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    cache = LLMCache(tmp_path / "fresh.sqlite")
    with pytest.raises(LLMCacheError, match=r"response log .*llm_responses\.jsonl\.gz: holds key a{64} twice") as exc:
        import_log(cache, log)
    assert not isinstance(exc.value, LogConflictError) and len(cache) == 0


def test_missing_log_imports_nothing_and_cache_only_still_refuses_misses(tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite")
    assert import_log(cache, tmp_path / "absent.jsonl.gz") == 0
    with pytest.raises(CacheMissError):
        LLM(ScriptedBackend(answer), cache, progress=False, cache_only=True).generate(REQUESTS[:1])


def test_build_llm_imports_the_run_log_once(cfg, monkeypatch):
    """A notebook run outside the runner (papermill or Jupyter) still starts from the committed log."""
    from kgir_lib.llm import build_llm
    from kgir_lib.llm.response_log import format as response_log

    src = LLMCache(cfg.path("tmp", "src.sqlite"))
    src.put("b" * 64, "scripted:x", {}, "logged", 1, 1, 0.1)
    export_log(src, log_path(cfg))
    llm = build_llm(cfg, script=answer, progress=False)
    assert llm.cache.get("b" * 64)["text"] == "logged"
    calls = []
    monkeypatch.setattr(response_log, "import_log", lambda *a: calls.append(a) or 0)
    build_llm(cfg, script=answer, progress=False)
    assert calls == []  # the same log version is not read twice in one process


def test_a_log_damaged_mid_stream_is_an_error_naming_the_file(tmp_path):
    """64 garbled bytes inside the deflate stream: zlib fails after some rows were read; the error names the
    log instead of surfacing as a bare zlib.error."""
    log = tmp_path / "llm_responses.jsonl.gz"
    cache = LLMCache(tmp_path / "a.sqlite")
    for i in range(200):
        cache.put(f"{i:064x}", "m", {}, f"answer {i} " + "lorem ipsum dolor sit amet " * (i % 7), 3, 2, 0.1)
    export_log(cache, log)
    data = bytearray(log.read_bytes())
    data[200:264] = bytes(range(64))
    log.write_bytes(bytes(data))
    with pytest.raises(LLMCacheError, match=r"response log .*llm_responses\.jsonl\.gz: unreadable \(error"):
        list(read_log(log))


@pytest.mark.parametrize("field, literal", [("prompt_tokens", "Infinity"), ("completion_tokens", "1e400"),
                                            ("prompt_tokens", "-1"), ("completion_tokens", "2.5"),
                                            ("seconds", "NaN"), ("prompt_tokens", str(2 ** 70)),
                                            ("completion_tokens", "1e30")])
def test_a_log_row_with_a_bad_count_is_refused_at_import_naming_file_and_line(tmp_path, field, literal):
    good = {"key": "a" * 64, "model": "m", "text": "t", "prompt_tokens": 1, "completion_tokens": 1, "seconds": 0.1,
            "checksum": checksum("a" * 64, "m", "t", 1, 1, 0.1)}
    bad = json.dumps({**good, "key": "b" * 64}).replace(f'"{field}": {json.dumps(good[field])}',
                                                         f'"{field}": {literal}')
    log = tmp_path / "llm_responses.jsonl.gz"
    log.write_bytes(gzip.compress((json.dumps(good) + "\n" + bad + "\n").encode()))
    cache = LLMCache(tmp_path / "c.sqlite")
    with pytest.raises(LLMCacheError, match=rf"llm_responses\.jsonl\.gz: line 2: '{field}' must be a finite"):
        import_log(cache, log)
    assert len(cache) == 0  # nothing of a refused log is imported


# ------------------------------------------------------------------ checksums and merging
REPO = Path(__file__).resolve().parents[1]


def _records(path) -> list:
    return [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]


def test_every_row_carries_a_checksum_over_every_field(tmp_path):
    log = tmp_path / "log.jsonl.gz"
    export_log(fill(tmp_path / "a.sqlite").cache, log)
    recs = _records(log)
    fields = ("key", "model", "text", "prompt_tokens", "completion_tokens", "seconds")
    assert all(r["checksum"] == checksum(*(r[f] for f in fields)) and len(r["checksum"]) == 16 for r in recs)
    base = ("k", "m", "a", 1, 2, 0.5)
    for i, other in enumerate(("j", "n", "b", 2, 3, 0.25)):  # each field, changed alone, changes the checksum
        assert checksum(*base[:i], other, *base[i + 1:]) != checksum(*base)


def test_an_altered_cached_text_never_replaces_the_logged_row(tmp_path):
    """The old export overwrote the log with the cache's copy; now the log's row is kept and the conflict is an
    error naming the key, both when the log is imported and when the cache is exported."""
    llm = fill(tmp_path / "a.sqlite")
    log = tmp_path / "log.jsonl.gz"
    export_log(llm.cache, log)
    key = sorted(r[0] for r in llm.cache.rows())[2]
    good = {r[0]: r[2] for r in read_log(log)}[key]
    with sqlite3.connect(tmp_path / "a.sqlite") as con:
        con.execute("UPDATE calls SET text = 'silently altered' WHERE key = ?", (key,))
    with pytest.raises(LLMCacheError, match=f"1 row\\(s\\) fail their checksum \\(first key {key[:12]}"):
        import_log(llm.cache, log)
    llm.cache.put("e" * 64, "m", {}, "a new answer", 1, 1, 0.1)
    with pytest.raises(LLMCacheError, match=f"first key {key[:12]}.*every other row was exported"):
        export_log(llm.cache, log)
    logged = {r[0]: r[2] for r in read_log(log)}
    assert logged[key] == good and logged["e" * 64] == "a new answer"  # nothing lost, nothing replaced


def test_an_altered_log_row_is_refused_naming_file_and_line(tmp_path):
    log = tmp_path / "log.jsonl.gz"
    export_log(fill(tmp_path / "a.sqlite").cache, log)
    lines = gzip.decompress(log.read_bytes()).decode().splitlines()
    rec = json.loads(lines[3])
    rec["text"] = "edited by hand"
    lines[3] = json.dumps(rec, sort_keys=True)
    log.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(LLMCacheError, match=rf"log\.jsonl\.gz: line 4 \(key {rec['key']}\): the row does not "
                                            "match its checksum"):
        import_log(LLMCache(tmp_path / "fresh.sqlite"), log)


@pytest.mark.parametrize("profile", ["sample", "local"])
def test_committed_logs_import_and_reexport_with_checksums_and_the_same_rows(tmp_path, profile):
    """A committed log imports as it is; the normal export path writes the same rows and checksums in the same
    order: the same bytes, and a second export too."""
    committed = REPO / "results" / profile / LOG_NAME
    old = _records(committed)
    cache = LLMCache(tmp_path / "c.sqlite")
    assert import_log(cache, committed) == len(old)
    log = tmp_path / LOG_NAME
    log.write_bytes(committed.read_bytes())
    assert export_log(cache, log) == len(old)
    new = _records(log)
    def bare(rows):
        return [{k: v for k, v in r.items() if k != "checksum"} for r in rows]

    fields = ("key", "model", "text", "prompt_tokens", "completion_tokens", "seconds")
    assert bare(new) == bare(old) and new == old
    assert all(r["checksum"] == checksum(*(r[f] for f in fields)) for r in new)
    assert log.read_bytes() == committed.read_bytes()
    export_log(cache, log)
    assert log.read_bytes() == committed.read_bytes()


def _rows(seconds: dict) -> list:
    return [(key, "m", f"text {key}", 10, 2, secs) for key, secs in seconds.items()]


def test_log_stats_counts_new_answers_and_sets_paused_ones_apart():
    from kgir_lib.llm.response_log import log_stats

    rows = _rows({"a": 5.0, "b": 10.0, "c": 20.0, "d": 30.0, "e": 900.0})
    got = log_stats(rows, since_keys=["a"], paused_over=400)
    assert got == {"rows": 5, "new": 4, "seconds": 960.0, "paused": 1, "paused_seconds": 900.0,
                   "mean": 20.0, "median": 20.0}
    plain = log_stats(rows)
    assert (plain["new"], plain["paused"], plain["mean"], plain["median"]) == (5, 0, 193.0, 20.0)


def test_stats_command_reads_the_earlier_log_from_git(tmp_path, capsys):
    import subprocess

    from kgir_lib.llm.response_log import main as log_main, merge_into_log

    repo = tmp_path / "repo"
    log = repo / "results" / LOG_NAME

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    repo.mkdir()
    git("init", "-q")
    merge_into_log(_rows({"a": 4.0, "b": 6.0}), log)
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    merge_into_log(_rows({"c": 12.0, "d": 14.0, "e": 3600.0}), log)
    assert log_main(["stats", str(log), "--since", "HEAD", "--paused-over", "400"]) == 0
    out = capsys.readouterr().out
    assert "5 answers in the log; 3 not in the log at HEAD" in out
    assert "1 of them took over 400 s" in out and "13.0 s an answer on average, median 13.0 s" in out
    assert log_main(["stats", str(log), "--since", "no-such-rev"]) == 2
    assert "--since no-such-rev: not a git revision" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"", gzip.compress(b""), gzip.compress(b"\n\n")],
                         ids=["0 bytes", "empty gzip stream", "blank lines"])
def test_an_empty_log_is_an_error_naming_it_and_is_never_exported_over(tmp_path, content):
    """An emptied log used to import as 0 responses: the run then asked the server for everything and
    exported an empty log over it."""
    log = tmp_path / "llm_responses.jsonl.gz"
    log.write_bytes(content)
    with pytest.raises(LLMCacheError, match=r"llm_responses\.jsonl\.gz: holds no response .*git checkout"):
        import_log(LLMCache(tmp_path / "c.sqlite"), log)
    cache = LLMCache(tmp_path / "other.sqlite")
    cache.put("a" * 64, "m", {}, "one", 1, 1, 0.1)
    with pytest.raises(LLMCacheError, match="holds no response"):
        export_log(cache, log)
    assert log.read_bytes() == content  # left as it was, for the user to restore


def test_nothing_to_log_writes_no_log(tmp_path):
    log = tmp_path / "llm_responses.jsonl.gz"
    assert export_log(LLMCache(tmp_path / "empty.sqlite"), log) == 0 and not log.exists()


def test_the_runner_stops_on_an_empty_log_before_any_notebook(tmp_path, monkeypatch, capsys):
    """The runner reports the emptied log by name (exit 2) and runs nothing (its ``main`` in this process, in the
    environment and folder a child would have: a notebook that ran would show in the run folder all the same)."""
    import nbformat

    from kgir_lib import runner

    run = tmp_path / "results" / "ci"
    run.mkdir(parents=True)
    (run / LOG_NAME).write_bytes(b"")
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("profile = None"), nbformat.v4.new_code_cell("print('ran')")]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(nbs / "00_probe.ipynb"))
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGIR_FIGURES_DIR", str(tmp_path / "f"))
    monkeypatch.delenv("KGIR_PROFILE", raising=False)
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    capsys.readouterr()
    code = runner.main(["--profile", "ci", "--notebooks-dir", str(nbs)])
    out = capsys.readouterr()
    assert code == 2, out.out + out.err
    assert f"{run / LOG_NAME}: holds no response (0 bytes)" in out.err and "Traceback" not in out.err
    assert not (run / "notebooks" / "00_probe.ipynb").exists() and (run / LOG_NAME).read_bytes() == b""


def test_a_log_imported_whole_is_not_read_again_until_its_bytes_change(tmp_path, monkeypatch):
    """The cache records the SHA-256 of a log it imported; the same bytes are skipped, other bytes read and checked."""
    from kgir_lib.llm.response_log import format as fmt

    log = tmp_path / "log.jsonl.gz"
    export_log(fill(tmp_path / "a.sqlite").cache, log)
    fresh = LLMCache(tmp_path / "fresh.sqlite")
    assert import_log(fresh, log) == 6
    reads: list = []
    read = fmt.read_log
    monkeypatch.setattr(fmt, "read_log", lambda path, *a: reads.append(path) or read(path, *a))
    assert import_log(fresh, log) == 0 and reads == []  # the same bytes: not read
    more = LLM(ScriptedBackend(answer), LLMCache(tmp_path / "b.sqlite"), progress=False)
    more.generate([ChatRequest.chat("sys", "question 99", max_tokens=16)], stage="more")
    export_log(more.cache, log)  # the log gains a row: other bytes
    reads.clear()
    assert import_log(fresh, log) == 1 and reads == [log]
    damaged = bytearray(log.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF  # damaged mid-stream: other bytes again, read, and the damage is an error
    log.write_bytes(bytes(damaged))
    with pytest.raises(LLMCacheError, match="unreadable"):
        import_log(fresh, log)


def test_an_export_with_no_new_call_leaves_the_log_unread_and_unwritten(tmp_path, monkeypatch):
    """The cache records each export (the log's SHA-256, its own largest row id and rows): a second export with
    nothing new merges nothing; a new call, a log replaced by other bytes or an altered cache row is seen."""
    from kgir_lib.llm.response_log import format as fmt

    llm = fill(tmp_path / "a.sqlite")
    log = tmp_path / "log.jsonl.gz"
    assert export_log(llm.cache, log) == 6
    merges: list = []
    merge = fmt.merge_into_log
    monkeypatch.setattr(fmt, "merge_into_log", lambda rows, path, **kw: merges.append(path) or merge(rows, path, **kw))
    assert export_log(llm.cache, log) == 6 and merges == []  # nothing new: not merged, the same bytes
    llm.generate([ChatRequest.chat("sys", "question 99", max_tokens=16)], stage="more")
    assert export_log(llm.cache, log) == 7 and len(merges) == 1  # a new call is merged
    first = log.read_bytes()
    other = tmp_path / "other.jsonl.gz"
    export_log(fill(tmp_path / "c.sqlite").cache, other)
    log.write_bytes(other.read_bytes())  # the log replaced (say, checked out at an older commit)
    assert export_log(llm.cache, log) == 7 and merges.count(log) == 2 and log.read_bytes() == first
    with sqlite3.connect(tmp_path / "a.sqlite") as conn:  # a cached text altered in place: same row ids and rows
        conn.execute("UPDATE calls SET text = 'altered' WHERE rowid = 1")
    with pytest.raises(LLMCacheError, match="fail their checksum"):
        export_log(llm.cache, log)
