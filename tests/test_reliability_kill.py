"""Kill and resume: a run SIGKILLed during extraction, during a method run and during trace
writing, then resumed, ends with exactly the results of a run that was never interrupted.

The run (a worker subprocess with a scripted backend) extracts a KG for a tiny corpus, saves it, and
runs three methods through :func:`kgir_lib.eval.evaluate.run_method` (traces + meta). The worker kills itself
with SIGKILL at a chosen point, so each kill lands exactly where it is meant to (no timing races):
``extract:N`` on the N-th extraction call the backend receives, ``method:N`` on the N-th method call,
``trace:N`` in the N-th trace-file write, after the temporary file is written and before it is renamed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent('''
    import hashlib, json, os, signal, sys
    from kgir_lib import traces
    from kgir_lib.eval import evaluate as ev
    from kgir_lib.config import load_config
    from kgir_lib.data import Corpus, Dataset, Question
    from kgir_lib.kg import KnowledgeGraph
    from kgir_lib.kg.extract import update_kg
    from kgir_lib.kg.store import load_kg, save_kg
    from kgir_lib.llm import LLM, LLMCache, ScriptedBackend
    from kgir_lib.registry import build_method
    from kgir_lib.methods.base import Workspace
    from kgir_lib.retrieval import DenseIndex
    from conftest import BagOfWordsEncoder, make_passage

    results, kill_at, resume = sys.argv[1], sys.argv[2], sys.argv[3] == "resume"
    where, _, nth = kill_at.partition(":")
    seen = {"extract": 0, "method": 0, "trace": 0}

    def maybe_die(kind):
        seen[kind] += 1
        if kind == where and seen[kind] == int(nth):
            os.kill(os.getpid(), signal.SIGKILL)

    phase = {"now": "extract"}

    def script(req):
        text = req.messages[-1][1]
        if phase["now"] == "extract":  # the last user turn is the passage: title, newline, text
            maybe_die("extract")
            title = text.split("\\n", 1)[0]
            words = [w.strip(".,") for w in text.split() if w[:1].isupper() and w.strip(".,") != title]
            return "\\n".join(f"{title} ## relates to ## {w}" for w in words[-2:])
        maybe_die("method")
        h = hashlib.sha1(text.encode()).hexdigest()
        return f"Answer: {['Compaq', 'Hewlett-Packard', 'Lenovo'][int(h, 16) % 3]}"

    real_fsync = traces.os.fsync

    def fsync(fd):  # the moment after a trace file's temporary copy is written, before its rename
        if ".trace.jsonl." in os.readlink(f"/proc/self/fd/{fd}"):
            maybe_die("trace")
        real_fsync(fd)

    traces.os.fsync = fsync

    ps = [make_passage("Compaq", "Compaq was the largest supplier of personal computers in 1994."),
          make_passage("Hewlett-Packard", "In 2002 Hewlett-Packard merged with Compaq."),
          make_passage("IBM", "IBM sold its PC business to Lenovo in 2005."),
          make_passage("Lenovo", "Lenovo is a Chinese technology company."),
          make_passage("Dell", "Dell was founded by Michael Dell in 1984."),
          make_passage("Apple", "Apple released the Macintosh in 1984.")]
    qs = [Question("q1", "Which company merged in 2002 with the top PC maker of 1994?", ("Hewlett-Packard",),
                   (ps[0].pid, ps[1].pid), "tiny", 2),
          Question("q2", "Who bought the PC business of IBM?", ("Lenovo",), (ps[2].pid,), "tiny", 1),
          Question("q3", "Who founded Dell?", ("Michael Dell",), (ps[4].pid,), "tiny", 1)]
    ds = Dataset("tiny", qs, Corpus(ps))
    cfg = load_config("ci", results_dir=results, llm_backend="scripted", top_k=3)
    backend = ScriptedBackend(script)
    llm = LLM(backend, LLMCache(cfg.path("cache", "llm.sqlite")), progress=False)
    kg_dir = cfg.run_dir / "kg" / "tiny"
    kg = load_kg(kg_dir) if (kg_dir / "triples.parquet").exists() else KnowledgeGraph()
    update_kg(kg, llm, ps)
    save_kg(kg, kg_dir)
    phase["now"] = "method"
    ws = Workspace(cfg=cfg, dataset=ds, llm=llm, dense=DenseIndex(ps, BagOfWordsEncoder(), progress=False), kg=kg)
    out = {"kg": sorted(map(list, (tuple(vars(t).values()) for t in load_kg(kg_dir).triples)))}
    for key in ("naive_rag", "kg2rag", "ircot"):
        outputs = ev.run_method(ws, build_method(key), qs, resume=resume)
        out[key] = [[o.qid, o.answer, o.ranked_pids] for o in outputs]
    out["backend_calls"] = len(backend.seen)
    print(json.dumps(out))
''')


def run(tmp_path: Path, results: Path, kill_at: str = "none", resume: bool = True) -> subprocess.CompletedProcess:
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    env.pop("KGIR_RESULTS_DIR", None)
    return subprocess.run([sys.executable, str(worker), str(results), kill_at, "resume" if resume else "fresh"],
                          cwd=REPO, env=env, text=True, capture_output=True, timeout=120)


def killed(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == -signal.SIGKILL, f"expected a SIGKILL, got {proc.returncode}: {proc.stderr[-2000:]}"


def result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cache_rows(results: Path) -> int:
    import sqlite3

    path = results / "ci" / "cache" / "llm.sqlite"
    if not path.exists():
        return 0
    con = sqlite3.connect(str(path))
    try:
        return con.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    finally:
        con.close()


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_killed_runs_resume_to_the_results_of_an_uninterrupted_run(tmp_path):
    clean = result(run(tmp_path, tmp_path / "clean"))
    assert clean["kg"] and all(len(clean[k]) == 3 for k in ("naive_rag", "kg2rag", "ircot"))

    res = tmp_path / "killed"
    killed(run(tmp_path, res, "extract:3"))                 # during extraction: 2 calls finished
    assert cache_rows(res) == 2
    assert not (res / "ci" / "kg" / "tiny" / "triples.parquet").exists()

    killed(run(tmp_path, res, "method:2"))                  # during the first method run
    assert (res / "ci" / "kg" / "tiny" / "triples.parquet").exists()
    assert not (res / "ci" / "traces" / "naive_rag").exists() or \
        not list((res / "ci" / "traces" / "naive_rag").glob("*.trace.jsonl"))

    killed(run(tmp_path, res, "trace:1"))                   # while writing the first trace file
    trace_dir = res / "ci" / "traces" / "naive_rag"
    assert not (trace_dir / "tiny.trace.jsonl").exists()    # only a temporary file was written

    resumed = result(run(tmp_path, res))
    assert resumed == {**clean, "backend_calls": resumed["backend_calls"]}
    assert resumed["backend_calls"] < clean["backend_calls"]  # finished calls came from the cache

    # kill while traces are REwritten (resume off): the old trace file survives whole, its meta is gone
    old = (res / "ci" / "traces" / "kg2rag" / "tiny.trace.jsonl").read_bytes()
    killed(run(tmp_path, res, "trace:2", resume=False))
    kg2rag = res / "ci" / "traces" / "kg2rag" / "tiny.trace.jsonl"
    assert kg2rag.read_bytes() == old
    assert not kg2rag.with_suffix(".meta.json").exists()

    again = result(run(tmp_path, res))
    assert again == {**clean, "backend_calls": 0}            # everything from the cache, same results
