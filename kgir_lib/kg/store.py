"""On-disk form of a knowledge graph (KGIR-RAG §2.1), one folder per dataset.

``<run>/kg/<dataset>/``::

    triples.parquet   head, relation, tail, pid (all strings), grouped by passage
    extracted.json    every processed passage id, including those that gave no triple
    entities.csv      entity, triples (how many triples name it as head or tail)
    relations.csv     relation, triples
    drops.json        parser drops by passage: {pid: {reason: n}}
    stats.json        paper Table 3 counts + drops by reason
    base.json         the passages notebook 01 extracted (its pool, in stored order): the graph every
                      method run starts from (:meth:`kgir_lib.methods.base.Workspace.method_view`); the
                      other processed passages were extracted on demand by some method run

Every file is written to a temporary name and renamed into place, so a crash
never leaves a half-written file; ``triples.parquet`` is written before
``extracted.json``, so a passage is never marked processed without its triples (if a
first save dies between the two, :func:`load_kg` warns and treats the passages
with triples as processed).

Parser drops are kept beside the graph in memory (:func:`record_drops`,
:func:`drops_of`), so the LLM route (:func:`kgir_lib.kg.extract.update_kg`) and
the OpenIE import record them and any later :func:`save_kg` writes them, even
when called by code that knows nothing about drops.
"""
from __future__ import annotations

import json
import os
import warnings
import weakref
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, TypeVar

from .graph import COLUMNS, KnowledgeGraph, Triple

if TYPE_CHECKING:  # pandas is imported where a table is made: a script that only extracts triples loads none
    import pandas as pd


def kg_dir(cfg, dataset: str) -> Path:
    """Where dataset ``dataset``'s graph is stored: ``<run directory>/kg/<dataset>/``."""
    return cfg.run_dir / "kg" / dataset


def openie_file(cfg, dataset: str) -> Optional[Path]:
    """Published OpenIE output shipped beside a dataset (HippoRAG's ``openie_<name>_results_*.json``), if any."""
    folder = cfg.data_path / dataset
    found = sorted(folder.glob(f"openie_{dataset}_results_*.json")) if folder.exists() else []
    return found[0] if found else None


def is_stored(directory: Path) -> bool:
    """Whether ``directory`` holds a stored graph (its ``triples.parquet``)."""
    return (Path(directory) / "triples.parquet").exists()


class KGStoreError(ValueError):
    """A stored knowledge graph is missing or corrupt; the message names the file."""


_DROPS: "weakref.WeakKeyDictionary[KnowledgeGraph, dict]" = weakref.WeakKeyDictionary()


def record_drops(kg: KnowledgeGraph, by_pid: Mapping[str, Counter]) -> None:
    """Remember the parser drops of passages of ``kg`` (replacing earlier ones of the same passages)."""
    store = _DROPS.setdefault(kg, {})
    for pid, drops in by_pid.items():
        store[pid] = Counter({k: int(v) for k, v in drops.items() if v})


def drops_of(kg: KnowledgeGraph) -> dict:
    """Parser drops by passage, for the passages still in ``kg``."""
    extracted = kg.extracted
    return {pid: c for pid, c in _DROPS.get(kg, {}).items() if pid in extracted and c}


def total_drops(kg: KnowledgeGraph) -> Counter:
    out: Counter = Counter()
    for c in drops_of(kg).values():
        out.update(c)
    return out


# ---------------------------------------------------------------------------- writing
def _atomic_write(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # unique per process: concurrent saves never mix
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _write_text(path: Path, text: str) -> None:
    _atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


def triples_frame(kg: KnowledgeGraph) -> pd.DataFrame:
    """The stored triples table: columns head, relation, tail, pid, all of dtype ``str``."""
    import pandas as pd

    df = kg.to_frame()
    return df.astype({c: "str" for c in COLUMNS}) if len(df) else pd.DataFrame({c: pd.Series([], dtype="str")
                                                                                for c in COLUMNS})


def vocabulary(kg: KnowledgeGraph, kind: str) -> pd.DataFrame:
    """Entities (``kind="entity"``) or relations with how many triples use them, most used first."""
    counts: Counter = Counter()
    for t in kg.triples:
        if kind == "entity":
            counts.update({t.head, t.tail})
        else:
            counts[t.relation] += 1
    import pandas as pd

    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return pd.DataFrame(rows, columns=[kind, "triples"])


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(c, pa.string()) for c in COLUMNS])
    table = pa.Table.from_pydict({c: [str(x) for x in df[c]] for c in COLUMNS}, schema=schema)
    _atomic_write(path, lambda p: pq.write_table(table, p))


def _clean(kg: KnowledgeGraph, directory: Path) -> KnowledgeGraph:
    """``kg`` itself, or a copy whose triple texts have their lone surrogates replaced by U+FFFD (they
    cannot be stored as UTF-8); replacements are counted in ``kgir_lib.traces.REPLACED["kg_store"]``."""
    from ..traces import REPLACED, replace_surrogates

    total, triples = 0, []
    for t in kg.triples:
        parts = []
        for value in (t.head, t.relation, t.tail):
            clean, n = replace_surrogates(value)
            total += n
            parts.append(clean)
        head, relation, tail = parts
        triples.append(Triple(head, relation, tail, t.pid))
    if not total:
        return kg
    REPLACED["kg_store"] += total
    warnings.warn(f"{directory}: {total} lone surrogate(s) in triples replaced by U+FFFD", stacklevel=3)
    return KnowledgeGraph(triples, sorted(kg.extracted))


def save_kg(kg: KnowledgeGraph, directory: Path, drops: Optional[Mapping[str, Counter]] = None) -> Path:
    """Write ``kg`` into ``directory`` (see the module docstring); returns the directory.

    ``drops`` (per passage) is added to what :func:`record_drops` already holds for ``kg``.
    Lone surrogates in triple texts are stored as U+FFFD (counted, see :func:`_clean`).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if drops:
        record_drops(kg, drops)
    # passages with triples in table order, then those without: loading rebuilds the same triple order
    order = stored_order(kg)
    by_pid, drops_total = drops_of(kg), total_drops(kg)
    kg = _clean(kg, directory)
    _write_parquet(triples_frame(kg), directory / "triples.parquet")
    for kind, name in (("entity", "entities.csv"), ("relation", "relations.csv")):
        _write_text(directory / name, vocabulary(kg, kind).to_csv(index=False))
    _write_text(directory / "drops.json", json.dumps({p: dict(c) for p, c in by_pid.items()}, indent=0,
                                                      sort_keys=True))
    stats = {**kg.stats(), "drops": dict(sorted(drops_total.items()))}
    _write_text(directory / "stats.json", json.dumps(stats, indent=2))
    _write_text(directory / "extracted.json", json.dumps(order))
    return directory


def stored_order(kg: KnowledgeGraph) -> list:
    """The passage order :func:`save_kg` writes: passages with triples in triple order, then those without,
    sorted (loading rebuilds the same order)."""
    return list(dict.fromkeys([t.pid for t in kg.triples] + sorted(kg.extracted)))


def save_base(directory: Path, kg: KnowledgeGraph, pids) -> list:
    """Write ``base.json``: the passages of ``pids`` that ``kg`` holds, in :func:`stored_order`; returns them."""
    keep = set(pids)
    base = [p for p in stored_order(kg) if p in keep]
    _write_text(Path(directory) / "base.json", json.dumps(base))
    return base


def load_base(directory: Path) -> Optional[list]:
    """The base passages of the graph in ``directory`` (``base.json``), or ``None`` when it has none (a graph
    imported whole, or stored before bases were recorded)."""
    path = Path(directory) / "base.json"
    if not path.exists():
        return None
    return [str(p) for p in _read_json(path, list)]


# ---------------------------------------------------------------------------- reading
_J = TypeVar("_J")  # the JSON type a file must hold


def _read_json(path: Path, kind: type[_J]) -> _J:
    if not path.exists():
        raise KGStoreError(f"{path}: missing (the KG folder is incomplete; rebuild it with notebook 01)")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise KGStoreError(f"{path}: corrupt JSON ({exc})") from exc
    if not isinstance(value, kind):
        raise KGStoreError(f"{path}: expected a JSON {kind.__name__}, got {type(value).__name__}")
    return value


def load_kg(directory: Path) -> KnowledgeGraph:
    """Read a KG written by :func:`save_kg`; raises :class:`KGStoreError` naming the bad file."""
    import pyarrow.parquet as pq

    directory = Path(directory)
    path = directory / "triples.parquet"
    if not path.exists():
        raise KGStoreError(f"{path}: missing (no knowledge graph stored in {directory})")
    try:
        df = pq.read_table(path).to_pandas()
    except Exception as exc:  # pyarrow raises several classes for a damaged file
        raise KGStoreError(f"{path}: unreadable parquet ({type(exc).__name__}: {exc})") from exc
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise KGStoreError(f"{path}: lacks columns {missing} (has {list(df.columns)})")
    if df[COLUMNS].isna().any().any():
        raise KGStoreError(f"{path}: has empty (null) cells")
    ext_path = directory / "extracted.json"
    if ext_path.exists():
        extracted = [str(p) for p in _read_json(ext_path, list)]
    else:  # a first save interrupted after the triples: passages with triples count as processed
        warnings.warn(f"{ext_path}: missing; treating the passages of {path.name} as the processed ones "
                      f"(passages that gave no triple will be extracted again)", stacklevel=2)
        extracted = list(dict.fromkeys(df["pid"].astype(str)))
    kg = KnowledgeGraph.from_frame(df, extracted)
    drops_path = directory / "drops.json"
    if drops_path.exists():
        raw = _read_json(drops_path, dict)
        bad = [p for p, c in raw.items() if not isinstance(c, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in c.values())]
        if bad:
            raise KGStoreError(f"{drops_path}: passage {bad[0]!r} (and {len(bad) - 1} more) must map each drop "
                               f"reason to a whole count >= 0; delete the file to load the graph without its "
                               f"drop counts (notebook 01 writes it again)")
        record_drops(kg, {str(p): Counter(c) for p, c in raw.items()})
    return kg
