"""A nullable field can be set to null by every path that sets a field: a profile override in ``load_config``,
a notebook parameter (``open_notebook``), the runner's ``-p NAME null`` and ``KGIRPipeline(..., NAME=None)``.
``None`` as a notebook parameter keeps the profile's value, so the explicit null is the text ``"null"``
(``kgir_lib.config.NULL``); a field that may not be null refuses it, naming the field."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kgir_lib import KGIRPipeline, runner
from kgir_lib.config import NULL, ConfigError, load_config
from kgir_lib.config.fields import _FIELDS, _field_kind
from kgir_lib.notebook.opening import open_notebook

from _probe import probe_notebook

REPO = Path(__file__).resolve().parents[1]

# a non-null value of every nullable field, set by a profile; the null override must replace each
NON_NULL = {
    "llm_model_path": None,  # filled with a file by the fixture (the llamacpp backend checks it exists)
    "reranker_model": "some-reranker", "embed_max_length": 128, "n_questions": 3, "extract_max_passages": 5,
    "max_evidence_triples": 7, "kg_llm_model": "some-kg-model", "hipporag2_synonymy": True,
    "eval_methods": ["kgir"], "attribution_methods": ["kgir_forced"], "attribution_datasets": ["hotpotqa"],
    "decomposition_readers": ["Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"], "decomposition_datasets": ["hotpotqa"],
    "study_n_questions": 2, "passage_chars": 123, "data_dir": None, "results_dir": None, "figures_dir": None,
    "run_name": "probe-run",
}


def nullable_fields() -> list:
    return sorted(name for name in _FIELDS if _field_kind(name)[1])


def test_the_list_holds_every_nullable_field():
    assert sorted(NON_NULL) == nullable_fields()


@pytest.fixture
def profile(tmp_path, monkeypatch):
    """A profile extending ci that sets every nullable field to a value that is not null."""
    for env in ("KGIR_DATA_DIR", "KGIR_RESULTS_DIR", "KGIR_FIGURES_DIR"):
        monkeypatch.delenv(env, raising=False)
    (tmp_path / "model.gguf").write_bytes(b"")
    values = {**NON_NULL, "llm_model_path": str(tmp_path / "model.gguf"), "data_dir": str(tmp_path / "data"),
              "results_dir": str(tmp_path / "results"), "figures_dir": str(tmp_path / "figures")}
    path = tmp_path / "every_null_set.yaml"
    path.write_text(yaml.safe_dump({"extends": "ci", **values}))
    return path, values


def test_load_config_sets_every_nullable_field_to_null_with_the_text_null(profile):
    path, values = profile
    base = load_config(path)
    assert {name: getattr(base, name) for name in values} == values  # the profile's values are not null ...
    for name in values:
        assert getattr(load_config(path, **{name: NULL}), name) is None, name  # ... and each can be nulled
        assert getattr(load_config(path, **{name: None}), name) == values[name], name  # None keeps the value


def test_a_field_that_may_not_be_null_refuses_the_null_naming_itself():
    for name in ("top_k", "temperature", "datasets", "allow_fewer_questions"):
        with pytest.raises(ConfigError, match=f"parameter '{name}'.*must not be null"):
            load_config("ci", **{name: NULL})
    assert load_config("ci", description=NULL).description == "null"  # a plain text field keeps the text
    with pytest.raises(ConfigError, match="parameter 'passage_chars'.*expected a number, got the text 'none'"):
        load_config("ci", passage_chars="none")


def test_open_notebook_takes_the_null_as_a_parameter_or_an_override(tmp_path, monkeypatch):
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGIR_FIGURES_DIR", str(tmp_path / "figures"))
    assert load_config("ci").passage_chars == 400
    for ns in ({"profile": "ci", "passage_chars": NULL},
               {"profile": "ci", "config_overrides": {"passage_chars": NULL}}):
        cfg, _ = open_notebook("04_iterative_rewrite", ns, llm=False, quiet=True)
        assert cfg.passage_chars is None
        written = yaml.safe_load((tmp_path / "results" / "ci" / "config" / "04_iterative_rewrite.yaml").read_text())
        assert written["passage_chars"] is None
    cfg, _ = open_notebook("04_iterative_rewrite", {"profile": "ci", "passage_chars": None}, llm=False, quiet=True)
    assert cfg.passage_chars == 400  # None: the parameters cell's default, the profile's value
    with pytest.raises(ConfigError, match="parameter 'max_iterations'.*must not be null"):
        open_notebook("04_iterative_rewrite", {"profile": "ci", "max_iterations": NULL}, llm=False, quiet=True)


def test_the_runner_turns_null_into_the_explicit_null_and_refuses_it_where_not_allowed(capsys):
    params = {k: runner._normalise(k, v) for k, v in runner._parse_params([["passage_chars", "null"]]).items()}
    assert params == {"passage_chars": NULL}  # what the notebooks receive as their parameter
    assert load_config("ci", **runner.split_params(params)[0]).passage_chars is None
    assert runner.scratch_name("ci", params) != runner.scratch_name("ci", {"passage_chars": 400})
    one = ["-p", "datasets", "[hotpotqa]", "-p", "ablation_datasets", "[hotpotqa]"]
    assert runner.main(["--profile", "ci", "--validate-only", *one, "-p", "passage_chars", "null"]) == 0
    assert runner.main(["--profile", "ci", "--validate-only", "-p", "top_k", "null"]) == 2
    assert "parameter 'top_k': must not be null" in capsys.readouterr().err
    assert runner._normalise("resume", None) is None  # a notebook-only parameter: None stays None


@pytest.mark.slow  # starts a notebook kernel
def test_the_runner_hands_the_null_to_a_notebook(tmp_path):
    probe = ("from kgir_lib.notebook.opening import open_notebook\n"
             "cfg, _ = open_notebook('00_probe', globals(), llm=False)\n"
             "cfg.path('probe.txt').write_text(repr(cfg.passage_chars))")
    nbs = probe_notebook(tmp_path / "nbs", probe, "profile = None\npassage_chars = None")
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "f")}
    env.pop("KGIR_PROFILE", None)
    out = subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs),
                          "-p", "passage_chars", "null"], cwd=REPO, env=env, text=True, capture_output=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    run_dir = tmp_path / "results" / runner.scratch_name("ci", {"passage_chars": NULL})
    assert (run_dir / "probe.txt").read_text() == "None"


def test_kgir_pipeline_takes_none_as_the_null(monkeypatch, tmp_path):
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "results"))
    assert KGIRPipeline("ci", passage_chars=None).cfg.passage_chars is None
    assert KGIRPipeline("ci", max_evidence_triples=None).cfg.max_evidence_triples is None
    assert KGIRPipeline("ci").cfg.passage_chars == 400
    with pytest.raises(ConfigError, match="parameter 'top_k'.*must not be null"):
        KGIRPipeline("ci", top_k=None)
    with pytest.raises(ConfigError, match="parameter 'passage_chars'.*must be >= 1"):
        KGIRPipeline("ci", passage_chars=0)
