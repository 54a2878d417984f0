"""The samples from HippoRAG 2's 1000-question release: the manifest's questions, in its order, and their passages.

How the samples the committed results were computed from were made, and so how they are made again:

- **Questions**: the upstream records whose ids the manifest lists, in the manifest's order, each unchanged
  (MuSiQue keys ``id, paragraphs, question, question_decomposition, answer, answer_aliases, answerable``;
  HotpotQA ``_id, answer, question, supporting_facts, context, type, level``), except the HotpotQA records the
  manifest marks ``paragraph_level`` (below).
- **Corpus**: the questions' paragraphs in question order, then paragraph order, de-duplicated by (title, text);
  MuSiQue text = ``paragraph_text``, HotpotQA text = the sentences joined with "" (HippoRAG's convention). The
  retrieval pool of a sample is its own questions' paragraphs, not the 1000-question corpus; that corpus is
  only checked to hold them (:func:`missing_from`).
- **HotpotQA's paragraph-level records.** 60 of the 84 HotpotQA sample questions were collected from a copy
  with paragraph-level labels only: each context paragraph is one "sentence" (its sentences joined with ""),
  ``supporting_facts`` is one ``[title, 0]`` per supporting title in context order, and ``type`` and ``level`` are
  empty. The committed results were computed on that form, and the suite reads ``type``
  (:mod:`kgir_lib.eval.mechanism.bridges` gives a comparison question no bridge, and an untyped one the bridge
  rule) and the order of the supporting titles (the order of a question's gold passages), so
  :func:`paragraph_level` reduces those upstream records to the same form. Nothing else of a record changes.
- **Files** are written as the samples were: JSON indented by one space, UTF-8 (no ASCII escapes), no final
  newline (:func:`dump`), so a derived file is byte-identical to the one the manifest was made from.
"""
from __future__ import annotations

import copy
import json

from ..data import DataError
from .checksums import ID_KEY


def paragraph_level(rec: dict) -> dict:
    """A HotpotQA record in the paragraph-level form (module docstring): context paragraphs as one sentence,
    one ``[title, 0]`` fact per supporting title in context order, empty ``type`` and ``level``."""
    out = copy.deepcopy(rec)
    context = [[title, ["".join(sentences)]] for title, sentences in rec["context"]]
    supporting = {str(f[0]) for f in rec["supporting_facts"]}
    out["context"] = context
    out["supporting_facts"] = [[title, 0] for title in dict.fromkeys(t for t, _ in context) if title in supporting]
    out["type"], out["level"] = "", ""
    return out


def passages(schema: str, records: list) -> list:
    """The corpus of ``records``: their paragraphs in order, de-duplicated by (title, text), as ``{title, text}``."""
    seen, out = set(), []
    for rec in records:
        if schema == "musique":
            pairs = [(p["title"], p["paragraph_text"]) for p in rec["paragraphs"]]
        else:
            pairs = [(title, "".join(sentences)) for title, sentences in rec["context"]]
        for pair in pairs:
            if pair not in seen:
                seen.add(pair)
                out.append({"title": pair[0], "text": pair[1]})
    return out


def select(name: str, entry: dict, upstream: object, source: str) -> list:
    """The manifest's questions from the upstream records, in the manifest's order; HotpotQA's paragraph-level
    ones reduced. A question the upstream file lacks is a :class:`DataError` naming the set and the first id."""
    if not isinstance(upstream, list):
        raise DataError(f"{name}: {source} must hold a JSON list of questions")
    key = ID_KEY[entry["schema"]]
    by_id = {str(r.get(key)): r for r in upstream if isinstance(r, dict)}
    missing = [q for q in entry["ids"] if q not in by_id]
    if missing:
        raise DataError(f"{name}: {len(missing)} of the {len(entry['ids'])} sample questions are not in {source} "
                        f"(first: {missing[0]!r}): the upstream file is not the release the manifest describes")
    reduce = set(entry.get("paragraph_level", ()))
    try:
        return [paragraph_level(by_id[q]) if q in reduce else by_id[q] for q in entry["ids"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{name}: a sample question in {source} is malformed ({type(exc).__name__}: {exc})") from None


def missing_from(corpus: list, upstream_corpus: object) -> int:
    """How many passages of ``corpus`` the upstream corpus file lacks (by title and text)."""
    if not isinstance(upstream_corpus, list):
        return len(corpus)
    have = {(p.get("title"), p.get("text")) for p in upstream_corpus if isinstance(p, dict)}
    return sum((p["title"], p["text"]) not in have for p in corpus)


def dump(value: object) -> bytes:
    """JSON as the sample files are written: indent 1, UTF-8 without ASCII escapes, no final newline."""
    try:
        return json.dumps(value, indent=1, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate from a ``\ud800`` escape
        raise DataError(f"a sample record holds text that cannot be written as UTF-8 ({exc})") from None


def derive(name: str, entry: dict, questions: object, corpus: object, source: str) -> tuple:
    """``({file name: bytes}, passages the upstream corpus lacks)`` of a derived set (module docstring)."""
    records = select(name, entry, questions, source)
    try:
        pool = passages(entry["schema"], records)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{name}: a sample question in {source} has malformed paragraphs ({exc})") from None
    files = {fname: dump(records if spec["role"] == "questions" else pool)
             for fname, spec in entry["files"].items() if spec.get("derived")}
    return files, missing_from(pool, corpus)
