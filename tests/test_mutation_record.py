"""The recorded mutation run (results/benchmarks/mutation.md) adds up: each module's verdicts sum to its mutants,
the modules sum to the total, every score is (killed + timeout) / tested to one decimal, a run with unchecked
mutants says "partial", and the modules are the ones pyproject.toml's [tool.mutmut] mutates."""
from __future__ import annotations

import fnmatch
import re
import tomllib

import pytest

from kgir_lib.config import PROJECT_ROOT

from _scripts import load_script

RECORD = PROJECT_ROOT / "results" / "benchmarks" / "mutation.md"
# the columns of benchmarks/mutation.sh's report, copied into the record
VERDICTS = ["killed", "timeout", "survived", "no tests", "suspicious", "segfault", "skipped", "not checked"]
HEAD = ["module", "total", *VERDICTS, "tested", "score %"]
SCORE_LINE = re.compile(r"score \(killed \+ timeout\) / tested: (?P<score>[\d.]+) % \((?P<label>[^)]*)\)")


def counts_table(text: str) -> dict:
    """``{module or "all": {column: int, "score %": str}}`` of the record's counts table (the report's)."""
    lines = text.splitlines()
    header = "| " + " | ".join(HEAD) + " |"
    assert lines.count(header) == 1, "mutation.md: expected one counts table with the report's header"
    rows = {}
    for line in lines[lines.index(header) + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == len(HEAD), f"mutation.md: row with {len(cells)} cells: {line}"
        name = cells[0].strip("`*")
        rows[name] = {**{k: int(v) for k, v in zip(HEAD[1:-1], cells[1:-1])}, "score %": cells[-1]}
    return rows


def score(row: dict) -> str:
    return f"{100 * (row['killed'] + row['timeout']) / row['tested']:.1f}" if row["tested"] else "–"


def check_record(text: str) -> None:
    """Raise AssertionError where the record's numbers do not add up (module docstring)."""
    rows = counts_table(text)
    assert "all" in rows and len(rows) > 1, "mutation.md: no module rows or no 'all' row"
    for name, row in rows.items():
        assert sum(row[k] for k in VERDICTS) == row["total"], f"{name}: the verdicts do not sum to its total"
        assert row["tested"] == row["total"] - row["skipped"] - row["not checked"], f"{name}: tested"
        assert row["score %"] == score(row), f"{name}: score {row['score %']}, computed {score(row)}"
    modules = [r for n, r in rows.items() if n != "all"]
    for k in ["total", *VERDICTS, "tested"]:
        assert rows["all"][k] == sum(r[k] for r in modules), f"all: {k} is not the sum of the modules'"
    found = SCORE_LINE.findall(text)
    assert len(found) == 1, "mutation.md: expected one score line"
    [(pct, label)] = found
    a = rows["all"]
    assert pct == score(a), f"score line {pct}, computed {score(a)}"
    if a["not checked"]:
        assert label == f"partial: {a['tested']} of {a['total']} mutants tested, {a['not checked']} not checked", \
            f"label {label!r}"
    else:
        assert label == f"complete: all {a['total']} mutants checked", f"label {label!r}"


def test_the_record_adds_up():
    check_record(RECORD.read_text(encoding="utf-8"))


def test_the_record_covers_the_configured_modules():
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]
    modules = [m for m in counts_table(RECORD.read_text(encoding="utf-8")) if m != "all"]
    for m in modules:
        assert any(fnmatch.fnmatch(m, pattern) for pattern in config["only_mutate"]), f"{m} is not mutated"
    for pattern in config["only_mutate"]:
        assert any(fnmatch.fnmatch(m, pattern) for m in modules), f"no row for {pattern}"


GOOD = """| module | total | killed | timeout | survived | no tests | suspicious | segfault | skipped | not checked | tested | score % |
|---|---|---|---|---|---|---|---|---|---|---|---|
| `a.py` | 10 | 6 | 1 | 2 | 0 | 0 | 0 | 0 | 1 | 9 | 77.8 |
| `b.py` | 4 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 4 | 0 | – |
| **all** | 14 | 6 | 1 | 2 | 0 | 0 | 0 | 0 | 5 | 9 | 77.8 |

score (killed + timeout) / tested: 77.8 % (partial: 9 of 14 mutants tested, 5 not checked)
"""


@pytest.mark.parametrize("old, new, message", [
    ("| `a.py` | 10 | 6 |", "| `a.py` | 11 | 6 |", "do not sum"),
    ("| 1 | 9 | 77.8 |\n| `b", "| 1 | 9 | 77.7 |\n| `b", "a.py: score"),
    ("| 5 | 9 | 77.8 |", "| 5 | 9 | 70.0 |", "all: score"),
    ("tested: 77.8 %", "tested: 77.9 %", "score line"),
    ("(partial: 9 of 14", "(partial: 8 of 14", "label"),
    ("partial: 9 of 14 mutants tested, 5 not checked", "complete: all 14 mutants checked", "label"),
])
def test_the_check_catches_numbers_that_do_not_add_up(old, new, message):
    check_record(GOOD)
    assert old in GOOD
    with pytest.raises(AssertionError, match=message):
        check_record(GOOD.replace(old, new))


def _groups_module():
    return load_script(PROJECT_ROOT / "benchmarks" / "mutation_groups.py")


def test_the_records_survivor_groups_add_up_to_its_survivors():
    text = RECORD.read_text(encoding="utf-8")
    lines = text.splitlines()
    start = lines.index("| group | survivors |") + 2
    rows = lines[start:start + next(i for i, line in enumerate(lines[start:]) if not line.startswith("| "))]
    assert sum(int(row.rsplit("|", 2)[1]) for row in rows) == counts_table(text)["all"]["survived"]
    listed = [line for line in lines if line.startswith("- `kgir_lib.")]
    assert len(listed) == counts_table(text)["all"]["survived"]


def _block(name: str, pinning: int, old: str, new: str) -> str:
    return (f"## {name}\n\ntests run: 5, of them pinning tests: {pinning}\n\n```diff\n--- a\n+++ b\n"
            f"@@ -1 +1 @@\n-{old}\n+{new}\n```\n")


@pytest.mark.parametrize("old, new, group", [
    ('bar = tqdm(total=T, desc="x")', 'bar = tqdm(total=None, desc="x")', "progress-bar"),
    ('raise ValueError(f"bad {x}")', "raise ValueError(None)", "error-message"),
    ('label = "KGIR-RAG rounds"', 'label = "XXKGIR-RAG roundsXX"', "a string literal"),
    ('f"{d:+.1f}"', 'f"{d:+.1F}"', "a format letter"),
    ("df.groupby(keys, sort=False)", "df.groupby(keys, sort=None)", "a pandas/numpy keyword"),
    ("if diff > 0:", "if diff >= 0:", "behaviour no test pins"),
])
def test_each_survivor_lands_in_the_group_its_diff_names(old, new, group):
    m = _groups_module()
    groups, pinned = m.survivor_groups(_block("kgir_lib.x.y__mutmut_1", 2, old, new) +
                                       _block("kgir_lib.x.y__mutmut_2", 0, "a = 1", "a = 2"))
    assert pinned == 1
    [(label, item)] = [(g, it) for g, items in groups.items() for it in items if it[0].endswith("_1")]
    assert label.startswith(group) and item[1] is True and item[2:] == ([old], [new])


# ---------------------------------------------------------------- the spot mutations (benchmarks/spot_mutations.py)
def _spot():
    return load_script(PROJECT_ROOT / "benchmarks" / "spot_mutations.py", register=True)  # (its dataclass)


def test_the_record_holds_every_spot_mutation_where_it_stands_and_each_was_caught():
    """Each mutation of the script is in the record's section, its line still in its file (a changed line fails
    here: run the script again), with at least one failing test that still exists."""
    spot = _spot()
    text = RECORD.read_text(encoding="utf-8")
    assert text.count(spot.BEGIN) == 1 and text.count(spot.END) == 1, "mutation.md: no spot-mutation section"
    section = text.split(spot.BEGIN, 1)[1].split(spot.END, 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| mutation")]
    assert len(rows) == len(spot.MUTATIONS), "mutation.md: one row a mutation of the script"
    for m, row in zip(spot.MUTATIONS, rows):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        m.line()  # the line still stands in its file, once
        assert cells[0] == m.name and re.fullmatch(rf"`{re.escape(m.path)}:\d+`", cells[1]), (m.name, cells[:2])
        failing = re.findall(r"`(tests/[^`:]+)::(\w+)(?:\[[^]`]*\])?`", cells[4])  # a parametrized id too
        assert failing, f"{m.name}: no failing test recorded"
        for path, test in failing:
            assert path in m.tests and f"def {test}(" in (PROJECT_ROOT / path).read_text(encoding="utf-8"), test
    assert f"{len(rows)} of {len(rows)} caught." in section


def test_a_spot_mutation_names_one_line_and_applies_to_a_copy(tmp_path):
    spot = _spot()
    (tmp_path / "m.py").write_text("x = 1\n    if a:\nx = 1\n")
    m = spot.Mutation("t", "m.py", "if a:", "if not a:", (), "")
    assert m.line(tmp_path) == 2
    m.apply(tmp_path)
    assert (tmp_path / "m.py").read_text() == "x = 1\n    if not a:\nx = 1\n"
    with pytest.raises(ValueError, match="on 2 lines, not 1"):
        spot.Mutation("t", "m.py", "x = 1", "x = 2", (), "").line(tmp_path)
