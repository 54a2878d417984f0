"""The book's question explorer (kgir_lib.book): its committed files rebuild from the traces, agree with the run's
mechanism tables (bridge funnel, rewrite forms, withheld gold), and stage into one page a question."""
from __future__ import annotations

import gzip
import html
import json
from pathlib import Path

import pandas as pd
import pytest

from kgir_lib.book.explorer import EXPLORER_FILE, HELD, NO_BRIDGE, ExplorerError, read_explorer, write_explorer
from kgir_lib.book.pages import BOOK_RUNS, BROKE_ORDER, EXPLORER, page_count, page_name, stage
from kgir_lib.config import load_config
from kgir_lib.eval.mechanism.funnel import STEPS
from kgir_lib.eval.mechanism.missing_gold import IN_D1, IN_LATER, NEVER
from kgir_lib.eval.mechanism.rewrite_form import FORMS

from conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parent.parent
MAX_BYTES = 5 * 1024 * 1024  # no committed file above 5 MiB


def explorer(profile: str) -> dict:
    return read_explorer(ROOT / "results" / profile / EXPLORER_FILE)


def table(profile: str, name: str) -> pd.DataFrame:
    return pd.read_csv(ROOT / "results" / profile / "tables" / f"{name}.csv")


@pytest.mark.parametrize("profile", BOOK_RUNS)
def test_explorer_file_is_small_and_complete(profile):
    path = ROOT / "results" / profile / EXPLORER_FILE
    assert path.stat().st_size < MAX_BYTES
    data = explorer(profile)
    per_q = table(profile, "04_kgir_per_question")
    assert data["profile"] == profile
    assert sorted(zip(per_q["dataset"], per_q["qid"].astype(str))) == sorted((q["dataset"], q["qid"])
                                                                             for q in data["questions"])
    answers = {(d, str(i)): a for d, i, a in zip(per_q["dataset"], per_q["qid"], per_q["answer"].fillna(""))}
    assert all(answers[(q["dataset"], q["qid"])] == q["answer"] for q in data["questions"])
    for q in data["questions"]:
        assert q["rounds"] and q["methods"][0]["method"] == "KGIR-RAG" and q["methods"][0]["answer"] == q["answer"]
        assert q["broke_at"] in BROKE_ORDER
        for pid in q["gold_pids"]:
            assert pid in q["passages"]


@pytest.mark.parametrize("profile", BOOK_RUNS)
def test_broken_steps_add_up_to_the_bridge_funnel(profile):
    funnel = table(profile, "04_bridge_funnel")
    funnel = funnel[(funnel["method"] == "kgir") & (funnel["bridge match"] == "contains") & (funnel["round"] == "any")]
    questions = explorer(profile)["questions"]
    assert set(funnel["dataset"]) == {q["dataset"] for q in questions if q["broke_at"] != NO_BRIDGE}
    order = {s: i for i, s in enumerate(BROKE_ORDER)}
    for dataset, g in funnel.groupby("dataset"):
        mine = [q for q in questions if q["dataset"] == dataset and q["broke_at"] != NO_BRIDGE]
        assert int(g["questions"].iloc[0]) == len(mine)
        for step in STEPS[1:]:
            passed = sum(order[q["broke_at"]] > order[step] for q in mine)
            assert int(g.loc[g["step"] == step, "n"].iloc[0]) == passed, (dataset, step)
    assert order[HELD] == len(STEPS) - 1


@pytest.mark.parametrize("profile", BOOK_RUNS)
def test_rewrite_forms_and_withheld_gold_match_the_tables(profile):
    questions = explorer(profile)["questions"]
    forms = table(profile, "04_rewrite_form")
    where = table(profile, "04_missing_gold_where")
    for dataset in {q["dataset"] for q in questions}:
        mine = [q for q in questions if q["dataset"] == dataset]
        row = forms[(forms["method"] == "kgir") & (forms["dataset"] == dataset) & (forms["round"] == "any")].iloc[0]
        counted = [r["form"] for q in mine for r in q["rounds"] if r["form"]]
        assert {f: counted.count(f) for f in FORMS} == {f: int(row[f]) for f in FORMS}
        w = where[where["dataset"] == dataset].iloc[0]
        places = [p for q in mine for p in q["withheld"].values()]
        assert [places.count(p) for p in (IN_D1, IN_LATER, NEVER)] == [int(w[p]) for p in (IN_D1, IN_LATER, NEVER)]


def _payload(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("profile", BOOK_RUNS)
def test_explorer_file_rebuilds_from_the_traces(profile, tmp_path):
    cfg = load_config(profile)
    if not (cfg.run_dir / "traces" / "kgir").is_dir():
        pytest.skip(f"the {profile} run's traces are not here: KGIR_PROFILE={profile} bash scripts/main.sh "
                    f"--regenerate rebuilds them from the committed response log")
    if not (SHARED_DATA / "musique").is_dir():
        pytest.skip(f"no data samples at {SHARED_DATA}")
    rebuilt = write_explorer(cfg, tmp_path / EXPLORER_FILE)
    got, want = _payload(rebuilt), _payload(ROOT / "results" / profile / EXPLORER_FILE)
    got_scores, want_scores = _pop_scores(got), _pop_scores(want)
    assert got == want  # every field but the retrieval scores, exactly
    # A retrieval score is rounded to 4 decimals from vectors whose last bits depend on the machine that computed
    # the encoder calls the committed seed leaves out (up to 2e-7 here): a score on a rounding boundary may move by
    # one unit of the 4th decimal, and by no more.
    assert len(got_scores) == len(want_scores)
    assert all((a is None) == (b is None) and (a is None or abs(a - b) <= 1.0001e-4)
               for a, b in zip(got_scores, want_scores))


def _pop_scores(node) -> list:
    """Remove every ``score`` field of a payload in place; the scores in document order."""
    found: list = []
    if isinstance(node, dict):
        if "score" in node:
            found.append(node.pop("score"))
        for value in node.values():
            found += _pop_scores(value)
    elif isinstance(node, list):
        for value in node:
            found += _pop_scores(value)
    return found


def test_read_explorer_names_the_file_and_fault(tmp_path):
    with pytest.raises(ExplorerError, match="no explorer file"):
        read_explorer(tmp_path / "none.json.gz")
    bad = tmp_path / "bad.json.gz"
    with gzip.open(bad, "wt") as f:
        json.dump({"format": 99, "questions": []}, f)
    with pytest.raises(ExplorerError, match="bad.json.gz.*'format'"):
        read_explorer(bad)


def test_stage_writes_one_page_a_question(tmp_path):
    pytest.importorskip("mathjax", reason="the book extra is not installed: .venv/bin/pip install -e '.[book]'")
    files = [(p, ROOT / "results" / p / EXPLORER_FILE) for p in BOOK_RUNS]
    pages = stage(ROOT, tmp_path / "src", files)
    runs = {p: explorer(p)["questions"] for p in BOOK_RUNS}
    assert len(pages) == sum(len(v) for v in runs.values())
    assert page_count(ROOT) == len(pages) + 14  # the front page, 7 notebooks, 5 docs, the explorer index
    index = (tmp_path / "src" / EXPLORER / "index.md").read_text(encoding="utf-8")
    assert index.count("<tr data-run=") == len(pages)
    q = next(x for x in runs[BOOK_RUNS[0]] if any(r["rewrite"] for r in x["rounds"]))
    text = (tmp_path / "src" / EXPLORER / f"{page_name(BOOK_RUNS[0], q)}.md").read_text(encoding="utf-8")
    assert html.escape(q["question"]) in text and html.escape(q["answer"]) in text
    assert html.escape(next(r["rewrite"] for r in q["rounds"] if r["rewrite"])) in text
    front = (tmp_path / "src" / "index.md").read_text(encoding="utf-8")
    assert front.startswith((ROOT / "README.md").read_text(encoding="utf-8").rstrip())
    assert "notebooks/07_case_study" in front and f"{EXPLORER}/index" in front
    assert (tmp_path / "src" / "_mathjax" / "mathjax" / "tex-mml-chtml.js").exists()


def test_benchmark_page_count_is_the_books():
    """results/benchmarks/book.md's page count (benchmarks/book_timing.py counts the built site) is the count the
    committed explorer files give, and its screenshots are committed."""
    import re

    text = (ROOT / "results" / "benchmarks" / "book.md").read_text(encoding="utf-8")
    m = re.search(r"\*\*Pages: (\d+)\*\*", text)
    assert m and int(m.group(1)) == page_count(ROOT)
    for name in re.findall(r"\]\((book_explorer_\d+\.png)\)", text):
        assert (ROOT / "results" / "benchmarks" / name).stat().st_size < 1024 * 1024
    assert len(re.findall(r"\]\((book_explorer_\d+\.png)\)", text)) == 2


@pytest.mark.parametrize("profile", BOOK_RUNS)
def test_every_methods_answers_average_to_table_4_5(profile):
    """The answers the explorer shows for every method, scored per question, give Table 4/5's EM of each method."""
    [path] = (ROOT / "results" / profile / "tables").glob("05_table4_5_qa_*.csv")
    t = pd.read_csv(path).set_index("method")
    questions = explorer(profile)["questions"]
    checked = 0
    for dataset in {q["dataset"] for q in questions}:
        [col] = [c for c in t.columns if c.startswith("ours") and c.endswith(f"/ {dataset} / EM")]
        mine = [q for q in questions if q["dataset"] == dataset]
        for method in mine[0]["methods"]:
            name = method["method"]
            ems = [next(m["EM"] for m in q["methods"] if m["method"] == name) for q in mine]
            assert sum(ems) / len(ems) == pytest.approx(float(t.loc[name, col]), abs=1e-9), (dataset, name)
            checked += 1
    assert checked >= 2 * len(questions[0]["methods"]) - 2
