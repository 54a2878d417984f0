"""Build ``notebooks/NN_name.ipynb`` from its diffable source ``notebooks/src/NN_name.py``.

Source format (percent cells, as jupytext writes them):

    # %% [markdown]
    # # Title
    # Some *markdown*.

    # %% tags=["parameters"]
    profile = None

    # %%
    from kgir_lib import ...

If the main job has executed the notebook for the ``sample`` profile
(``results/sample/notebooks/NN_name.ipynb``), each built cell gets the outputs
of the executed cell with the same source, so the committed notebook shows a
reader the sample run without running anything.

Usage: ``python scripts/build_notebooks.py [NN_name ...] [--profile sample] [--no-outputs]``
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "notebooks" / "src"
OUT = ROOT / "notebooks"
_HEADER = re.compile(r"^# %%(?P<md>\s*\[markdown\])?(?:\s+tags=(?P<tags>\[.*\]))?\s*$")


def parse_source(text: str) -> list:
    cells, kind, tags, lines = [], None, [], []

    def flush():
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", ln) for ln in body.splitlines())
            cell = nbformat.v4.new_markdown_cell(body)
        else:
            cell = nbformat.v4.new_code_cell(body)
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)

    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            flush()
            kind = "markdown" if m.group("md") else "code"
            tags = json.loads(m.group("tags")) if m.group("tags") else []
            lines = []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def build(name: str, profile: str, with_outputs: bool) -> Path:
    src = SRC / f"{name}.py"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = parse_source(src.read_text(encoding="utf-8"))
    executed = ROOT / "results" / profile / "notebooks" / f"{name}.ipynb"
    if with_outputs and executed.exists():
        done = nbformat.read(executed, as_version=4)
        by_source = {}
        for c in done.cells:
            if c.cell_type == "code" and "injected-parameters" not in c.metadata.get("tags", []):
                by_source.setdefault(c.source, c)
        for c in nb.cells:
            if c.cell_type == "code" and c.source in by_source:
                c.outputs = by_source[c.source].get("outputs", [])
                c.execution_count = by_source[c.source].get("execution_count")
    for i, c in enumerate(nb.cells):
        c["id"] = f"{name[:2]}-{i:03d}"
    path = OUT / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--profile", default="sample")
    ap.add_argument("--no-outputs", action="store_true")
    args = ap.parse_args(argv)
    names = args.names or sorted(p.stem for p in SRC.glob("[0-9][0-9]_*.py"))
    for name in names:
        print(build(name, args.profile, not args.no_outputs).relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
