"""Gold bridges (kgir_lib.eval.mechanism.bridges): normalisation, aliases, matching, MuSiQue and HotpotQA rules."""
from __future__ import annotations

import pytest

from kgir_lib.data import DataError, load_dataset, passage_id
from kgir_lib.eval.mechanism.bridges import (Bridge, bridge_aliases, bridges_of, entity_matches, hotpot_bridges,
                                             load_bridges, musique_bridges, names, names_bridge, norm, record_bridges)

from conftest import SHARED_DATA


def test_norm_folds_accents_hyphens_articles_and_punctuation():
    assert norm("Hewlett-Packard") == "hewlett packard"
    assert norm("César Millán") == "cesar millan"
    assert norm("The Church of England") == "church of england"
    assert norm("Guns N' Roses") == "guns n roses"
    assert norm(None) == ""


def test_aliases_drop_parenthesis_and_after_comma():
    assert bridge_aliases("Roxie Hart (film)") == ("roxie hart film", "roxie hart")
    assert bridge_aliases("Key West, Florida") == ("key west florida", "key west")
    assert bridge_aliases("Compaq") == ("compaq",)
    assert bridge_aliases("(untitled)") == ("untitled",)


def test_names_needs_whole_words():
    assert names("Which company did Compaq merge with?", "compaq")
    assert not names("Which company did Compaqs merge with?", "compaq")
    assert names("the Hewlett–Packard deal", "hewlett packard")
    assert not names("anything", "")


def test_names_bridge_ignores_aliases_the_question_names():
    b = Bridge("Key West, Florida", bridge_aliases("Key West, Florida"), ("p",))
    assert names_bridge("Where is Key West?", b, question="Where is the island?")
    assert not names_bridge("Where is Key West?", b, question="What is near Key West?")


def test_entity_matches_equal_and_contains():
    compaq = Bridge("Compaq", ("compaq",), ("p",))
    assert entity_matches("Compaq", compaq, "equal")
    assert entity_matches("the Compaq", compaq, "equal")          # the article goes in normalisation
    assert not entity_matches("Compaq Computer Corporation", compaq, "equal")
    assert entity_matches("Compaq Computer Corporation", compaq, "contains")
    assert not entity_matches("Compaqs", compaq, "contains")       # not a whole word
    us = Bridge("US", ("us",), ("p",))
    assert entity_matches("U.S.", us, "contains")                  # equal after normalisation
    assert not entity_matches("US Army", us, "contains")           # shorter than MIN_CONTAINED_CHARS
    hall = Bridge("G. Stanley Hall", bridge_aliases("G. Stanley Hall"), ("p",))
    assert not entity_matches("Hall", hall, "contains")            # the entity inside the alias does not count
    with pytest.raises(ValueError, match="mode"):
        entity_matches("Compaq", compaq, "fuzzy")


def _para(i, title, text, sup=True):
    return {"idx": i, "title": title, "paragraph_text": text, "is_supporting": sup}


def test_musique_chain_bridges_and_next_passages():
    rec = {"id": "3hop1__1_2_3", "question": "Who founded the label of the performer of Song X?", "answer": "Ann Lee",
           "answer_aliases": [],
           "paragraphs": [_para(0, "Song X", "Song X is by Bob."), _para(1, "noise", "n", False),
                          _para(2, "Bob", "Bob signed with Label Y."), _para(3, "Label Y", "Founded by Ann Lee.")],
           "question_decomposition": [
               {"question": "Song X >> performer", "answer": "Bob", "paragraph_support_idx": 0},
               {"question": "What label is #1 on?", "answer": "the Label Y", "paragraph_support_idx": 2},
               {"question": "Who founded #2?", "answer": "Ann Lee", "paragraph_support_idx": 3}]}
    got = musique_bridges(rec)
    assert got == (Bridge("Bob", ("bob",), (passage_id("Bob", "Bob signed with Label Y."),), hop=1),
                   Bridge("the Label Y", ("label y",), (passage_id("Label Y", "Founded by Ann Lee."),), hop=2))


def test_musique_parallel_hops_point_at_the_hop_that_uses_them():
    rec = {"id": "3hop2__1", "question": "Is the capital of A larger than the capital of B?", "answer": "Cx",
           "paragraphs": [_para(0, "A", "a"), _para(1, "B", "b"), _para(2, "C", "c")],
           "question_decomposition": [
               {"question": "capital of A", "answer": "Ax", "paragraph_support_idx": 0},
               {"question": "capital of B", "answer": "Bx", "paragraph_support_idx": 1},
               {"question": "which of #2 and #1 is larger", "answer": "Cx", "paragraph_support_idx": 2}]}
    got = musique_bridges(rec)
    assert [b.name for b in got] == ["Ax", "Bx"]
    assert got[0].next_pids == got[1].next_pids == (passage_id("C", "c"),)


def test_musique_drops_bridges_named_or_equal_to_the_answer():
    rec = {"id": "2hop__1", "question": "Where was Frankfurt's consulate?", "answer": "Frankfurt am Main",
           "answer_aliases": ["Frankfurt"], "paragraphs": [_para(0, "a", "a"), _para(1, "b", "b")],
           "question_decomposition": [
               {"question": "q1", "answer": "Frankfurt", "paragraph_support_idx": 0},
               {"question": "q2 #1", "answer": "Frankfurt am Main", "paragraph_support_idx": 1}]}
    assert musique_bridges(rec) == ()
    rec["answer_aliases"] = []
    assert musique_bridges(rec) == ()                     # named by the question
    rec["question"] = "Where was the consulate?"
    assert [b.name for b in musique_bridges(rec)] == ["Frankfurt"]


def test_musique_bad_support_index_names_the_record():
    rec = {"id": "2hop__9", "question": "q", "answer": "z", "paragraphs": [_para(0, "a", "a")],
           "question_decomposition": [{"question": "q1", "answer": "x", "paragraph_support_idx": 0},
                                      {"question": "#1", "answer": "z", "paragraph_support_idx": 7}]}
    with pytest.raises(DataError, match=r"2hop__9.*hop 2.*paragraph_support_idx"):
        musique_bridges(rec)


def _hotpot(question, titles, answer="Hewlett-Packard", type_="bridge"):
    return {"_id": "h1", "question": question, "answer": answer, "type": type_,
            "supporting_facts": [[t, 0] for t in titles], "context": [[t, [f"{t} s1.", " s2."]] for t in titles]}


def test_hotpot_bridge_is_the_one_unnamed_title():
    rec = _hotpot("Which company merged with the maker of the Presario (computer)?", ["Presario", "Compaq (company)"])
    (b,) = hotpot_bridges(rec)
    assert b == Bridge("Compaq (company)", ("compaq company", "compaq"),
                       (passage_id("Compaq (company)", "Compaq (company) s1. s2."),), hop=1)


def test_hotpot_no_bridge_for_comparison_yes_no_and_ambiguous():
    assert hotpot_bridges(_hotpot("Which is older, Presario or Compaq?", ["Presario", "Compaq"], "Compaq",
                                  "comparison")) == ()
    assert hotpot_bridges(_hotpot("Was the maker of X American?", ["X", "Compaq"], "yes", "")) == ()
    assert hotpot_bridges(_hotpot("Who merged with the maker?", ["Presario", "Compaq"])) == ()   # two unnamed
    assert hotpot_bridges(_hotpot("Who merged with Presario's Compaq?", ["Presario", "Compaq"])) == ()  # none
    assert hotpot_bridges(_hotpot("Who made Presario?", ["Presario", "Compaq"], "Compaq", "")) == ()  # answer


def test_hotpot_untyped_record_uses_the_title_rule_and_corpus_fallback():
    rec = _hotpot("Which company merged with the maker of the Presario?", ["Presario", "Compaq"], type_="")
    (b,) = hotpot_bridges(rec, corpus_pids={"other"}, by_title={"Compaq": ["pC1", "pC2"]})
    assert b.next_pids == ("pC1",)
    with pytest.raises(DataError, match="Compaq"):
        hotpot_bridges(rec, corpus_pids={"other"}, by_title={})



def test_bad_raw_records_are_named_errors_and_record_bridges_tells_the_schema():
    """Raw records: a field of the wrong type, a record without an id ('?'), a HotpotQA record without context
    (its supporting titles have no passage), a record of neither schema; record_bridges and bridges_of key the
    bridges by each schema's id field."""
    import re

    with pytest.raises(DataError, match=r"^MuSiQue record 'm1': 'question_decomposition' and 'paragraphs' must be "
                                        r"lists$"):
        musique_bridges({"id": "m1", "question_decomposition": [], "paragraphs": "a paragraph"})
    with pytest.raises(DataError, match=r"^MuSiQue record '\?': 'question_decomposition'"):
        musique_bridges({"question_decomposition": "a hop", "paragraphs": []})
    no_id = {"question": "q", "answer": "z", "paragraphs": [_para(0, "a", "a")],
             "question_decomposition": [{"question": "q1", "answer": "x", "paragraph_support_idx": 0},
                                        {"question": "#1", "answer": "z", "paragraph_support_idx": 7}]}
    with pytest.raises(DataError, match=r"^MuSiQue record '\?': hop 2: "):
        musique_bridges(no_id)
    hot = _hotpot("Which company merged with the maker of the Presario?", ["Presario", "Compaq"], type_="")
    with pytest.raises(DataError, match=re.escape("HotpotQA record '?': 'supporting_facts' and 'context' must be "
                                                  "lists of [title, ...] pairs ('int' object is not subscriptable)")):
        hotpot_bridges({k: v for k, v in hot.items() if k != "_id"} | {"context": [5]})
    with pytest.raises(DataError, match=r"^HotpotQA record 'h1': supporting title 'Compaq' is not in the corpus$"):
        hotpot_bridges({k: v for k, v in hot.items() if k != "context"})
    mq = {"id": "2hop__1", "question": "Where was the consulate?", "answer": "Frankfurt am Main",
          "paragraphs": [_para(0, "a", "a"), _para(1, "b", "b")],
          "question_decomposition": [{"question": "q1", "answer": "Frankfurt", "paragraph_support_idx": 0},
                                     {"question": "q2 #1", "answer": "Frankfurt am Main", "paragraph_support_idx": 1}]}
    assert record_bridges(mq) == ("2hop__1", musique_bridges(mq))
    assert record_bridges(hot) == ("h1", hotpot_bridges(hot)) and len(hotpot_bridges(hot)) == 1
    assert bridges_of([mq, hot]) == {"2hop__1": musique_bridges(mq), "h1": hotpot_bridges(hot)}
    # the corpus and its titles reach the HotpotQA rule (a passage id the corpus lacks: its title's first passage)
    fallback = {"corpus_pids": {"other"}, "by_title": {"Compaq": ["pC1", "pC2"]}}
    assert record_bridges(hot, **fallback)[1][0].next_pids == ("pC1",)
    assert bridges_of([hot], **fallback)["h1"][0].next_pids == ("pC1",)
    with pytest.raises(DataError, match=r"^record has neither 'question_decomposition' \(MuSiQue\) nor "
                                        r"'supporting_facts' \(HotpotQA\)$"):
        record_bridges({"id": "x"})

needs_shared = pytest.mark.skipif(not (SHARED_DATA / "musique_train").is_dir(), reason="no shared data")


@needs_shared
@pytest.mark.parametrize("name", ["musique_train", "hotpotqa"])
def test_real_bridges_point_at_gold_passages(name):
    """Every next-hop passage is one of the question's gold passages (the suite's passage ids)."""
    ds = load_dataset(name, SHARED_DATA)
    bridges = load_bridges(name, SHARED_DATA)
    assert set(bridges) == {q.qid for q in ds.questions}
    n = 0
    for q in ds.questions:
        for b in bridges[q.qid]:
            assert set(b.next_pids) <= set(q.gold_pids), (q.qid, b.name)
            assert b.aliases and not all(names(q.question, a) for a in b.aliases)
            n += 1
    assert n > 0


def test_norm_drops_possessive_s():
    assert norm("Compaq's merger") == "compaq merger"
    assert norm("Hello Love’s performer") == "hello love performer"
    assert names("Who bought Compaq's PC unit?", "compaq")
