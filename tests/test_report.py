"""report: Markdown tables."""
from __future__ import annotations

import pandas as pd
import pytest

from kgir_lib import report


def test_to_markdown_prints_exact_columns_as_given_and_rounds_the_rest():
    df = pd.DataFrame({"fraction": [0.0, 0.05, 0.1], "EM": [10.0, 11.666666, 12.25], "n": [1, 2, 3]})
    lines = report.to_markdown(df, exact=["fraction"]).splitlines()
    assert lines[0] == "| fraction | EM | n |"
    assert lines[2:] == ["| 0.0 | 10.0 | 1 |", "| 0.05 | 11.7 | 2 |", "| 0.1 | 12.2 | 3 |"]
    # without `exact`, .1f everywhere (0.05 prints as 0.1: why the swept columns are named), NaN blank
    assert report.to_markdown(df).splitlines()[3] == "| 0.1 | 11.7 | 2 |"
    assert report.to_markdown(pd.DataFrame({"x": [1.0, float("nan")]})).splitlines()[2:] == ["| 1.0 |", "|  |"]
    # an index column can be exact too (save_table's tables are indexed by their keys)
    indexed = df.set_index("fraction")
    assert report.to_markdown(indexed, exact=["fraction"]).splitlines()[3].startswith("| 0.05 |")


def test_to_markdown_names_an_unknown_exact_column():
    with pytest.raises(KeyError, match="threshold"):
        report.to_markdown(pd.DataFrame({"x": [1.0]}), exact=["threshold"])


def test_to_markdown_prints_p_values_with_two_significant_digits():
    df = pd.DataFrame({"EM": [8.04], "p": [0.0009765625], "p (Holm)": [0.005859375], "EM p vs round 1": [1.0],
                       "P(correct | answer) %": [8.13]})
    assert report.to_markdown(df).splitlines()[2] == "| 8.0 | 0.00098 | 0.0059 | 1 | 8.1 |"
    assert [report.is_p_column(c) for c in df.columns] == [False, True, True, True, False]


def test_runtime_columns_are_wall_time_cache_hits_and_what_this_run_did():
    from kgir_lib.report import is_runtime, split_runtime

    for label in ("wall seconds", "wall seconds / q (this run)", "cache hits / q", "cache_hits",
                  "extracted this run", "new LLM calls this run", ("hotpotqa", "wall seconds")):
        assert is_runtime(label), label
    for label in ("this run", "LLM seconds", "calls", "extract_calls_in_this_run", ("hotpotqa", "EM")):
        assert not is_runtime(label), label
    df = pd.DataFrame({"EM": [1.0], "wall seconds": [2.0], "extracted this run": [3]})
    result, runtime = split_runtime(df)
    assert list(result.columns) == ["EM"] and list(runtime.columns) == ["wall seconds", "extracted this run"]
    assert split_runtime(result)[1] is None
