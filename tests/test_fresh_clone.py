"""The README's main command on a fresh clone, as a stranger runs it: it finishes, and it leaves the clone as it
found it (``git status --porcelain`` empty), so a rerun that computes the same numbers changes no committed file.

The clone is made from this checkout's last commit into a temporary folder, with the shared data beside it as
``../shared`` (a symbolic link). Set-up is not repeated: the clone's ``.venv`` is a link to this checkout's
environment (the same pinned installs), and ``PYTHONPATH`` makes the clone's own ``kgir_lib`` the one every
kernel imports.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kgir_lib.config import PROJECT_ROOT, default_data_dir

pytestmark = pytest.mark.slow


def fresh_clone(tmp_path: Path, shared: Path | None) -> Path:
    """A clone of the last commit in ``tmp_path/repo``; ``shared`` (a data folder) linked as ``../shared/data``."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(PROJECT_ROOT), str(repo)], check=True)
    (repo / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    if shared is not None:
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "data").symlink_to(shared.resolve())
    return repo


def clone_env(repo: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGIR_")}  # a stranger's shell: none set
    return {**env, "PYTHONPATH": str(repo), "MPLBACKEND": "Agg", **extra}


def git_status(repo: Path) -> list:
    out = subprocess.run(["git", "status", "--porcelain"], cwd=repo, text=True, capture_output=True, check=True)
    return out.stdout.splitlines()


@pytest.mark.skipif(not (PROJECT_ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.skipif(not default_data_dir().is_dir(), reason="no data folder to put beside the clone")
def test_the_main_job_on_a_fresh_clone_leaves_it_clean(tmp_path):
    repo = fresh_clone(tmp_path, default_data_dir())
    proc = subprocess.run(["bash", "scripts/main.sh"], cwd=repo, env=clone_env(repo), text=True,
                          capture_output=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "done: 7 notebooks" in proc.stdout
    assert git_status(repo) == [], "the main job changed committed files:\n" + "\n".join(git_status(repo))


@pytest.mark.skipif(not (PROJECT_ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.skipif(not default_data_dir().is_dir(), reason="no samples to build the stand-in hosts from")
def test_a_clone_with_no_data_beside_it_fetches_verifies_and_runs_the_main_job(tmp_path):
    """A stranger's machine: no ``../shared``, ``KGIR_DATA_DIR`` unset; the upstream hosts are stood in for by a
    server on 127.0.0.1 in each host's layout (the base URLs come from the environment). The main job fetches,
    derives and verifies the samples into ``data/samples/``, runs every notebook, and every committed table comes
    out unchanged (nothing tracked changes)."""
    from data_server import serve, upstream_tree

    repo = fresh_clone(tmp_path, None)
    assert not (tmp_path / "shared").exists()
    with serve(upstream_tree(default_data_dir())) as server:
        proc = subprocess.run(["bash", "scripts/main.sh"], cwd=repo, env=clone_env(repo, **server.env()),
                              text=True, capture_output=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "done: 7 notebooks" in proc.stdout
    assert (repo / "data" / "samples" / "musique_train" / "musique_train.json").is_file()
    assert git_status(repo) == [], "the main job changed committed files:\n" + "\n".join(git_status(repo))
