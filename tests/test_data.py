"""Data loaders on the real shared samples, sampling, and errors on crafted files (KGIR-RAG §3.1, §3.3)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kgir_lib.config import default_data_dir
from kgir_lib.data import (SAMPLE_RESERVED, DataError, Passage, load_corpus, load_dataset,
                           passage_id, sample_questions, tuning_questions)

SHARED_DATA = default_data_dir()  # $KGIR_DATA_DIR, else ../shared/data beside the project, else data/samples
needs_shared = pytest.mark.skipif(not (SHARED_DATA / "musique").is_dir(), reason=f"no shared data at {SHARED_DATA}")


@pytest.fixture(scope="module")
def real():
    return {name: load_dataset(name, SHARED_DATA) for name in ("musique", "hotpotqa", "musique_train")}


# ------------------------------------------------------------------ the real shared data
@needs_shared
@pytest.mark.parametrize("name, n_q, n_p", [("musique", 84, 1471), ("hotpotqa", 84, 840),
                                            ("musique_train", 100, 1890)])
def test_real_counts(real, name, n_q, n_p):
    ds = real[name]
    assert (ds.name, len(ds.questions), len(ds.corpus)) == (name, n_q, n_p)
    assert len(set(ds.corpus.pids)) == n_p
    assert len({q.qid for q in ds.questions}) == n_q
    assert all(q.dataset == name for q in ds.questions)


@needs_shared
@pytest.mark.parametrize("name", ["musique", "musique_train"])
def test_musique_gold_is_every_supporting_paragraph(real, name):
    raw = json.loads((SHARED_DATA / name / f"{name}.json").read_text())
    ds = real[name]
    by_id = {q.qid: q for q in ds.questions}
    for rec in raw:
        q = by_id[rec["id"]]
        supporting = [p for p in rec["paragraphs"] if p["is_supporting"]]
        assert len(q.gold_pids) == len(supporting) >= 2
        for p in supporting:
            pid = passage_id(p["title"], p["paragraph_text"])
            assert pid in q.gold_pids
            assert ds.corpus[pid].text == p["paragraph_text"]
        assert q.answers[0] == rec["answer"]
        assert set(rec["answer_aliases"]) <= set(q.answers)
        assert q.hops == len(rec["question_decomposition"])
    # 59 two-hop, 15 three-hop and 10 four-hop questions in the dev sample: 203 gold passages
    if name == "musique":
        assert sum(len(q.gold_pids) for q in ds.questions) == 59 * 2 + 15 * 3 + 10 * 4


@needs_shared
def test_hotpotqa_gold_is_the_supporting_titles(real):
    raw = json.loads((SHARED_DATA / "hotpotqa" / "hotpotqa.json").read_text())
    ds = real["hotpotqa"]
    by_id = {q.qid: q for q in ds.questions}
    for rec in raw:
        q = by_id[rec["_id"]]
        titles = {t for t, _ in rec["supporting_facts"]}
        assert {ds.corpus[pid].title for pid in q.gold_pids} == titles
        assert len(q.gold_pids) == len(titles) == 2
        assert q.answers == (rec["answer"],)
        # the gold passage is this question's own paragraph (sentences joined with "")
        context = {t: "".join(s) for t, s in rec["context"]}
        for pid in q.gold_pids:
            p = ds.corpus[pid]
            assert p.text == context[p.title]


@needs_shared
def test_passages_and_corpus_access(real):
    corpus = real["musique"].corpus
    first = corpus.passages[0]
    assert isinstance(first, Passage)
    assert corpus[first.pid] is first and first.pid in corpus and "nope" not in corpus
    assert first.content == f"{first.title}\n{first.text}"
    assert corpus.pids[0] == first.pid
    raw = json.loads((SHARED_DATA / "musique" / "musique_corpus.json").read_text())
    assert [(p.title, p.text) for p in corpus.passages] == [(r["title"], r["text"]) for r in raw]


def test_passage_id_is_title_plus_text():
    # pinned: the id keys the graphs, traces and caches of every committed run; sha1("A\x1fb")[:16]
    assert passage_id("A", "b") == "f40a93b3527a10cd"
    assert passage_id("A", "b") != passage_id("A", "c") != passage_id("B", "b")
    assert passage_id("Ab", "c") != passage_id("A", "bc")


# ------------------------------------------------------------------ sampling
@needs_shared
def test_sampling_is_seeded_nested_and_in_file_order(real):
    qs = real["musique"].questions
    s8 = sample_questions(qs, 8, seed=0)
    assert s8 == sample_questions(qs, 8, seed=0)
    assert len(s8) == 8 and len({q.qid for q in s8}) == 8
    assert s8 != sample_questions(qs, 8, seed=1)
    s20 = sample_questions(qs, 20, seed=0)
    assert set(q.qid for q in s8) <= set(q.qid for q in s20)  # a larger n extends a smaller one
    order = [qs.index(q) for q in s20]
    assert order == sorted(order)
    assert sample_questions(qs, None) == qs and sample_questions(qs, 1000) == qs
    assert sample_questions(qs, 0) == []



def test_tuning_questions_follow_the_largest_sample_and_never_meet_it():
    qs = [f"q{i}" for i in range(100)]
    tuned = tuning_questions(qs, 30, seed=0)
    order = list(range(100))
    random.Random(0).shuffle(order)
    assert tuned == [qs[i] for i in order[30:60]]  # shuffle positions 30-59, in shuffle order
    assert not set(tuned) & set(sample_questions(qs, SAMPLE_RESERVED, seed=0))
    assert set(tuned) <= set(sample_questions(qs, 60, seed=0))  # a run of all or 60+ questions meets them
    assert tuning_questions(qs, 5, seed=0) == tuned[:5]

def test_sampling_exact_values():
    # documented rule: first n of random.Random(seed).shuffle(range(len)), then file order
    import random

    items = [f"q{i}" for i in range(10)]
    order = list(range(10))
    random.Random(3).shuffle(order)
    assert sample_questions(items, 4, seed=3) == [items[i] for i in sorted(order[:4])]


def test_sampling_bad_n():
    with pytest.raises(DataError, match="n_questions"):
        sample_questions([1, 2, 3], -1)
    with pytest.raises(DataError, match="n_questions"):
        sample_questions([1, 2, 3], 2.5)


# ------------------------------------------------------------------ crafted files: errors that name the problem
def _musique_rec(i: int, title: str = "T", text: str = "body") -> dict:
    return {"id": f"m{i}", "question": "q?", "answer": "a", "answer_aliases": ["alias"],
            "paragraphs": [{"idx": 0, "title": title, "paragraph_text": text, "is_supporting": True},
                           {"idx": 1, "title": "Other", "paragraph_text": "noise", "is_supporting": False}],
            "question_decomposition": [{"question": "T >> r", "answer": "x", "paragraph_support_idx": 0},
                                       {"question": "#1 >> s", "answer": "a", "paragraph_support_idx": 0}],
            "answerable": True}


def _make(tmp_path: Path, name: str, questions, corpus, nested: bool = True) -> Path:
    folder = tmp_path / name if nested else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, content in ((".json", questions), ("_corpus.json", corpus)):
        if content is not None:
            text = content if isinstance(content, str) else json.dumps(content)
            (folder / f"{name}{suffix}").write_text(text)
    return tmp_path


CORPUS = [{"title": "T", "text": "body"}, {"title": "Other", "text": "noise"}]


@pytest.mark.parametrize("nested", [True, False])
def test_crafted_musique_set_in_either_layout(tmp_path, nested):
    d = _make(tmp_path, "myset", [_musique_rec(0), _musique_rec(1)], CORPUS + CORPUS[:1], nested)
    ds = load_dataset("myset", d)
    assert len(ds.corpus) == 2  # duplicate (title, text) rows collapse to one passage
    q = ds.questions[0]
    assert (q.qid, q.answers, q.hops, q.dataset) == ("m0", ("a", "alias"), 2, "myset")
    assert q.gold_pids == (passage_id("T", "body"),)


def test_crafted_hotpot_set(tmp_path):
    rec = {"_id": "h1", "question": "q?", "answer": "yes", "type": "comparison", "level": "hard",
           "supporting_facts": [["T", 0], ["T", 1], ["Other", 0]],
           "context": [["T", ["bo", "dy"]], ["Other", ["noise"]]]}
    ds = load_dataset("hp", _make(tmp_path, "hp", [rec], CORPUS))
    assert ds.questions[0].gold_pids == (passage_id("T", "body"), passage_id("Other", "noise"))


def test_unknown_dataset_names_it_and_lists_known(tmp_path):
    d = _make(tmp_path, "myset", [_musique_rec(0)], CORPUS)
    with pytest.raises(DataError, match="unknown dataset 'nosuch'.*myset"):
        load_dataset("nosuch", d)


def test_missing_data_dir(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_dataset("musique", tmp_path / "nowhere")


def test_missing_questions_file_names_it(tmp_path):
    d = _make(tmp_path, "myset", None, CORPUS)
    with pytest.raises(DataError, match=r"missing file myset\.json"):
        load_dataset("myset", d)


@pytest.mark.parametrize("which", [".json", "_corpus.json"])
def test_bad_json_names_the_file(tmp_path, which):
    good_q, good_c = [_musique_rec(0)], CORPUS
    d = _make(tmp_path, "myset", "[{oops" if which == ".json" else good_q,
              "[{oops" if which == "_corpus.json" else good_c)
    with pytest.raises(DataError, match=rf"myset{which}: not valid JSON"):
        load_dataset("myset", d)


@pytest.mark.parametrize("drop, needle", [("answer", "'answer'"), ("id", "'id'"), ("question", "'question'")])
def test_missing_question_field_names_it(tmp_path, drop, needle):
    rec = _musique_rec(0)
    del rec[drop]
    d = _make(tmp_path, "myset", [_musique_rec(1), rec], CORPUS)
    with pytest.raises(DataError, match=rf"myset\.json: record 1 has no field {needle}"):
        load_dataset("myset", d)


def test_missing_corpus_field_names_it(tmp_path):
    d = _make(tmp_path, "myset", [_musique_rec(0)], [{"title": "T"}])
    with pytest.raises(DataError, match=r"myset_corpus\.json: record 0 has no field 'text'"):
        load_dataset("myset", d)


def test_other_schema_errors(tmp_path):
    d = _make(tmp_path, "a", [{"id": "x", "question": "q"}], CORPUS)
    with pytest.raises(DataError, match="neither 'paragraphs'"):
        load_dataset("a", d)
    d = _make(tmp_path, "b", [_musique_rec(0, title="Missing")], CORPUS)
    with pytest.raises(DataError, match="'Missing' is not in the corpus"):
        load_dataset("b", d)
    d = _make(tmp_path, "c", {"not": "a list"}, CORPUS)
    with pytest.raises(DataError, match="expected a list"):
        load_dataset("c", d)
    d = _make(tmp_path, "e", [_musique_rec(0), _musique_rec(0)], CORPUS)
    with pytest.raises(DataError, match="repeats question id 'm0'"):
        load_dataset("e", d)
    rec = _musique_rec(0)
    rec["paragraphs"] = "not a list"
    d = _make(tmp_path, "f", [rec], CORPUS)
    with pytest.raises(DataError, match="'paragraphs' must be a list, got a string"):
        load_dataset("f", d)
    hp = {"_id": "h", "question": "q", "answer": "a", "supporting_facts": [5], "context": []}
    d = _make(tmp_path, "g", [hp], CORPUS)
    with pytest.raises(DataError, match="record 0.*supporting_facts"):
        load_dataset("g", d)


def test_load_corpus_rejects_non_list(tmp_path):
    p = tmp_path / "x_corpus.json"
    p.write_text('{"title": "T"}')
    with pytest.raises(DataError, match="x_corpus.json"):
        load_corpus(p)


def test_default_data_dir_from_env(tmp_path, monkeypatch):
    d = _make(tmp_path, "myset", [_musique_rec(0)], CORPUS)
    monkeypatch.setenv("KGIR_DATA_DIR", str(d))
    assert len(load_dataset("myset").questions) == 1


# ------------------------------------------------------------------ field types, empty sets, no gold
@pytest.mark.parametrize("field, value, needle", [
    ("question", None, "'question' must be a string, got null"),
    ("question", "  ", "'question' is empty"),
    ("question", ["q"], "'question' must be a string, got a list"),
    ("id", None, "'id' must be a string or a whole number, got null"),
    ("id", True, "'id' must be a string or a whole number, got true/false"),
    ("answer", {"x": 1}, "'answer' must be a string or a whole number or a number, got an object"),
    ("answer", None, "'answer' must be .* got null"),
    ("answer_aliases", [None], "'answer_aliases' must be a list of strings"),
])
def test_question_field_types_are_checked(tmp_path, field, value, needle):
    rec = _musique_rec(1)
    rec[field] = value
    d = _make(tmp_path, "myset", [_musique_rec(0), rec], CORPUS)
    with pytest.raises(DataError, match=rf"myset\.json: record 1 field {needle}"):
        load_dataset("myset", d)


def test_hotpot_field_types_are_checked(tmp_path):
    rec = {"_id": None, "question": "q?", "answer": "yes", "supporting_facts": [["T", 0]],
           "context": [["T", ["bo", "dy"]]]}
    with pytest.raises(DataError, match=r"hp\.json: record 0 field '_id' must be"):
        load_dataset("hp", _make(tmp_path, "hp", [rec], CORPUS))


def test_hotpot_context_sentences_must_be_strings(tmp_path):
    rec = {"_id": "h0", "question": "q?", "answer": "yes", "supporting_facts": [["T", 0]],
           "context": [["T", ["bo", None]]]}
    with pytest.raises(DataError, match=r"hp\.json: record 0: 'context' paragraph 'T' must be a list of sentence"):
        load_dataset("hp", _make(tmp_path, "hp", [rec], CORPUS))


def test_a_supporting_fact_given_as_a_bare_string_is_refused(tmp_path):
    rec = {"_id": "h0", "question": "q?", "answer": "yes", "supporting_facts": ["TX"],
           "context": [["T", ["body"]]]}
    with pytest.raises(DataError, match=r"hp\.json: record 0: 'supporting_facts' and 'context' must be lists of"):
        load_dataset("hp", _make(tmp_path, "hp", [rec], CORPUS))


def test_a_file_nested_too_deeply_is_a_data_error_naming_it(tmp_path):
    d = _make(tmp_path, "myset", [_musique_rec(0)], CORPUS)
    corpus = next(d.rglob("myset_corpus.json"))
    corpus.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(DataError, match=r"myset_corpus\.json: not valid JSON \(maximum recursion depth"):
        load_dataset("myset", d)


@pytest.mark.parametrize("corpus, needle", [
    ([{"title": "T", "text": None}], r"record 0 field 'text' must be a string, got null"),
    ([{"title": 5, "text": "x"}], r"record 0 field 'title' must be a string, got a number"),
    ([], "the corpus is empty"),
])
def test_corpus_field_types_and_empty_corpus(tmp_path, corpus, needle):
    d = _make(tmp_path, "myset", [_musique_rec(0)], corpus)
    with pytest.raises(DataError, match=rf"myset_corpus\.json: {needle}"):
        load_dataset("myset", d)


def test_supporting_paragraph_text_must_be_a_string(tmp_path):
    rec = _musique_rec(0)
    rec["paragraphs"][0]["paragraph_text"] = None
    with pytest.raises(DataError, match="record 0 paragraph 0: 'title' and 'paragraph_text' must be strings"):
        load_dataset("myset", _make(tmp_path, "myset", [rec], CORPUS))


def test_empty_question_set(tmp_path):
    with pytest.raises(DataError, match=r"myset\.json: the question set is empty"):
        load_dataset("myset", _make(tmp_path, "myset", [], CORPUS))


def test_question_without_gold_refused_unless_declared(tmp_path):
    rec = _musique_rec(1)
    for p in rec["paragraphs"]:
        p["is_supporting"] = False
    d = _make(tmp_path, "myset", [_musique_rec(0), rec], CORPUS)
    with pytest.raises(DataError, match=r"myset\.json: record 1 \(question 'm1'\) has no supporting passage"):
        load_dataset("myset", d)
    (d / "myset" / "myset_meta.json").write_text(json.dumps({"gold_passages": False}))
    ds = load_dataset("myset", d)
    assert ds.questions[1].gold_pids == ()
    (d / "myset" / "myset_meta.json").write_text(json.dumps({"gold_passages": "no"}))
    with pytest.raises(DataError, match="myset_meta.json: expected an object"):
        load_dataset("myset", d)


@pytest.mark.parametrize("answer, needle", [
    ("NaN", r"field 'answer' is nan \(not a number\)"),  # JSON's NaN token: once the answer "nan"
    ("Infinity", r"field 'answer' is inf \(not a number\)"),
    ('"  "', r"field 'answer' is empty"),
    ("null", r"field 'answer' must be .* got null"),
    (None, r"has no field 'answer'"),
])
@pytest.mark.parametrize("schema", ["musique", "hotpotqa"])
def test_a_missing_or_nan_gold_answer_is_refused_naming_the_set_and_the_question(tmp_path, schema, answer, needle):
    hotpot = lambda i: {"_id": f"h{i}", "question": "q?", "answer": "a", "supporting_facts": [["T", 0]],  # noqa: E731
                        "context": [["T", ["body"]]]}
    make = _musique_rec if schema == "musique" else hotpot
    good, rec, qid = make(0), make(1), f"{'m' if schema == 'musique' else 'h'}1"
    text = json.dumps(rec).replace('"answer": "a"', '"answer": __A__')  # the JSON token itself, e.g. NaN
    text = text.replace(', "answer": __A__', "") if answer is None else text.replace("__A__", answer)
    d = _make(tmp_path, "myset", f"[{json.dumps(good)}, {text}]", CORPUS)
    with pytest.raises(DataError, match=rf"myset\.json: record 1 {needle}.*\(dataset 'myset', question '{qid}'\): "
                                        rf"a question without a gold answer cannot be scored"):
        load_dataset("myset", d)


@pytest.mark.parametrize("alias, needle", [("NaN", "is nan"), ('""', "is empty")])
def test_a_nan_or_empty_alias_is_refused_naming_the_set_and_the_question(tmp_path, alias, needle):
    text = json.dumps(_musique_rec(1)).replace('"answer_aliases": ["alias"]', f'"answer_aliases": ["alias", {alias}]')
    d = _make(tmp_path, "myset", f"[{json.dumps(_musique_rec(0))}, {text}]", CORPUS)
    with pytest.raises(DataError, match=rf"record 1 field 'answer_aliases' entry 1 {needle}.*"
                                        rf"\(dataset 'myset', question 'm1'\)"):
        load_dataset("myset", d)


def test_numeric_ids_and_answers_are_kept_as_text(tmp_path):
    rec = _musique_rec(0)
    rec["id"], rec["answer"] = 7, 1994
    q = load_dataset("myset", _make(tmp_path, "myset", [rec], CORPUS)).questions[0]
    assert (q.qid, q.answers[0]) == ("7", "1994")


def test_data_dir_that_is_a_file(tmp_path):
    f = tmp_path / "data.json"
    f.write_text("[]")
    with pytest.raises(DataError, match="is a file, not a directory"):
        load_dataset("musique", f)


def test_a_lone_surrogate_in_a_gold_answer_is_replaced_counted_and_named(tmp_path):
    """A ``\\ud800`` escape in an answer loaded as a lone surrogate and crashed scoring in notebook 05."""
    from kgir_lib.eval.metrics import best_em, best_f1
    from kgir_lib.traces import REPLACED

    rec = _musique_rec(0)
    rec["answer"] = "Paris\ud800"
    rec["answer_aliases"] = ["Pa\udc00ris"]
    folder = tmp_path / "sur"
    folder.mkdir()
    (folder / "sur.json").write_text(json.dumps([_musique_rec(1), rec], ensure_ascii=True))
    (folder / "sur_corpus.json").write_text(json.dumps(CORPUS))
    before = REPLACED["data"]
    with pytest.warns(UserWarning, match=r"sur\.json: 2 lone UTF-16 surrogate\(s\) replaced by U\+FFFD "
                                         r"\(first in record 1 field 'answer'\)"):
        ds = load_dataset("sur", tmp_path)
    assert REPLACED["data"] == before + 2
    assert ds.questions[1].answers == ("Paris\ufffd", "Pa\ufffdris")
    assert all(a.encode("utf-8") for a in ds.questions[1].answers)  # writable as UTF-8
    answers = ds.questions[1].answers
    assert best_em("Paris\ufffd", answers) == 1.0 and best_f1("Paris\ufffd", answers) == 1.0


def test_a_surrogate_pair_is_a_character_not_a_lone_surrogate(tmp_path):
    rec = _musique_rec(0)
    rec["answer"] = "\U0001F600"
    folder = tmp_path / "emoji"
    folder.mkdir()
    (folder / "emoji.json").write_text(json.dumps([rec], ensure_ascii=True))  # written as \ud83d\ude00
    (folder / "emoji_corpus.json").write_text(json.dumps(CORPUS))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_dataset("emoji", tmp_path).questions[0].answers[0] == "\U0001F600"
