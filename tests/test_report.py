"""report: Markdown tables."""
from __future__ import annotations

import pandas as pd

from kgir_lib import report


def test_to_markdown_keeps_swept_values_apart_and_rounds_measurements():
    df = pd.DataFrame({"fraction": [0.0, 0.05, 0.1], "EM": [10.0, 11.666666, 12.25], "n": [1, 2, 3]})
    lines = report.to_markdown(df).splitlines()
    assert lines[0] == "| fraction | EM | n |"
    # a set value that .1f would blur prints in full; a measured mean keeps .1f
    assert lines[2:] == ["| 0.0 | 10.0 | 1 |", "| 0.05 | 11.7 | 2 |", "| 0.1 | 12.2 | 3 |"]
    # a column that .1f shows exactly keeps .1f, NaN is blank
    assert report.to_markdown(pd.DataFrame({"x": [1.0, float("nan")]})).splitlines()[2:] == ["| 1.0 |", "|  |"]
