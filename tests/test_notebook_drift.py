"""Notebook text cannot drift from the config it runs on.

A notebook's markdown may *name* a setting (`` `cfg.ngram_threshold` ``, `` `top_k` ``) but the value a run
uses is printed from the config (:mod:`kgir_lib.notebook.narrative`, ``open_notebook``). This test scans the markdown
of every notebook source (and the comments of its parameters cell) and fails when

* a ``cfg.FIELD`` marker names no field of :class:`kgir_lib.config.Config`;
* a value is quoted for a known field ("θ = 0.5", "top_k = 10", "threshold 0.8", "3 passages of 400
  characters") that differs from that field's value in a profile the notebooks run on (``sample``, the main
  job; ``ci``, the test suite);
* a parameters-cell comment quotes a profile's value ("(sample: 4, ci: 2)", "the profile's (0.5)"): it says
  "None: the profile's value" and nothing more;
* a paragraph names exactly one eq. 5 similarity ("Dice", "overlap coefficient", "containment") or one
  embedded run model (SmolLM2, Qwen2.5-Coder-0.5B/1.5B) that is not the profile's; a paragraph that names
  several is a comparison and passes;
* a paragraph says "default" (or "this run") next to exactly one backticked value of a categorical setting
  (``match_method``, ``gtmp_reading``, ``reflection_passages``, ``kgir_answer_source``, ``lightrag_index``) that is
  not the profile's;
* a paragraph says "n-gram" while a profile's eq. 5 rule compares words (``match_method`` = ``tokens``), unless
  it names several similarities (a comparison); no printed string of a notebook's code, and no string of the
  notebook and case modules, says "n-gram" at all (they print what the config runs: ``narrative.match_name``);
* a paragraph about the claims or a verdict uses a verdict word the claims table does not
  (:mod:`kgir_lib.eval.claims`: "supports", "contradicts", "cannot tell", "not run"), e.g. "supported";
* a backticked name that looks like a method key (``kgir_forced``, ``lightrag_naive``) is neither a registry key
  nor a config field, prompt or stage name the library spells.
"""
from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import jupytext
import pytest

from kgir_lib.config import Config, load_config
from kgir_lib.eval import claims
from kgir_lib.notebook.narrative import NGRAM_METHODS
from kgir_lib.registry import METHODS, STUDY_METHODS

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
PROFILES = ("sample", "ci")
FIELDS = {f.name for f in fields(Config)}

NUM = r"(\d+(?:\.\d+)?)"
# field -> regexes whose first group is a value quoted for it
NUMERIC = {
    "ngram_threshold": [rf"(?:θ|ngram_threshold`?|threshold(?: θ)?)\s*(?:=|:|≥|of|at)?\s*\(?{NUM}\b"],
    "top_k": [rf"(?<![\w])top_k`?\s*(?:=|:)\s*{NUM}\b", rf"\bk\s*=\s*{NUM}\b"],
    "ngram_n": [rf"ngram_n`?\s*(?:=|:)\s*{NUM}\b", rf"character\s+{NUM}-grams"],
    "n_questions": [rf"n_questions`?\s*(?:=|:)\s*{NUM}\b", rf"\b{NUM} questions a dataset"],
    "max_iterations": [rf"max_iterations`?\s*(?:=|:)\s*{NUM}\b"],
    "context_passages": [rf"\b{NUM} (?:passages )?of (?:≤\s*|at most\s*)?\d+ characters"],
    "passage_chars": [rf"\b\d+ (?:passages )?of (?:≤\s*|at most\s*)?{NUM} characters", rf"passage_chars`?\s*(?:=|:)\s*{NUM}\b"],
}
SIMILARITY_WORDS = {"dice": r"\bDice\b", "overlap": r"overlap coefficient", "containment": r"\bcontainment\b"}
RUN_MODELS = {"SmolLM2-135M-Instruct-Q4_1": r"SmolLM2", "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M": r"Qwen2\.5-Coder-0\.5B",
              "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M": r"Qwen2\.5-Coder-1\.5B"}
CATEGORICAL = {"match_method": ("dice", "overlap", "containment", "tokens"), "gtmp_reading": ("passages", "seed_star"),
               "reflection_passages": ("new", "all"), "kgir_answer_source": ("reader", "reflection"),
               "lightrag_index": ("suite_graph", "native")}
NGRAM_WORD = re.compile(r"\bn-grams?\b|\btrigrams?\b", re.IGNORECASE)
VERDICT_WORDS = (claims.SUPPORTS, claims.CONTRADICTS, claims.CANNOT_TELL, claims.NOT_RUN)
# verdict words a paragraph about the claims might use that the claims table does not
FOREIGN_VERDICTS = re.compile(r"\b(supported|contradicted|inconclusive|refuted|confirmed|undecided)\b", re.IGNORECASE)
METHOD_KEY = re.compile(r"`((?:kgir|ircot|iter_retgen|hyde|kg2rag|hipporag2|lightrag|naive|bm25|dense)[a-z0-9_]*)`")
LIBRARY = ROOT / "kgir_lib"


def library_names() -> set:
    """Names the library spells as strings or fields: registry keys, config fields, prompt files, and every quoted
    identifier in its source (stage names such as ``lightrag_extract``)."""
    quoted = set()
    for path in LIBRARY.rglob("*.py"):
        quoted |= set(re.findall(r"[\"']([a-z][a-z0-9_]*)[\"']", path.read_text(encoding="utf-8")))
    prompts = {p.stem for p in (LIBRARY / "prompts").glob("*.txt")}
    return set(METHODS) | set(STUDY_METHODS) | FIELDS | prompts | quoted


def profiles() -> list:
    return [load_config(p) for p in PROFILES]


def markdown_paragraphs(path: Path) -> list:
    """``(cell number, paragraph)`` of every markdown cell of a notebook source."""
    nb = jupytext.read(path, fmt="py:percent")
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            out.extend((i, p) for p in re.split(r"\n\s*\n", cell.source) if p.strip())
    return out


def parameter_comments(path: Path) -> list:
    nb = jupytext.read(path, fmt="py:percent")
    return [line.split("#", 1)[1] for c in nb.cells if "parameters" in c.metadata.get("tags", [])
            for line in c.source.splitlines() if "#" in line]


def numeric_quotes(text: str) -> list:
    """``(field, quoted value)`` for every value quoted for a known numeric field in ``text``."""
    found = []
    for name, patterns in NUMERIC.items():
        for pat in patterns:
            found.extend((name, float(m.group(1))) for m in re.finditer(pat, text))
    return found


def drift(paragraph: str, cfgs: list) -> list:
    """What ``paragraph`` says that a profile contradicts (an empty list: nothing)."""
    problems = []
    for marker in re.findall(r"cfg\.(\w+)", paragraph):
        if marker not in FIELDS:
            problems.append(f"cfg.{marker} is not a Config field")
    for name, value in numeric_quotes(paragraph):
        for cfg in cfgs:
            if float(getattr(cfg, name)) != value:
                problems.append(f"quotes {name} = {value:g}; profile {cfg.profile} has {getattr(cfg, name)}")
    named = [m for m, pat in SIMILARITY_WORDS.items() if re.search(pat, paragraph)]
    if len(named) == 1:
        problems += [f"names the similarity {named[0]!r}; profile {c.profile} uses {c.match_method!r}"
                     for c in cfgs if c.match_method != named[0]]
    models = [m for m, pat in RUN_MODELS.items() if re.search(pat, paragraph)]
    if len(models) == 1:
        problems += [f"names the model {models[0]}; profile {c.profile} runs {c.llm_model}"
                     for c in cfgs if c.llm_model != models[0]]
    if re.search(r"\bdefault|\bthis run\b", paragraph):
        for name, values in CATEGORICAL.items():
            if f"`{name}`" not in paragraph and f"cfg.{name}" not in paragraph and name != "match_method" \
                    and name != "gtmp_reading":
                continue
            said = [v for v in values if f"`{v}`" in paragraph]
            if len(said) == 1:
                problems += [f"says the default {name} is {said[0]!r}; profile {c.profile} has "
                             f"{getattr(c, name)!r}" for c in cfgs if getattr(c, name) != said[0]]
    if NGRAM_WORD.search(paragraph) and len(named) < 2:
        problems += [f"says 'n-gram'; profile {c.profile} matches by {c.match_method!r}"
                     for c in cfgs if c.match_method not in NGRAM_METHODS]
    if re.search(r"\bclaims?\b|\bverdicts?\b", paragraph, re.IGNORECASE):
        problems += [f"verdict word {w!r} is not the claims table's ({', '.join(VERDICT_WORDS)})"
                     for w in dict.fromkeys(m.lower() for m in FOREIGN_VERDICTS.findall(paragraph))]
    return problems


def method_key_drift(paragraph: str, known: set) -> list:
    """Backticked method-like keys in ``paragraph`` that the library does not know."""
    return [f"`{k}` is no registry key, config field, prompt or stage name"
            for k in dict.fromkeys(METHOD_KEY.findall(paragraph)) if k not in known]


def code_strings(path: Path) -> list:
    """``(cell number, string literal)`` of every code cell of a notebook source."""
    import ast

    nb = jupytext.read(path, fmt="py:percent")
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        out += [(i, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return out


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_markdown_quotes_no_config_value_the_profiles_contradict(path):
    cfgs = profiles()
    problems = [f"cell {i}: {p}  <- {para[:90]!r}" for i, para in markdown_paragraphs(path) for p in drift(para, cfgs)]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_method_keys_in_markdown_are_the_registry_s(path):
    known = library_names()
    problems = [f"cell {i}: {p}" for i, para in markdown_paragraphs(path) for p in method_key_drift(para, known)]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


NOTEBOOK_MODULES = sorted((LIBRARY / "notebook").rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES + NOTEBOOK_MODULES, ids=[p.stem for p in SOURCES + NOTEBOOK_MODULES])
def test_no_printed_text_names_n_grams(path):
    """What a notebook prints comes from the config: a caption or printout saying "n-gram" is wrong whenever the
    run matches tokens, so none says it (narrative.match_name names the rule the config runs)."""
    if path.suffix == ".py" and path.parent.name == "src":
        strings = code_strings(path)
    else:
        import ast

        strings = [(n.lineno, n.value) for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                   if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        docstrings = {n.body[0].value.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(getattr(n.body[0], "value", None), ast.Constant)}
        strings = [(i, t) for i, t in strings if t not in docstrings]
    bad = [f"{i}: {t[:80]!r}" for i, t in strings if NGRAM_WORD.search(t)]
    assert not bad, f"{path.name} prints 'n-gram':\n" + "\n".join(bad)


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_parameter_comments_quote_no_profile_values(path):
    bad = [c for c in parameter_comments(path)
           if re.search(r"\((?:sample|ci|paper|local)\s*:", c) or re.search(r"profile'?s?\W*\(?\s*[\d\[(]", c)]
    assert not bad, f"{path.name}: parameter comments quote profile values: {bad}"


def test_the_scan_catches_what_a_lecturer_caught():
    """The check itself: the drifted sentences that were in the notebooks fail, their config-driven forms pass."""
    cfgs = profiles()
    assert drift("the **Dice coefficient** of the character trigrams; threshold θ = `ngram_threshold` (0.5)", cfgs)
    assert drift("the sample uses 5 passages of 600 characters", cfgs)
    assert drift("On the `sample` profile the graph comes from SmolLM2-135M (notebook 01)", cfgs)
    assert drift("G_tmp is `seed_star` by default", cfgs)
    assert drift("the threshold is `cfg.ngram_treshold`", cfgs)
    assert not drift("the threshold θ (`cfg.ngram_threshold`, printed above) decides which names match", cfgs)
    assert not drift("Dice, the overlap coefficient and token containment, side by side", cfgs)
    cfg = cfgs[0]
    quoted = f"{cfg.context_passages} passages of {cfg.passage_chars} characters at θ = {cfg.ngram_threshold}"
    assert not drift(quoted, cfgs) or cfgs[0].passage_chars != cfgs[1].passage_chars
    # what the lecturer caught next: settings, verdict words and method names that the run does not use
    assert drift("## 4. Question entities (eq. 4) and their n-gram matches in `G_q` (eq. 5)", cfgs)
    assert not drift("Dice and the overlap coefficient compare character n-grams; tokens compare words", cfgs)
    assert drift("**the paper's claims read off this run**: supported, contradicted, or cannot tell.", cfgs)
    assert not drift("The claims table reads **supports**, **contradicts** or **cannot tell**.", cfgs)
    assert drift("In this run the reflection reads `all` of D'_t (`reflection_passages`).", cfgs)
    assert not drift(f"In this run the reflection reads `{cfg.reflection_passages}` (`reflection_passages`).", cfgs)
    known = library_names()
    assert method_key_drift("the forced-rounds variant (`kgir_forcd`) runs every round", known)
    assert not method_key_drift("the forced-rounds variant (`kgir_forced`), prompt `kgir_reflect_verdict`, stage "
                                "`lightrag_extract`, field `kgir_answer_source`", known)
