"""Committed corpus embeddings seed the cache (kgir_lib.embedding_seed): checksum checked, cache never overwritten."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from kgir_lib.embedding_seed import SUMS, read_sums, seed_cache


def commit(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / name, array)
    digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    (folder / SUMS).write_text(f"{digest}  {name}\n")
    return digest


def test_a_committed_file_with_its_checksum_fills_the_missing_cache_exactly(tmp_path):
    emb = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    digest = commit(tmp_path / "committed", "m-abc.npy", emb)
    assert read_sums(tmp_path / "committed") == {"m-abc.npy": digest}
    cache = tmp_path / "cache" / "m-abc.npy"
    assert seed_cache(cache, [tmp_path / "missing", tmp_path / "committed"]) == tmp_path / "committed" / "m-abc.npy"
    loaded = np.load(cache)
    assert loaded.dtype == np.float32 and np.array_equal(loaded, emb)
    np.save(cache, emb * 2)  # a cache that exists is never replaced
    assert seed_cache(cache, [tmp_path / "committed"]) is None
    assert np.array_equal(np.load(cache), emb * 2)


def test_a_wrong_or_missing_checksum_is_refused_with_a_warning_naming_the_file(tmp_path):
    emb = np.ones((2, 3), dtype=np.float32)
    commit(tmp_path / "c", "m-abc.npy", emb)
    np.save(tmp_path / "c" / "m-abc.npy", emb * 3)  # changed after its checksum was written
    cache = tmp_path / "cache" / "m-abc.npy"
    with pytest.warns(UserWarning, match=r"m-abc\.npy: checksum mismatch"):
        assert seed_cache(cache, [tmp_path / "c"]) is None
    assert not cache.exists()
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "m-abc.npy", emb)
    with pytest.warns(UserWarning, match="checksum missing"):
        assert seed_cache(cache, [tmp_path / "d"]) is None
    assert seed_cache(tmp_path / "cache" / "other.npy", [tmp_path / "c"]) is None  # no file of that name


def test_the_encoder_calls_are_exported_whole_and_seed_a_cache_that_has_none(tmp_path, monkeypatch):
    """``python -m kgir_lib.embedding_seed --calls-only --from RUN``: the calls a run's cache holds, compacted, with
    their checksum, in the profile's committed folder; they seed a fresh run's cache and answer its calls."""
    from conftest import BagOfWordsEncoder
    from kgir_lib.config import load_config
    from kgir_lib.embedding_seed import export_embeddings
    from kgir_lib.encoder_calls import CALLS_FILE, RememberedCalls

    kept = tmp_path / "kept" / "ci"  # a test run kept with KGIR_TEST_RESULTS_DIR
    made = RememberedCalls(BagOfWordsEncoder(), kept / "cache" / "embeddings" / CALLS_FILE)
    vectors = made.encode(["Which company merged with Compaq?", "Compaq"])
    cfg = load_config("ci", results_dir=str(tmp_path / "results"))
    written = export_embeddings(cfg, cfg.datasets, source=kept, calls_only=True)
    committed = cfg.run_dir / "embeddings"
    assert written == [committed / CALLS_FILE] and set(read_sums(committed)) == {CALLS_FILE}
    fresh = tmp_path / "fresh" / CALLS_FILE
    assert seed_cache(fresh, [committed]) == committed / CALLS_FILE
    again = RememberedCalls(BagOfWordsEncoder(), fresh)
    again.encoder.encode = None  # answered from the seed, or this fails
    assert again.encode(["Which company merged with Compaq?", "Compaq"]).tobytes() == vectors.tobytes()
    import sqlite3

    tables = {r[0] for r in sqlite3.connect(committed / CALLS_FILE).execute("SELECT name FROM sqlite_master")}
    assert "used" not in tables  # (a seed starts a run's record of the calls it asks afresh)
    made.encode(["a call the run asked"])
    with sqlite3.connect(made.path) as con:
        con.execute("DELETE FROM used WHERE key = ?", (made._key(["a call the run asked"]),))  # ... and no longer
    export_embeddings(cfg, cfg.datasets, source=kept, calls_only=True)
    kept_keys = {r[0] for r in sqlite3.connect(committed / CALLS_FILE).execute("SELECT key FROM calls")}
    assert kept_keys == {made._key(["Which company merged with Compaq?", "Compaq"])}
    with pytest.raises(FileNotFoundError, match="no encoder calls"):
        export_embeddings(cfg, cfg.datasets, source=tmp_path / "nothing", calls_only=True)


def test_packed_calls_unpack_to_every_row_byte_for_byte_and_seed_the_cache(tmp_path):
    """``--pack``: the committed calls as ``calls.sqlite.xz``; a cache seeded from it answers every call with the
    very vectors the run stored (and the checksum guards the packed file as it guards the plain one)."""
    import sqlite3

    from conftest import BagOfWordsEncoder
    from kgir_lib.embedding_seed import pack_calls, unpack_calls
    from kgir_lib.encoder_calls import CALLS_FILE, RememberedCalls

    made = RememberedCalls(BagOfWordsEncoder(), tmp_path / "run" / CALLS_FILE)
    texts = [["Which company merged with Compaq?", "Compaq"], ["HP", "Dell", "Compaq merged with HP", "x"]]
    vectors = [made.encode(t) for t in texts]
    committed = tmp_path / "committed"
    committed.mkdir()
    assert pack_calls(made.path, committed / (CALLS_FILE + ".xz")) == 2
    assert unpack_calls(committed / (CALLS_FILE + ".xz"), tmp_path / "back.sqlite") == 2
    rows = [sqlite3.connect(p).execute("SELECT key, vectors, sha256 FROM calls ORDER BY key").fetchall()
            for p in (made.path, tmp_path / "back.sqlite")]
    assert rows[0] == rows[1] and len(rows[0]) == 2
    digest = hashlib.sha256((committed / (CALLS_FILE + ".xz")).read_bytes()).hexdigest()
    (committed / SUMS).write_text(f"{digest}  {CALLS_FILE}.xz\n")
    cache = tmp_path / "fresh" / CALLS_FILE
    assert seed_cache(cache, [tmp_path / "none", committed]) == committed / (CALLS_FILE + ".xz")

    class NoModel(BagOfWordsEncoder):
        def encode(self, texts, progress=False):
            raise AssertionError("a seeded call must not reach the model")

    again = RememberedCalls(NoModel(), cache)
    for t, v in zip(texts, vectors):
        assert again.encode(t).tobytes() == v.tobytes()
    (committed / SUMS).write_text(f"{'0' * 64}  {CALLS_FILE}.xz\n")
    with pytest.warns(UserWarning, match=r"calls\.sqlite\.xz: checksum mismatch"):
        assert seed_cache(tmp_path / "other" / CALLS_FILE, [committed]) is None


def test_packing_refuses_a_row_it_could_not_give_back_exactly(tmp_path):
    import sqlite3

    from kgir_lib.embedding_seed import pack_calls

    store = tmp_path / "calls.sqlite"
    con = sqlite3.connect(store)
    with con:
        con.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, vectors BLOB NOT NULL, sha256 TEXT NOT NULL)")
        import io
        buf = io.BytesIO()
        np.save(buf, np.ones((2, 3), dtype=np.float64))
        con.execute("INSERT INTO calls VALUES ('k', ?, 'x')", (buf.getvalue(),))
    con.close()
    with pytest.raises(ValueError, match="call k is not a float32 matrix"):
        pack_calls(store, tmp_path / "out.xz")
    assert not (tmp_path / "out.xz").exists()


def test_packing_keeps_only_the_calls_the_cache_was_asked_for_and_stores_a_shared_row_once(tmp_path):
    """A seeded cache also holds the seed's calls no run asks any more: the ``used`` table names the ones asked for,
    and only those are packed. A row that several calls hold bit for bit is stored once (format 2), and every
    call still unpacks byte for byte."""
    import lzma
    import sqlite3

    from conftest import BagOfWordsEncoder
    from kgir_lib.embedding_seed import pack_calls, unpack_calls
    from kgir_lib.encoder_calls import CALLS_FILE, USED, RememberedCalls

    made = RememberedCalls(BagOfWordsEncoder(), tmp_path / "run" / CALLS_FILE)
    asked = [["Compaq", "HP"], ["HP", "Compaq", "Dell"], ["Dell"]]
    vectors = [made.encode(t) for t in asked]
    con = sqlite3.connect(made.path)
    with con:
        con.execute(f"DELETE FROM {USED} WHERE key = ?", (made._key(["Dell"]),))  # a call no run asks any more
    con.close()
    packed = tmp_path / "calls.sqlite.xz"
    assert pack_calls(made.path, packed) == 2
    header = json.loads(lzma.decompress(packed.read_bytes()).partition(b"\n")[0])
    assert header["format"] == 2 and header["unique"] == 3  # Compaq, HP, Dell: five rows, three distinct
    assert unpack_calls(packed, tmp_path / "back.sqlite") == 2
    back = dict(sqlite3.connect(tmp_path / "back.sqlite").execute("SELECT key, vectors FROM calls").fetchall())
    assert set(back) == {made._key(t) for t in asked[:2]}
    for t, v in zip(asked[:2], vectors):
        assert np.load(__import__("io").BytesIO(back[made._key(t)])).tobytes() == v.tobytes()


def test_a_size_limit_packs_the_calls_worth_the_most_work_a_byte_and_stays_under_it(tmp_path):
    """``max_bytes``: the calls that fit, those whose rows other calls share first; the file stays under the limit
    and what it holds unpacks exactly."""
    import sqlite3

    from kgir_lib.embedding_seed import pack_calls, select_calls, unpack_calls
    from kgir_lib.encoder_calls import CALLS_FILE, RememberedCalls

    class Noise:
        model_name, batch_size, dim = "noise", 8, 384

        def encode(self, texts, progress=False):
            return np.stack([np.random.default_rng(abs(hash(t)) % 2 ** 32).standard_normal(self.dim)
                             for t in texts]).astype(np.float32)

    made = RememberedCalls(Noise(), tmp_path / CALLS_FILE)
    shared = [f"shared {i}" for i in range(20)]
    made.encode(shared)
    made.encode(shared[::-1])  # the same rows again: nearly free to add
    made.encode([f"lone {i}" for i in range(40)])  # forty rows of its own
    from kgir_lib.embedding_seed import _rows

    calls = _rows(made.path)
    chosen = {key for key, _ in select_calls(calls, 30_000)}
    assert chosen == {made._key(shared), made._key(shared[::-1])}
    packed = tmp_path / "calls.sqlite.xz"
    assert pack_calls(made.path, packed, max_bytes=40_000) == 2 and packed.stat().st_size <= 40_000
    assert unpack_calls(packed, tmp_path / "back.sqlite") == 2
    rows = sqlite3.connect(tmp_path / "back.sqlite").execute("SELECT key FROM calls").fetchall()
    assert {r[0] for r in rows} == chosen
    with pytest.raises(ValueError, match="several widths"):
        con = sqlite3.connect(made.path)
        import io
        buf = io.BytesIO()
        np.save(buf, np.ones((1, 3), dtype=np.float32))
        with con:
            con.execute("INSERT INTO calls VALUES ('w', ?, 'x')", (buf.getvalue(),))
            con.execute("INSERT INTO used VALUES ('w')")
        con.close()
        pack_calls(made.path, tmp_path / "other.xz")


def test_a_size_limit_packs_a_call_of_long_texts_before_one_of_as_many_names(tmp_path):
    """The encoder's time goes with the characters it reads: each call's cost is noted (each text counted up to
    ``TEXT_CHARS_CAP``), and of two calls with as many rows (so as many bytes) the one of long texts is packed
    first; the seed a refresh writes keeps the calls alone."""
    import sqlite3

    from kgir_lib.embedding_seed import _keep_used, _rows, call_costs, select_calls
    from kgir_lib.encoder_calls import CALLS_FILE, COSTS, TEXT_CHARS_CAP, RememberedCalls, has_table

    class Noise:
        model_name, batch_size, dim = "noise", 8, 384

        def encode(self, texts, progress=False):
            return np.stack([np.random.default_rng(abs(hash(t)) % 2 ** 32).standard_normal(self.dim)
                             for t in texts]).astype(np.float32)

    made = RememberedCalls(Noise(), tmp_path / CALLS_FILE)
    names = [f"name {i}" for i in range(10)]
    long = [f"passage {i} " + "x" * 5000 for i in range(10)]
    made.encode(names)
    made.encode(long)
    costs = call_costs(made.path)
    assert costs == {made._key(names): sum(len(t) for t in names), made._key(long): 10 * TEXT_CHARS_CAP}
    calls = _rows(made.path)
    assert {key for key, _ in select_calls(calls, 20_000, costs)} == {made._key(long)}
    without = {key for key, _ in select_calls(calls, 20_000)}  # (rows alone: one call, whichever; ties by key)
    assert len(without) == 1
    _keep_used(made.path)
    assert not has_table(sqlite3.connect(made.path), COSTS)


def test_no_committed_file_exceeds_5_mib():
    """The repository's rule, which the packed encoder calls are sized for (``MAX_COMMITTED_BYTES``)."""
    import subprocess

    from kgir_lib.config import PROJECT_ROOT
    from kgir_lib.embedding_seed import MAX_COMMITTED_BYTES

    assert MAX_COMMITTED_BYTES <= 5 * 2 ** 20
    files = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True, check=True).stdout
    paths = [PROJECT_ROOT / p for p in files.decode("utf-8").split("\0") if p]
    assert len(paths) > 100
    too_big = [(str(p.relative_to(PROJECT_ROOT)), p.stat().st_size) for p in paths
               if p.is_file() and p.stat().st_size > 5 * 2 ** 20]
    assert too_big == []


def test_a_run_elsewhere_is_seeded_from_its_own_profiles_committed_calls_before_any_other(tmp_path):
    from kgir_lib.config import PROJECT_ROOT, load_config
    from kgir_lib.embedding_seed import SEED_DIR, committed_dirs

    for profile in ("local", "sample"):
        dirs = committed_dirs(load_config(profile, results_dir=str(tmp_path)))
        assert dirs[:2] == [tmp_path / profile / SEED_DIR, PROJECT_ROOT / "results" / profile / SEED_DIR]
        assert len(dirs) == len(set(dirs))  # every other profile's folder follows once
