"""kgir_lib.notebook.display: the one table helper of the notebooks (rounding, empty published columns, wide tables,
text)."""
import numpy as np
import pandas as pd

from kgir_lib.notebook.display import Table, blocks, is_published, tidy


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
    assert [p.shape for p in parts] == [(5, 5), (5, 5), (5, 2)]
    assert all(list(p.index) == list(wide.index) for p in parts)
    short = wide.head(2)
    assert blocks(short, max_cols=5)[0].shape == (12, 2)  # transposed: one row a column
    cols = pd.MultiIndex.from_tuples([("ours", "EM"), ("ours", "F1"), ("ours", "R@2"), ("pub A", "EM"),
                                      ("pub A", "F1"), ("pub B", "EM")])
    grouped = pd.DataFrame(np.zeros((6, 6)), columns=cols)
    assert [list(dict.fromkeys(p.columns.get_level_values(0))) for p in blocks(grouped, max_cols=4)] == \
        [["ours"], ["pub A", "pub B"]]
    assert blocks(wide, max_cols=20) == [wide] or blocks(wide, max_cols=20)[0] is wide


def test_table_html_renders_line_breaks_and_wraps_long_text_into_unbreakable_lines():
    q = "Which county is the city where Harris W. Fawell was born in, and what is its seat?"
    html = Table(pd.DataFrame({"question": [q], "triples": ["(a, b, c)\n(d, e, f)"]}), caption="c", wrap=30)._repr_html_()
    assert "(a,&nbsp;b,&nbsp;c)<br>(d,&nbsp;e,&nbsp;f)" in html
    assert "\\n" not in html and "<caption>c</caption>" in html
    cell = html.split("<td style=\"text-align: left\">")[1].split("</td>")[0]
    lines = cell.split("<br>")
    assert len(lines) == 3 and all(len(line.replace("&nbsp;", " ")) <= 30 for line in lines)
    assert " " not in cell  # every space inside a line is non-breaking
    assert '<td style="text-align: left">' in html  # text reads from the left
    mixed = Table(pd.DataFrame({"v": [40.0, 3.68]}))._repr_html_()
    assert "<td>40</td>" in mixed and "<td>3.68</td>" in mixed
    plain = Table(pd.DataFrame({"n": [1.5]}), index=False)
    assert "<th></th>" not in plain._repr_html_() and "<td>1.5</td>" in plain._repr_html_()
    assert "county" in repr(Table(pd.DataFrame({"question": [q]})))


def test_p_values_keep_two_significant_digits():
    from kgir_lib.notebook.display import is_p_value

    assert all(map(is_p_value, ["p", "p (Holm)", "p R@2 merged vs D_1", "EM p vs round 1", "names: p vs kgir"]))
    assert not any(map(is_p_value, ["prompt_tokens", "pooled", "F1", "paper: KGIR-RAG minus other"]))
    out = tidy(pd.DataFrame({"p (Holm)": [0.015625, 4.4e-12, float("nan")], "EM": [12.3456, 1.0, 2.5]}))
    assert list(out["p (Holm)"]) == ["0.016", "4.4e-12", ""] and list(out["EM"]) == [12.3, 1.0, 2.5]
