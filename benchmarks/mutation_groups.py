"""The surviving mutants of a mutation report (``mutants/report.md``, written by ``benchmarks/mutation.sh``), grouped
by a rule on each mutant's diff, as ``results/benchmarks/mutation.md`` shows them.

A grouping by what the mutant changes (a progress bar, an error message, a string literal, a format letter, a
pandas/numpy keyword), not a judgement of each one; a survivor no rule matches is "behaviour no test pins". Also
counts the survivors that ran ``tests/test_pinned_tables.py`` (the report says, per mutant, how many pinning tests
ran).

    python benchmarks/mutation_groups.py mutants/report.md > mutants/groups.md
"""
from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path
from typing import Callable

BLOCK = re.compile(r"^## (\S+)\n\ntests run: (\d+), of them pinning tests: (\d+)\n\n```diff\n(.*?)```", re.S | re.M)
KEYWORDS = r"(sort|dtype|drop|initial|index|columns|ascending|observed|dropna|include_groups)"
BEHAVIOUR = "behaviour no test pins (not judged one by one)"


def _strings_blanked(line: str) -> str:
    return re.sub(r'"[^"]*"|\'[^\']*\'', '""', line)


def _format_letter(new: list) -> bool:
    return any(re.search(r":[^}\"']*[FG]\}|\"[+.0-9]*[FG]\"", x) for x in new)


def _keyword(old: list, new: list) -> bool:
    if any(re.search(KEYWORDS + r"=None|astype\(None\)", x) for x in new):
        return True
    return len(old) == len(new) and any(re.search(KEYWORDS + "=", a) and not re.search(KEYWORDS + "=", b)
                                        for a, b in zip(old, new))


RULES: list[tuple[str, Callable[[list, list], bool]]] = [
    ("progress-bar display (the bar's total, label, visibility, steps)",
     lambda old, new: any("tqdm(" in x or "bar.update" in x or "leave=" in x for x in old + new)),
    ("error-message wording (the error is still raised; its type is tested)",
     lambda old, new: any(re.search(r"raise |Error\(|warn", x) for x in old)),
    ("a string literal's content or case (a label, note or sentence; also a dict key or character set, so not all "
     "harmless)",
     lambda old, new: [_strings_blanked(x) for x in old] == [_strings_blanked(x) for x in new]
     and not any(re.search(r"\{[^}]*:[^}]*[FGE]\}", x) for x in new)),
    ("a format letter in upper case (the same text for finite values)", lambda old, new: _format_letter(new)),
    (f"a pandas/numpy keyword set to None or dropped ({KEYWORDS[1:-1].replace('|', ', ')})", _keyword),
]


def changed_lines(diff: str) -> tuple[list, list]:
    """The removed and the added lines of a unified diff (without the ``---`` / ``+++`` headers)."""
    body = [line for line in diff.splitlines() if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]
    return [line[1:] for line in body if line[0] == "-"], [line[1:] for line in body if line[0] == "+"]


def group_of(diff: str) -> str:
    """The first rule of :data:`RULES` the diff matches, else :data:`BEHAVIOUR`."""
    old, new = changed_lines(diff)
    return next((label for label, rule in RULES if rule(old, new)), BEHAVIOUR)


def survivor_groups(report: str) -> tuple[dict, int]:
    """``({group: [(name, pinning tests ran, old lines, new lines)]}, survivors that ran pinning tests)``."""
    groups: dict = defaultdict(list)
    pinned = 0
    for name, _, n_pinning, diff in BLOCK.findall(report):
        groups[group_of(diff)].append((name, int(n_pinning) > 0, *changed_lines(diff)))
        pinned += int(n_pinning) > 0
    return dict(sorted(groups.items(), key=lambda kv: -len(kv[1]))), pinned


def _short(lines: list) -> str:
    return " ⏎ ".join(x.strip() for x in lines)[:160].replace("|", "\\|").replace("`", "'")


def render(report: str) -> str:
    """The markdown: the pinning count, the table of groups, then every survivor under its group."""
    groups, pinned = survivor_groups(report)
    total = sum(len(v) for v in groups.values())
    out = [f"Of the {total} survivors, {pinned} ran pinning tests (which passed) and {total - pinned} are in "
           "functions no committed table's rebuild calls.", "", "| group | survivors |", "|---|---|",
           *(f"| {g} | {len(items)} |" for g, items in groups.items())]
    for g, items in groups.items():
        out += ["", f"### {g} ({len(items)})", ""]
        out += [f"- `{name}`{' (pinning tests ran)' if pin else ''}: `{_short(old)}` ⟶ `{_short(new)}`"
                for name, pin, old, new in items]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a mutation report (mutants/report.md)")
    print(render(parser.parse_args().report.read_text(encoding="utf-8")), end="")


if __name__ == "__main__":
    main()
