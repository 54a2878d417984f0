"""The committed sample numbers, pinned (the shape of Microsoft recommenders' notebook tests, which assert
the metric values an executed notebook stored).

- **fast**: the committed per-question traces of ``results/sample/traces/<method>/<dataset>.trace.jsonl`` are
  scored again with the suite's scoring code (:func:`kgir_lib.eval.evaluate.score` and the tables notebook 05
  builds from it) and every number of notebook 05's tables must come out as committed: EM / F1
  (Tables 4/5), Recall@2/5 (Table 6), the answer form, the cost table's counts, the paired bootstrap
  intervals and verdicts, the claims' means and differences, and the ``n`` in the column headers. The
  test reads whatever methods, datasets and metrics the tables hold, so it keeps passing after a correct
  regeneration of the sample results, and fails when a committed cell and the traces disagree.
- **slow**: ``python -m kgir_lib.runner --profile sample --regenerate`` of notebooks 01, 04 and 05 into a
  temporary results directory holding only the committed response log (no traces, no graph: every
  method runs again from the LLM cache), then every numeric column of every table it writes must equal
  the committed one, except the columns of seconds and cache hits.
"""
from __future__ import annotations

import functools
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from kgir_lib.config import PROJECT_ROOT, default_data_dir
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.eval import evaluate as ev
from kgir_lib.eval.bootstrap import bootstrap_table, dataset_groups, paired_scores
from kgir_lib.registry import DEFAULT_METHODS, method_labels
from kgir_lib.traces import trace_filename

RUN = PROJECT_ROOT / "results" / "sample"
TABLES = RUN / "tables"
DATA = default_data_dir()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"no shared data at {DATA} (set KGIR_DATA_DIR)")
ATOL = 1e-9  # the CSVs hold full float precision; recomputed means may differ in the last bit only


def committed(name: str) -> pd.DataFrame:
    path = TABLES / f"{name}.csv"
    assert path.exists(), f"committed table {path} is missing"
    return pd.read_csv(path)


def committed_at_head(name: str) -> pd.DataFrame:
    """The table as the last commit holds it, so that a main job run in this checkout before the tests (the
    README's two commands in order) cannot move the reference; the working copy outside a git checkout."""
    rel = (TABLES / f"{name}.csv").relative_to(PROJECT_ROOT).as_posix()
    proc = subprocess.run(["git", "-C", str(PROJECT_ROOT), "show", f"HEAD:{rel}"], capture_output=True, text=True)
    if proc.returncode != 0:
        return committed(name)
    return pd.read_csv(io.StringIO(proc.stdout))


def caption(name: str) -> str:
    return (TABLES / f"{name}.md").read_text(encoding="utf-8").split("\n\n", 1)[0]


def run_config() -> dict:
    """The effective config notebook 05 ran with (``results/sample/config/05_eval.yaml``)."""
    return yaml.safe_load((RUN / "config" / "05_eval.yaml").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def labels() -> dict:
    """``{key: row label}`` of every method as the committed run labels it (:func:`kgir_lib.registry.method_labels`
    under its config: LightRAG's rows name its index)."""
    return method_labels(SimpleNamespace(**run_config()))


@functools.lru_cache(maxsize=1)
def key_of() -> dict:
    return {label: key for key, label in labels().items()}


def same(got, want, what: str) -> None:
    """Equal numbers (NaN equals NaN), to the CSV's precision; the message names the cell."""
    g, w = float(got), float(want)
    assert (np.isnan(g) and np.isnan(w)) or abs(g - w) <= ATOL * max(1.0, abs(w)), f"{what}: {g!r} != committed {w!r}"


def ours_columns(df: pd.DataFrame) -> dict:
    """``{column: (label, dataset, metric)}`` of the column group of our numbers (``ours (...) / d / m``)."""
    out = {}
    for c in df.columns:
        parts = c.split(" / ")
        if c.startswith("ours (") and len(parts) == 3:
            out[c] = tuple(parts)
    assert out, "no 'ours (...)' column in the table"
    return out


@pytest.fixture(scope="module")
def scores() -> pd.DataFrame:
    """Notebook 05's score frame, rebuilt from the committed traces: one row a (dataset, method, question)."""
    if not DATA.is_dir():
        pytest.skip(f"no shared data at {DATA} (set KGIR_DATA_DIR)")
    cfg = run_config()
    frames = []
    for dataset in cfg["datasets"]:
        questions = sample_questions(load_dataset(dataset, DATA).questions, cfg["n_questions"], cfg["seed"])
        for key in cfg.get("eval_methods") or DEFAULT_METHODS:
            path = RUN / "traces" / key / trace_filename(dataset)
            assert path.exists(), f"committed trace file {path} is missing"
            outputs = ev.load_outputs(path)
            assert [o.qid for o in outputs] == [q.qid for q in questions], f"{path}: not the sampled questions"
            df = ev.score(outputs, questions)
            df.insert(0, "method", labels()[key])
            df.insert(0, "key", key)
            df.insert(0, "dataset", dataset)
            frames.append(df)
    return pd.concat(frames, ignore_index=True)


def check_summary(table: pd.DataFrame, scores: pd.DataFrame, name: str) -> int:
    """Every cell of our column group equals the mean over the method's questions; returns cells checked."""
    cols = ours_columns(table)
    n_label = ev.questions_per_dataset(scores)
    model = run_config()["llm_model"]
    checked = 0
    for col, (label, dataset, metric) in cols.items():
        assert label == ev.ours_label(SimpleNamespace(llm_model=model), n_label), f"{name}: header {label!r}"
        for method, cell in zip(table["method"], table[col]):
            rows = scores[(scores["method"] == method) & (scores["dataset"] == dataset)]
            if method not in key_of() or rows.empty:
                assert np.isnan(cell), f"{name}: {method} / {dataset} / {metric} was not run but reads {cell}"
                continue
            same(rows[metric].mean(), cell, f"{name}: {method} / {dataset} / {metric}")
            checked += 1
    return checked


@needs_data
def test_qa_and_recall_tables_are_the_means_of_the_committed_traces(scores):
    qa_tables = sorted(TABLES.glob("05_table4_5_qa_*.csv"))
    assert qa_tables, "no committed 05_table4_5_qa_* table"
    checked = sum(check_summary(committed(p.stem), scores, p.stem) for p in qa_tables)
    checked += check_summary(committed("05_table6_recall"), scores, "05_table6_recall")
    cells = scores["method"].nunique() * scores["dataset"].nunique() * 2  # two metrics a dataset and method
    assert checked == cells * (len(qa_tables) + 1), "a method that ran has no row in a table"


@needs_data
def test_answer_form_and_cost_counts_are_those_of_the_committed_traces(scores):
    form = committed("05_answer_form").set_index(["method", "dataset"])
    mine = ev.answer_form(scores)
    assert list(form.index) == list(mine.index)
    for col in form.columns:
        for idx in form.index:
            same(mine.loc[idx, col], form.loc[idx, col], f"05_answer_form: {idx} / {col}")
    cost = committed("05_cost_per_question_by_dataset").set_index(["method", "dataset"])
    mine = ev.cost_table(scores, by_dataset=True)
    assert list(cost.index) == list(mine.index)
    counted = [c for c in cost.columns if "seconds" not in c and "cache hits" not in c]
    assert {"LLM calls / q", "tokens / q", "F1"} <= set(counted)
    for col in counted:
        for idx in cost.index:
            same(mine.loc[idx, col], cost.loc[idx, col], f"05_cost_per_question_by_dataset: {idx} / {col}")


def resamples(name: str) -> int:
    found = re.search(r"\((\d+) resamples\)", caption(name))
    assert found, f"{name}.md: the caption does not say how many bootstrap resamples"
    return int(found.group(1))


@needs_data
def test_bootstrap_intervals_and_verdicts_are_those_of_the_committed_traces(scores):
    table = committed("05_bootstrap_ci")
    reference = re.match(r"(.+?) minus each method", caption("05_bootstrap_ci")).group(1)
    mine = bootstrap_table(scores, reference=reference, metrics=tuple(dict.fromkeys(table["metric"])),
                           n_boot=resamples("05_bootstrap_ci"), seed=0)
    keys = ["dataset", "baseline", "metric"]
    assert [tuple(r) for r in table[keys].to_numpy()] == [tuple(r) for r in mine[keys].to_numpy()]
    assert table["supported"].tolist() == mine["supported"].tolist()
    for col in ("n", "mean diff", "CI lo", "CI hi"):
        for i, (want, got) in enumerate(zip(table[col], mine[col])):
            same(got, want, f"05_bootstrap_ci: {tuple(table.loc[i, keys])} / {col}")


@needs_data
def test_claims_means_and_differences_are_those_of_the_committed_traces(scores):
    """Each claim row: n paired questions, KGIR-RAG's mean, the other method's, and their difference."""
    table = committed("05_claims")
    reference = next(c for c in table.columns if c in key_of())
    groups = dict(dataset_groups(scores))
    for i, row in table.iterrows():
        what = f"05_claims row {i} ({row['dataset']}, {row['metric']}, {row['compared with']})"
        a, b = paired_scores(groups[row["dataset"]], reference, row["compared with"], row["metric"])
        assert int(row["n"]) == a.size, what
        if a.size:
            same(a.mean(), row[reference], f"{what} / {reference}")
            same(b.mean(), row["other"], f"{what} / other")
            same((a - b).mean(), row["diff"], f"{what} / diff")


# ---------------------------------------------------------------- slow: regenerate from the response log
# Notebooks 04 and 05 need notebook 01's graphs (hotpotqa: the extracted pool; musique_train: the imported
# OpenIE). Notebook 02 writes only its own tables and the embedding cache (rebuilt on demand), and notebook
# 03's on-demand extractions are passages KGIR-RAG's first retrieval extracts again in 04: regenerating 01,
# 04 and 05 gives the same tables as regenerating 01-05, without the work of 02 and 03.
NOTEBOOKS = ("01", "04", "05")
# timing columns, and the cache's: hits, and calls or seconds of calls that were not in it ("new")
UNPINNED = re.compile(r"seconds|wall|time|_s$|cache.hit|\bnew\b", re.IGNORECASE)


def numeric_columns(df: pd.DataFrame) -> list:
    return [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not UNPINNED.search(str(c))]


def assert_same_tables(tables: Path) -> int:
    """Every numeric column (but timing and cache columns) of every CSV in ``tables`` equals the committed
    table's; returns how many columns were compared."""
    written = sorted(tables.glob("*.csv"))
    assert written, f"no table was written to {tables}"
    compared = 0
    for path in written:
        new, old = pd.read_csv(path), committed_at_head(path.stem)
        assert list(new.columns) == list(old.columns) and len(new) == len(old), f"{path.name}: shape changed"
        for col in numeric_columns(old):
            a, b = new[col].to_numpy(float), old[col].to_numpy(float)
            same = (np.isnan(a) & np.isnan(b)) | (a == b)  # == also pairs equal infinities (an MDE out of reach)
            with np.errstate(invalid="ignore"):
                bad = ~(same | (np.abs(a - b) <= ATOL * np.maximum(1.0, np.abs(b))))
            assert not bad.any(), (f"{path.name} / {col}: rows {np.flatnonzero(bad).tolist()[:10]} differ: "
                                   f"regenerated {a[bad][:5].tolist()} vs committed {b[bad][:5].tolist()}")
            compared += 1
    return compared


@pytest.mark.slow
@needs_data
def test_regenerating_from_the_response_log_reproduces_every_committed_number(tmp_path):
    results = tmp_path / "results"
    (results / "sample").mkdir(parents=True)
    shutil.copy2(RUN / "llm_responses.jsonl.gz", results / "sample" / "llm_responses.jsonl.gz")
    env = dict(os.environ, KGIR_RESULTS_DIR=str(results), KGIR_FIGURES_DIR=str(tmp_path / "figures"),
               KGIR_DATA_DIR=str(DATA), MPLBACKEND="Agg")
    env.pop("KGIR_PROFILE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "sample", "--regenerate",
                           "--only", *NOTEBOOKS], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"regenerate failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert assert_same_tables(results / "sample" / "tables") > 0
