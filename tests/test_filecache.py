"""What was computed from files is kept while they are unchanged (``kgir_lib.filecache``), and a dataset is read once
a process: each call gets its own lists, an edited file is read again, a repaired one warns at every load."""
from __future__ import annotations

import json
import os
import time

import pytest

from kgir_lib import data
from kgir_lib.filecache import FileMemo
from kgir_lib.traces import REPLACED

SETTLE_S = 0.05  # the tests' settling time: far above a file-system clock tick (a few ms), far below the 2 s default


def _settle():
    time.sleep(SETTLE_S * 1.5)


def test_a_file_changed_within_the_settling_time_is_not_cached(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("1")
    memo = FileMemo()
    assert memo.key("f", path) is None
    memo.put(None, "value")
    assert memo.get(None) is None and not memo._held


def test_any_change_of_a_file_changes_its_key_even_with_its_size_and_modification_time_kept(tmp_path):
    memo, path, absent = FileMemo(settle_s=SETTLE_S), tmp_path / "f.json", tmp_path / "meta.json"
    path.write_text("[1]")
    _settle()
    first = memo.key("f", path, absent)
    assert first is not None and first == memo.key("f", path, absent)
    assert memo.key("g", path, absent) != first  # the label is part of the key
    mtime = path.stat().st_mtime_ns
    path.write_text("[2]")  # same size
    os.utime(path, ns=(mtime, mtime))  # same modification time: the change time still moves
    _settle()
    assert memo.key("f", path, absent) not in (None, first)
    absent.write_text("{}")  # a file that appears changes the key too
    _settle()
    assert memo.key("f", path, absent) != memo.key("f", path, tmp_path / "still_absent.json")


def test_the_oldest_entry_goes_beyond_the_size():
    memo = FileMemo(size=2)
    for n in range(3):
        memo.put(("k", n), n)
    assert [memo.get(("k", n)) for n in range(3)] == [None, 1, 2]


def _write_set(folder, answer: str) -> None:
    rec = {"id": "m0", "question": "q?", "answer": answer, "answer_aliases": [],
           "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "body", "is_supporting": True}],
           "question_decomposition": [{"question": "q?", "answer": answer, "paragraph_support_idx": 0}]}
    (folder / "s.json").write_text(json.dumps([rec], ensure_ascii=True))
    (folder / "s_corpus.json").write_text(json.dumps([{"title": "T", "text": "body"}]))


@pytest.fixture
def quick(monkeypatch):
    """Datasets cached once their files are :data:`SETTLE_S` old."""
    memo = FileMemo(settle_s=SETTLE_S)
    monkeypatch.setattr(data, "_LOADED", memo)
    return memo


def test_a_dataset_is_read_once_and_every_call_gets_its_own_lists(tmp_path, quick):
    (tmp_path / "s").mkdir()
    _write_set(tmp_path / "s", "Paris")
    _settle()
    first = data.load_dataset("s", tmp_path)
    assert len(quick._held) == 1
    first.questions.clear()
    first.corpus.passages.clear()
    second = data.load_dataset("s", tmp_path)
    assert [q.answers for q in second.questions] == [("Paris",)] and len(second.corpus) == 1
    assert second.corpus[second.corpus.pids[0]].text == "body"
    assert second.questions is not data.load_dataset("s", tmp_path).questions


def test_an_edited_dataset_is_read_again(tmp_path, quick):
    (tmp_path / "s").mkdir()
    _write_set(tmp_path / "s", "Paris")
    _settle()
    assert data.load_dataset("s", tmp_path).questions[0].answers == ("Paris",)
    questions = tmp_path / "s" / "s.json"
    mtime = questions.stat().st_mtime_ns
    _write_set(tmp_path / "s", "Rouen")  # same size
    os.utime(questions, ns=(mtime, mtime))
    assert data.load_dataset("s", tmp_path).questions[0].answers == ("Rouen",)  # too fresh to be cached: read
    _settle()
    assert data.load_dataset("s", tmp_path).questions[0].answers == ("Rouen",)  # settled: read again, cached
    assert len(quick._held) == 2


def test_a_dataset_whose_text_was_repaired_warns_and_counts_at_every_load(tmp_path, quick):
    (tmp_path / "s").mkdir()
    _write_set(tmp_path / "s", "Paris\ud800")
    _settle()
    for _ in range(2):
        before = REPLACED["data"]
        with pytest.warns(UserWarning, match="lone UTF-16 surrogate"):
            data.load_dataset("s", tmp_path)
        assert REPLACED["data"] == before + 2  # the answer and its hop's answer
    assert not quick._held
