"""A researcher's composition is a method of the suite like any registered one: the block of docs/api.md composes and
registers it with public names only, and it then runs through the suite (run_suite: the tables' rows under its
name), the paired tests against KGIR-RAG and the runner (every notebook's kernel builds it), with no edit to
kgir/variants.py or registry.py."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kgir_lib import registry, runner
from kgir_lib.config import PROJECT_ROOT
from kgir_lib.eval import evaluate as ev
from kgir_lib.eval.bootstrap import bootstrap_table, paired_scores
from kgir_lib.eval.claims import exact_test
from kgir_lib.kgir.loop import PAPER
from kgir_lib.kgir.variants import OwnKGIRRAG, compose

from _probe import probe_notebook

BLOCK = re.compile(r"<!-- composition block: tests/test_own_composition.py runs it -->\n```python\n(.*?)```", re.S)
KEY = "kgir_mine"


def composition_block() -> str:
    return BLOCK.search((PROJECT_ROOT / "docs" / "api.md").read_text(encoding="utf-8")).group(1)


@pytest.fixture
def restored():
    """The registry as it was, after the test."""
    before = (dict(registry.METHODS), dict(registry.LABELS))
    yield
    for table, saved in zip((registry.METHODS, registry.LABELS), before):
        table.clear()
        table.update(saved)


@pytest.fixture
def registered(restored):
    """The block of docs/api.md run here."""
    namespace: dict = {}
    exec(compile(composition_block(), "docs/api.md composition block", "exec"), namespace)
    return namespace


def test_the_block_is_short_and_uses_public_names_only():
    code = composition_block()
    assert len(code.strip().splitlines()) <= 12
    imports = [line for line in code.splitlines() if line.startswith(("import", "from"))]
    assert imports == ["from dataclasses import replace", "from kgir_lib import PAPER, compose, register"]


def script(req):
    if req.prompt == "kgir_ner":
        return "Entities: Compaq; 1994"
    if req.prompt == "kgir_rewrite":
        return "Rewritten question: Which company did Compaq merge with in 2002?"
    if req.prompt.startswith("kgir_reflect"):
        return "Missing: the merger partner" if "merged" in req.messages[-1][1] else "Answer: IBM"
    return "Answer: Hewlett-Packard"


def test_the_composition_runs_through_the_suite_the_tables_and_the_paired_tests(registered, tiny_workspace):
    mine = registered["MINE"]
    assert registry.LABELS[KEY] == mine.name and KEY in registry.METHODS
    method = registry.build_method(KEY, max_iterations=2)
    assert isinstance(method, OwnKGIRRAG) and method.name == mine.name and method.key == KEY
    registry.check_method_keys(["kgir", KEY])  # eval_methods takes it
    ws = tiny_workspace(script)
    searched = []
    inner = ws.dense.search

    def search(queries, k):
        searched.extend(queries)
        return inner(queries, k)
    ws.dense.search = search
    res = ev.run_suite(ws.cfg, ws.llm, ["tiny"], ["kgir", KEY], workspace_fn=lambda c, n, llm: ws, progress=False,
                       resume=False)
    assert list(res.scores["method"]) == ["KGIR-RAG", mine.name] and list(res.scores["key"]) == ["kgir", KEY]
    q = ws.dataset.questions[0].question
    assert f"{q} Which company did Compaq merge with in 2002?" in searched  # its own D'_t step ran
    [out] = ev.load_outputs(ev.trace_path(ws.cfg, method, "tiny"))
    assert out.trace["method"] == mine.name and out.trace["variant"] == KEY
    table = bootstrap_table(res.scores, reference="KGIR-RAG", metrics=("EM",), n_boot=10)
    assert not table.empty and set(table["baseline"]) == {mine.name} and set(table["n"]) == {1}
    a, b = paired_scores(res.scores, "KGIR-RAG", mine.name, "EM")
    assert exact_test(a, b, "EM")["test"] == "McNemar" and a.size == 1


def test_a_composition_is_refused_where_it_cannot_be_one(registered):
    with pytest.raises(ValueError, match="parameter 'key'"):
        compose("Mine", "Mine Too", PAPER, "described")
    with pytest.raises(ValueError, match="parameter 'description'"):
        compose("Mine", "kgir_other", PAPER, " ")
    with pytest.raises(ValueError, match="parameter 'steps'"):
        compose("Mine", "kgir_other", "the paper's", "described")
    with pytest.raises(ValueError, match="the key 'kgir' is taken"):
        registry.register(compose("Mine", "kgir", PAPER, "described"))
    with pytest.raises(ValueError, match="register: a composition"):
        registry.register(PAPER)
    again = compose(registered["MINE"].name, KEY, PAPER, registered["MINE"].description)
    assert registry.register(again) == KEY and registry.build_method(KEY).spec is again  # the file read again
    with pytest.raises(ValueError, match="no file"):
        registry.load_composition("nowhere/mine.py:MINE")
    with pytest.raises(ValueError, match="defines no NOTHING"):
        registry.load_composition("kgir_lib.kgir.loop:NOTHING")
    with pytest.raises(ValueError, match="PAPER is a Steps, not a composition"):
        registry.load_composition("kgir_lib.kgir.loop:PAPER")


def test_the_resume_fingerprint_reads_the_composition_s_steps(registered):
    """Traces are reused only for the same composition: its steps in words that stay the same from one process to
    the next (no memory address), a changed step changes them."""
    mine = registered["MINE"]
    words = registry.build_method(KEY).params()["composition"]
    assert words == OwnKGIRRAG(composition=mine).params()["composition"] and "0x" not in json.dumps(words)
    assert words[:3] == [KEY, mine.name, mine.description]
    assert "AlsoTheQuestion" in json.dumps(words) and "ReflectionPassages" in json.dumps(words)
    other = compose(mine.name, KEY, PAPER, mine.description)
    assert OwnKGIRRAG(composition=other).params()["composition"] != words


def _probe(folder: Path) -> Path:
    body = ("import json\nfrom kgir_lib.config import load_config\nfrom kgir_lib.registry import build_method\n"
            "from kgir_lib.notebook.opening import config_params\n"
            "cfg = load_config(profile, **config_params(globals()))\n"
            "labels = [build_method(k).name for k in cfg.eval_methods]\n"
            "cfg.path('probe.json').write_text(json.dumps(labels))\n")
    return probe_notebook(folder, body, "profile = None\neval_methods = None")


@pytest.mark.slow  # starts a notebook kernel
def test_the_runner_hands_the_composition_to_every_notebook(tmp_path, restored):
    (tmp_path / "mine.py").write_text(composition_block(), encoding="utf-8")
    nbs = _probe(tmp_path / "nbs")
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs")}
    env.pop("KGIR_PROFILE", None)
    env.pop(registry.COMPOSITIONS_ENV, None)
    args = [sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs),
            "-p", "eval_methods", f"[kgir, {KEY}]"]
    refused = subprocess.run(args, cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    assert refused.returncode == 2 and f"'{KEY}'" in refused.stderr  # unknown without its composition
    done = subprocess.run([*args, "--composition", "mine.py:MINE"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    spec = f"{(tmp_path / 'mine.py').resolve()}:MINE"
    run_dir = tmp_path / "results" / runner.scratch_name("ci", {"eval_methods": ["kgir", KEY],
                                                                "composition": [spec]})
    name = registry.load_composition(spec).name
    assert json.loads((run_dir / "probe.json").read_text()) == ["KGIR-RAG", name]
    bad = subprocess.run([*args, "--composition", "mine.py:NOPE", "--validate-only"], cwd=tmp_path, env=env,
                         text=True, capture_output=True, timeout=300)
    assert bad.returncode == 2 and "--composition" in bad.stderr and "defines no NOPE" in bad.stderr
