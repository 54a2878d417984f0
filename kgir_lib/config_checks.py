"""The checks :func:`kgir_lib.config.load_config` runs on an effective config, each naming the field.

Kept apart from :mod:`kgir_lib.config` (which holds the fields, the profiles and the one table of allowed
number ranges, :data:`kgir_lib.config.RANGES`) so that the config module stays small.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from .config import _FIELDS, _SECRET_HINT, Config, ConfigError, _field_kind, field_range


def check_ranges(cfg: Config) -> None:
    """Every int and float field within its :data:`kgir_lib.config.RANGES` entry (None always passes)."""
    for name in _FIELDS:
        kind, _ = _field_kind(name)
        value = getattr(cfg, name)
        if kind not in ("int", "float") or value is None:
            continue
        allowed = field_range(name)
        if allowed is None:
            raise ConfigError(f"parameter {name!r}: no allowed range in kgir_lib.config.RANGES (add one)")
        if not allowed.holds(value):
            raise ConfigError(f"parameter {name!r}: must be {allowed}, got {value}")


def check_locations(cfg: Config) -> None:
    """The run and figure directories must be creatable: no existing file on their path."""
    for name, path in (("results_dir", cfg.run_dir), ("figures_dir", cfg.fig_dir)):
        for part in (path, *path.parents):
            if part.exists():
                if not part.is_dir():
                    raise ConfigError(f"parameter {name!r}: {part} is a file, not a directory (the run writes "
                                      f"into {path})")
                break


def check_url(url: str) -> None:
    """An ``llm_base_urls`` entry: http(s), with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"parameter 'llm_base_urls': {url!r} is not an http(s) URL")
    try:
        host, _ = parts.hostname, parts.port  # .port raises on a port that is not a number
    except ValueError as exc:
        raise ConfigError(f"parameter 'llm_base_urls': {url!r} has a bad port ({exc})") from None
    if not host:
        raise ConfigError(f"parameter 'llm_base_urls': {url!r} names no host (e.g. http://localhost:8000/v1)")


def check_model_path(cfg: Config) -> None:
    """``llm_model_path``, where the llama.cpp backend will load it, must be an existing file."""
    if cfg.llm_model_path is None or cfg.llm_backend != "llamacpp":
        return
    path = Path(cfg.llm_model_path).expanduser()
    if not path.is_file():
        what = "is a directory, not a GGUF file" if path.is_dir() else "does not exist"
        raise ConfigError(f"parameter 'llm_model_path': {path.absolute()} {what}")


_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")


def check_key_env_name(name: str) -> None:
    """``llm_api_key_env`` names a variable (e.g. KGIR_LLM_API_KEY); a value that does not look like a
    name may be a pasted secret: refused, and never echoed."""
    if name and not _ENV_NAME.fullmatch(name):
        raise ConfigError("parameter 'llm_api_key_env': must be the NAME of an environment variable "
                          "(capital letters, digits and '_', e.g. KGIR_LLM_API_KEY); the value given does "
                          f"not look like one (not shown: it may be a secret). {_SECRET_HINT}")
