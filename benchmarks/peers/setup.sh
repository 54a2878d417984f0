#!/usr/bin/env bash
# One isolated virtualenv per peer system, so the main stack's pins never change.
#   hipporag  ->  benchmarks/peers/.venv-hipporag   (upstream HippoRAG 2, PyPI hipporag==2.0.0a4)
#   graphrag  ->  benchmarks/peers/.venv-graphrag   (Microsoft GraphRAG, PyPI graphrag==3.3.0; its whole
#                 dependency set installs on CPU, pinned in graphrag-requirements.txt; used by graphrag_cost.py)
# hipporag and gritlm go in with --no-deps (their pins: torch 2.5.1 CUDA, vllm 0.6.6); the rest from
# hipporag-requirements.txt. vllm is not installed: stubs/vllm (put on the path by the driver) gives the two
# names HippoRAG.py imports at load time; the cross-check never calls them. README.md says what was left out.
# Usage: bash benchmarks/peers/setup.sh [hipporag|graphrag|--help]      Knobs: PYTHON (default python3).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY=${PYTHON:-python3}
peer=${1:-hipporag}
case "$peer" in
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  hipporag)
    VENV="$HERE/.venv-hipporag"
    stamp="$VENV/.peer-setup-$(cat "$HERE/setup.sh" "$HERE/hipporag-requirements.txt" | sha1sum | cut -c1-10)"
    if [ -f "$stamp" ] && PYTHONPATH="$HERE/stubs" "$VENV/bin/python" -c "from hipporag import HippoRAG" 2>/dev/null; then
      echo "peers: $VENV is up to date"; exit 0
    fi
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    pip="$VENV/bin/python -m pip"
    echo "peers: installing the hipporag environment into $VENV"
    $pip install -q -r "$HERE/hipporag-requirements.txt"
    $pip install -q --no-deps hipporag==2.0.0a4 gritlm==1.0.2
    PYTHONPATH="$HERE/stubs" "$VENV/bin/python" -c "from hipporag import HippoRAG; print('peers: from hipporag import HippoRAG: ok')"
    rm -f "$VENV"/.peer-setup-*
    touch "$stamp"
    ;;
  graphrag)
    VENV="$HERE/.venv-graphrag"
    stamp="$VENV/.peer-setup-$(cat "$HERE/setup.sh" "$HERE/graphrag-requirements.txt" | sha1sum | cut -c1-10)"
    if [ -f "$stamp" ] && LITELLM_LOCAL_MODEL_COST_MAP=True "$VENV/bin/python" -c "import graphrag.api" 2>/dev/null; then
      echo "peers: $VENV is up to date"; exit 0
    fi
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    pip="$VENV/bin/python -m pip"
    echo "peers: installing the graphrag environment into $VENV"
    $pip install -q -r "$HERE/graphrag-requirements.txt" graphrag==3.3.0
    LITELLM_LOCAL_MODEL_COST_MAP=True "$VENV/bin/python" -c "import importlib.metadata as m, graphrag.api; print('peers: graphrag', m.version('graphrag'), 'imports: ok')"
    rm -f "$VENV"/.peer-setup-*
    touch "$stamp"
    ;;
  *) echo "unknown peer '$peer' (known: hipporag, graphrag)" >&2; exit 2 ;;
esac
