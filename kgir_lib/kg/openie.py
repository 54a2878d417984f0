"""Import published OpenIE output (HippoRAG's ``openie_<dataset>_results_*.json``).

HippoRAG's OpenIE file is ``{"docs": [{"title", "text", "passage",
"extracted_entities", "extracted_triples"}, ...], ...}``. Each doc is matched to a
corpus passage by identity (title + text, :func:`kgir_lib.data.passage_id`; a doc
with only ``passage`` = "title\\ntext" is split at the first newline), and its
triples go through the same :func:`~kgir_lib.kg.parse.parse_triples` as LLM
output, so an imported graph and an extracted one have the same stored form.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Optional

from ..data import Corpus, passage_id
from .graph import KnowledgeGraph, Triple
from .parse import parse_triples
from .store import record_drops


class OpenIEFormatError(ValueError):
    """The file is not in HippoRAG's OpenIE format; the message names the file and field."""


def _doc_pid(doc: dict, path: Path, i: int, corpus: Corpus) -> Optional[str]:
    """The corpus pid of ``doc``, or ``None`` if the passage is not in the corpus."""
    candidates = []
    if "title" in doc and "text" in doc:
        candidates.append((str(doc["title"]), str(doc["text"])))
    if "passage" in doc:
        title, _, text = str(doc["passage"]).partition("\n")
        candidates.append((title, text))
    if not candidates:
        raise OpenIEFormatError(f"{path}: docs[{i}] has neither 'title' + 'text' nor 'passage'")
    for title, text in candidates:
        pid = passage_id(title, text)
        if pid in corpus:
            return pid
    return None


def _docs(path: Path) -> list:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OpenIEFormatError(f"{path}: no such OpenIE file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OpenIEFormatError(f"{path}: not valid JSON ({exc})") from exc
    docs = raw.get("docs") if isinstance(raw, dict) else raw
    if not isinstance(docs, list):
        raise OpenIEFormatError(f"{path}: expected a top-level object with a 'docs' list")
    return docs


def import_openie(path: Path, corpus: Corpus, clean: bool = True) -> tuple:
    """``(KnowledgeGraph, drops)`` from a HippoRAG OpenIE file, over the passages of ``corpus``.

    Every matched doc is marked processed (also when it has no triple). ``drops``
    counts the parser's drop reasons plus ``doc_not_in_corpus`` (docs skipped
    because no corpus passage has their title + text) and ``duplicate_doc``.
    ``clean=False`` keeps self-loops and repeated triples (:func:`kgir_lib.kg.parse.validate`).
    """
    path = Path(path)
    kg = KnowledgeGraph()
    drops: Counter = Counter()
    by_pid: dict = {}
    for i, doc in enumerate(_docs(path)):
        if not isinstance(doc, dict):
            raise OpenIEFormatError(f"{path}: docs[{i}] is a {type(doc).__name__}, expected an object")
        if "extracted_triples" not in doc:
            raise OpenIEFormatError(f"{path}: docs[{i}] has no field 'extracted_triples'")
        pid = _doc_pid(doc, path, i, corpus)
        if pid is None:
            drops["doc_not_in_corpus"] += 1
            continue
        if pid in by_pid:
            drops["duplicate_doc"] += 1
            continue
        kept, doc_drops = parse_triples(doc["extracted_triples"], clean)
        kg.add(pid, [Triple(h, r, t, pid) for h, r, t in kept])
        by_pid[pid] = doc_drops
        drops.update(doc_drops)
    record_drops(kg, by_pid)
    return kg, drops
