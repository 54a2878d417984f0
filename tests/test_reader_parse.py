"""The shared reader's parser (kgir_lib.methods.reader): exact answers from real-looking replies."""
from __future__ import annotations

import pytest

from kgir_lib.methods.reader import MAX_ANSWER_WORDS, answer_usable, parse_answer


@pytest.mark.parametrize("reply, answer", [
    ("Hewlett-Packard", "Hewlett-Packard"),
    ("  \"Compaq\".  \n more text", "Compaq"),
    ("So the answer is: HP.", "HP"),
    ("Reasoning first.\nAnswer: 1994\nAnswer: 2002", "2002"),   # the last marker wins
    ("Answer:\nHP", "HP"),
    ("answer is： 東京", "東京"),
    ("", ""),
    (None, ""),
    ("So the answer is:", ""),     # a marker with nothing after it is no answer, not the marker itself
    ("Compaq merged. Answer:", ""),
])
def test_parse_answer(reply, answer):
    assert parse_answer(reply) == answer


def test_a_bare_marker_or_a_sentence_is_not_usable():
    assert not answer_usable("So the answer is:") and not answer_usable("")
    assert answer_usable("Hewlett-Packard")
    assert not answer_usable(" ".join(["word"] * (MAX_ANSWER_WORDS + 1)))


@pytest.mark.parametrize("text, leading, trailing, out", [
    ('  "HP". ', '"', '".', "HP"),
    ("**Compaq**", "*", "*", "Compaq"),
    ("...x...", ".", ".", "x"),
    ("x. .", "", ".", "x"),       # whitespace and dots interleaved at the end
    ("  ", "", "", ""),
    ("a\u2003", "", "", "a"),      # unicode whitespace, as the regex \s matches it
    ("'", "'", "'", ""),
])
def test_trim_is_the_anchored_regex_without_its_cost(text, leading, trailing, out):
    import re

    from kgir_lib.llm.parsing import trim

    assert trim(text, leading, trailing) == out
    cls = lambda chars: "[\\s" + re.escape(chars) + "]+"  # noqa: E731
    assert re.sub(f"^{cls(leading)}|{cls(trailing)}$", "", text) == out  # the pattern it replaces


def test_long_runs_of_blanks_and_dots_parse_as_the_short_ones():
    """A looping model's run of blanks or dots used to make these regexes quadratic; the result is unchanged."""
    from kgir_lib.kgir.seeds import parse_entities

    assert parse_answer("HP" + " ." * 20000) == "HP"
    assert parse_entities("Compaq" + " " * 20000 + "; HP") == ["Compaq", "HP"]
