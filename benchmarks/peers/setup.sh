#!/usr/bin/env bash
# One isolated virtualenv per peer system, so the main stack's pins never change.
#   hipporag  ->  benchmarks/peers/.venv-hipporag   (upstream HippoRAG 2, PyPI hipporag==2.0.0a4)
#   graphrag  ->  benchmarks/peers/.venv-graphrag   (Microsoft GraphRAG, PyPI graphrag==3.3.0; its whole
#                 dependency set installs on CPU, pinned in graphrag-requirements.txt; used by graphrag_cost.py)
#   flashrag  ->  benchmarks/peers/.venv-flashrag   (FlashRAG, PyPI flashrag-dev==0.1.2, --no-deps, its dependencies
#                 from flashrag-requirements.txt; tiktoken's o200k_base and cl100k_base files, which tiktoken would
#                 download at first use, are taken from the litellm 1.73.1 wheel into .venv-flashrag/tiktoken_cache;
#                 used by flashrag_crosscheck.sh)
# hipporag and gritlm go in with --no-deps (their pins: torch 2.5.1 CUDA, vllm 0.6.6); the rest from
# hipporag-requirements.txt. vllm is not installed: stubs/vllm (put on the path by the driver) gives the two
# names HippoRAG.py imports at load time; the cross-check never calls them. README.md says what was left out.
# Usage: bash benchmarks/peers/setup.sh [hipporag|graphrag|flashrag] [--help]      Knobs: PYTHON (default python3).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY=${PYTHON:-python3}
for arg in "$@"; do  # --help anywhere (setup.sh flashrag --help): print this header, install nothing
  case "$arg" in -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
done
peer=${1:-hipporag}
case "$peer" in
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
  flashrag)
    VENV="$HERE/.venv-flashrag"
    stamp="$VENV/.peer-setup-$(cat "$HERE/setup.sh" "$HERE/flashrag-requirements.txt" | sha1sum | cut -c1-10)"
    check() {
      TIKTOKEN_CACHE_DIR="$VENV/tiktoken_cache" HF_HUB_OFFLINE=1 "$VENV/bin/python" -c "
import tiktoken
from flashrag.pipeline import IRCOTPipeline, IterativePipeline
from flashrag.generator import OpenaiGenerator
from flashrag.retriever import BaseRetriever
print('peers: flashrag pipelines import: ok; tiktoken', tiktoken.encoding_for_model('gpt-4o').name, 'offline: ok')"
    }
    if [ -f "$stamp" ] && check >/dev/null 2>&1; then
      echo "peers: $VENV is up to date"; exit 0
    fi
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    pip="$VENV/bin/python -m pip"
    echo "peers: installing the flashrag environment into $VENV"
    $pip install -q -r "$HERE/flashrag-requirements.txt"
    $pip install -q --no-deps flashrag-dev==0.1.2
    tmp="$(mktemp -d)"
    $pip download -q --no-deps litellm==1.73.1 -d "$tmp"
    "$VENV/bin/python" - "$tmp" "$VENV/tiktoken_cache" <<'PYEOF'
import hashlib, pathlib, sys, zipfile
# tiktoken caches a file under the SHA-1 of its URL; the litellm wheel ships them under those names
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
dst.mkdir(parents=True, exist_ok=True)
wheel = next(src.glob("litellm-*.whl"))
with zipfile.ZipFile(wheel) as z:
    for enc in ("o200k_base", "cl100k_base"):
        name = hashlib.sha1(f"https://openaipublic.blob.core.windows.net/encodings/{enc}.tiktoken".encode()).hexdigest()
        (dst / name).write_bytes(z.read(f"litellm/litellm_core_utils/tokenizers/{name}"))
        print(f"peers: tiktoken {enc} -> {dst / name}")
PYEOF
    rm -rf "$tmp"
    check
    rm -f "$VENV"/.peer-setup-*
    touch "$stamp"
    ;;
  *) echo "unknown peer '$peer' (known: hipporag, graphrag, flashrag)" >&2; exit 2 ;;
esac
