"""Stored form of a KG: round trip, vocabularies, stats, atomic writes, clear errors; Table 3."""
from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.kg.stats import side_by_side, table3, triples_per_passage
from kgir_lib.kg.store import KGStoreError, drops_of, load_kg, record_drops, save_kg, vocabulary


def test_round_trip_keeps_triples_order_and_empty_passages(tiny_kg, tmp_path):
    tiny_kg.add("p-empty", [])
    record_drops(tiny_kg, {"p-empty": Counter(wrong_arity=2)})
    d = save_kg(tiny_kg, tmp_path / "kg")
    assert sorted(p.name for p in d.iterdir()) == ["drops.json", "entities.csv", "extracted.json",
                                                   "relations.csv", "stats.json", "triples.parquet"]
    loaded = load_kg(d)
    assert loaded.to_frame().equals(tiny_kg.to_frame())
    assert loaded.extracted == tiny_kg.extracted and "p-empty" in loaded.extracted
    assert drops_of(loaded) == {"p-empty": Counter(wrong_arity=2)}
    assert list(pd.read_parquet(d / "triples.parquet").columns) == ["head", "relation", "tail", "pid"]
    assert not list(d.glob(".*.tmp"))


def test_vocabularies_and_stats(tiny_kg, tmp_path):
    d = save_kg(tiny_kg, tmp_path / "kg")
    ents = pd.read_csv(d / "entities.csv")
    rels = pd.read_csv(d / "relations.csv")
    # Compaq: 2 triples of its own + HP merged with Compaq = 3
    assert ents.iloc[0].tolist() == ["Compaq", 3]
    assert len(ents) == len(tiny_kg.entities()) and len(rels) == len(tiny_kg.relations())
    assert rels.set_index("relation")["triples"]["is a"] == 2
    stats = json.loads((d / "stats.json").read_text())
    assert stats == {**tiny_kg.stats(), "drops": {}}
    assert stats["triples"] == 8 and stats["passages"] == 6


def test_entity_counted_once_per_triple():
    kg = KnowledgeGraph([Triple("A", "r", "B", "p"), Triple("A", "s", "C", "p")], ["p"])
    assert vocabulary(kg, "entity").values.tolist() == [["A", 2], ["B", 1], ["C", 1]]


def test_empty_graph_round_trip(tmp_path):
    d = save_kg(KnowledgeGraph(), tmp_path / "kg")
    loaded = load_kg(d)
    assert len(loaded) == 0 and loaded.extracted == set()


def test_saving_after_removal_forgets_drops(tiny_kg, tmp_path):
    pid = tiny_kg.triples[0].pid
    record_drops(tiny_kg, {pid: Counter(duplicate=1)})
    tiny_kg.remove([pid])
    d = save_kg(tiny_kg, tmp_path / "kg")
    assert json.loads((d / "drops.json").read_text()) == {}


def test_failed_write_leaves_the_old_file(tiny_kg, tmp_path, monkeypatch):
    d = save_kg(tiny_kg, tmp_path / "kg")
    before = (d / "triples.parquet").read_bytes()
    import pyarrow.parquet as pq

    def boom(table, path):
        open(path, "wb").write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", boom)
    tiny_kg.add("new", [Triple("X", "r", "Y", "new")])
    with pytest.raises(OSError):
        save_kg(tiny_kg, d)
    assert (d / "triples.parquet").read_bytes() == before
    assert not list(d.glob(".*.tmp"))
    assert len(load_kg(d)) == 8


def test_missing_or_corrupt_files_raise_clear_errors(tiny_kg, tmp_path):
    with pytest.raises(KGStoreError, match="triples.parquet: missing"):
        load_kg(tmp_path / "nowhere")
    d = save_kg(tiny_kg, tmp_path / "kg")
    (d / "extracted.json").write_text("{not json")
    with pytest.raises(KGStoreError, match="extracted.json: corrupt JSON"):
        load_kg(d)
    (d / "extracted.json").unlink()
    with pytest.warns(UserWarning, match="extracted.json: missing"):
        recovered = load_kg(d)  # a first save interrupted after the triples
    assert recovered.to_frame().equals(tiny_kg.to_frame())
    (d / "triples.parquet").write_bytes(b"garbage")
    with pytest.raises(KGStoreError, match="triples.parquet: unreadable parquet"):
        load_kg(d)
    pd.DataFrame({"head": ["a"], "tail": ["b"]}).to_parquet(d / "triples.parquet")
    with pytest.raises(KGStoreError, match=r"lacks columns \['relation', 'pid'\]"):
        load_kg(d)


# ---------------------------------------------------------------------------- Table 3 and views
def test_table3_counts_and_drops(tiny_kg):
    small = KnowledgeGraph([Triple("A", "r", "B", "p1")], ["p1", "p2"])
    record_drops(small, {"p1": Counter(wrong_arity=3), "p2": Counter(unparseable=1)})
    t = table3({"tiny": (tiny_kg, Counter(duplicate=2, doc_not_in_corpus=1)), "small": (small, None)})
    assert t.loc["tiny", ["passages", "entities", "relations", "triples"]].tolist() == [6, 12, 7, 8]  # 12 distinct heads/tails, 7 relations
    assert t.loc["tiny", "triples_per_passage"] == pytest.approx(8 / 6)
    assert t.loc["tiny", "drop_duplicate"] == 2 and t.loc["tiny", "drop_doc_not_in_corpus"] == 1
    assert t.loc["tiny", "drops_total"] == 3
    assert t.loc["small", ["passages", "triples", "drop_wrong_arity", "drop_unparseable", "drops_total"]].tolist() \
        == [2, 1, 3, 1, 4]
    assert list(t.columns[:5]) == ["passages", "entities", "relations", "triples", "triples_per_passage"]


def test_triples_per_passage_includes_zero(tiny_kg):
    tiny_kg.add("zero", [])
    s = triples_per_passage(tiny_kg)
    assert s["zero"] == 0 and s.sum() == 8 and len(s) == 7


def test_side_by_side(tiny_kg, tiny_dataset):
    p = tiny_dataset.corpus.passages[1]
    df = side_by_side(tiny_kg, tiny_dataset.corpus, [p.pid], raw={p.pid: "raw"})
    assert df.loc[p.pid, "passage"].startswith("Hewlett-Packard: In 2002")
    assert df.loc[p.pid, "triples"] == "(Hewlett-Packard, merged with, Compaq)\n(Hewlett-Packard, merged in, 2002)"
    assert df.loc[p.pid, "raw LLM output"] == "raw"


def test_lone_surrogates_are_replaced_counted_and_saved(tmp_path):
    """A lone surrogate from an LLM reply made save_kg raise UnicodeEncodeError."""
    from kgir_lib.traces import REPLACED

    kg = KnowledgeGraph([Triple("Bad\ud800name", "is", "x\udc80", "p1"), Triple("A", "b", "C", "p1")], ["p1"])
    before = REPLACED["kg_store"]
    with pytest.warns(UserWarning, match="2 lone surrogate"):
        d = save_kg(kg, tmp_path / "kg")
    assert REPLACED["kg_store"] == before + 2
    loaded = load_kg(d)
    assert [(t.head, t.tail) for t in loaded.triples] == [("Bad\ufffdname", "x\ufffd"), ("A", "C")]
    assert "Bad\ufffdname" in (d / "entities.csv").read_text(encoding="utf-8")


@pytest.mark.parametrize("drops", ['{"p1": {"unparseable": "x"}}', '{"p1": ["unparseable"]}',
                                   '{"p1": {"duplicate": -2}}'])
def test_a_bad_drops_file_is_an_error_naming_it(tiny_kg, tmp_path, drops):
    d = save_kg(tiny_kg, tmp_path / "kg")
    (d / "drops.json").write_text(drops)
    with pytest.raises(KGStoreError, match=r"drops\.json: passage 'p1' .* whole count >= 0; delete the file"):
        load_kg(d)
    (d / "drops.json").unlink()
    assert len(load_kg(d)) == len(tiny_kg)  # the graph itself is intact
