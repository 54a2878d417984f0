"""kgir_lib.notebook.display: the one table helper of the notebooks (rounding, empty published columns, wide tables,
text)."""
import re

import numpy as np
import pytest
import pandas as pd

from kgir_lib.notebook.display import Table, blocks, cut_rows, is_published, key_columns, notes_markdown, show, tidy


def test_tidy_rounds_floats_and_turns_whole_float_columns_into_integers():
    df = pd.DataFrame({"F1": [21.989247, 3.04], "seconds": [240.790677, 1.0], "calls": [3.0, np.nan],
                       "method": ["a", "b"]})
    out = tidy(df, digits={"seconds": 0})
    assert out["F1"].tolist() == [22.0, 3.0]
    assert out["seconds"].tolist() == [241.0, 1.0]
    assert str(out["calls"].dtype) == "Int64" and out["calls"].iloc[0] == 3 and out["calls"].isna().iloc[1]
    assert out["method"].tolist() == ["a", "b"]
    assert tidy(df, digits=2)["F1"].tolist() == [21.99, 3.04]
    set_values = tidy(pd.DataFrame({"fraction": [0.0, 0.05, 0.1], "threshold": [0.5, 0.8, 0.95]}))
    assert set_values["fraction"].tolist() == [0.0, 0.05, 0.1] and set_values["threshold"].tolist() == [0.5, 0.8, 0.95]


def test_tidy_drops_published_columns_that_are_empty_in_this_table_only():
    df = pd.DataFrame({"EM": [1.5, 2.5], "ΔEM (paper, Qwen2.5-72B)": [np.nan, np.nan],
                       "ΔF1 (paper, Qwen2.5-72B)": [np.nan, -4.8], "note": [None, None]})
    out = tidy(df)
    assert list(out.columns) == ["EM", "ΔF1 (paper, Qwen2.5-72B)", "note"]  # our own empty column stays
    grouped = pd.DataFrame({("ours", "EM"): [1.0], ("published: HippoRAG 2 paper", "EM"): [np.nan]})
    assert list(tidy(grouped).columns) == [("ours", "EM")]
    assert is_published(("published: KAG", "musique", "EM")) and not is_published("EM")


def test_blocks_split_wide_tables_transpose_short_ones_and_keep_groups_together():
    wide = pd.DataFrame(np.arange(60.0).reshape(5, 12), columns=[f"c{i}" for i in range(12)])
    parts = blocks(wide, max_cols=5)
    assert [p.shape for p in parts] == [(5, 4), (5, 4), (5, 4)]  # equal widths: no block of one lone column
    assert [p.shape[1] for p in blocks(wide.iloc[:, :11], max_cols=10)] == [6, 5]
    assert all(list(p.index) == list(wide.index) for p in parts)
    short = wide.head(2)
    assert blocks(short, max_cols=5)[0].shape == (12, 2)  # transposed: one row a column
    cols = pd.MultiIndex.from_tuples([("ours", "EM"), ("ours", "F1"), ("ours", "R@2"), ("pub A", "EM"),
                                      ("pub A", "F1"), ("pub B", "EM")])
    grouped = pd.DataFrame(np.zeros((6, 6)), columns=cols)
    assert [list(dict.fromkeys(p.columns.get_level_values(0))) for p in blocks(grouped, max_cols=4)] == \
        [["ours"], ["pub A", "pub B"]]
    assert blocks(wide, max_cols=20) == [wide] or blocks(wide, max_cols=20)[0] is wide


def test_table_html_renders_line_breaks_and_wraps_long_text_with_plain_spaces():
    q = "Which county is the city where Harris W. Fawell was born in, and what is its seat?"
    html = Table(pd.DataFrame({"question": [q], "triples": ["(a, b, c)\n(d, e, f)"]}), caption="c", wrap=30)._repr_html_()
    assert "(a, b, c)<br>(d, e, f)" in html  # a given line break is kept, short text has no box
    assert "&nbsp;" not in html  # a browser may wrap further: no table runs off the page
    assert "\\n" not in html and "<caption>c</caption>" in html
    cell = html.split("<td style=\"text-align: left; min-width: 18ch\">")[1].split("</td>")[0]
    # long text whole, in a box 30 characters wide where the browser breaks it between words
    assert cell == f'<div style="max-width: 30ch">{q}</div>'
    short = Table(pd.DataFrame({"answer": ["HP", "Compaq"]}))._repr_html_()
    assert 'min-width: 6ch' in short  # a short text column keeps its longest line, no more
    many = Table(pd.DataFrame({c: [q] for c in ("question", "rewrite", "answer", "gold")} | {"bridge": ["Uganda"]}),
                 wrap=30)._repr_html_()
    widths = [int(w) for w in re.findall(r"min-width: (\d+)ch", many)]
    assert widths == [13, 13, 13, 13, 6]  # five text columns (18 + 18 + 18 + 18 + 6 ch) squeezed to fit the page
    mixed = Table(pd.DataFrame({"v": [40.0, 3.68]}))._repr_html_()
    assert "<td>40</td>" in mixed and "<td>3.68</td>" in mixed
    plain = Table(pd.DataFrame({"n": [1.5]}), index=False)
    assert "<th></th>" not in plain._repr_html_() and "<td>1.5</td>" in plain._repr_html_()
    assert "county" in repr(Table(pd.DataFrame({"question": [q]})))


def test_a_table_cell_breaks_between_words_only():
    """A cell's text is never cut at the wrap width: a break written at 45 characters ("...the practice of<br>what
    way...") is broken again by a narrower column, mid-phrase. The text stays whole and the browser breaks it
    between words, as wide as the column is; a word longer than the box stays whole; the screen estimate counts the
    lines the box makes."""
    from kgir_lib.notebook import screens

    q = ("Rostker v. Goldberg held that the practice of what way of filling armed forces vacancies was "
         "consitutional?")
    mark = "Conscription in the United States [next hop, gold, new]"
    long_word = "musique_train_2hop__130712_90450_and_more"
    html = Table(pd.DataFrame({"query": [q], "after": [mark], "id": [long_word]}), wrap=45)._repr_html_()
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert cells == [f'<div style="max-width: 45ch">{q}</div>', f'<div style="max-width: 45ch">{mark}</div>',
                     long_word]  # no <br>: no phrase cut at 45 characters
    assert "<br>" not in html
    from kgir_lib.notebook.display import _lines

    assert _lines(q, 45) == ["Rostker v. Goldberg held that the practice of",
                             "what way of filling armed forces vacancies",
                             "was consitutional?"]  # the lines a 45-character column lays out, between words
    assert _lines(long_word, 20) == [long_word]  # a long word is not split
    assert screens._cell_lines(cells[0]) == 3 and screens._cell_lines(cells[1]) == 2
    assert screens._cell_lines("a<br>b") == 2 and screens._cell_lines(long_word) == 1


def test_key_columns_are_the_leading_text_columns_that_tell_rows_apart():
    per_q = pd.DataFrame({"dataset": ["a", "a", "b"], "qid": ["1", "2", "1"], "answer": ["x", "y", "z"],
                          "EM": [1.0, 0.0, 1.0]})
    assert key_columns(per_q) == ["dataset", "qid"]
    assert key_columns(pd.DataFrame({"dataset": ["a", "b"], "n": [1, 2]})) == ["dataset"]
    assert key_columns(pd.DataFrame({"rank": [1, 2], "title": ["a", "b"]})) == []  # a number first: no key
    assert key_columns(per_q.set_index("dataset")) == []  # an index already labels the rows
    texts = pd.DataFrame({"a": ["x", "x"], "b": ["y", "y"]})
    assert key_columns(texts) == ["a"]  # never every column


def test_every_block_of_a_split_table_repeats_its_keys_and_drops_rows_without_values(capsys):
    per_q = pd.DataFrame({"dataset": ["a"] * 4, "qid": list("1234"), **{f"m{i}": [1.0, 2.0, 3.0, 4.0] for i in range(12)}})
    parts = blocks(per_q.set_index(key_columns(per_q)), max_cols=5)
    assert len(parts) == 3 and all(p.index.names == ["dataset", "qid"] and len(p) == 4 for p in parts)
    published = pd.DataFrame({"ours EM": [1.0, 2.0, 3.0], "ours F1": [1.0, 2.0, 3.0], "pub EM": [np.nan, 5.0, np.nan],
                              "pub F1": [np.nan, 6.0, np.nan]}, index=pd.Index(["A", "B", "C"], name="method"))
    first, second = blocks(published, max_cols=2, transpose_rows=0)
    assert list(first.index) == ["A", "B", "C"] and list(second.index) == ["B"]
    stop = pd.DataFrame({"dataset": ["hotpotqa", "musique"], **{f"c{i}": [1.0, 2.0] for i in range(11)}})
    [t] = blocks(stop.set_index(key_columns(stop)), max_cols=10)
    assert list(t.columns) == ["hotpotqa", "musique"]  # transposed: the keys head the columns, not 0 and 1


def test_long_tables_show_their_head_and_say_where_the_whole_table_is(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, *a, **k: shown.append(obj))
    df = pd.DataFrame({"dataset": ["d"] * 50, "qid": [str(i) for i in range(50)], "EM": np.arange(50.0)})
    head, total = cut_rows(df, 20)
    assert len(head) == 20 and total == 50
    show(df, "per question", full="results/x/tables/t.csv", notes={"EM": "exact match", "F1": "unused"})
    tables = [o for o in shown if isinstance(o, Table)]
    assert len(tables) == 1 and len(tables[0].df) == 20 and tables[0].df.index.names == ["dataset", "qid"]
    text = shown[-1].data
    assert "First 20 of 50 rows; the whole table: results/x/tables/t.csv" in text
    assert "*EM*: exact match" in text and "unused" not in text
    assert notes_markdown(pd.DataFrame({"x": [1]}), {"y": "z"}) == ""
    assert notes_markdown(pd.DataFrame({"MDE (α = 0.05, power 0.8)": [1.0]}), {"MDE": "smallest"}) == \
        "*MDE (α = 0.05, power 0.8)*: smallest"
    assert notes_markdown(pd.DataFrame({"MDE EM": [1.0]}), {"MDE": "smallest"}) == ""


def test_p_values_keep_two_significant_digits():
    from kgir_lib.notebook.display import is_p_value

    assert all(map(is_p_value, ["p", "p (Holm)", "p R@2 merged vs D_1", "EM p vs round 1", "names: p vs kgir"]))
    assert not any(map(is_p_value, ["prompt_tokens", "pooled", "F1", "paper: KGIR-RAG minus other"]))
    out = tidy(pd.DataFrame({"p (Holm)": [0.015625, 4.4e-12, float("nan")], "EM": [12.3456, 1.0, 2.5]}))
    assert list(out["p (Holm)"]) == ["0.016", "4.4e-12", ""] and list(out["EM"]) == [12.3, 1.0, 2.5]


def test_least_width_is_the_longest_unbreakable_word_of_each_column():
    """A browser wraps a cell at spaces, hyphens and <br>: the narrowest column is its longest word (a header's in
    bold), or its min-width, plus padding; a table's narrowest width is the sum over its columns."""
    from kgir_lib.notebook.display import BOLD_CHAR_PX, CELL_PAD_PX, CHAR_PX, least_width_px

    html = ('<table><caption>a caption that never sets a width</caption><thead><tr><th>abc</th>'
            '<th>two words</th></tr></thead><tbody><tr><td>12345</td><td style="min-width: 18ch">x</td></tr>'
            '<tr><td>1-2-3-4</td><td>long-hyphenated<br>ok</td></tr></tbody></table>')
    first = max(3 * BOLD_CHAR_PX, 5 * CHAR_PX) + CELL_PAD_PX
    second = max(5 * BOLD_CHAR_PX, 18 * CHAR_PX, len("hyphenated") * CHAR_PX) + CELL_PAD_PX
    assert least_width_px(html) == pytest.approx(first + second)


def test_a_table_too_wide_for_a_1024_px_page_is_split_so_every_block_fits(monkeypatch):
    """Eight columns fit the column count but not a 1024-px page: the blocks are the fewest that each fit, every
    block keeps the row keys; a table that fits stays whole."""
    from kgir_lib.notebook import display as d

    keys = ["musique_train", "hotpotqa", "musique", "a", "b"]
    df = pd.DataFrame({"dataset": keys} | {f"a fairly_long_column_header_{i}": [1.5] * 5 for i in range(8)})
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    show(df, "wide")
    tables = [o for o in shown if isinstance(o, Table)]
    assert len(tables) > 1
    assert all(d.least_width_px(t._repr_html_()) <= d.TABLE_PX for t in tables)
    assert all(list(t.df.index) == keys for t in tables)
    assert sum(t.df.shape[1] for t in tables) == 8
    shown.clear()
    show(df.iloc[:, :3], "narrow")
    assert len([o for o in shown if isinstance(o, Table)]) == 1


def test_a_true_or_false_cell_reads_yes_or_no():
    """Python's True / False is not shown to a reader: a bool column and a bool among other values read yes / no;
    the numbers 1 and 0 stay numbers."""
    html = Table(pd.DataFrame({"gold": [True, False], "mixed": [True, "x"], "n": [1, 0]}))._repr_html_()
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert cells == ["yes", "yes", "1", "no", "x", "0"]
    assert "True" not in html and "False" not in html
