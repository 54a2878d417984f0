"""Committed embeddings that seed the embedding cache, so a fresh clone does not re-embed its corpora.

The dense index caches a corpus's embeddings in ``results/<profile>/cache/embeddings/`` (not committed).
Embedding the sample's two corpora (2,730 passages) with MiniLM takes minutes on a busy 2-core CPU, which made
the first rerun of notebook 03 look hung. So the main job's corpus embeddings are committed once, as the cache
stores them, in ``results/<profile>/embeddings/`` with a ``SHA256SUMS`` file; :func:`seed_cache` copies one
into the cache when the cache lacks it and its checksum matches. The file name holds the model and the corpus
fingerprint (:func:`kgir_lib.retrieval.embedding_cache_file`), so a file is only ever used for the corpus and
model it was made from, by any profile.

They are stored as float32, as computed: rounded to float16 (half the size), 1 of 104 hotpotqa queries of the
sample run got its top-10 in another order, which changes prompts and so misses the committed LLM answers.

The encoder's other calls of the main job (the questions, the triple texts of the edge weights, the entity names:
:class:`kgir_lib.encoder_calls.RememberedCalls`) are committed the same way, as one SQLite file
(``calls.sqlite``) that seeds a run's cache when the cache has none. Each call is stored under the exact list of
texts it was given, and a seeded call answers that call whole; with them a fresh clone's main job never loads the
encoder (its library alone is seconds of CPU in every notebook), and gets the vectors the committed run got
whatever its CPU. (A call the seed lacks is assembled from the texts of the calls made before it, the rest
computed: :class:`~kgir_lib.encoder_calls.RememberedCalls`; a seed commits calls only.)

``python -m kgir_lib.embedding_seed --profile sample`` writes the files of a profile's datasets and its encoder
calls from its cache: run it after the main job in a fresh clone (or with ``cache/`` moved aside), so the calls
are the main job's and nothing else. The test suite's notebooks (profile ``ci``, results in a temporary folder)
have theirs in ``results/ci/embeddings/``: ``KGIR_TEST_RESULTS_DIR=DIR bash scripts/test.sh notebooks/*.ipynb``,
then ``python -m kgir_lib.embedding_seed --profile ci --calls-only --from DIR/ci``.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import shutil
import sqlite3
import sys
import warnings
from pathlib import Path
from typing import Iterable, Optional, Sequence

from .data_sources.checksums import file_sha256

__all__ = ["SEED_DIR", "SUMS", "PACKED", "committed_dirs", "seed_cache", "export_embeddings", "pack_calls",
           "unpack_calls"]

SEED_DIR = "embeddings"
SUMS = "SHA256SUMS"
PACKED = ".xz"  # a committed encoder-calls store packed by pack_calls: ``calls.sqlite.xz``


def read_sums(folder: Path) -> dict:
    """``{file name: sha256}`` of ``folder/SHA256SUMS`` (``sha256sum`` format); empty when absent."""
    path = Path(folder) / SUMS
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            out[name.lstrip("*")] = digest
    return out


def committed_dirs(cfg) -> list:
    """Folders that may hold committed embeddings: the run's own, then its profile's committed one (a scratch run
    or a run with its results elsewhere asks for the calls its profile's run made), then every other profile's."""
    from .config import PROJECT_ROOT

    dirs = ([cfg.run_dir / SEED_DIR, PROJECT_ROOT / "results" / cfg.profile / SEED_DIR]
            + sorted((PROJECT_ROOT / "results").glob(f"*/{SEED_DIR}")))
    return list(dict.fromkeys(Path(d) for d in dirs))


def seed_cache(cache_file: Path, dirs: Iterable[Path]) -> Optional[Path]:
    """Copy the committed file named like ``cache_file`` into the cache, if the cache lacks it.

    Returns the committed file used, or ``None`` (cache already filled, or no committed file). A committed
    file whose checksum is missing or wrong is skipped with a warning naming it (the corpus is then
    embedded as before); nothing already cached is touched.
    """
    cache_file = Path(cache_file)
    if cache_file.exists():
        return None
    for folder in dirs:
        src = Path(folder) / cache_file.name
        if not src.exists():
            src = src.with_name(src.name + PACKED)
            if not src.exists():
                continue
        expected = read_sums(folder).get(src.name)
        if expected is None or file_sha256(src) != expected:
            problem = "missing from " + SUMS if expected is None else "mismatch"
            warnings.warn(f"committed embeddings {src}: checksum {problem}; not used (the corpus is embedded instead)",
                          stacklevel=2)
            continue
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(f".{cache_file.stem}.{os.getpid()}.seed{cache_file.suffix}")
        if src.name.endswith(PACKED):
            unpack_calls(src, tmp)
            expected = file_sha256(tmp)
        else:
            shutil.copyfile(src, tmp)
        os.replace(tmp, cache_file)
        # the cache's own checksum beside it (kgir_lib.retrieval.load_embeddings verifies it on every load)
        cache_file.with_name(cache_file.name + ".sha256").write_text(expected + "\n")
        return src
    return None


MAX_COMMITTED_BYTES = 5_000_000  # a committed file stays under 5 MiB (5,242,880 bytes): the packed calls' budget
CALL_OVERHEAD_ROWS = 10  # what computing a call costs besides its rows, in rows (tokenising, the model's dispatch:
                         # a text encoded alone costs about ten times its share of a 64-text batch on this CPU)
ROW_CHARS = 40  # a short text's characters, a row's cost when its call's is not known: HippoRAG 2's facts average
                # 56, the entity names 14 (musique_train; MiniLM's CPU time per character is 0.18-0.24 ms for
                # names, facts and passages alike: benchmarks/bench_encoder_calls.py)
_ROW_BYTES = 1200  # a unique float32 row of 384 values packed (byte planes, LZMA): its random low mantissa bytes


def _rows(store: Path) -> list:
    """``[(key, matrix)]`` of an encoder-calls store, by key; the calls its ``used`` table names when it has one
    (the calls the cache was asked for, so a seed's calls no run asks any more are left out)."""
    import numpy as np

    from .encoder_calls import USED, has_table

    con = sqlite3.connect(store)
    try:
        query = (f"SELECT key, vectors FROM calls WHERE key IN (SELECT key FROM {USED}) ORDER BY key"
                 if has_table(con, USED)
                 else "SELECT key, vectors FROM calls ORDER BY key")
        rows = con.execute(query).fetchall()
    finally:
        con.close()
    out = []
    for key, blob in rows:
        arr = np.load(io.BytesIO(bytes(blob)))
        if arr.dtype != np.float32 or arr.ndim != 2 or _npy(arr) != bytes(blob):
            raise ValueError(f"{store}: call {key} is not a float32 matrix stored as np.save writes it; not packed")
        out.append((key, arr))
    return out


def _unique_rows(calls: list) -> tuple:
    """The distinct rows (bit for bit) of the calls' matrices, in first-seen order, and each call row's index in
    them."""
    import numpy as np

    seen: dict = {}
    unique: list = []
    index: list = []
    for _, arr in calls:
        for row in np.ascontiguousarray(arr, dtype="<f4"):
            b = row.tobytes()
            if b not in seen:
                seen[b] = len(unique)
                unique.append(b)
            index.append(seen[b])
    return unique, index


def call_costs(store: Path) -> dict:
    """``{key: characters}`` of an encoder-calls store's calls whose cost it noted (its
    :data:`~kgir_lib.encoder_calls.COSTS` table; empty for a store without it, e.g. an unpacked seed)."""
    from .encoder_calls import COSTS, has_table

    con = sqlite3.connect(store)
    try:
        return dict(con.execute(f"SELECT key, chars FROM {COSTS}").fetchall()) if has_table(con, COSTS) else {}
    finally:
        con.close()


def select_calls(calls: list, max_bytes: int, costs: Optional[dict] = None) -> list:
    """The calls worth committing within about ``max_bytes``: by the work a seeded call saves per byte it takes,
    best first, until the estimate reaches the budget. A call's work, in characters: its characters (``costs``,
    from the store's :data:`~kgir_lib.encoder_calls.COSTS` table; when not known, :data:`ROW_CHARS` a row) and
    :data:`CALL_OVERHEAD_ROWS` rows more: the encoder's time goes with the characters, so a call of long texts
    saves more than one of names with as many rows. A row shared by several calls (the same text batched alike) is
    stored once, so each call is charged its share of each of its rows (about 1.2 kB a row, divided among the calls
    that hold it bit for bit) and calls that repeat texts come first. Returns the chosen calls, by key."""
    from collections import Counter

    costs = costs or {}
    holders = Counter(b for _, arr in calls for b in {r.tobytes() for r in arr})
    ranked = []
    for key, arr in calls:
        share = sum(_ROW_BYTES / holders[b] for b in {r.tobytes() for r in arr}) + 4 * arr.shape[0] + 64
        work = costs.get(key, arr.shape[0] * ROW_CHARS) + CALL_OVERHEAD_ROWS * ROW_CHARS
        ranked.append((work / share, key, arr, share))
    chosen, used = [], 0.0
    for _, key, arr, share in sorted(ranked, key=lambda r: (-r[0], r[1])):
        if used + share <= max_bytes:
            used += share
            chosen.append((key, arr))
    return sorted(chosen, key=lambda c: c[0])


def pack_calls(store: Path, out: Path, max_bytes: Optional[int] = None) -> int:
    """Pack an encoder-calls store (:class:`kgir_lib.encoder_calls.RememberedCalls`' SQLite file) into ``out``
    (``calls.sqlite.xz``); returns the number of calls packed.

    Only the calls the store's cache was asked for (its ``used`` table, when it has one). A text's vector is the
    same bit for bit in most calls that batch it alike, so each distinct row is stored once and every call lists
    its rows' indices; the distinct float32 rows are laid out as four byte planes (all first bytes, then all
    second bytes, ...), whose sign, exponent and high mantissa bytes repeat, and the whole is LZMA-compressed. A
    JSON header line lists each call's key and shape. ``max_bytes``: the file's size limit; the calls then are
    :func:`select_calls`' choice (weighed by the costs the store noted, :func:`call_costs`), shrunk until the file
    fits (a call left out is computed when asked; on another machine its last bits may differ from the committed
    run's). :func:`unpack_calls` gives back every packed row byte for byte."""
    import numpy as np

    calls = _rows(store)
    costs = call_costs(store)
    budget = max_bytes
    data = b""
    while True:
        chosen = calls if budget is None else select_calls(calls, budget, costs)
        unique, index = _unique_rows(chosen)
        dims = {arr.shape[1] for _, arr in chosen}
        if len(dims) > 1:
            raise ValueError(f"{store}: calls of several widths {sorted(dims)}; not packed")
        header = {"format": 2, "calls": [[key, int(arr.shape[0]), int(arr.shape[1])] for key, arr in chosen],
                  "unique": len(unique)}
        flat = np.frombuffer(b"".join(unique), dtype=np.uint8)
        planes = flat.reshape(-1, 4).T.tobytes() if flat.size else b""
        body = planes + np.asarray(index, dtype="<u4").tobytes()
        data = lzma.compress(json.dumps(header).encode("utf-8") + b"\n" + body, preset=6)
        if budget is None or max_bytes is None or len(data) <= max_bytes:  # (budget is None iff max_bytes is)
            break
        budget = int(budget * max_bytes / len(data) * 0.98)  # (the estimate of a row's bytes was low: shrink)
    tmp = Path(out).with_name(f".{Path(out).name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, out)
    return len(chosen)


def unpack_calls(packed: Path, store: Path) -> int:
    """The SQLite store of :func:`pack_calls`' file ``packed``, written to ``store`` (a new file: rows exactly as
    :class:`~kgir_lib.encoder_calls.RememberedCalls` writes them, each with the SHA-256 of its bytes); returns the
    number of calls (distinct rows with each call's row indices, ``"format": 2``)."""
    import numpy as np

    head, _, body = lzma.decompress(Path(packed).read_bytes()).partition(b"\n")
    header = json.loads(head)
    if not isinstance(header, dict) or header.get("format") != 2:
        raise ValueError(f"{packed}: not a packed encoder-calls file of format 2; pack it again with pack_calls")
    calls = header["calls"]
    dim = calls[0][2] if calls else 0
    width = header["unique"] * dim * 4
    planes, index = body[:width], np.frombuffer(body[width:], dtype="<u4")
    unique = np.frombuffer(planes, dtype=np.uint8).reshape(4, -1).T.copy().view("<f4").reshape(-1, dim) \
        if width else np.zeros((0, dim), dtype="<f4")
    if index.size != sum(n for _, n, _ in calls) or (index.size and int(index.max()) >= len(unique)):
        raise ValueError(f"{packed}: its row indices do not match the calls its header lists (damaged)")
    values = unique[index].reshape(-1) if index.size else np.zeros(0, dtype="<f4")
    Path(store).unlink(missing_ok=True)
    con = sqlite3.connect(store)
    try:
        with con:
            con.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, vectors BLOB NOT NULL, "
                        "sha256 TEXT NOT NULL)")
            at = 0
            for key, n, dim in calls:
                blob = _npy(values[at:at + n * dim].reshape(n, dim).astype(np.float32))
                at += n * dim
                con.execute("INSERT INTO calls VALUES (?, ?, ?)", (key, blob, hashlib.sha256(blob).hexdigest()))
    finally:
        con.close()
    return len(calls)


def _keep_used(store: Path) -> None:
    """Leave in ``store`` only the calls its ``used`` table names, and drop that table (a seed starts with none, so
    the next run's table holds that run's calls alone), the table of single texts (a run's own cache: a seed
    answers whole calls) and that of the calls' costs; a store without the ``used`` table keeps its calls."""
    from .encoder_calls import COSTS, TEXTS, USED, has_table

    con = sqlite3.connect(store)
    try:
        with con:
            if has_table(con, USED):
                con.execute(f"DELETE FROM calls WHERE key NOT IN (SELECT key FROM {USED})")
                con.execute(f"DROP TABLE {USED}")
            con.execute(f"DROP TABLE IF EXISTS {TEXTS}")
            con.execute(f"DROP TABLE IF EXISTS {COSTS}")
        con.execute("VACUUM")
    finally:
        con.close()


def _npy(arr) -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def export_embeddings(cfg, datasets: Sequence[str], source: Optional[Path] = None, calls_only: bool = False,
                      pack: bool = False) -> list:
    """Write the cached embeddings of ``datasets`` and the encoder's calls (:data:`~kgir_lib.encoder_calls.CALLS_FILE`,
    when the cache holds them) to ``results/<profile>/embeddings/`` with their checksums. ``source``: the run
    directory whose cache is read (default the profile's own, ``cfg.run_dir``), e.g. the ``ci`` folder of a test run
    kept with ``KGIR_TEST_RESULTS_DIR``; ``calls_only``: the calls alone (corpora another profile commits already);
    ``pack``: the calls as ``calls.sqlite.xz`` (:func:`pack_calls`: each distinct row once, compressed, and only the
    calls that fit in :data:`MAX_COMMITTED_BYTES`: the local run's calls)."""
    from .data import load_dataset
    from .encoder_calls import CALLS_FILE
    from .retrieval import Encoder, embedding_cache_file

    cache = Path(source or cfg.run_dir) / "cache" / "embeddings"
    out_dir = cfg.run_dir / SEED_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    enc = Encoder(cfg.embed_model, cfg.embed_batch_size)
    sums = read_sums(out_dir)
    written = []
    for name in [] if calls_only else datasets:
        ds = load_dataset(name, cfg.data_path)
        cached = embedding_cache_file(cache, enc, [p.content for p in ds.corpus.passages])
        if not cached.exists():
            raise FileNotFoundError(f"dataset {name!r}: no cached embeddings at {cached}; run notebook 02 first")
        dst = out_dir / cached.name
        shutil.copyfile(cached, dst)
        sums[dst.name] = file_sha256(dst)
        written.append(dst)
    calls = cache / CALLS_FILE
    if calls_only and not calls.exists():
        raise FileNotFoundError(f"no encoder calls at {calls}: run the notebooks there first")
    if calls.exists():
        dst = out_dir / (CALLS_FILE + (PACKED if pack else ""))
        if pack:
            pack_calls(calls, dst, max_bytes=MAX_COMMITTED_BYTES)
        else:
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            tmp.unlink(missing_ok=True)
            con = sqlite3.connect(calls)
            try:
                con.execute("VACUUM INTO ?", (str(tmp),))  # a compact copy, without the cache's free pages
            finally:
                con.close()
            _keep_used(tmp)
            os.replace(tmp, dst)
        sums[dst.name] = file_sha256(dst)
        written.append(dst)
    (out_dir / SUMS).write_text("".join(f"{d}  {n}\n" for n, d in sorted(sums.items())))
    return written


def main(argv=None) -> int:
    from .config import load_config

    ap = argparse.ArgumentParser(description="Commit a profile's corpus embeddings and encoder calls "
                                             "(results/<profile>/embeddings/).")
    ap.add_argument("--profile", default="sample")
    ap.add_argument("--from", dest="source", type=Path, default=None,
                    help="the run directory whose cache is read (default: the profile's own), e.g. DIR/ci of "
                         "`KGIR_TEST_RESULTS_DIR=DIR bash scripts/test.sh notebooks/*.ipynb`")
    ap.add_argument("--calls-only", action="store_true", help="the encoder calls alone, no corpus embeddings")
    ap.add_argument("--pack", action="store_true",
                    help="write the calls packed, calls.sqlite.xz: each distinct row once, compressed, and no more "
                         "calls than fit in 5 MB (the calls worth the most work a byte; the others are computed)")
    args = ap.parse_args(argv)
    cfg = load_config(args.profile)
    for path in export_embeddings(cfg, list(dict.fromkeys(cfg.datasets)), args.source, args.calls_only, args.pack):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
