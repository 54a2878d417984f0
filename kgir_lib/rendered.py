"""Text in ``README.md`` and ``docs/`` rendered from committed tables, so no number there is typed by hand, and
from the one place a list is declared (every Config field with its help; every KGIR-RAG variant with its
description), so no copy of it drifts.

A rendered block follows a marker line that names the function rendering it and the table it reads::

    <!-- <label>: <module>.<function> of <table path, from the project root> -->

The block is the run of lines right after the marker that are of the same kind as its first one: table rows
(``|``), list items (``- ``) or plain text at the marker's indentation; a blank line or a line of another kind
ends it. :data:`RENDERERS` knows each function a marker may name and how its output becomes lines (one line per
dataset for the per-dataset sentences). ``python -m kgir_lib.rendered`` rewrites every block of the project's
documents from the tables; ``--check`` only lists the stale ones (exit status 1), which the test suite runs too.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import pandas as pd

from .config import PROJECT_ROOT

MARKER = re.compile(r"^(?P<indent> *)<!-- (?P<label>[^:>]+): (?P<function>[\w.]+) of (?P<table>\S+) -->$")
DOCUMENTS = ("README.md", "docs/results.md", "docs/operations.md")  # the documents that carry rendered blocks


def _per_dataset(sentence: Callable[[pd.DataFrame, str], str], **read) -> Callable[[Path], list]:
    def render(path: Path) -> list:
        table = pd.read_csv(path, **read)
        return [f"- {sentence(table, d)}" for d in dict.fromkeys(table["dataset"])]
    return render


def _crosscheck(path: Path) -> list:
    from .eval.peer_agreement import crosscheck_sentence
    return [crosscheck_sentence(pd.read_csv(path))]


def _kg2rag_crosscheck(path: Path) -> list:
    from .eval.kg2rag_agreement import crosscheck_sentence
    return [crosscheck_sentence(pd.read_csv(path))]


def _flashrag(path: Path) -> list:
    from .eval.peer_iterative import crosscheck_sentence
    return [crosscheck_sentence(pd.read_csv(path, dtype={"qid": str}))]


def _flashrag_reading(path: Path) -> list:
    from .eval.peer_iterative import reading_sentence
    return [reading_sentence(pd.read_csv(path, dtype={"qid": str}))]


def _claims(path: Path) -> list:
    from .eval.claims import claims_headline
    return claims_headline(pd.read_csv(path)).splitlines()


def _funnel(path: Path) -> list:
    from .eval.mechanism.funnel import funnel_sentence
    return _per_dataset(funnel_sentence, dtype={"round": str})(path)


def _headroom(path: Path) -> list:
    from .eval.mechanism.headroom import headroom_sentence
    return _per_dataset(headroom_sentence)(path)


def _rounds(path: Path) -> list:
    from .eval.mechanism.calibration import natural_rounds_sentence
    return _per_dataset(natural_rounds_sentence)(path)


def _decomposition(path: Path) -> list:
    from .eval.mechanism.loss_decomposition import decomposition_sentence
    return _per_dataset(decomposition_sentence)(path)


def _missing_gold(path: Path) -> list:
    from .eval.mechanism.missing_gold import missing_gold_sentence
    return _per_dataset(missing_gold_sentence)(path)


def _swap(path: Path) -> list:
    from .eval.mechanism.missing_gold import swap_sentence
    table = pd.read_csv(path)
    return [f"- {swap_sentence(table, d, r)}" for d in dict.fromkeys(table["dataset"])
            for r in dict.fromkeys(table["reader"])]


def _orders(path: Path) -> list:
    from .eval.mechanism.loss_orders import orders_sentence
    table = pd.read_csv(path)
    return [f"- {orders_sentence(table, d, r)}" for d in dict.fromkeys(table["dataset"])
            for r in dict.fromkeys(table["reader"])]


def _repair(path: Path) -> list:
    from .eval.mechanism.repair import repair_sentence
    return _per_dataset(repair_sentence)(path)


def _rewrite_form(path: Path) -> list:
    from .eval.mechanism.rewrite_form import form_sentences
    return [f"- {s}" for s in form_sentences(pd.read_csv(path, dtype={"round": str}))]


def _extraction_cut(path: Path) -> list:
    """Per dataset, from a run's ``tables/05_indexing_cost.csv``, with notebook 01's pool from ``table3_kg_stats.csv``
    beside it and the extraction budget from the run's config record of notebook 05 (``config/05_eval.yaml``)."""
    import yaml

    from .eval.cost import extraction_cut_sentence
    table = pd.read_csv(path)
    budget = int(yaml.safe_load((path.parent.parent / "config" / "05_eval.yaml").read_text(encoding="utf-8"))
                 ["max_tokens_extract"])
    t3 = pd.read_csv(path.parent / "table3_kg_stats.csv")
    lines = []
    for d in dict.fromkeys(table["dataset"]):
        graph = t3[t3["graph"].str.startswith(f"{d} (")]
        pool = ((int(graph["replies_cut_at_token_limit"].iloc[0]), int(graph["passages"].iloc[0]))
                if len(graph) == 1 and str(graph["graph"].iloc[0]).startswith(f"{d} (llm") else None)
        lines.append(f"- {extraction_cut_sentence(table, d, budget, pool)}")
    return lines


def _config_fields(path: Path) -> list:
    from .config.reference import fields_markdown
    return fields_markdown()


def _variants(path: Path) -> list:
    from .kgir.variants import describe
    return describe().splitlines()


def _reading_rule(path: Path) -> list:
    from .eval.claims import READING_RULE
    return [READING_RULE]


def _table7_sign(path: Path) -> list:
    from .report import TABLE7_SIGN
    return [TABLE7_SIGN]


# the functions a marker may name -> the block's lines from the table's path (a table, or the module that declares
# what is rendered: the Config fields, the KGIR-RAG variants)
RENDERERS: dict = {
    "kgir_lib.config.reference.fields_markdown": _config_fields,
    "kgir_lib.kgir.variants.describe": _variants,
    "kgir_lib.eval.peer_agreement.crosscheck_sentence": _crosscheck,
    "kgir_lib.eval.kg2rag_agreement.crosscheck_sentence": _kg2rag_crosscheck,
    "kgir_lib.eval.peer_iterative.crosscheck_sentence": _flashrag,
    "kgir_lib.eval.peer_iterative.reading_sentence": _flashrag_reading,
    "kgir_lib.eval.claims.claims_headline": _claims,
    "kgir_lib.eval.claims.READING_RULE": _reading_rule,
    "kgir_lib.report.TABLE7_SIGN": _table7_sign,
    "kgir_lib.eval.mechanism.funnel.funnel_sentence": _funnel,
    "kgir_lib.eval.mechanism.headroom.headroom_sentence": _headroom,
    "kgir_lib.eval.mechanism.calibration.natural_rounds_sentence": _rounds,
    "kgir_lib.eval.mechanism.loss_decomposition.decomposition_sentence": _decomposition,
    "kgir_lib.eval.mechanism.missing_gold.missing_gold_sentence": _missing_gold,
    "kgir_lib.eval.mechanism.missing_gold.swap_sentence": _swap,
    "kgir_lib.eval.mechanism.rewrite_form.form_sentences": _rewrite_form,
    "kgir_lib.eval.mechanism.loss_orders.orders_sentence": _orders,
    "kgir_lib.eval.mechanism.repair.repair_sentence": _repair,
    "kgir_lib.eval.cost.extraction_cut_sentence": _extraction_cut,
}


@dataclass(frozen=True)
class Block:
    """One rendered block of a document: its marker (``line``, 0-based), the lines it holds now (``start`` to
    ``end``, exclusive) and the lines the table renders."""

    document: str
    line: int
    label: str
    function: str
    table: str
    start: int
    end: int
    current: tuple
    rendered: tuple

    @property
    def stale(self) -> bool:
        return self.current != self.rendered


def _kind(line: str, indent: str) -> str:
    if not line.strip():
        return "blank"
    body = line[len(indent):] if line.startswith(indent) else None
    if body is None or body.startswith(" "):
        return "other"
    return "table" if body.startswith("|") else "item" if body.startswith("- ") else "text"


def blocks(text: str, document: str = "<text>", root: Path = PROJECT_ROOT) -> list:
    """Every marker of ``text`` with its block; an unknown function or a missing table is a ValueError naming the
    document and line."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        found = MARKER.match(line)
        if not found:
            if "<!-- " in line and " of " in line and "kgir_lib." in line:
                raise ValueError(f"{document}:{i + 1}: a marker that does not read "
                                 f"'<!-- label: module.function of table -->': {line.strip()!r}")
            continue
        function, table, indent = found["function"], found["table"], found["indent"]
        if function not in RENDERERS:
            raise ValueError(f"{document}:{i + 1}: no renderer for {function!r} (known: {', '.join(RENDERERS)})")
        path = root / table
        if not path.is_file():
            raise ValueError(f"{document}:{i + 1}: the marker's table {table!r} does not exist")
        rendered = tuple(indent + x for x in RENDERERS[function](path))
        end = i + 1
        kind = _kind(lines[end], indent) if end < len(lines) else "blank"
        while kind not in ("blank", "other") and end < len(lines) and _kind(lines[end], indent) == kind:
            end += 1
        out.append(Block(document, i, found["label"].strip(), function, table, i + 1, end,
                         tuple(lines[i + 1:end]), rendered))
    return out


def render(text: str, document: str = "<text>", root: Path = PROJECT_ROOT) -> str:
    """``text`` with every block replaced by its table's rendering."""
    lines = text.split("\n")
    for b in reversed(blocks(text, document, root)):
        lines[b.start:b.end] = list(b.rendered)
    return "\n".join(lines)


def stale_blocks(documents: Iterable[str] = DOCUMENTS, root: Path = PROJECT_ROOT) -> list:
    """The blocks of ``documents`` (paths from ``root``) whose text is not their table's rendering."""
    return [b for d in documents for b in blocks((root / d).read_text(encoding="utf-8"), d, root) if b.stale]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgir_lib.rendered",
                                     description="Render the marked blocks of the project's documents from the "
                                                 "committed tables they name.")
    parser.add_argument("documents", nargs="*", default=list(DOCUMENTS), help="paths from the project root")
    parser.add_argument("--check", action="store_true", help="list the stale blocks, change nothing")
    parser.add_argument("--root", type=Path, default=PROJECT_ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    stale = stale_blocks(args.documents, args.root)
    for b in stale:
        print(f"{b.document}:{b.line + 1}: {b.label} ({b.table}) {'is stale' if args.check else 'rendered'}")
    if not stale:
        print("every rendered block is up to date")
    if args.check:
        return 1 if stale else 0
    for d in dict.fromkeys(b.document for b in stale):
        path = args.root / d
        path.write_text(render(path.read_text(encoding="utf-8"), d, args.root), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
