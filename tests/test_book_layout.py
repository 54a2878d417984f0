"""The explorer's pages give the whole width to their tables: no right-hand column, no article width cap."""
from __future__ import annotations

from pathlib import Path

from kgir_lib.book.pages import WIDE, index_page, question_page

ROOT = Path(__file__).resolve().parents[1]


def _front_matter(page: str) -> list:
    lines = page.splitlines()
    assert lines[0] == "---", "a page opens with its front matter"
    return lines[1:lines.index("---", 1)]


def test_the_index_and_a_question_page_remove_the_right_hand_column():
    q = {"dataset": "d", "qid": "q1", "question": "Who?", "gold_answers": ["x"], "bridges": [], "EM": 0.0,
         "F1": 0.0, "answer": "", "answer_source": "", "answered_by": "", "broke_at": "", "rounds": [],
         "methods": [], "passages": {}}
    assert WIDE in _front_matter(question_page("sample", "m", q))
    assert WIDE in _front_matter(index_page([("sample", "m", [q])]))
    assert WIDE == "html_theme.sidebar_secondary.remove: true"  # the theme's own page setting


def test_the_stylesheet_lifts_the_article_width_cap_on_the_explorer_pages_only():
    css = (ROOT / "book" / "static" / "book.css").read_text(encoding="utf-8")
    rule = css[css.index(".bd-article-container:has(#kg-index)"):]
    assert ".bd-article-container:has(.kg-side)" in rule and "max-width: none" in rule.split("}")[0]
