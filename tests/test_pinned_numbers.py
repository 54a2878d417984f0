"""The committed sample numbers, regenerated from the response log (the slow tier).

``python -m kgir_lib.runner --profile sample --regenerate`` of notebooks 01, 04 and 05 into a temporary results
directory holding only the committed response log (no traces, no graph: every method runs again from the LLM
cache), then every numeric column of every table it writes must equal the committed one, except the columns of
seconds and cache hits.

The fast tier is ``tests/test_pinned_tables.py``: every committed table rebuilt from the committed traces and
response log without running a method, compared cell by cell.
"""
from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kgir_lib.config import PROJECT_ROOT, default_data_dir

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
