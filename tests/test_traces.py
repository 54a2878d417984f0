"""Trace files (kgir_lib.traces): atomic writes, meta written last, torn lines, surrogates; one reader for all."""
from __future__ import annotations

import json
import os

import pytest

from kgir_lib import traces
from kgir_lib.baselines.naive import NaiveRAG
from kgir_lib.eval import evaluate as ev
from kgir_lib.methods.base import MethodOutput
from kgir_lib.notebook.case import records as case_records
from kgir_lib.traces import read_traces, write_traces


def outputs(n: int, answer: str = "HP") -> list:
    return [MethodOutput(f"q{i}", answer, [f"p{i}"], trace={"method": "m"}) for i in range(n)]


def test_write_is_atomic_a_failure_before_the_rename_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "t" / "d.trace.jsonl"
    write_traces(outputs(3), path)
    old = path.read_bytes()

    def die(*args):  # the process dies between writing the temporary file and renaming it
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", die)
    with pytest.raises(KeyboardInterrupt):
        write_traces(outputs(5, "new"), path)
    assert path.read_bytes() == old
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_write_traces_removes_the_stale_meta_before_replacing_the_traces(tmp_path):
    path = tmp_path / "d.trace.jsonl"
    write_traces(outputs(2), path)
    traces.write_meta(path, {"qids": ["q0", "q1"], "fingerprint": "old"})
    assert traces.read_meta(path)["fingerprint"] == "old"
    write_traces(outputs(3), path)
    assert traces.read_meta(path) is None  # never a meta that vouches for other traces
    assert not traces.meta_path(path).exists()


def test_a_torn_last_line_is_recovered_with_a_warning(tmp_path):
    path = tmp_path / "d.trace.jsonl"
    write_traces(outputs(3), path)
    text = path.read_text()
    path.write_text(text[: len(text) - 15])  # killed while the old code wrote the last line
    with pytest.warns(UserWarning, match=r"d\.trace\.jsonl: dropped a torn last line 3"):
        recs = read_traces(path)
    assert [r["qid"] for r in recs] == ["q0", "q1"]


def test_a_bad_line_in_the_middle_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "d.trace.jsonl"
    lines = [json.dumps(o.to_json()) for o in outputs(3)]
    lines[1] = lines[1][:20]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(traces.TraceError, match=r"d\.trace\.jsonl: line 2 is not valid JSON"):
        read_traces(path)
    assert case_records.read_traces is read_traces  # the case study reads with the same function


def test_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "d.trace.jsonl"
    path.write_bytes(b'{"qid": "\xff"}\n')
    with pytest.raises(traces.TraceError, match=r"d\.trace\.jsonl: not UTF-8"):
        read_traces(path)


def test_lone_surrogates_are_replaced_counted_and_the_file_is_complete(tmp_path):
    """Old behaviour: UnicodeEncodeError half way, leaving an empty trace file."""
    path = tmp_path / "d.trace.jsonl"
    outs = outputs(2)
    outs[0].answer = "bad \ud800"
    outs[1].trace["note"] = ["x\udc80y"]
    before = traces.REPLACED["traces"]
    with pytest.warns(UserWarning, match="2 lone surrogate"):
        write_traces(outs, path)
    assert traces.REPLACED["traces"] == before + 2
    recs = read_traces(path)
    assert recs[0]["answer"] == "bad \ufffd" and recs[1]["trace"]["note"] == ["x\ufffdy"]


def test_unreadable_meta_means_run_again(tmp_path):
    path = tmp_path / "d.trace.jsonl"
    traces.meta_path(path).write_text('{"qids": [')
    with pytest.warns(UserWarning, match="unreadable"):
        assert traces.read_meta(path) is None


def test_run_method_resume_after_a_torn_trace_file_runs_again(tiny_workspace):
    """Old behaviour: a truncated trace file next to its old meta made resume=True raise a bare JSONDecodeError."""
    ws = tiny_workspace(lambda req: "Answer: HP")
    m = NaiveRAG()
    qs = ws.dataset.questions
    first = ev.run_method(ws, m, qs)
    path = ev.trace_path(ws.cfg, m, ws.dataset.name)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.warns(UserWarning, match="torn last line"):
        again = ev.run_method(ws, m, qs, resume=True)
    assert [(o.qid, o.answer) for o in again] == [(o.qid, o.answer) for o in first]
    assert read_traces(path)[0]["qid"] == "q1"  # rewritten whole
    assert ev.read_meta(path)["qids"] == ["q1"]


@pytest.mark.parametrize("line, problem", [
    ("[1, 2]", "a JSON list, not an object"),
    ('"text"', "a JSON str, not an object"),
    ('{"answer": "HP"}', "no 'qid'"),
    ('{"qid": null}', "'qid' is None"),
    ('{"qid": "q9", "ranked_pids": 5}', "field 'ranked_pids' is a int"),
    ('{"qid": "q9", "trace": []}', "field 'trace' is a list"),
])
def test_a_valid_json_line_that_is_not_a_record_names_file_and_line(tmp_path, line, problem):
    """Old behaviour: TypeError / KeyError from whoever read the record next."""
    path = tmp_path / "d.trace.jsonl"
    lines = [json.dumps(o.to_json()) for o in outputs(3)]
    lines[1] = line
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(traces.TraceError, match=rf"d\.trace\.jsonl: line 2 is not a trace record \({problem}\)"):
        ev.load_outputs(path)


def test_stale_temporary_files_are_removed_and_a_live_writers_are_kept(tmp_path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()  # a process that has exited
    (tmp_path / "traces" / "kgir").mkdir(parents=True)
    stale = [tmp_path / "traces" / "kgir" / f".hotpotqa.trace.jsonl.{dead}.tmp",
             tmp_path / f".llm_responses.jsonl.gz.{dead}.tmp", tmp_path / f".emb-abc.{dead}.tmp.npy",
             tmp_path / "phrases-m-abc.tmp.npy"]
    live = tmp_path / f".table.csv.{os.getpid()}.tmp"
    keep = [live, tmp_path / "notes.tmp.txt", tmp_path / "results.csv"]
    for path in stale + keep:
        path.write_text("x")
    assert sorted(traces.remove_stale_temporaries(tmp_path, tmp_path / "absent")) == sorted(stale)
    assert all(p.exists() for p in keep) and not any(p.exists() for p in stale)
