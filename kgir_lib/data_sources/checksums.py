"""Checksums of what the suite reads from a sample set, and the check of a data folder against the manifest.

A set's checksums cover, question by question in the committed id order, every field a stage of the suite reads
(:mod:`kgir_lib.data` for questions, answers and gold passages, paper §3.3.2-3.3.3;
:mod:`kgir_lib.eval.mechanism.bridges` for MuSiQue's decomposition and HotpotQA's ``type``, §3.5):

- MuSiQue: ``question``; ``answers`` (the answer and its aliases); ``gold_titles`` (the titles of the paragraphs
  marked ``is_supporting``); ``paragraphs`` (each paragraph's idx, title, text and ``is_supporting``: the gold
  passages' texts and the hop paragraphs the decomposition points at); ``decomposition`` (each hop's question,
  answer and ``paragraph_support_idx``).
- HotpotQA: ``question``; ``answers``; ``gold_titles`` (the titles of ``supporting_facts``, in their order);
  ``type``; ``context`` (each paragraph's title and its sentences joined with "", the passage the suite builds).
- The corpus: its titles and its texts, in order.

A checksum is the SHA-256 of the canonical JSON (:func:`digest`) of the list of values; beside it the first
8 hex digits of each question's (passage's) value, so a mismatch names the set, the field and the first
question that differs. Files fetched verbatim are checked whole, by SHA-256; a derived file that is not
byte-identical to the one the manifest was made from is said, not refused, when every field matches.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..data import DataError, _find
from .sources import SAMPLE_SETS, manifest

ID_KEY = {"musique": "id", "hotpotqa": "_id"}
FIELDS = {"musique": ("question", "answers", "gold_titles", "paragraphs", "decomposition"),
          "hotpotqa": ("question", "answers", "gold_titles", "type", "context")}
SHORT = 8  # hex digits of a per-question digest


def digest(value: object) -> str:
    """SHA-256 (hex) of ``value`` as canonical JSON (ASCII escapes, no spaces)."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of the file at ``path``, read in 1 MiB blocks (a large file is never held in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def checksum(values: Sequence) -> dict:
    """``{"sha256": digest of the list, "each": the short digest of every value, space-separated}``."""
    return {"sha256": digest(list(values)), "each": " ".join(digest(v)[:SHORT] for v in values)}


def record_fields(schema: str, rec: dict) -> dict:
    """The values of :data:`FIELDS` that one raw record holds (module docstring)."""
    if schema == "musique":
        paragraphs = rec["paragraphs"]
        return {
            "question": rec["question"],
            "answers": [rec["answer"], list(rec.get("answer_aliases") or [])],
            "gold_titles": [p["title"] for p in paragraphs if p.get("is_supporting")],
            "paragraphs": [[p.get("idx"), p["title"], p["paragraph_text"], bool(p.get("is_supporting"))]
                           for p in paragraphs],
            "decomposition": [[d.get("question"), d.get("answer"), d.get("paragraph_support_idx")]
                              for d in rec.get("question_decomposition") or []],
        }
    return {
        "question": rec["question"],
        "answers": [rec["answer"]],
        "gold_titles": list(dict.fromkeys(str(f[0]) for f in rec["supporting_facts"])),
        "type": rec.get("type"),
        "context": [[str(t), "".join(s) if isinstance(s, list) else s] for t, s in rec["context"]],
    }


def _fields_of(schema: str, records: list, where: Path) -> tuple:
    """``(ids, {field: [value per record]})``; a record without a field the suite reads is a DataError."""
    ids: list = []
    values: dict = {f: [] for f in FIELDS[schema]}
    for i, rec in enumerate(records):
        try:
            ids.append(str(rec[ID_KEY[schema]]))
            for name, value in record_fields(schema, rec).items():
                values[name].append(value)
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise DataError(f"{where}: record {i} lacks a field the suite reads "
                            f"({type(exc).__name__}: {exc})") from None
    return ids, values


def _corpus_of(corpus: list, where: Path) -> tuple:
    try:
        return [str(p["title"]) for p in corpus], [str(p["text"]) for p in corpus]
    except (KeyError, TypeError) as exc:
        raise DataError(f"{where}: a passage lacks 'title' or 'text' ({exc})") from None


def set_checksums(schema: str, records: list, corpus: list, where: Path = Path("?")) -> dict:
    """The manifest's checksum part of one set: ids, counts, every field, the corpus titles and texts."""
    ids, values = _fields_of(schema, records, where)
    titles, texts = _corpus_of(corpus, where)
    return {"n_questions": len(ids), "n_passages": len(titles), "ids": ids,
            "fields": {name: checksum(v) for name, v in values.items()},
            "corpus": {"titles": checksum(titles), "texts": checksum(texts)}}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc})") from None


def _first_difference(name: str, what: str, expected: str, values: list, labels: list) -> str | None:
    """A line naming the first item whose short digest differs from the manifest's, or None if all agree."""
    want = expected.split() if expected else []
    got = [digest(v)[:SHORT] for v in values]
    bad = [i for i, (w, g) in enumerate(zip(want, got)) if w != g]
    if not bad:
        return None
    return f"{name}: {what} differs in {len(bad)} of {len(want)}, first at {labels[bad[0]]}"


def compare(name: str, entry: dict, records: list, corpus: list, qpath: Path, cpath: Path) -> list:
    """Every difference between a set's files and its manifest entry, one line each (empty: all agree)."""
    schema = entry["schema"]
    ids, values = _fields_of(schema, records, qpath)
    problems = []
    want_ids = entry["ids"]
    if ids != want_ids:
        known, have = set(want_ids), set(ids)
        extra, missing = [q for q in ids if q not in known], [q for q in want_ids if q not in have]
        first = next((i for i, (a, b) in enumerate(zip(ids, want_ids)) if a != b), min(len(ids), len(want_ids)))
        problems.append(f"{name}: field 'ids': {qpath} holds {len(ids)} questions, the manifest {len(want_ids)}; "
                        f"first difference at record {first}"
                        + (f"; missing {missing[:3]}" if missing else "")
                        + (f"; not in the sample {extra[:3]}" if extra else ""))
    row = {q: i for i, q in enumerate(ids)}
    for field in FIELDS[schema]:
        if digest(values[field]) == entry["fields"][field]["sha256"] and ids == want_ids:
            continue
        want = entry["fields"][field]["each"].split()
        pairs = [(k, row[q]) for k, q in enumerate(want_ids) if q in row]  # compared question by question id
        line = _first_difference(name, f"field {field!r}", " ".join(want[k] for k, _ in pairs),
                                 [values[field][i] for _, i in pairs],
                                 [f"question {ids[i]!r} (record {i} of {qpath})" for _, i in pairs])
        if line:
            problems.append(line)
    titles, texts = _corpus_of(corpus, cpath)
    if len(titles) != entry["n_passages"]:
        problems.append(f"{name}: field 'corpus': {cpath} holds {len(titles)} passages, "
                        f"the manifest {entry['n_passages']}")
    for what, got in (("titles", titles), ("texts", texts)):
        if digest(got) != entry["corpus"][what]["sha256"]:
            line = _first_difference(name, f"field 'corpus {what}'", entry["corpus"][what]["each"], got,
                                     [f"passage {i} ({t!r}) of {cpath}" for i, t in enumerate(titles)])
            problems.append(line or f"{name}: field 'corpus {what}' differs (passage count or order) in {cpath}")
    return problems


def check_set(data_dir: Path, name: str, entry: dict | None = None) -> tuple:
    """``(summary lines, problems)`` of set ``name`` in ``data_dir`` against its manifest entry: each field that
    differs with its first question (or passage), and every verbatim file whose SHA-256 differs."""
    entry = entry or manifest()["sets"][name]
    data_dir = Path(data_dir)
    try:
        qpath, cpath = _find(data_dir, name, ".json"), _find(data_dir, name, "_corpus.json")
        records, corpus = _read_json(qpath), _read_json(cpath)
        if not isinstance(records, list) or not isinstance(corpus, list):
            raise DataError(f"{qpath} and {cpath} must each hold a JSON list")
        problems = compare(name, entry, records, corpus, qpath, cpath)
    except DataError as exc:
        return [], [f"{name}: {exc}"]
    identical = []
    for fname, spec in entry["files"].items():
        path = {"questions": qpath, "corpus": cpath}.get(spec.get("role"), qpath.parent / fname)
        if not path.is_file():
            problems.append(f"{name}: file {fname} is missing (looked for {path})")
            continue
        got = file_sha256(path)
        identical.append(got == spec["sha256"])
        if got != spec["sha256"] and "source" in spec:  # fetched verbatim: the bytes are the contract
            problems.append(f"{name}: file {path} differs from the upstream file (SHA-256 {got}, "
                            f"expected {spec['sha256']})")
    files = ("every file byte-identical to the manifest's" if all(identical) else
             "derived files not byte-identical (formatting only: every field the suite reads matches)")
    summary = f"{name}: {entry['n_questions']} questions, {entry['n_passages']} passages, checksums match; {files}"
    return [summary], problems


def verify_dir(data_dir: Path, names: Iterable[str] = SAMPLE_SETS) -> list:
    """Check every set of ``names`` in ``data_dir`` (:func:`check_set`); summary lines, else one
    :class:`DataError` naming, for each set, each field that differs and its first question."""
    lines: list = []
    problems: list = []
    for name in names:
        ok, bad = check_set(Path(data_dir), name)
        lines, problems = lines + ok, problems + bad
    if problems:
        raise DataError(f"{data_dir}: the data does not match the committed manifest "
                        f"(kgir_lib/data_sources/manifest.json):\n  " + "\n  ".join(problems))
    return lines


def build_entry(layout: dict, data_dir: Path, name: str) -> dict:
    """A set's manifest entry: its layout (schema, upstream files) and the checksums of the set as found in
    ``data_dir`` (the samples the committed results were computed from), with each file's SHA-256."""
    data_dir = Path(data_dir)
    qpath, cpath = _find(data_dir, name, ".json"), _find(data_dir, name, "_corpus.json")
    records = _read_json(qpath)
    entry = {**layout, **set_checksums(layout["schema"], records, _read_json(cpath), qpath)}
    if layout["schema"] == "hotpotqa":  # the records of the paragraph-level copy (kgir_lib.data_sources.derive)
        entry["paragraph_level"] = [str(r["_id"]) for r in records if r.get("type") == ""]
    entry["files"] = {f: {**spec, "sha256": file_sha256({"questions": qpath, "corpus": cpath}.get(
        spec.get("role"), qpath.parent / f))} for f, spec in layout["files"].items()}
    return entry
