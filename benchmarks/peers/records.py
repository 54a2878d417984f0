"""The cross-checks' records as files: JSON lines, plain or gzip-compressed by the name's ending, and gzip files
whose bytes depend only on their content. Standard library only: scripts in the peers' environments use it too."""
from __future__ import annotations

import gzip
import json
from pathlib import Path


def read_jsonl(path: Path) -> list:
    """The records of a JSON-lines file (``.gz``: compressed), blank lines skipped."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(x) for x in fh if x.strip()]


def write_gzip(path: Path, text: str) -> None:
    """``text`` gzip-compressed with no time stamp in the header, so the same content gives the same bytes."""
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as fh:
        fh.write(text.encode("utf-8"))


def write_jsonl(path: Path, rows: list) -> None:
    """``rows`` as JSON lines (``.gz``: compressed by :func:`write_gzip`), the folder made if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if str(path).endswith(".gz"):
        write_gzip(path, text)
    else:
        path.write_text(text, encoding="utf-8")
