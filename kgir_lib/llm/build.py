"""Portable build flags for llama-cpp-python (run by ``scripts/setup.sh`` before kgir_lib is installed).

llama.cpp's default ``GGML_NATIVE=ON`` compiles for the build machine's CPU. On a CPU with AMX
(``amx_int8``/``amx_tile`` in ``/proc/cpuinfo``) the natively built ggml segfaults in the first
decode, and a native wheel cached by pip can land on a different CPU. So set-up always builds with
``GGML_NATIVE=OFF``, turns on each x86 extension the CPU reports (AVX-512 is ~1.5x faster where it
exists), and never turns on AMX. It also skips llama-cpp-python's multimodal library, which a
text-only run never loads, to shorten the build.

Stdlib only: ``python3 kgir_lib/llm/build.py cmake-args`` prints the flags, ``... tag`` a short hash
of them (the wheel-cache key), ``... flags`` the CPU flags they were chosen from.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

LLAMA_CPP_VERSION = "0.3.36"

# (cpuinfo flag, cmake option); an option is ON only if every listed flag is present.
_EXTENSIONS: list[tuple[tuple[str, ...], str]] = [
    (("avx",), "GGML_AVX"),
    (("avx2",), "GGML_AVX2"),
    (("fma",), "GGML_FMA"),
    (("f16c",), "GGML_F16C"),
    (("avx512f",), "GGML_AVX512"),
    (("avx512f", "avx512_vnni"), "GGML_AVX512_VNNI"),
    (("avx512f", "avx512_bf16"), "GGML_AVX512_BF16"),
]
_ALWAYS_OFF = ["GGML_NATIVE", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "GGML_CUDA", "GGML_METAL",
               "LLAVA_BUILD"]  # LLAVA_BUILD: the multimodal library (mtmd), which text-only use never loads


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The feature flags of the first CPU in ``/proc/cpuinfo`` (or of the text given)."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.exists() else ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cmake_args(flags: set[str]) -> list[str]:
    """CMake options for a portable build on a CPU with ``flags``: never native, never AMX."""
    args = [f"-D{opt}=OFF" for opt in _ALWAYS_OFF]
    for needed, opt in _EXTENSIONS:
        args.append(f"-D{opt}={'ON' if all(f in flags for f in needed) else 'OFF'}")
    return args


def build_tag(args: list[str]) -> str:
    """A short key for a wheel built with ``args`` (version + flags), so a wheel built for one CPU
    is never reused for a CPU that needs other flags."""
    text = LLAMA_CPP_VERSION + " " + " ".join(args)
    return f"{LLAMA_CPP_VERSION}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def main(argv: list[str]) -> int:
    flags = cpu_flags()
    args = cmake_args(flags)
    what = argv[1] if len(argv) > 1 else "cmake-args"
    if what == "cmake-args":
        print(" ".join(args))
    elif what == "tag":
        print(build_tag(args))
    elif what == "flags":
        interesting = sorted({f for needed, _ in _EXTENSIONS for f in needed} | {"amx_int8", "amx_tile", "amx_bf16"})
        print(" ".join(f for f in interesting if f in flags) or "(none of the x86 SIMD flags)")
    else:
        print(f"usage: {argv[0]} [cmake-args|tag|flags]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
