"""``python -m kgir_lib.book explorer --profile NAME``: write a run's explorer file from its traces;
``python -m kgir_lib.book stage OUT``: stage the book's sources into OUT (``bash scripts/book.sh`` runs both
steps it needs; docs/operations.md, "The book")."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import load_config
from .explorer import EXPLORER_FILE, ExplorerError, write_explorer
from .pages import BOOK_RUNS, stage

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgir_lib.book", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("explorer", help="write results/<profile>/explorer.json.gz from the run's traces")
    ex.add_argument("--profile", required=True)
    st = sub.add_parser("stage", help="stage the book's sources")
    st.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.command == "explorer":
            print(write_explorer(load_config(args.profile)))
        else:
            files = [(p, ROOT / "results" / p / EXPLORER_FILE) for p in BOOK_RUNS]
            pages = stage(ROOT, args.out, files)
            print(f"staged {args.out}: {len(pages)} question pages")
    except (ExplorerError, FileNotFoundError) as e:
        print(f"book: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
