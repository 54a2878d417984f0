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
* a paragraph says "default" next to exactly one backticked value of ``match_method`` or ``gtmp_reading``
  that is not the profile's.
"""
from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import jupytext
import pytest

from kgir_lib.config import Config, load_config

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
CATEGORICAL = {"match_method": ("dice", "overlap", "containment"), "gtmp_reading": ("passages", "seed_star")}


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
    if re.search(r"\bdefault", paragraph):
        for name, values in CATEGORICAL.items():
            said = [v for v in values if f"`{v}`" in paragraph]
            if len(said) == 1:
                problems += [f"says the default {name} is {said[0]!r}; profile {c.profile} has "
                             f"{getattr(c, name)!r}" for c in cfgs if getattr(c, name) != said[0]]
    return problems


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_markdown_quotes_no_config_value_the_profiles_contradict(path):
    cfgs = profiles()
    problems = [f"cell {i}: {p}  <- {para[:90]!r}" for i, para in markdown_paragraphs(path) for p in drift(para, cfgs)]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


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
