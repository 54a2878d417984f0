"""Plausible one-line bugs in the code behind committed numbers, each applied alone to a copy of the project, with
the fast tests that must catch it run against the copy: a mutation the tests let pass is a number no test pins.

Each entry of :data:`MUTATIONS` names a file, one line as it stands (it must occur exactly once) and the line
that replaces it, and the fast tests (no model) that should fail. For each mutation the script copies the package
and the tests into a temporary folder (the other top-level folders are linked, never written), runs those tests
unmutated (they must pass: otherwise a failure says nothing about the mutation), applies the mutation, runs them
again and records which failed. The project itself is never modified.

    python benchmarks/spot_mutations.py            # every mutation; prints the record's section
    python benchmarks/spot_mutations.py --write    # also rewrites that section of results/benchmarks/mutation.md

Environment: PYTHON (default: this interpreter), KGIR_DATA_DIR (default: the suite's data folder).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "results" / "benchmarks" / "mutation.md"
BEGIN = "<!-- spot mutations: written by benchmarks/spot_mutations.py --write -->"
END = "<!-- end of spot mutations -->"
BEFORE = "## Every survivor"  # the section goes before the mutmut run's long list of survivors
COPIED = ("kgir_lib", "tests", "pyproject.toml")  # what a mutation may change, or what runs: copied, not linked


@dataclass(frozen=True)
class Mutation:
    """One bug: in ``path``, the line ``old`` (stripped; exactly one line of the file) becomes ``new``."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple
    moves: str  # which committed number it would move

    def line(self, root: Path = ROOT) -> int:
        """The 1-based line of ``old`` in the file; a ValueError when it is not there exactly once."""
        lines = (root / self.path).read_text(encoding="utf-8").splitlines()
        found = [i + 1 for i, text in enumerate(lines) if text.strip() == self.old]
        if len(found) != 1:
            raise ValueError(f"mutation {self.name!r}: {self.path} holds {self.old!r} on {len(found)} lines, not 1")
        return found[0]

    def apply(self, root: Path) -> None:
        path = root / self.path
        lines = path.read_text(encoding="utf-8").split("\n")
        i = self.line(root) - 1
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = indent + self.new
        path.write_text("\n".join(lines), encoding="utf-8")


MUTATIONS = (
    Mutation("claims MDE: discordance counted one way", "kgir_lib/eval/claims/table.py",
             "discordance = float((a != b).mean())", "discordance = float((a > b).mean())",
             ("tests/test_claims.py", "tests/test_local_tables.py"),
             "the EM MDE cells of the local 05_claims (README's headline)"),
    Mutation("passage cut: a passage of exactly the cut counted as longer",
             "kgir_lib/eval/mechanism/loss_decomposition.py",
             "longer += any(cut is not None and len(p.text) > cut for p in gold)",
             "longer += any(cut is not None and len(p.text) >= cut for p in gold)",
             ("tests/test_local_tables.py",), "04_passage_cut (local), quoted by docs/results.md"),
    Mutation("passage cut: only the first gold bridge read", "kgir_lib/eval/mechanism/loss_decomposition.py",
             "bridge += any(past_the_cut([b.name], gold, cut) for b in q.gold_bridges)",
             "bridge += any(past_the_cut([b.name], gold, cut) for b in q.gold_bridges[:1])",
             ("tests/test_local_tables.py",), "04_passage_cut (local), quoted by docs/results.md"),
    Mutation("public API: a repeated passage kept twice", "kgir_lib/api.py",
             "if pid not in seen:", "if True:",
             ("tests/test_passages_of.py",), "the passages the public API indexes (its docstring's promise)"),
    Mutation("Table 7: the variant minus the full method again", "kgir_lib/eval/ablation.py",
             '"ΔEM (ours)": em0 - float(r.EM), "ΔF1 (ours)": f10 - float(r.F1)}',
             '"ΔEM (ours)": float(r.EM) - em0, "ΔF1 (ours)": float(r.F1) - f10}',
             ("tests/test_ablation.py", "tests/test_committed_statistics.py"),
             "06_kgir_ablation and 06_kg2rag_ablation (the one sign of Table 7)"),
    Mutation("counts: the profile's n_questions, not the data's", "kgir_lib/report.py",
             "out[d] = total if n is None else n if total is None else min(n, total)",
             "out[d] = total if n is None else n",
             ("tests/test_local_tables.py",), "every local caption's count (hotpotqa 84, not 100)"),
    Mutation("bootstrap: an interval touching 0 read as excluding it", "kgir_lib/eval/bootstrap.py",
             "side = ABOVE if lo > 0 else BELOW if hi < 0 else CONTAINS",
             "side = ABOVE if lo >= 0 else BELOW if hi < 0 else CONTAINS",
             ("tests/test_known_answers_tables.py",), "the interval column of 05_bootstrap_ci"),
    Mutation("claims: the other method's mean read from KGIR-RAG's scores", "kgir_lib/eval/claims/table.py",
             'row.update({"n": a.size, reference: float(a.mean()), "other": float(b.mean()), "diff": diff,',
             'row.update({"n": a.size, reference: float(a.mean()), "other": float(a.mean()), "diff": diff,',
             ("tests/test_local_explorer_scores.py",), "the 'other' column of the local 05_claims"),
    Mutation("extraction cut: half the replies cut read as the median reply fitting", "kgir_lib/eval/cost.py",
             'if 2 * cut < n else "half or more, so the median passage\'s reply was cut too")',
             'if 2 * cut <= n else "half or more, so the median passage\'s reply was cut too")',
             ("tests/test_extraction_cut_sentence.py",),
             "the extraction-cut sentence docs/results.md renders, at exactly half the replies cut (no committed "
             "run is there)"),
)


def run_tests(root: Path, tests: tuple, python: str) -> tuple:
    """``(return code, the failed tests' ids)`` of pytest on ``tests`` in ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root), "MPLBACKEND": "Agg"}
    env.setdefault("KGIR_DATA_DIR", str(default_data()))
    out = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "-rf", *tests],
                         cwd=root, env=env, capture_output=True, text=True)
    failed = sorted({m.group(1) for m in re.finditer(r"^FAILED (\S+?)(?: - |$)", out.stdout, re.M)})
    return out.returncode, failed, out.stdout[-3000:]


def default_data() -> Path:
    sys.path.insert(0, str(ROOT))
    from kgir_lib.config import default_data_dir
    return default_data_dir().resolve()


def copy_project(dest: Path) -> None:
    """The project in ``dest``: :data:`COPIED` copied, every other top-level entry (results, docs, .venv, ...)
    linked."""
    for entry in ROOT.iterdir():
        if entry.name in (".git", "mutants") or entry.name.startswith(".pytest"):
            continue
        if entry.is_dir() and entry.name in COPIED:
            shutil.copytree(entry, dest / entry.name, ignore=shutil.ignore_patterns("__pycache__"))
        elif entry.name in COPIED:
            shutil.copy2(entry, dest / entry.name)
        else:
            (dest / entry.name).symlink_to(entry)


def check(m: Mutation, python: str) -> dict:
    """Run ``m``'s tests on an unmutated copy, then on the mutated copy: ``{"line", "baseline", "failed"}``."""
    line = m.line()
    with tempfile.TemporaryDirectory(prefix="spot-mutation-") as tmp:
        root = Path(tmp)
        copy_project(root)
        rc, failed, tail = run_tests(root, m.tests, python)
        if rc != 0:
            raise SystemExit(f"{m.name}: the tests fail before the mutation ({failed or 'rc ' + str(rc)}):\n{tail}")
        m.apply(root)
        rc, failed, tail = run_tests(root, m.tests, python)
    if rc == 0:
        print(f"NOT CAUGHT: {m.name}", file=sys.stderr)
    elif not failed:
        raise SystemExit(f"{m.name}: pytest failed without a failing test (rc {rc}):\n{tail}")
    return {"line": line, "failed": failed}


def section(results: list) -> str:
    """The record's section: one row a mutation."""
    caught = sum(bool(r["failed"]) for _, r in results)
    rows = [BEGIN, "", "## Spot mutations: one-line bugs in the code behind committed numbers", "",
            "Each bug applied alone to a copy of the project (`python benchmarks/spot_mutations.py --write`), with its "
            "fast tests run before (they pass) and after; the failing tests are those after the mutation. "
            f"{caught} of {len(results)} caught.", "",
            "| mutation | where | line as it stands ⟶ mutated | committed number it would move | failing tests |",
            "|---|---|---|---|---|"]
    for m, r in results:
        failed = "<br>".join(f"`{t}`" for t in r["failed"]) or "**none: not caught**"
        rows.append(f"| {m.name} | `{m.path}:{r['line']}` | `{m.old}` ⟶ `{m.new}` | {m.moves} | {failed} |")
    return "\n".join(rows + ["", END])


def write_section(text: str, record: Path = RECORD) -> None:
    body = record.read_text(encoding="utf-8")
    if BEGIN in body:
        head, rest = body.split(BEGIN, 1)
        body = head.rstrip("\n") + "\n\n" + text + rest.split(END, 1)[1]
    elif BEFORE in body:
        head, rest = body.split(BEFORE, 1)
        body = head.rstrip("\n") + "\n\n" + text + "\n\n" + BEFORE + rest
    else:
        body = body.rstrip("\n") + "\n\n" + text + "\n"
    record.write_text(body, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the section of {RECORD.relative_to(ROOT)}")
    args = parser.parse_args()
    python = os.environ.get("PYTHON", sys.executable)
    results = []
    for m in MUTATIONS:
        print(f"{m.name} ...", file=sys.stderr, flush=True)
        results.append((m, check(m, python)))
    text = section(results)
    print(text)
    if args.write:
        write_section(text)
    if not all(r["failed"] for _, r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
