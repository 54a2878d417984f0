"""Import of HippoRAG's OpenIE output, and its equality with the LLM route's stored form."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from kgir_lib.config import default_data_dir
from kgir_lib.data import Corpus, load_corpus
from kgir_lib.kg.extract import update_kg
from kgir_lib.kg import KnowledgeGraph
from kgir_lib.kg.openie import OpenIEFormatError, import_openie
from kgir_lib.kg.parse import parse_triples
from kgir_lib.kg.store import load_kg, save_kg
from kgir_lib.llm import LLM, LLMCache, ScriptedBackend

from conftest import make_passage

NAME = "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"


def real_files() -> tuple:
    folder = default_data_dir() / "musique_train"
    if not (folder / NAME).exists():
        pytest.skip(f"real OpenIE file not found in {folder} (set KGIR_DATA_DIR to the shared data folder)")
    return folder / NAME, load_corpus(folder / "musique_train_corpus.json")


def write(tmp_path: Path, obj) -> Path:
    path = tmp_path / "openie_x_results_test.json"
    path.write_text(json.dumps(obj))
    return path


def test_import_real_file():
    path, corpus = real_files()
    docs = json.loads(path.read_text())["docs"]
    kg, drops = import_openie(path, corpus)
    expected_kept, expected_drops = 0, Counter()
    for d in docs:
        k, dr = parse_triples(d["extracted_triples"])
        expected_kept += len(k)
        expected_drops += dr
    assert len(corpus) == 1890 and kg.extracted == set(corpus.pids)  # every passage, 2 of them without triples
    assert len(kg) == expected_kept == 17184
    assert drops == expected_drops == Counter(wrong_arity=185, duplicate=30, head_equals_tail=20)
    assert sum(1 for pid in corpus.pids if not kg.triples_of([pid])) == 2
    first = corpus.passages[0]
    assert kg.triples_of([first.pid])[0].head == docs[0]["extracted_triples"][0][0]


def test_import_equals_llm_route_stored_form(tmp_path):
    """The same triples through the LLM route (as `h ## r ## t` text) store byte-identical files."""
    path, corpus = real_files()
    docs = json.loads(path.read_text())["docs"]
    plain = [d for d in docs[:120] if not any("#" in str(x) or "|" in str(x) for t in d["extracted_triples"] for x in t)]
    by_content = {f"{d['title']}\n{d['text']}": "\n".join(" ## ".join(map(str, t)) for t in d["extracted_triples"])
                  for d in plain}
    sub = Corpus([p for p in corpus.passages if p.content in by_content])
    assert len(sub) == len(plain) > 100

    imported, imp_drops = import_openie(write(tmp_path, {"docs": plain}), sub)

    def script(req):
        return by_content[req.messages[-1][1]]

    llm = LLM(ScriptedBackend(script), LLMCache(tmp_path / "llm.sqlite"), progress=False)
    extracted = KnowledgeGraph()
    rep = update_kg(extracted, llm, sub.passages)
    assert rep.drops == imp_drops
    a, b = save_kg(imported, tmp_path / "a"), save_kg(extracted, tmp_path / "b")
    for name in ("triples.parquet", "extracted.json", "entities.csv", "relations.csv", "drops.json", "stats.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    fa, fb = pd.read_parquet(a / "triples.parquet"), pd.read_parquet(b / "triples.parquet")
    assert list(fa.dtypes) == list(fb.dtypes) and fa.equals(fb)
    assert load_kg(a).to_frame().equals(load_kg(b).to_frame())


def test_matching_skips_unknown_and_duplicate_docs(tmp_path):
    p1, p2 = make_passage("Compaq", "Compaq made PCs."), make_passage("HP", "HP merged with Compaq.")
    docs = [
        {"title": "Compaq", "text": "Compaq made PCs.", "extracted_triples": [["Compaq", "made", "PCs"]]},
        {"passage": "HP\nHP merged with Compaq.", "extracted_triples": [["HP", "merged with", "Compaq"], ["HP"]]},
        {"title": "Other", "text": "Not in the corpus.", "extracted_triples": [["a", "b", "c"]]},
        {"title": "Compaq", "text": "Compaq made PCs.", "extracted_triples": []},
    ]
    kg, drops = import_openie(write(tmp_path, {"docs": docs}), Corpus([p1, p2]))
    assert drops == Counter(doc_not_in_corpus=1, duplicate_doc=1, wrong_arity=1)
    assert [t.text() for t in kg.triples_of([p1.pid, p2.pid])] == ["(Compaq, made, PCs)", "(HP, merged with, Compaq)"]


@pytest.mark.parametrize("content, message", [
    ("{oops", "not valid JSON"),
    (json.dumps({"documents": []}), "expected a top-level object with a 'docs' list"),
    (json.dumps({"docs": [["x"]]}), r"docs\[0\] is a list, expected an object"),
    (json.dumps({"docs": [{"title": "a", "text": "b"}]}), r"docs\[0\] has no field 'extracted_triples'"),
    (json.dumps({"docs": [{"extracted_triples": []}]}), r"docs\[0\] has neither 'title' \+ 'text' nor 'passage'"),
])
def test_bad_files_name_the_file_and_field(tmp_path, content, message):
    path = tmp_path / "openie_bad.json"
    path.write_text(content)
    with pytest.raises(OpenIEFormatError, match=message) as err:
        import_openie(path, Corpus([]))
    assert str(path) in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(OpenIEFormatError, match="no such OpenIE file"):
        import_openie(tmp_path / "nope.json", Corpus([]))
