"""Where set-up takes torch from: the CPU build, not the CUDA one, on a machine that needs no CUDA.

On Linux (x86_64 and aarch64) and Windows, ``pip install torch==X`` from plain PyPI resolves to the CUDA build of
torch: for 2.13.0 on Linux x86_64 a 526.6 MB wheel that also pulls ``cuda-toolkit``, ``nvidia-cudnn-cu13`` and
``nccl``. PyTorch publishes the CPU build, ``torch==X+cpu``, on its own wheel index (:data:`CPU_INDEX`, the command
pytorch.org gives for "CPU"); the suite's CPU stack (``scripts/setup.sh``) installs that, the index added to pip's
configured sources (which still serve torch's dependencies). On macOS PyPI's wheel is the CPU build already.

Where the CPU index cannot be reached (a network closed to everything but a package mirror), set-up falls back to
``torch==X`` from pip's configured sources and says so in one line: a mirror or a local wheel folder may hold the CPU
build; plain PyPI gives the CUDA one. ``KGIR_TORCH_INDEX=<url>`` names another index serving ``+cpu`` wheels (a
mirror of PyTorch's); ``KGIR_TORCH_INDEX=none`` skips the index and takes pip's configured sources.

Standard library only (set-up runs it before the environment exists).

    python scripts/torch_wheel.py    the pip arguments for torch, one a line, on stdout; what was chosen on stderr
"""
from __future__ import annotations

import os
import platform
import re
import sys
import tomllib
import urllib.request
from pathlib import Path
from typing import Callable, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TIMEOUT_S = 10.0  # to reach the index: a closed network fails at once or after this


class TorchSource(NamedTuple):
    """The pip arguments that install torch (``args``) and the line set-up prints about them (``note``)."""

    args: list
    note: str


def pinned_torch(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The torch version the ``cpu`` extra of ``pyproject.toml`` pins (``torch==X``)."""
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for req in extras.get("cpu", []):
        m = re.fullmatch(r"\s*torch\s*==\s*([^\s;+]+)\s*", req)
        if m:
            return m.group(1)
    raise ValueError(f"{pyproject}: the 'cpu' extra pins no torch==VERSION")


def reach(url: str, timeout: float = TIMEOUT_S) -> str | None:
    """None when ``url``'s torch page answers, else why not (one line)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url.rstrip('/')}/torch/", method="HEAD"),
                                    timeout=timeout) as response:
            if response.status < 400:
                return None
            return f"HTTP {response.status}"
    except Exception as exc:  # URLError, HTTPError, timeouts, refused connections, bad certificates
        return str(getattr(exc, "reason", None) or exc).strip() or type(exc).__name__


def torch_source(version: str, system: str, reachable: Callable[[str], str | None],
                 env: dict | None = None) -> TorchSource:
    """Where ``torch==version`` comes from on an operating system ``system`` (:func:`platform.system`).

    ``reachable(url)`` says whether an index answers (None) or why not (:func:`reach`; a test passes its own).
    ``env`` is the environment (``KGIR_TORCH_INDEX``: another index, or ``none``)."""
    env = os.environ if env is None else env
    index = (env.get("KGIR_TORCH_INDEX") or CPU_INDEX).strip()
    plain = [f"torch=={version}"]
    if index.lower() == "none":
        return TorchSource(plain, f"setup: torch=={version} from pip's configured sources (KGIR_TORCH_INDEX=none)")
    if system == "Darwin":
        return TorchSource(plain, f"setup: torch=={version} from pip's configured sources (on macOS PyPI's wheel "
                                  f"is the CPU build)")
    why = reachable(index)
    if why is None:
        return TorchSource(["--extra-index-url", index, f"torch=={version}+cpu"],
                           f"setup: torch=={version}+cpu (CPU build) from {index}")
    return TorchSource(plain, f"setup: {index} cannot be reached ({why}): torch=={version} from pip's configured "
                              f"sources instead (on plain PyPI the CUDA build, with NVIDIA's CUDA libraries)")


def main() -> int:
    source = torch_source(pinned_torch(), platform.system(), reach)
    print(source.note, file=sys.stderr)
    print("\n".join(source.args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
