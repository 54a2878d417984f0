"""The suite's side of a cross-check as the compare scripts run it: the profile's config over a work folder,
cache only (``KGIR_LLM_CACHE_ONLY=1``: a request the committed response log does not hold is an error, never a
model call), its run directory seeded with that committed log."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def checkout_commit() -> str:
    """The checkout's commit (short hash, ``+ uncommitted changes`` if the code the suite side runs, ``kgir_lib/``
    or ``benchmarks/``, differs from it), or ``unknown``."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--",
                                "kgir_lib", "benchmarks"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"commit {head}{' + uncommitted changes' if dirty else ''}"


def cache_only_config(work: Path, profile: str):
    """``profile``'s config writing under ``work/results``, whose response log is the committed one."""
    os.environ["KGIR_LLM_CACHE_ONLY"] = "1"
    from kgir_lib.config import load_config
    from kgir_lib.llm.response_log import LOG_NAME

    log = ROOT / "results" / profile / LOG_NAME
    if not log.exists():
        raise SystemExit(f"{log}: no committed response log for profile {profile!r}")
    cfg = load_config(profile, results_dir=str(work / "results"))
    target = cfg.run_dir / LOG_NAME
    if not target.exists() or target.stat().st_size != log.stat().st_size:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, target)
    return cfg
