"""Where set-up takes torch from (scripts/torch_wheel.py): PyTorch's CPU index where it answers, else pip's own
sources with one line saying so. No network: the index's reachability is passed in."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import torch_wheel  # noqa: E402
from torch_wheel import CPU_INDEX, torch_source  # noqa: E402


def closed(url: str) -> str:
    return "[Errno -2] Name or service not known"


def test_the_cpu_build_comes_from_pytorchs_cpu_index_when_it_answers():
    asked = []
    source = torch_source("2.13.0", "Linux", lambda url: asked.append(url), env={})
    assert asked == [CPU_INDEX] == ["https://download.pytorch.org/whl/cpu"]
    assert source.args == ["--extra-index-url", CPU_INDEX, "torch==2.13.0+cpu"]  # +cpu: never the CUDA build
    assert source.note == "setup: torch==2.13.0+cpu (CPU build) from https://download.pytorch.org/whl/cpu"


def test_an_unreachable_index_falls_back_to_pips_sources_in_one_line_naming_why():
    source = torch_source("2.13.0", "Linux", closed, env={})
    assert source.args == ["torch==2.13.0"]
    assert "\n" not in source.note
    assert source.note == ("setup: https://download.pytorch.org/whl/cpu cannot be reached ([Errno -2] Name or service "
                           "not known): torch==2.13.0 from pip's configured sources instead (on plain PyPI the CUDA "
                           "build, with NVIDIA's CUDA libraries)")


def test_macos_takes_pypi_whose_wheel_is_the_cpu_build_without_asking_the_index():
    source = torch_source("2.13.0", "Darwin", lambda url: pytest.fail("the index was asked"), env={})
    assert source.args == ["torch==2.13.0"] and "macOS" in source.note


@pytest.mark.parametrize("value, args", [
    ("https://mirror.example/whl/cpu", ["--extra-index-url", "https://mirror.example/whl/cpu", "torch==2.13.0+cpu"]),
    ("none", ["torch==2.13.0"]),
])
def test_kgir_torch_index_names_another_index_or_none(value, args):
    asked = []
    source = torch_source("2.13.0", "Linux", lambda url: asked.append(url), env={"KGIR_TORCH_INDEX": value})
    assert source.args == args
    assert asked == ([] if value == "none" else [value])


def test_the_version_is_the_one_pyproject_pins(tmp_path):
    assert torch_wheel.pinned_torch() == "2.13.0"
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[project.optional-dependencies]\ncpu = ["numpy==2.0"]\n')
    with pytest.raises(ValueError, match=r"pyproject.toml: the 'cpu' extra pins no torch"):
        torch_wheel.pinned_torch(bad)


def test_the_script_prints_the_arguments_and_its_line_with_the_index_overridden():
    out = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "scripts" / "torch_wheel.py")], text=True,
                         capture_output=True, env={"KGIR_TORCH_INDEX": "none", "PATH": "/usr/bin:/bin"}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["torch==2.13.0"]
    assert out.stderr.strip() == "setup: torch==2.13.0 from pip's configured sources (KGIR_TORCH_INDEX=none)"


def test_set_up_installs_torch_with_the_arguments_the_script_gives():
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert 'torch_args=$("$PY" scripts/torch_wheel.py)' in text and "$pip install -q $torch_args" in text
    assert "install -q torch==" not in text
