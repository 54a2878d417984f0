"""kgir_lib.api.passages_of: the passages the public API indexes, a passage given twice kept once."""
import pytest

from kgir_lib.api import passages_of
from kgir_lib.data import Passage


def test_a_passage_given_twice_is_kept_once_in_first_seen_order():
    items = [("A", "alpha text"), {"title": "B", "text": "beta text"}, ("A", "alpha text"),
             Passage("x", "B", "beta text"), ("A", "another text")]
    out = passages_of(items)
    assert [(p.title, p.text) for p in out] == [("A", "alpha text"), ("B", "beta text"), ("A", "another text")]
    assert len({p.pid for p in out}) == 3


def test_an_unusable_item_is_named_with_the_parameter():
    with pytest.raises(ValueError, match=r"parameter 'docs': item 1 is not a \(title, text\) pair"):
        passages_of([("A", "t"), "just text"], parameter="docs")
