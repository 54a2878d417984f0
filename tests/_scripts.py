"""Loading a script of the repository (a benchmark, a peer's cross-check, a build script) as a module, for the
tests that call its functions: one way, so every such test imports what the script would run with."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional

import pytest

from conftest import PEER_SETUP

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"


def load_script(path: Path, name: Optional[str] = None, *, register: bool = False) -> ModuleType:
    """The script at ``path`` run as module ``name`` (its file's stem by default); ``register`` puts it in
    ``sys.modules`` first (a dataclass of the script looks its module up there)."""
    spec = importlib.util.spec_from_file_location(name or Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_peer(name: str) -> ModuleType:
    """``benchmarks/peers/<name>.py`` as a module, its folder on the import path (the peer scripts import each
    other by name)."""
    if str(PEERS) not in sys.path:
        sys.path.insert(0, str(PEERS))
    return load_script(PEERS / f"{name}.py")


def peer_python(peer: str) -> Path:
    """The interpreter of a peer's environment (``bash benchmarks/peers/setup.sh <peer>`` makes it)."""
    return PEERS / f".venv-{peer}" / "bin" / "python"


def runs_in_peer_env(peer: str) -> Callable:
    """The mark of a test that runs in ``peer``'s environment (a second interpreter importing the peer's library):
    the whole suite's tier, skipped with the command that makes the environment when it is absent."""
    def mark(test: Callable) -> Callable:
        absent = pytest.mark.skipif(not peer_python(peer).exists(),
                                    reason=f"peer environment absent ({PEER_SETUP} {peer})")
        return pytest.mark.slow(absent(test))
    return mark
