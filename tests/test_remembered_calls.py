"""The encoder's calls kept on disk (kgir_lib.encoder_calls.RememberedCalls): a rerun gets back, bit for bit, what the
same call got, without loading the model; a new call encodes only the texts no call held before; a damaged row is
recomputed, never read."""
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
    swapped = again.encode(["Dell", "Compaq merged with HP"])  # another call (another order): assembled, not computed
    assert again.encoder.calls == [] and swapped.tobytes() == first[::-1].tobytes()
    assert enc.model_name == "bow-test" and enc.dim == 256  # the encoder's own attributes


def test_a_damaged_row_is_recomputed_with_a_warning(tmp_path):
    """A damaged call is never read: it is assembled again from its texts' vectors, or computed without them."""
    enc = RememberedCalls(CountingEncoder(), tmp_path / "calls.sqlite")
    good = enc.encode(["Lenovo"])

    def damage() -> None:
        with sqlite3.connect(tmp_path / "calls.sqlite") as con:
            blob = bytearray(con.execute("SELECT vectors FROM calls").fetchone()[0])
            blob[-4:] = b"\x00\x00\x80\x7f"  # the last float made +inf: still a valid .npy
            con.execute("UPDATE calls SET vectors = ?", (bytes(blob),))

    damage()
    with pytest.warns(UserWarning, match="do not match their checksum"):
        again = enc.encode(["Lenovo"])
    assert again.tobytes() == good.tobytes() and len(enc.encoder.calls) == 1  # from the kept text
    damage()
    with sqlite3.connect(tmp_path / "calls.sqlite") as con:
        con.execute("DELETE FROM texts")
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


def test_a_new_call_encodes_only_the_texts_no_call_held_each_once(tmp_path):
    """A call not stored is assembled: the texts earlier calls held (computed, or read back from a stored call, as a
    seed's) keep their vectors bit for bit, the others are encoded once each in one call; the call is then stored."""
    store = tmp_path / "calls.sqlite"
    made = RememberedCalls(CountingEncoder(), store).encode(["Compaq", "HP"])
    enc = RememberedCalls(CountingEncoder(), store)
    out = enc.encode(["Dell", "HP", "Dell", "IBM", "Compaq"])
    assert enc.encoder.calls == [["Dell", "IBM"]]  # each new text once, in first-seen order
    assert out.dtype == np.float32 and out.shape == (5, 256)
    assert out[1].tobytes() == made[1].tobytes() and out[4].tobytes() == made[0].tobytes()
    assert out[0].tobytes() == out[2].tobytes()
    np.testing.assert_allclose(out, BagOfWordsEncoder().encode(["Dell", "HP", "Dell", "IBM", "Compaq"]), atol=1e-6)
    again = RememberedCalls(CountingEncoder(), store)
    assert again.encode(["Dell", "HP", "Dell", "IBM", "Compaq"]).tobytes() == out.tobytes()
    assert again.encode(["IBM", "HP"]).tobytes() == out[[3, 1]].tobytes() and again.encoder.calls == []
    with sqlite3.connect(store) as con:  # what the store counts as computed: each text once, where it was encoded
        assert con.execute("SELECT count(*) FROM texts WHERE computed = 1").fetchone()[0] == 4


def test_the_texts_of_a_stored_call_answer_later_calls(tmp_path):
    """A call answered whole (a seeded one) lends its texts' vectors to later calls that mix them with new texts."""
    store = tmp_path / "calls.sqlite"
    seeded = RememberedCalls(CountingEncoder(), store).encode(["Compaq", "HP"])
    with sqlite3.connect(store) as con:  # a seed holds calls only
        con.execute("DELETE FROM texts")
    enc = RememberedCalls(CountingEncoder(), store)
    assert enc.encode(["Compaq", "HP"]).tobytes() == seeded.tobytes() and enc.encoder.calls == []
    out = enc.encode(["HP", "Lenovo"])
    assert enc.encoder.calls == [["Lenovo"]] and out[0].tobytes() == seeded[1].tobytes()


def test_a_damaged_text_is_recomputed_with_a_warning(tmp_path):
    store = tmp_path / "calls.sqlite"
    enc = RememberedCalls(CountingEncoder(), store)
    enc.encode(["Lenovo", "Acer"])
    with sqlite3.connect(store) as con:
        con.execute("UPDATE texts SET vector = zeroblob(1024)")
    with pytest.warns(UserWarning, match="1 text vector"):
        out = enc.encode(["Acer"])
    assert enc.encoder.calls[-1] == ["Acer"]
    np.testing.assert_allclose(out, BagOfWordsEncoder().encode(["Acer"]), atol=1e-6)
    assert enc.encode(["Acer", "Dell"]).tobytes()[:1024] == out.tobytes()  # the recomputed row replaced the damaged one
    assert enc.encoder.calls[-1] == ["Dell"]
