"""The shape of KGIR-RAG's code: the paper's modules hold the paper's method and nothing else, every variant
is a composition of steps, and the code of kgir/ reads one statement a line.

- No module of the paper's method names an oracle, a study, a repair of ours, the forced rounds or the gold,
  or any name of the study variants (their registry and variant keys, the classes of kgir/study.py); none
  imports the study variants.
- No class of kgir_lib overrides a private method of another class of kgir_lib (a variant that did would lean
  on an undeclared protected API).
- Every KGIR-RAG variant of the registry is a row of the one table (kgir_lib.kgir.variants.VARIANTS), built
  from step objects with one public method each.
- kgir/: lines of at most 100 characters, one statement a line (no ``;``, no compound statement on one
  line, no unrelated assignments folded into one tuple assignment); functions of more than four parameters
  take the rest keyword-only.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import kgir_lib
from kgir_lib.kgir import study
from kgir_lib.kgir.first_retrieval import FIRST_AND_NEW
from kgir_lib.kgir.loop import PAPER, Loop, Steps
from kgir_lib.kgir.variants import KINDS, STUDY_VARIANTS, VARIANTS, KGIRRAG, StudyKGIRRAG
from kgir_lib.registry import METHODS, STUDY_METHODS, build_method

REPO = Path(__file__).resolve().parents[1]
KGIR = REPO / "kgir_lib" / "kgir"
PAPER_MODULES = ("loop", "steps", "contract", "subgraph", "seeds", "entity_matching", "state", "rounds", "rewrite")
# the words a module of the paper's method never uses (the word "forced" alone stays: it is the vocabulary of the
# round cap of Algorithm 2, which the committed traces keep: answered_by "forced_reader", final.forced and
# "forced at cap"; the forced-rounds study is "forced rounds" and its round_answers)
WORDS = (r"oracle", r"\bstud(?:y|ies)\b", r"\bours\b", r"\bgold\b", r"forced[ -]rounds?", r"round_answers")
MAX_COLUMNS = 100
MAX_POSITIONAL = 4


def _study_names() -> set:
    """The names that belong to the study variants: their registry and variant keys (but "forced", see WORDS)
    and every public name kgir/study.py defines."""
    rows = {v: row for v, row in VARIANTS.items() if row.kind not in ("method", "ablation")}
    names = {row.key for row in rows.values()} | {v for v in rows if v != "forced"}
    return names | {n for n, obj in vars(study).items()
                    if not n.startswith("_") and getattr(obj, "__module__", None) == study.__name__}


@pytest.mark.parametrize("module", PAPER_MODULES)
def test_no_module_of_the_paper_names_a_study_variant(module):
    text = (KGIR / f"{module}.py").read_text(encoding="utf-8")
    words = [w for w in WORDS if re.search(w, text, re.I)]
    assert not words, f"kgir/{module}.py names {words}: the paper's method only (study variants: kgir/study.py)"
    names = sorted(n for n in _study_names() if re.search(rf"\b{re.escape(n)}\b", text))
    assert not names, f"kgir/{module}.py names the study variants' {names}"
    tree = ast.parse(text)
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"study", "variants"}, f"kgir/{module}.py imports the study variants"


def test_the_forbidden_words_would_be_found():
    """The check reads what it must: the study module trips it, a docstring saying 'oracle' would."""
    text = (KGIR / "study.py").read_text(encoding="utf-8")
    assert all(re.search(w, text, re.I) for w in (r"oracle", r"\bours\b", r"\bgold\b", r"round_answers"))
    assert "GoldSeeds" in _study_names() and "kgir_oracle_rewrite" in _study_names()
    assert "forced" not in _study_names() and "kgir_forced" in _study_names()


def _kgir_lib_classes() -> list:
    out = []
    for info in pkgutil.walk_packages(kgir_lib.__path__, "kgir_lib."):
        if info.name.endswith(".__main__"):  # a command: importing it runs it
            continue
        module = importlib.import_module(info.name)
        out += [cls for _, cls in inspect.getmembers(module, inspect.isclass) if cls.__module__ == module.__name__]
    return out


def test_no_class_overrides_a_private_method_of_another():
    ours = set(_kgir_lib_classes())
    found = []
    for cls in ours:
        for attr in cls.__dict__:
            if not attr.startswith("_") or attr.startswith("__"):
                continue
            found += [f"{cls.__module__}.{cls.__name__}.{attr} overrides {base.__module__}.{base.__name__}"
                      for base in cls.__mro__[1:] if base in ours and attr in base.__dict__]
    assert not found, "private methods overridden:\n" + "\n".join(found)
    # the check finds one
    base = type("Base", (), {"_step": lambda self: 1})
    sub = type("Sub", (base,), {"_step": lambda self: 2})
    assert "_step" in sub.__dict__ and "_step" in base.__dict__


def test_every_kgir_variant_is_a_row_of_the_one_table():
    keys = {row.key for row in VARIANTS.values()}
    # besides the table: the deployable repair (kgir_lib.kgir.first_retrieval), a composition of the paper's steps
    # registered under its own key (tests/test_first_retrieval.py)
    assert keys | {FIRST_AND_NEW.key} == {k for k in METHODS if k.startswith("kgir")}
    assert FIRST_AND_NEW.key not in keys and FIRST_AND_NEW.kind == "ours" and isinstance(FIRST_AND_NEW.steps, Steps)
    assert STUDY_METHODS == [row.key for row in STUDY_VARIANTS.values()]
    assert {row.kind for row in VARIANTS.values()} <= set(KINDS)
    for v, row in VARIANTS.items():
        method = build_method(row.key)
        assert method.spec is row and method.name == row.name and row.description.strip()
        assert isinstance(method, StudyKGIRRAG) == (row.kind in ("oracle", "ours")) and isinstance(method, KGIRRAG)
        assert isinstance(row.steps, Steps) and callable(getattr(row.composition, "answer"))
        for step in vars(row.steps).values():
            if step is not None:
                public = [n for n, _ in inspect.getmembers(type(step), inspect.isfunction) if not n.startswith("_")]
                assert callable(step) and public == [], f"{v}: a step is called, and has no other method"
    assert VARIANTS["full"].composition == Loop(PAPER) and VARIANTS["full"].kind == "method"
    assert {v for v, row in VARIANTS.items() if row.kind == "ablation"} == {"no_subgraph", "no_reflection",
                                                                           "no_rewrite"}
    assert {v: row.oracle for v, row in VARIANTS.items() if row.oracle} == {
        "oracle_seeds": ("seeds",), "oracle_rewrite": ("rewrite",), "oracle_next_hop": ("next_hop",),
        "oracle_context": ("context",), "oracle_seeds_rewrite": ("seeds", "rewrite"),
        "oracle_seeds_rewrite_next_hop": ("seeds", "rewrite", "next_hop")}


def test_a_composition_that_cannot_run_is_refused():
    with pytest.raises(ValueError, match="subgraph and its seeds"):
        Steps(seeds=None)
    with pytest.raises(ValueError, match="reflection reads the rewrite"):
        Steps(rewrite=None)


# ---------------------------------------------------------------- the code of kgir/ reads one statement a line
def _style_faults(path: Path) -> list:
    text = path.read_text(encoding="utf-8")
    faults = [f"{path.name}:{i}: {len(line)} characters" for i, line in enumerate(text.splitlines(), 1)
              if len(line) > MAX_COLUMNS]
    lines: dict = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.stmt):
            lines.setdefault(node.lineno, []).append(node)
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)
                and isinstance(node.value, ast.Tuple)):
            faults.append(f"{path.name}:{node.lineno}: assignments folded into one tuple assignment")
    faults += [f"{path.name}:{n}: {len(nodes)} statements on one line" for n, nodes in lines.items()
               if len(nodes) > 1]
    return faults


def _positional_faults(path: Path) -> list:
    faults = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
            if len(params) > MAX_POSITIONAL:
                faults.append(f"{path.name}:{node.lineno}: {node.name} takes {len(params)} positional parameters")
    return faults


@pytest.mark.parametrize("path", sorted(KGIR.glob("*.py")), ids=lambda p: p.name)
def test_kgir_one_statement_a_line(path):
    assert not _style_faults(path)


@pytest.mark.parametrize("path", sorted(KGIR.glob("*.py")), ids=lambda p: p.name)
def test_kgir_functions_of_more_than_four_parameters_take_keywords(path):
    assert not _positional_faults(path)


def test_the_style_checks_find_what_they_must(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("a, b = 1, 2\nx = 1; y = 2\nif x: y = 3\n" + "z = '" + "w" * 120 + "'\n"
                   "def f(a, b, c, d, e):\n    return a\n\ndef g(a, b, c, d, *, e):\n    return a\n")
    faults = _style_faults(bad)
    assert any("folded" in f for f in faults) and any(":2: 2 statements" in f for f in faults)
    assert any(":3: 2 statements" in f for f in faults) and any("characters" in f for f in faults)
    assert _positional_faults(bad) == ["bad.py:5: f takes 5 positional parameters"]
