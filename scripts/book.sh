#!/usr/bin/env bash
# Build the suite as a book: the README as front page, the seven readers' copies of the notebooks with their stored
# outputs, the docs and the question explorer (every question of the local and sample runs, from their committed
# explorer files), as a static HTML site with full-text search, with no network and no model call. Sphinx with
# myst-nb and the book theme (the 'book' extra of pyproject.toml: .venv/bin/pip install -e ".[book]"); why, and what
# it writes, in docs/operations.md ("The book"). Writes only under _build/book/ (ignored; $KGIR_BOOK_DIR elsewhere):
# the staged sources in src/, the site in html/ (open _build/book/html/index.html).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${KGIR_PYTHON:-.venv/bin/python}
OUT=${KGIR_BOOK_DIR:-_build/book}
if ! "$PY" -c "import myst_nb, sphinx_book_theme" 2>/dev/null; then
  echo "book: Sphinx, myst-nb or the book theme is missing: .venv/bin/pip install -e \".[book]\"" >&2
  exit 1
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -m kgir_lib.book stage "$OUT/src"
rm -rf "$OUT/html"
# -W: a warning (a broken cross-reference, a missing file) fails the build; -j 2: two processes
"$PY" -m sphinx -q -W --keep-going -b html -j 2 "$OUT/src" "$OUT/html"
echo "book: $OUT/html/index.html"
