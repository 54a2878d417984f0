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
