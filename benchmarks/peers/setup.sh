#!/usr/bin/env bash
# One isolated virtualenv per peer system, so the main stack's pins never change.
#   hipporag  ->  benchmarks/peers/.venv-hipporag   (upstream HippoRAG 2, PyPI hipporag==2.0.0a4)
#   graphrag  ->  benchmarks/peers/.venv-graphrag   (Microsoft GraphRAG, PyPI graphrag==3.3.0; its whole
#                 dependency set installs on CPU, pinned in graphrag-requirements.txt; used by graphrag_cost.py)
#   kg2rag    ->  benchmarks/peers/.venv-kg2rag     (the authors' KG²RAG code, GitHub nju-websoft/KG2RAG at the
#                 pinned commit below, checked out into .venv-kg2rag/src/KG2RAG; its code/requirements.txt pins
#                 where they install, else the nearest: kg2rag-requirements.txt; used by kg2rag_crosscheck.sh)
#   flashrag  ->  benchmarks/peers/.venv-flashrag   (FlashRAG, PyPI flashrag-dev==0.1.2, --no-deps, its dependencies
#                 from flashrag-requirements.txt; tiktoken's o200k_base and cl100k_base files, which tiktoken would
#                 download at first use, are taken from the litellm 1.73.1 wheel into .venv-flashrag/tiktoken_cache;
#                 used by flashrag_crosscheck.sh)
# hipporag and gritlm go in with --no-deps (their pins: torch 2.5.1 CUDA, vllm 0.6.6); the rest from
# hipporag-requirements.txt. vllm is not installed: stubs/vllm (put on the path by the driver) gives the two
# names HippoRAG.py imports at load time; the cross-check never calls them. README.md says what was left out.
# KG²RAG's code is cloned from GitHub at the pinned commit; with no internet, KG2RAG_CHECKOUT names a local clone
# (a work tree or a bare repository holding that commit) to clone from instead. The project holds none of it.
# Usage: bash benchmarks/peers/setup.sh [hipporag|graphrag|kg2rag|flashrag] [--help]
# Knobs: PYTHON (default python3), KG2RAG_CHECKOUT (default: https://github.com/nju-websoft/KG2RAG).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY=${PYTHON:-python3}
for arg in "$@"; do  # --help anywhere (setup.sh kg2rag --help): print this header, install nothing
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
  kg2rag)
    VENV="$HERE/.venv-kg2rag"
    COMMIT=7d626c77b7af30b55aa3f960cde755b9549a0616   # nju-websoft/KG2RAG main, "Create requirements.txt"
    SRC="$VENV/src/KG2RAG"
    import_check="import sys; sys.path.insert(0, '$SRC/code'); from util.kg_post_processor import KGRetrievePostProcessor, GraphFilterPostProcessor, NaivePostprocessor"
    stamp="$VENV/.peer-setup-$(cat "$HERE/setup.sh" "$HERE/kg2rag-requirements.txt" | sha1sum | cut -c1-10)"
    if [ -f "$stamp" ] && [ "$(git -C "$SRC" rev-parse HEAD 2>/dev/null)" = "$COMMIT" ] \
        && "$VENV/bin/python" -c "$import_check" 2>/dev/null; then
      echo "peers: $VENV is up to date (KG2RAG at ${COMMIT:0:7})"; exit 0
    fi
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    pip="$VENV/bin/python -m pip"
    echo "peers: installing the kg2rag environment into $VENV"
    $pip install -q -r "$HERE/kg2rag-requirements.txt"
    # upstream's pins that its own llama_index 0.12.20 excludes (networkx>=3.0, tqdm>=4.66.1): installed over it
    $pip install -q --no-deps networkx==2.5.1 decorator==4.4.2 tqdm==4.64.0
    origin="${KG2RAG_CHECKOUT:-https://github.com/nju-websoft/KG2RAG}"
    if [ "$(git -C "$SRC" rev-parse HEAD 2>/dev/null)" != "$COMMIT" ]; then
      rm -rf "$SRC"
      echo "peers: cloning KG2RAG from $origin at ${COMMIT:0:7}"
      git clone -q --no-checkout "$origin" "$SRC" || {
        echo "peers: cannot clone $origin (no internet? set KG2RAG_CHECKOUT to a local clone)" >&2; exit 1; }
      # only code/ and the top-level files: data/ (hundreds of MB) is not used
      git -C "$SRC" config core.sparseCheckout true
      git -C "$SRC" config core.sparseCheckoutCone true
      printf '/*\n!/*/\n/code/\n' > "$SRC/.git/info/sparse-checkout"
      git -C "$SRC" -c advice.detachedHead=false checkout -q "$COMMIT" || {
        echo "peers: $origin does not hold commit $COMMIT" >&2; exit 1; }
    fi
    "$VENV/bin/python" -c "$import_check; import networkx, llama_index.core, FlagEmbedding; print('peers: KG2RAG', '${COMMIT:0:7}', 'post-processors import: ok (networkx', networkx.__version__ + ')')"
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
  *) echo "unknown peer '$peer' (known: hipporag, graphrag, kg2rag, flashrag)" >&2; exit 2 ;;
esac
