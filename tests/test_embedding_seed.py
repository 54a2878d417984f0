"""Committed corpus embeddings seed the cache (kgir_lib.embedding_seed): checksum checked, cache never overwritten."""
from __future__ import annotations

import hashlib

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
    with pytest.raises(FileNotFoundError, match="no encoder calls"):
        export_embeddings(cfg, cfg.datasets, source=tmp_path / "nothing", calls_only=True)
