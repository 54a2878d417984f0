"""A fresh clone of this checkout for the timing scripts (``regenerate_timing.py``, ``test_timing.py``): what a
reader who clones the repository starts from, with this checkout's Python environment linked in (as
``tests/test_fresh_clone.py`` does), so set-up is the up-to-date check only."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fresh_clone(folder: Path) -> Path:
    """A clone of this checkout's last commit in ``folder/repo``, its ``.venv`` a link to this checkout's."""
    repo = Path(folder) / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    (repo / ".venv").symlink_to(ROOT / ".venv")
    return repo


def clone_env(repo: Path, data_dir: Path, **extra: str) -> dict:
    """A new user's shell for ``repo``: no ``KGIR_*`` variable but the samples' folder, the clone's library first;
    ``extra`` variables on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGIR_")}
    return {**env, "PYTHONPATH": str(repo), "KGIR_DATA_DIR": str(data_dir), **extra}
