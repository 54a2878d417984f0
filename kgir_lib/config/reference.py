"""Every Config field with its help, type, default and allowed values, from the one place each is declared:
the field's metadata (:func:`~kgir_lib.config.fields.knob`), its annotation, its default, and the tables of
allowed values (:data:`~kgir_lib.config.fields.CHOICES`, :data:`~kgir_lib.config.fields.RANGES`).

``python -m kgir_lib.config`` prints them (``--markdown``: the table docs/operations.md renders, through
:mod:`kgir_lib.rendered`).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import MISSING, fields
from typing import Optional

from .fields import CHOICES, Config, _field_kind, field_range


def _default(f) -> object:
    return f.default_factory() if f.default is MISSING else f.default


def field_rows() -> list:
    """One dict a field, in declaration order: ``name``, ``type`` (``"or null"`` when it may be null),
    ``default`` (as a profile writes it: JSON), ``allowed`` (the choices or the range, else ``""``) and
    ``help``."""
    rows = []
    for f in fields(Config):
        kind, nullable = _field_kind(f.name)
        allowed = " | ".join(CHOICES[f.name]) if f.name in CHOICES else str(field_range(f.name) or "")
        rows.append({"name": f.name, "type": f"{kind} or null" if nullable else kind,
                     "default": json.dumps(_default(f), ensure_ascii=False), "allowed": allowed,
                     "help": f.metadata["help"]})
    return rows


def fields_markdown(rows: Optional[list] = None) -> list:
    """The lines of a Markdown table of :func:`field_rows`."""
    out = ["| field | type | default | allowed | what it does |", "|---|---|---|---|---|"]
    for r in rows if rows is not None else field_rows():
        cells = [f"`{r['name']}`", r["type"], f"`{r['default']}`", r["allowed"], r["help"]]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return out


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgir_lib.config",
                                 description="Every field of kgir_lib.config.Config: help, type, default, allowed "
                                             "values.")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (docs/operations.md renders it)")
    args = ap.parse_args(argv)
    if args.markdown:
        print("\n".join(fields_markdown()))
        return 0
    for r in field_rows():
        allowed = f"; allowed {r['allowed']}" if r["allowed"] else ""
        print(f"{r['name']} ({r['type']}, default {r['default']}{allowed})\n    {r['help']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
