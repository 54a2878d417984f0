"""A committed run's effective-config records are what a rerun of its profile writes.

``results/<profile>/config/<notebook>.yaml`` is written by every notebook (:func:`kgir_lib.config.start_run`). When
a profile file is edited after its run and only some notebooks are run again, the other records keep the old
value, and the next ``--regenerate`` rewrites them: a tracked file changes although nothing was computed anew. This
test reads each committed record against :func:`kgir_lib.config.profiles.config_record` of the profile as it
stands, so such a stale record fails here, in the fast tier, naming the file and the field.
"""
from __future__ import annotations

import pytest
import yaml

from kgir_lib.config import PROJECT_ROOT, builtin_profiles, load_config
from kgir_lib.config.profiles import config_record

RECORDS = sorted(p for name in builtin_profiles() for p in (PROJECT_ROOT / "results" / name / "config").glob("*.yaml"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("KGIR_PROFILE", "KGIR_DATA_DIR", "KGIR_RESULTS_DIR", "KGIR_FIGURES_DIR"):
        monkeypatch.delenv(var, raising=False)


def test_both_committed_runs_have_their_records():
    assert {p.parent.parent.name for p in RECORDS} >= {"sample", "local"}
    assert all(len(list(p.parent.glob("*.yaml"))) == 7 for p in RECORDS)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_committed_record_is_what_the_profile_writes(path):
    profile = path.parent.parent.name
    want = config_record(load_config(profile))
    got = path.read_text(encoding="utf-8")
    if got != want:  # (the fields that differ, for the message: each record parsed once)
        wanted = yaml.safe_load(want)
        stale = {k: (v, wanted.get(k)) for k, v in yaml.safe_load(got).items() if wanted.get(k) != v}
        pytest.fail(f"{path.relative_to(PROJECT_ROOT)} differs from profile {profile!r} as it stands "
                    f"(field: committed, profile): {stale}; regenerate that notebook")


def test_a_changed_field_makes_the_record_differ():
    cfg = load_config("local")
    assert config_record(cfg) != config_record(load_config("local", decomposition_datasets=["musique_train"]))
    assert "results_dir: null" in config_record(cfg) and "data_dir: null" in config_record(cfg)
