"""The one place where per-question trace files (JSONL) and their ``.meta.json`` are named, written and read.

A run's traces are ``traces/<method key>/<dataset>.trace.jsonl`` (:func:`trace_filename`,
:func:`trace_files`), one ``MethodOutput.to_json()`` a line.

Writing is atomic: the lines go to a temporary file in the same folder, which is
flushed, fsync'ed and renamed over the old file (``os.replace``), so a kill
leaves either the old file or the new one, never a torn one. The stale
``.meta.json`` beside a trace file is removed *before* the new traces replace it
and the new meta is written (atomically) only after them, so a meta file never
vouches for traces it was not written with (:func:`kgir_lib.eval.evaluate.run_method`
reruns a method whose meta is missing; the LLM cache makes that cheap).

Reading tolerates one thing only: a torn *last* line (a file written by an older,
non-atomic version and killed mid-write) is dropped with a warning. Any other
unreadable line is a :class:`TraceError` naming the file and the line.

Lone UTF-16 surrogates (``"\\ud800"``; they come from ``\\uXXXX`` escapes in a
server's JSON) cannot be encoded as UTF-8. :func:`scrub` replaces each with
U+FFFD and :data:`REPLACED` counts the replacements by where they happened
(``traces``, ``llm_cache``, ``kg_store``).
"""
from __future__ import annotations

import json
import os
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Optional, Tuple

REPLACEMENT = "\ufffd"
REPLACED: Counter = Counter()  # where -> lone surrogates replaced by U+FFFD in this process
_SURROGATE = re.compile("[\ud800-\udfff]")


class TraceError(ValueError):
    """A trace or meta file cannot be read; the message names the file (and line)."""


# ---------------------------------------------------------------------------- lone surrogates
def replace_surrogates(text: str) -> Tuple[str, int]:
    """``text`` with every lone surrogate replaced by U+FFFD, and how many were replaced."""
    return _SURROGATE.subn(REPLACEMENT, text)


def scrub(value: Any, where: str = "traces") -> Any:
    """``value`` (str, or lists / tuples / dicts of them) with lone surrogates replaced; counted in :data:`REPLACED`."""
    if isinstance(value, str):
        clean, n = replace_surrogates(value)
        if n:
            REPLACED[where] += n
        return clean
    if isinstance(value, dict):
        return {scrub(k, where): scrub(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, where) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub(v, where) for v in value)
    return value


def scrub_located(value: Any, where: tuple = ()) -> Tuple[Any, list]:
    """``value`` (str, or lists / dicts of them) with lone surrogates replaced, and the location of each one
    (a tuple of list indices and dict keys below ``where``). Not counted: the caller counts and names them."""
    if isinstance(value, str):
        clean, n = replace_surrogates(value)
        return clean, [where] * n
    found: list = []
    if isinstance(value, list):
        out = []
        for i, item in enumerate(value):
            clean, at = scrub_located(item, where + (i,))
            out.append(clean)
            found += at
        return out, found
    if isinstance(value, dict):
        pairs = {}
        for key, item in value.items():
            clean, at = scrub_located(item, where + (key,))
            pairs[replace_surrogates(key)[0] if isinstance(key, str) else key] = clean
            found += at
        return pairs, found
    return value, found


def _dumps(record: Any) -> str:
    """One JSON line; strings with lone surrogates are scrubbed (only then: the common case stays fast)."""
    line = json.dumps(record, ensure_ascii=False, default=str)
    if _SURROGATE.search(line):
        line = json.dumps(scrub(json.loads(line)), ensure_ascii=False, default=str)
    return line


# ---------------------------------------------------------------------------- where trace files live
TRACE_SUFFIX = ".trace.jsonl"


def trace_filename(dataset: str) -> str:
    """A dataset's trace file name inside ``traces/<method>/``: ``<dataset>.trace.jsonl``."""
    return f"{dataset}{TRACE_SUFFIX}"


def trace_file(run_dir: Path, method_key: str, dataset: str) -> Path:
    """Where a method's traces of a dataset live in a run directory:
    ``<run>/traces/<method key>/<dataset>.trace.jsonl``."""
    return Path(run_dir) / "traces" / method_key / trace_filename(dataset)


def trace_dataset(path: Path) -> str:
    """The dataset a trace file belongs to (``<dataset>.trace.jsonl``)."""
    return Path(path).name.removesuffix(".jsonl").removesuffix(".trace")


def trace_files(cfg: Any) -> list:
    """Every ``traces/<method>/<dataset>.trace.jsonl`` of ``cfg``'s run directory (not the studies' subfolders)."""
    root = cfg.run_dir / "traces"
    return sorted(root.glob(f"*/*{TRACE_SUFFIX}")) if root.exists() else []


# ---------------------------------------------------------------------------- atomic writing
def atomic_write_text(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same folder and ``os.replace``."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a flushed, fsync'ed temporary file in the same folder and
    ``os.replace``: a kill leaves the old file or the new one, never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.tmp(\.npy)?")


def remove_stale_temporaries(*roots: Path) -> list:
    """Delete the temporary files that writes killed before their rename left under ``roots``
    (``.<name>.<pid>.tmp``, from :func:`atomic_write_bytes`; ``.tmp.npy`` from older embedding caches)
    whose writing process is gone; a file of a process still running is left alone. Returns the paths."""
    removed = []
    for root in roots:
        if not Path(root).is_dir():
            continue
        for path in Path(root).rglob("*.tmp*"):
            match = _TEMPORARY.fullmatch(path.name)
            stale = not _alive(int(match["pid"])) if match else path.name.endswith(".tmp.npy")
            if stale and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # a process of another user
        return True
    return True


def meta_path(path: Path) -> Path:
    """The ``.meta.json`` beside trace file ``path`` (``<dataset>.trace.jsonl`` -> ``<dataset>.trace.meta.json``)."""
    return Path(path).with_suffix(".meta.json")


def write_jsonl(records: Iterable[Any], path: Path) -> Path:
    """JSON objects, one a line, written atomically; lone surrogates become U+FFFD (counted)."""
    before = REPLACED["traces"]
    text = "".join(_dumps(r) + "\n" for r in records)
    if REPLACED["traces"] > before:
        warnings.warn(f"{path}: {REPLACED['traces'] - before} lone surrogate(s) replaced by U+FFFD", stacklevel=3)
    return atomic_write_text(path, text)


def write_traces(outputs: Iterable[Any], path: Path) -> Path:
    """Per-question trace file: one ``MethodOutput.to_json()`` (or dict) a line, written atomically.

    The stale ``.meta.json`` beside it is removed first (see the module docstring).
    """
    path = Path(path)
    records = [o.to_json() if hasattr(o, "to_json") else o for o in outputs]
    meta_path(path).unlink(missing_ok=True)
    return write_jsonl(records, path)


def write_meta(path: Path, meta: dict) -> Path:
    """The run facts of trace file ``path``, written atomically after the traces."""
    return atomic_write_text(meta_path(path), json.dumps(scrub(meta), indent=1, default=str, ensure_ascii=False))


# ---------------------------------------------------------------------------- reading
def read_traces(path: Path) -> list:
    """The records of a JSONL trace file.

    A torn last line (no final newline, not valid JSON) is dropped with a warning;
    any other bad line raises :class:`TraceError` naming the file and line number.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"trace file {path}: not UTF-8 ({exc})") from None
    except OSError as exc:
        raise TraceError(f"trace file {path}: cannot be read ({exc})") from None
    lines = text.split("\n")
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            if n == len(lines) and not text.endswith("\n"):  # the last line, unterminated: torn by a kill
                warnings.warn(f"trace file {path}: dropped a torn last line {n} (an interrupted write)",
                              stacklevel=2)
                break
            raise TraceError(f"trace file {path}: line {n} is not valid JSON ({exc.msg}); "
                             f"delete the file to recompute it") from None
        problem = _record_problem(rec)
        if problem:
            raise TraceError(f"trace file {path}: line {n} is not a trace record ({problem}); "
                             f"delete the file to recompute it")
        out.append(rec)
    return out


_RECORD_FIELDS = {"answer": (str,), "ranked_pids": (list,), "usage": (dict, type(None)), "trace": (dict,)}


def _record_problem(rec: Any) -> str:
    """Why ``rec`` is not a question's record (a JSON object with a ``qid`` and well-typed fields), or ''."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    if not isinstance(rec.get("qid"), (str, int)) or isinstance(rec.get("qid"), bool):
        return "no 'qid'" if "qid" not in rec else f"'qid' is {rec['qid']!r}"
    for name, kinds in _RECORD_FIELDS.items():
        if name in rec and not isinstance(rec[name], kinds):
            return f"field {name!r} is a {type(rec[name]).__name__}"
    return ""


def read_meta(path: Path) -> Optional[dict]:
    """The meta of trace file ``path``; ``None`` if it is missing or unreadable (the run is then redone)."""
    meta = meta_path(path)
    if not meta.exists():
        return None
    try:
        value = json.loads(meta.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        warnings.warn(f"{meta}: unreadable; the run it describes will be recomputed", stacklevel=2)
        return None
    return value if isinstance(value, dict) else None
