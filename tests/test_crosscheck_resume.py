"""The KG²RAG cross-check's resume (benchmarks/peers/crosscheck_lib.sh: inputs_stamp, run_kept, resumable), run in
bash with stub runs in place of the authors' code: no peer environment. Each run is written to OUT.part, renamed OUT
when it ends, beside OUT.inputs (its inputs' content checksums, the order and the seed); a start on the same inputs
keeps a finished run, and a run whose stamp differs or is missing is run again."""
from __future__ import annotations

import gzip
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "benchmarks" / "peers" / "crosscheck_lib.sh"
SCRIPT = ROOT / "benchmarks" / "peers" / "kg2rag_crosscheck.sh"

# A stub of one run: appends its output path to CALLS, writes "run N" to it (N: the calls so far), and fails when
# FAIL is set (after writing part of its output, as a run stopped midway would).
STUB = '''
stub() {
    echo "$1" >> "$CALLS"
    printf 'run %s' "$(wc -l < "$CALLS")" > "$1"
    [ -z "${FAIL:-}" ]
}
'''


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    body = f'set -euo pipefail; PY="{sys.executable}"; source "{LIB}"; CALLS="{cwd}/calls"; {STUB}\n{script}'
    return subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", **env})


def _gz(path: Path, data: bytes, mtime: int) -> None:
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=mtime) as z:
        z.write(data)


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A dataset folder as the suite step leaves it: inputs.json.gz and scores.jsonl.gz."""
    d = tmp_path / "musique_train"
    d.mkdir()
    _gz(d / "inputs.json.gz", b'{"questions": []}\n', 1)
    _gz(d / "scores.jsonl.gz", b'{"q": 1}\n', 1)
    return d


def _calls(tmp: Path) -> int:
    calls = tmp / "calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_the_stamp_is_the_inputs_content_checksums_the_order_and_the_seed(inputs, tmp_path):
    """The stamp earlier starts wrote (the script's former inline expression) and the library's agree, so runs a
    cross-check finished before the change are kept; a gzip written again with another time in its header gives the
    same stamp; a missing input is named."""
    sha = [hashlib.sha256(gzip.decompress((inputs / f).read_bytes())).hexdigest()
           for f in ("inputs.json.gz", "scores.jsonl.gz")]
    got = _bash(f'inputs_stamp "{inputs}" as-is 3', tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout == f"{sha[0]} {sha[1]} as-is 3"
    former = _bash(f'WORK="{tmp_path}"; dataset=musique_train; order=as-is; seed=3; '
                   'echo -n "$(for f in inputs.json.gz scores.jsonl.gz; do gzip -dc "$WORK/$dataset/$f" | sha256sum '
                   '| cut -d\' \' -f1; done | tr \'\\n\' \' \')$order $seed"', tmp_path)
    assert former.stdout == got.stdout
    _gz(inputs / "scores.jsonl.gz", b'{"q": 1}\n', 99)
    assert _bash(f'inputs_stamp "{inputs}" as-is 3', tmp_path).stdout == got.stdout
    _gz(inputs / "scores.jsonl.gz", b'{"q": 2}\n', 1)
    assert _bash(f'inputs_stamp "{inputs}" as-is 3', tmp_path).stdout != got.stdout
    assert _bash(f'inputs_stamp "{inputs}" as-is 4', tmp_path).stdout != got.stdout
    (inputs / "inputs.json.gz").unlink()
    missing = _bash(f'inputs_stamp "{inputs}" as-is 3', tmp_path)
    assert missing.returncode == 1 and "missing input" in missing.stderr and "inputs.json.gz" in missing.stderr


def test_a_finished_run_is_kept_on_the_same_inputs_and_run_again_when_its_stamp_differs(inputs, tmp_path):
    out = inputs / "upstream_seed0.jsonl"
    first = _bash(f'resumable "{out}" "A" stub', tmp_path)
    assert first.returncode == 0, first.stderr
    assert out.read_text() == "run 1" and (inputs / "upstream_seed0.jsonl.inputs").read_text() == "A"
    assert not (inputs / "upstream_seed0.jsonl.part").exists() and _calls(tmp_path) == 1
    assert (tmp_path / "calls").read_text() == f"{out}.part\n"  # the run writes to OUT.part, never to OUT
    again = _bash(f'resumable "{out}" "A" stub', tmp_path)
    assert again.returncode == 0 and _calls(tmp_path) == 1 and out.read_text() == "run 1"
    assert "kept upstream_seed0.jsonl of musique_train (same inputs)" in again.stdout
    other = _bash(f'resumable "{out}" "B" stub', tmp_path)
    assert other.returncode == 0 and _calls(tmp_path) == 2
    assert out.read_text() == "run 2" and (inputs / "upstream_seed0.jsonl.inputs").read_text() == "B"


def test_a_run_without_its_stamp_or_without_its_output_is_run_again(inputs, tmp_path):
    out = inputs / "upstream_insertion.jsonl"
    out.write_text("a run whose stamp was never written")
    assert _bash(f'resumable "{out}" "A" stub', tmp_path).returncode == 0 and _calls(tmp_path) == 1
    out.unlink()  # a stamp left without its output
    assert _bash(f'resumable "{out}" "A" stub', tmp_path).returncode == 0 and _calls(tmp_path) == 2
    assert out.read_text() == "run 2"


def test_a_failed_run_leaves_the_earlier_run_and_its_stamp_and_no_output(inputs, tmp_path):
    """The command fails after writing part of its output: its status is returned, OUT.part is not renamed, and an
    earlier finished run stays as it was, still kept on its own inputs."""
    out = inputs / "upstream_seed1.jsonl"
    assert _bash(f'resumable "{out}" "A" stub', tmp_path).returncode == 0
    failed = _bash(f'resumable "{out}" "B" stub', tmp_path, FAIL="1")
    assert failed.returncode != 0 and _calls(tmp_path) == 2
    assert out.read_text() == "run 1" and (inputs / "upstream_seed1.jsonl.inputs").read_text() == "A"
    assert (inputs / "upstream_seed1.jsonl.part").read_text() == "run 2"
    assert "kept" in _bash(f'resumable "{out}" "A" stub', tmp_path).stdout and _calls(tmp_path) == 2
    fresh = inputs / "upstream_seed2.jsonl"
    assert _bash(f'resumable "{fresh}" "A" stub', tmp_path, FAIL="1").returncode != 0
    assert not fresh.exists() and not (inputs / "upstream_seed2.jsonl.inputs").exists()
    silent = _bash(f'quiet() {{ :; }}; resumable "{inputs}/upstream_seed3.jsonl" "A" quiet', tmp_path)
    assert silent.returncode == 1 and "wrote no" in silent.stderr  # a run that wrote nothing is not stamped


def test_a_start_stopped_between_the_rename_and_the_new_stamp_is_run_again(inputs, tmp_path):
    """Stopped right after the new run replaced OUT (before its stamp was written): the earlier run's stamp must not
    survive beside the new output, or a start on the earlier inputs would keep a run of other inputs."""
    out = inputs / "upstream_views0.jsonl"
    assert _bash(f'resumable "{out}" "A" stub', tmp_path).returncode == 0
    stopped = _bash(f'mv() {{ command mv "$@"; exit 9; }}; resumable "{out}" "B" stub', tmp_path)
    assert stopped.returncode == 9 and out.read_text() == "run 2"
    assert not (inputs / "upstream_views0.jsonl.inputs").exists()
    assert _bash(f'resumable "{out}" "A" stub', tmp_path).returncode == 0 and _calls(tmp_path) == 3
    assert out.read_text() == "run 3" and (inputs / "upstream_views0.jsonl.inputs").read_text() == "A"


def test_the_kg2rag_cross_check_runs_the_authors_code_through_the_library_resume():
    """The script stamps and resumes each run of the authors' code with the library's functions (the ones tested
    above), not a copy of its own, and still parses."""
    text = SCRIPT.read_text(encoding="utf-8")
    body = text[text.index("run_upstream() {"):]
    body = body[:body.index("\n}\n")]
    assert 'stamp="$(inputs_stamp "$WORK/$dataset" "$order" "$seed")"' in body
    assert 'resumable "$out" "$stamp" upstream_once "$order" "$seed" "$dataset"' in body
    assert "sha256sum" not in text and "mv " not in body
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_the_peers_readme_gives_the_committed_reports_seed_count():
    """The README's hash-seed sentence names the seed count of the committed report (the script's default is 5)."""
    import pandas as pd

    rows = pd.read_csv(ROOT / "results" / "benchmarks" / "peers_kg2rag.csv", usecols=["upstream_hash_seeds"])
    n = int(rows["upstream_hash_seeds"].max())
    readme = " ".join((ROOT / "benchmarks" / "peers" / "README.md").read_text(encoding="utf-8").split())
    assert f"**Hash seeds**: 5 by default (`HASH_SEEDS`; the committed report ran {n})" in readme
    assert 'HASH_SEEDS="${HASH_SEEDS:-5}"' in SCRIPT.read_text(encoding="utf-8")


def test_seed_run_dir_copies_the_first_runs_run_directory_only_into_a_folder_without_one(tmp_path: Path) -> None:
    """The uncleaned run starts from the cleaned run's run directory (its encoder cache) when its folder has none;
    a folder that has one keeps it, and a first run without one copies nothing."""
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "results" / "local" / "cache").mkdir(parents=True)
    (first / "results" / "local" / "cache" / "calls.sqlite").write_bytes(b"vectors")
    done = _bash(f'seed_run_dir "{first}" "{second}"', tmp_path)
    assert done.returncode == 0 and "copied" in done.stdout
    assert (second / "results" / "local" / "cache" / "calls.sqlite").read_bytes() == b"vectors"
    (first / "results" / "local" / "cache" / "calls.sqlite").write_bytes(b"other")
    again = _bash(f'seed_run_dir "{first}" "{second}"', tmp_path)
    assert again.returncode == 0 and again.stdout == ""
    assert (second / "results" / "local" / "cache" / "calls.sqlite").read_bytes() == b"vectors"
    none = _bash(f'seed_run_dir "{tmp_path / "absent"}" "{tmp_path / "third"}"', tmp_path)
    assert none.returncode == 0 and not (tmp_path / "third").exists()
