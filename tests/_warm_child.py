"""Children forked from one warm Python: ``python -m MODULE ARGS`` without paying the module's imports again.

A test that runs the same command many times as a child (to see everything the process writes on its standard
output and error, its exit code, and the files it leaves) pays about half a second of CPU a run for importing the
library. :class:`WarmPython` starts one Python that imports the modules once, then forks a child per run: the child
takes the run's environment, working folder and ``sys.argv`` and runs the module as ``__main__`` with its output on
its own file descriptors 1 and 2, as ``python -m`` would. The library reads its environment variables when asked, not
when imported, so a child sees the run's variables; a command whose imports themselves are under test (a fresh
clone's library, an import error) is run as a plain subprocess instead.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

SERVER = r"""
import json, os, runpy, sys, traceback
for name in sys.argv[1:]:
    __import__(name)
base = list(sys.path[1:])
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.environ.clear()
        os.environ.update(job["env"])
        os.chdir(job["cwd"])
        sys.argv, sys.path[:] = [job["module"], *job["args"]], [job["cwd"], *base]
        code = 0
        try:
            runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
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
    print(json.dumps(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])), flush=True)
"""


class WarmPython:
    """One Python that has imported ``preload``; :meth:`run` forks a child of it per command."""

    def __init__(self, *preload: str) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="kgir-warm-")
        self._proc = subprocess.Popen([sys.executable, "-c", SERVER, *preload], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        self._n = 0

    def run(self, module: str, args: list, env: dict, cwd: Path) -> subprocess.CompletedProcess:
        """What ``subprocess.run([sys.executable, "-m", module, *args], env=env, cwd=cwd, capture_output=True,
        text=True)`` gives, from a forked child."""
        self._n += 1
        out, err = (Path(self._folder.name) / f"{self._n}.{kind}" for kind in ("out", "err"))
        job = {"module": module, "args": [str(a) for a in args], "env": dict(env), "cwd": str(cwd),
               "out": str(out), "err": str(err)}
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(job) + "\n")
        self._proc.stdin.flush()
        answer = self._proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the warm Python ended (exit {self._proc.wait()})")
        return subprocess.CompletedProcess([sys.executable, "-m", module, *job["args"]], json.loads(answer),
                                           out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8"))

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=60)
        if self._proc.stdout:
            self._proc.stdout.close()
        self._folder.cleanup()
