"""Every script under ``benchmarks/`` still runs: a script whose import moved (``kgir_lib.evaluate`` became
``kgir_lib.eval.evaluate``) used to fail only when someone ran it, long after the move.

Scripts are found by globbing, so a new one is covered the day it lands:

- every ``.py`` file compiles, and every name it imports from ``kgir_lib`` (at the top or inside a function)
  exists, as does every attribute it reads off an imported ``kgir_lib`` module (``li.open_index``) and every name
  it imports from a sibling script;
- a ``.py`` file with a ``__main__`` block answers ``--help`` with exit code 0 in this environment, unless one of
  its top-level imports is missing here (a peer script that needs the peer environment of
  ``benchmarks/peers/setup.sh``): then the two checks above are all that can run. A file without one is run
  as a module (its top-level code, no ``main``);
- every ``.sh`` file parses (``bash -n``) and answers ``--help`` with exit code 0.

The scripts run in parallel, those of this environment forked from one process that has imported pandas (``runs``).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import pytest

from conftest import PEER_SETUP

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
# The peer environment a peer script runs in (``benchmarks/peers/setup.sh <peer>``), by the start of its name
PEER_OF_PREFIX = {"flashrag_": "flashrag", "hipporag2_": "hipporag", "kg2rag_": "kg2rag", "graphrag_": "graphrag"}
def _ours(p: Path) -> bool:
    """Not inside a virtualenv (``.venv``, a peer's ``.venv-<peer>``) or a peer's work folder."""
    return not any(part.startswith(".venv") or part == ".work" for part in p.parts)


PY_FILES = sorted(p for p in BENCH.rglob("*.py") if _ours(p))
SH_FILES = sorted(p for p in BENCH.rglob("*.sh") if _ours(p))
TIMEOUT_S = 120


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _has_main(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)


def _top_level_modules(tree: ast.Module) -> list:
    """The absolute modules a file imports at its top level (not inside a function or a try)."""
    out = []
    for n in tree.body:
        if isinstance(n, ast.Import):
            out += [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            out.append(n.module)
    return out


def _siblings(path: Path) -> dict:
    return {p.stem: p for p in path.parent.glob("*.py")}


def missing_here(path: Path) -> list:
    """Top-level imports of ``path`` that this environment cannot resolve (kgir_lib and sibling scripts count
    as present): a peer script's, which run in the peer environment only."""
    out = []
    for mod in _top_level_modules(_tree(path)):
        top = mod.split(".")[0]
        if top == "kgir_lib" or top in _siblings(path) or top == "__future__":
            continue
        if importlib.util.find_spec(top) is None:
            out.append(top)
    return out


def _peer(path: Path) -> Optional[str]:
    return next((name for prefix, name in PEER_OF_PREFIX.items() if path.name.startswith(prefix)), None)


def peer_setup(path: Path) -> str:
    """The command that makes the peer environment a peer script runs in (the tests' summary names it); once it
    has run, the script's ``--help`` runs in that environment (:func:`peer_python`)."""
    return f"{PEER_SETUP} {_peer(path)}" if _peer(path) else PEER_SETUP


def peer_python(path: Path) -> Optional[Path]:
    """The interpreter of the peer environment a peer script runs in (None when its name names no peer)."""
    return BENCH / "peers" / f".venv-{_peer(path)}" / "bin" / "python" if _peer(path) else None


def test_a_peer_scripts_skip_names_the_command_that_makes_its_environment():
    peers = BENCH / "peers"
    assert peer_setup(peers / "flashrag_pipelines.py") == "bash benchmarks/peers/setup.sh flashrag"
    assert peer_setup(peers / "hipporag2_upstream.py") == "bash benchmarks/peers/setup.sh hipporag"
    assert peer_setup(peers / "peer_run.py") == "bash benchmarks/peers/setup.sh"
    assert peer_python(peers / "flashrag_pipelines.py") == peers / ".venv-flashrag" / "bin" / "python"
    setup = (peers / "setup.sh").read_text()
    assert all(f"  {name})" in setup for name in PEER_OF_PREFIX.values())  # each a peer set-up.sh knows


def _defined_names(path: Path) -> set:
    """The names a sibling script defines or imports at its top level."""
    names: set = set()
    for n in _tree(path).body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names |= {t.id for tgt in targets for t in ast.walk(tgt) if isinstance(t, ast.Name)}
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return names


def stale_imports(path: Path) -> list:
    """Every import of ``path`` from ``kgir_lib`` or a sibling script that names something that does not exist,
    and every attribute read off an imported ``kgir_lib`` module that it lacks; ``[]`` when all resolve."""
    tree, problems, modules = _tree(path), [], {}
    siblings = _siblings(path)
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            top = n.module.split(".")[0]
            if top == "kgir_lib":
                try:
                    mod = importlib.import_module(n.module)
                except ImportError as exc:
                    problems.append(f"line {n.lineno}: from {n.module} import ...: {exc}")
                    continue
                for a in n.names:
                    if hasattr(mod, a.name):
                        obj = getattr(mod, a.name)
                    else:
                        try:
                            obj = importlib.import_module(f"{n.module}.{a.name}")
                        except ImportError:
                            problems.append(f"line {n.lineno}: {n.module} has no {a.name!r}")
                            continue
                    if type(obj).__name__ == "module":
                        modules[a.asname or a.name] = obj
            elif n.module in siblings and siblings[n.module] != path:
                known = _defined_names(siblings[n.module])
                problems += [f"line {n.lineno}: {n.module} (benchmarks script) has no {a.name!r}"
                             for a in n.names if a.name not in known]
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name.split(".")[0] == "kgir_lib":
                    try:
                        mod = importlib.import_module(a.name)
                    except ImportError as exc:
                        problems.append(f"line {n.lineno}: import {a.name}: {exc}")
                        continue
                    if a.asname:
                        modules[a.asname] = mod
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules:
            if not hasattr(modules[n.value.id], n.attr):
                problems.append(f"line {n.lineno}: {modules[n.value.id].__name__} has no {n.attr!r}")
    return problems


def handles_help(path: Path) -> bool:
    """Whether ``path`` reads ``--help`` (a shell script that names it, a Python script with argparse): one that
    does not would run for real when the test asks it for help (the cross-check would build its peer
    environment), so it fails without being run."""
    text = path.read_text(encoding="utf-8")
    return "--help" in text if path.suffix == ".sh" else ("--help" in text or "ArgumentParser" in text)


def _command(path: Path) -> Optional[list]:
    """How to run ``path`` here: ``--help`` for a script, its top-level code for a module; None for a peer script
    or a script that does not read ``--help``."""
    if not handles_help(path) and (path.suffix == ".sh" or _has_main(_tree(path))):
        return None
    if path.suffix == ".sh":
        return ["bash", str(path), "--help"]
    if missing_here(path):  # a peer script: run in its peer environment, when that has been made
        peer_py = peer_python(path)
        return [str(peer_py), str(path), "--help"] if peer_py and peer_py.exists() and _has_main(_tree(path)) else None
    if _has_main(_tree(path)):
        return [sys.executable, str(path), "--help"]
    return [sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1], run_name='benchmark_check')",
            str(path)]


# The scripts of this environment run in children forked from one Python that has imported pandas (and numpy) and the
# library's modules most of them import at their top (config, data, llm, pipeline, report): each child starts as
# ``python SCRIPT --help`` would (``sys.argv``, the script's folder first on ``sys.path``, run as ``__main__``, its exit
# code and output its own), without importing them again (pandas about 0.7 s of CPU a script, 10 s for all; the
# library's modules another 2 s for all). Another interpreter (a peer's) and shell scripts run as subprocesses.
FORKED = r"""
import json, os, runpy, sys, traceback
import numpy, pandas  # noqa: F401  (imported once, for every child)
import kgir_lib.config, kgir_lib.data, kgir_lib.llm, kgir_lib.pipeline, kgir_lib.report  # noqa: F401,E401
base = list(sys.path[1:])
codes = {}
for path, argv, run_name, out, err in json.load(sys.stdin):
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        sys.argv, sys.path[:] = [path, *argv], [os.path.dirname(path), *base]
        code = 0
        try:
            runpy.run_path(path, run_name=run_name)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    codes[path] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(codes))
"""


def _forked(cmd: list) -> Optional[tuple]:
    """``(script, argv, run_name)`` when ``cmd`` runs a script in this interpreter (:data:`FORKED` runs it), else
    None."""
    if cmd[0] != sys.executable:
        return None
    if cmd[1] == "-c":
        return cmd[3], [], "benchmark_check"
    return cmd[1], cmd[2:], "__main__"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """``{file: CompletedProcess}`` of every runnable benchmark file's command: this interpreter's in children of one
    process (:data:`FORKED`), the others as subprocesses, in parallel."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "KGIR_PYTHON": sys.executable}
    jobs = {p: c for p in [*PY_FILES, *SH_FILES] if (c := _command(p)) is not None}
    folder = tmp_path_factory.mktemp("help")
    forked = {p: (*_forked(c), str(folder / f"{i}.out"), str(folder / f"{i}.err"))
              for i, (p, c) in enumerate(jobs.items()) if _forked(c)}

    def run(item):
        path, cmd = item
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, stdin=subprocess.PIPE if path is None else None)
        try:
            out, err = proc.communicate(json.dumps(list(forked.values())) if path is None else None,
                                        timeout=TIMEOUT_S * (1 if path else 4))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the script's children too (a server, an installer)
            out, err = proc.communicate()
            err += f"\n(killed after {TIMEOUT_S} s)"
        return path, subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    items = [(None, [sys.executable, "-c", FORKED])] + [(p, c) for p, c in jobs.items() if p not in forked]
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        done = dict(pool.map(run, items))
    server = done.pop(None)
    assert server.returncode == 0, server.stderr[-2000:]
    codes = json.loads(server.stdout.splitlines()[-1])
    for path, (script, _, _, out, err) in forked.items():
        done[path] = subprocess.CompletedProcess(jobs[path], codes[script], Path(out).read_text(encoding="utf-8"),
                                                 Path(err).read_text(encoding="utf-8"))
    return done


def test_the_glob_finds_the_scripts():
    names = {_rel(p) for p in [*PY_FILES, *SH_FILES]}
    assert {"benchmarks/bench_reader.py", "benchmarks/peers/hipporag2_compare.py",
            "benchmarks/peers/hipporag2_crosscheck.sh"} <= names


@pytest.mark.parametrize("path", PY_FILES, ids=_rel)
def test_every_python_file_compiles_and_its_imports_exist(path):
    compile(path.read_text(encoding="utf-8"), str(path), "exec")
    assert stale_imports(path) == [], _rel(path)


@pytest.mark.parametrize("path", [*PY_FILES, *SH_FILES], ids=_rel)
def test_every_script_answers_help(path, runs):
    if path.suffix == ".sh":
        parsed = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert parsed.returncode == 0, parsed.stderr
    if path.suffix == ".sh" or _has_main(_tree(path)):
        assert handles_help(path), f"{_rel(path)} does not read --help (not run: it would run for real)"
    if path not in runs:
        pytest.skip(f"{_rel(path)} needs the peer environment (missing here: "
                    f"{', '.join(sorted(set(missing_here(path))))}; {peer_setup(path)} makes it); its syntax and "
                    f"kgir_lib imports are checked above")
    out = runs[path]
    assert out.returncode == 0, f"{_rel(path)}: exit {out.returncode}\n{out.stderr[-2000:]}"
    assert "Traceback" not in out.stderr
    if path.suffix == ".sh" or _has_main(_tree(path)):
        assert out.stdout.strip(), f"{_rel(path)} --help printed nothing"


def test_the_import_check_catches_a_moved_module(tmp_path):
    """The check fails on the import that broke hipporag2_compare.py (kgir_lib.evaluate moved to kgir_lib.eval),
    on a name a module lacks, and on an attribute read off an imported module."""
    script = tmp_path / "bench_moved.py"
    script.write_text("def main():\n    from kgir_lib.evaluate import load_outputs\n"
                      "    from kgir_lib.eval.evaluate import no_such_name\n"
                      "    from kgir_lib.eval import metrics as m\n    return m.no_such_metric\n")
    problems = stale_imports(script)
    assert len(problems) == 3 and "kgir_lib.evaluate" in problems[0], problems
    assert "no_such_name" in problems[1] and "no_such_metric" in problems[2]
