"""The encoder's calls kept on disk (kgir_lib.encoder_calls.RememberedCalls): a rerun gets back, bit for bit, what the
same call computed, without loading the model; a damaged row is recomputed, never read."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from conftest import BagOfWordsEncoder
from kgir_lib.encoder_calls import RememberedCalls
from kgir_lib.retrieval import Encoder, _ENCODERS


class CountingEncoder(BagOfWordsEncoder):
    def __init__(self) -> None:
        self.calls: list = []

    def encode(self, texts, progress=False):
        self.calls.append(list(texts))
        return super().encode(texts, progress)


def test_a_call_made_again_is_answered_from_the_store_bit_for_bit(tmp_path):
    inner = CountingEncoder()
    enc = RememberedCalls(inner, tmp_path / "calls.sqlite")
    first = enc.encode(["Compaq merged with HP", "Dell"])
    again = RememberedCalls(CountingEncoder(), tmp_path / "calls.sqlite")  # another process, the same store
    second = again.encode(["Compaq merged with HP", "Dell"])
    assert second.tobytes() == first.tobytes() and second.dtype == first.dtype and again.encoder.calls == []
    again.encode(["Dell", "Compaq merged with HP"])  # another call (another order): computed, not assembled
    assert again.encoder.calls == [["Dell", "Compaq merged with HP"]]
    assert enc.model_name == "bow-test" and enc.dim == 256  # the encoder's own attributes


def test_a_damaged_row_is_recomputed_with_a_warning(tmp_path):
    enc = RememberedCalls(CountingEncoder(), tmp_path / "calls.sqlite")
    good = enc.encode(["Lenovo"])
    with sqlite3.connect(tmp_path / "calls.sqlite") as con:
        blob = bytearray(con.execute("SELECT vectors FROM calls").fetchone()[0])
        blob[-4:] = b"\x00\x00\x80\x7f"  # the last float made +inf: still a valid .npy
        con.execute("UPDATE calls SET vectors = ?", (bytes(blob),))
    with pytest.warns(UserWarning, match="do not match their checksum"):
        again = enc.encode(["Lenovo"])
    assert again.tobytes() == good.tobytes() and len(enc.encoder.calls) == 2


def test_stored_calls_need_no_model(tmp_path):
    """An encoder is loaded at its first use only: one whose every call is stored never loads (a model name that
    could not be loaded, and the process's model registry unchanged), and its width comes from the store."""
    store = tmp_path / "calls.sqlite"
    named = BagOfWordsEncoder()
    named.cache_name = "no-such-model"  # the key the stored call was made under
    vectors = RememberedCalls(named, store).encode(["IBM sold its PC business"])
    before = dict(_ENCODERS)
    lazy = RememberedCalls(Encoder("no-such-model", backend="sentence-transformers"), store)
    assert lazy.encode(["IBM sold its PC business"]).tobytes() == vectors.tobytes()
    assert lazy.dim == 256 and _ENCODERS == before
    np.testing.assert_array_equal(lazy.encode(["IBM sold its PC business"]), vectors)
