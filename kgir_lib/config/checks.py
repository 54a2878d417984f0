"""The checks of a config value, each naming the field: the one place a value is checked.

:func:`validate` runs them all on an effective config (:func:`kgir_lib.config.load_config`);
:func:`check_value` checks one value against its field (type, :data:`~kgir_lib.config.fields.RANGES`,
:data:`~kgir_lib.config.fields.CHOICES`), for a setting given elsewhere than in a profile: a method's
constructor parameter that overrides a field (:meth:`kgir_lib.methods.base.MethodBase.setting`), a value of a
notebook 06 sweep.
"""
from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

from ..redact import SECRET_PART_CHARS, SECRET_PART_DIGITS, looks_like_secret, mask_url, redact, secret_name
from .fields import (_FIELDS, _SECRET_HINT, CHOICES, NULL, Config, ConfigError, _field_kind, builtin_profiles,
                     field_range)


def _list_of_str(name: str) -> bool:
    """Whether list field ``name`` holds strings (names, URLs): its default does, or it is empty."""
    factory = _FIELDS[name].default_factory
    default = factory() if factory is not dataclasses.MISSING else []
    return all(isinstance(v, str) for v in default)


def coerce(name: str, value: Any, where: str = "") -> Any:
    """``value`` checked against the type of field ``name``; ints widen to floats, a string to a 1-list."""
    try:
        return _coerce(name, value, where)
    except ConfigError as exc:
        if secret_name(name):  # never echo what may be a secret
            raise ConfigError(f"parameter {name!r}{where}: not a valid value for this field (the value is not "
                              f"shown: the name suggests a secret). {_SECRET_HINT}") from None
        raise ConfigError(redact(str(exc))) from None


def _coerce(name: str, value: Any, where: str) -> Any:
    kind, nullable = _field_kind(name)
    label = f"parameter {name!r}{where}"
    if value == NULL and (nullable or kind != "str"):  # the explicit null (fields.NULL); a text field keeps it
        value = None
    if value is None:
        if nullable:
            return None
        raise ConfigError(f"{label}: must not be null")
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{label}: expected true/false, got {value!r}")
        return value
    if kind in ("int", "float"):
        return _number(kind, value, label)
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{label}: expected a string, got {value!r}")
        return value
    if kind == "list":
        if isinstance(value, str):
            value = [value]
        item = str if _list_of_str(name) else (str, int, float)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, item) and not isinstance(v, bool)
                                                           for v in value):
            what = "strings" if item is str else "plain values"
            raise ConfigError(f"{label}: expected a list of {what}, got {value!r}")
        return list(value)
    return value


def _number(kind: str, value: Any, label: str) -> Any:
    """An int or float field's value. Text that reads as a number (``1e9``: YAML 1.1 reads an exponent
    without a dot as text) is taken as that number; NaN and infinities are refused."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ConfigError(f"{label}: expected a number, got the text {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{label}: expected a number, got {value!r} ({type(value).__name__})")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{label}: must be a finite number, got {value!r}")
    if kind == "int":
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{label}: expected a whole number, got {value!r}")
        return int(value)
    return float(value)


def check_range(name: str, value: Any, label: Optional[str] = None) -> None:
    """An int or float value of field ``name`` within its :data:`~kgir_lib.config.fields.RANGES` entry (None always
    passes); the message names ``label`` (default: the field)."""
    kind, _ = _field_kind(name)
    if kind not in ("int", "float") or value is None:
        return
    allowed = field_range(name)
    label = label or f"parameter {name!r}"
    if allowed is None:
        raise ConfigError(f"{label}: no allowed range in kgir_lib.config.fields.RANGES (add one)")
    if not allowed.holds(value):
        raise ConfigError(f"{label}: must be {allowed}, got {value}")


def check_ranges(cfg: Config) -> None:
    """Every int and float field within its :data:`~kgir_lib.config.fields.RANGES` entry (None always passes)."""
    for name in _FIELDS:
        check_range(name, getattr(cfg, name))


def check_choice(name: str, value: Any, label: Optional[str] = None) -> None:
    """A text field with a :data:`~kgir_lib.config.fields.CHOICES` entry holds one of its values."""
    allowed = CHOICES.get(name)
    if allowed is not None and value not in allowed:
        raise ConfigError(f"{label or f'parameter {name!r}'}: unknown value {value!r} ({' | '.join(allowed)})")


def check_value(name: str, value: Any, label: Optional[str] = None) -> Any:
    """``value`` as field ``name`` takes it (:func:`coerce`), within its range and choices; ``None`` passes when
    the field may be null. ``label`` names where the value came from (e.g. ``"KGIRRAG parameter 'top_k'"``)."""
    try:
        value = coerce(name, value)
    except ConfigError as exc:
        if label:
            raise ConfigError(str(exc).replace(f"parameter {name!r}", label, 1)) from None
        raise
    check_range(name, value, label)
    check_choice(name, value, label)
    return value


def validate(cfg: Config) -> None:
    """Every check of an effective config (:func:`kgir_lib.config.load_config` runs it)."""
    for name in CHOICES:
        check_choice(name, getattr(cfg, name))
    if cfg.llm_backend == "openai" and not cfg.llm_base_urls:
        raise ConfigError("parameter 'llm_base_urls': the openai backend needs at least one base URL")
    for url in cfg.llm_base_urls:
        check_url(url)
    check_model_path(cfg)
    check_key_env_name(cfg.llm_api_key_env)
    check_ranges(cfg)
    check_locations(cfg)
    check_run_name(cfg)
    if cfg.kg_llm_model is not None and cfg.llm_backend == "openai" and not cfg.kg_llm_base_urls:
        raise ConfigError("parameter 'kg_llm_base_urls': 'kg_llm_model' on the openai backend needs its own base URL")
    for url in cfg.kg_llm_base_urls:
        check_url(url, "kg_llm_base_urls")
    check_decomposition_readers(cfg)
    if not cfg.datasets:
        raise ConfigError("parameter 'datasets': needs at least one dataset name")
    if cfg.eval_methods is not None and not cfg.eval_methods:  # the keys: kgir_lib.registry.check_method_keys
        raise ConfigError("parameter 'eval_methods': give at least one method key, or null for every method")
    for key in cfg.to_dict():
        if "api_key" in key and key != "llm_api_key_env":
            raise ConfigError(f"parameter {key!r}: {_SECRET_HINT}")


def check_decomposition_readers(cfg: Config) -> None:
    """``decomposition_readers``: null, or distinct model names (each is found where the readers are built:
    :func:`kgir_lib.eval.mechanism.loss_decomposition.reader_llms`)."""
    readers = cfg.decomposition_readers
    if readers is None:
        return
    if not readers or not all(isinstance(m, str) and m.strip() for m in readers) or len(set(readers)) < len(readers):
        raise ConfigError(f"parameter 'decomposition_readers': give distinct model names, or null for the profile's "
                          f"own model (got {readers!r})")


def check_locations(cfg: Config) -> None:
    """The run and figure directories must be creatable: no existing file on their path."""
    for name, path in (("results_dir", cfg.run_dir), ("figures_dir", cfg.fig_dir)):
        for part in (path, *path.parents):
            if part.exists():
                if not part.is_dir():
                    raise ConfigError(f"parameter {name!r}: {part} is a file, not a directory (the run writes "
                                      f"into {path})")
                break


_RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,119}")


def check_run_name(cfg: Config) -> None:
    """The run directory's name: a plain folder name, and never a built-in profile's directory unless the run
    *is* that profile (a profile file or a ``run_name`` must not write into another profile's results)."""
    name = cfg.run_name or cfg.profile
    if cfg.run_name is not None and not _RUN_NAME.fullmatch(cfg.run_name):
        raise ConfigError(f"parameter 'run_name': {cfg.run_name!r} is not a plain folder name "
                          f"(letters, digits, '_', '.', '-'; at most 120)")
    if name in builtin_profiles() and name != cfg.profile:
        raise ConfigError(f"parameter 'run_name': {name!r} is the run directory of the built-in profile "
                          f"{name!r}; profile {cfg.profile!r} may not write there")


def check_url(url: str, field: str = "llm_base_urls") -> None:
    """A base URL (of ``field``): http(s), with a host, and no credentials (``user:key@host`` would be
    written into every config dump and notebook; the key comes from the environment)."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise ConfigError(f"parameter {field!r}: {mask_url(url)!r} holds a user name or password; a URL "
                          f"with credentials is refused (it would be written into configs and notebooks). "
                          f"{_SECRET_HINT}")
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"parameter {field!r}: {mask_url(url)!r} is not an http(s) URL")
    try:
        host, _ = parts.hostname, parts.port  # .port raises on a port that is not a number
    except ValueError as exc:
        raise ConfigError(f"parameter {field!r}: {mask_url(url)!r} has a bad port ({exc})") from None
    if not host:
        raise ConfigError(f"parameter {field!r}: {mask_url(url)!r} names no host (e.g. http://localhost:8000/v1)")


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
    name, or that looks like a key (:func:`kgir_lib.redact.looks_like_secret`: a long run of letters and
    digits), may be a pasted secret: refused, and never echoed, so it reaches no config file or notebook."""
    if name and not _ENV_NAME.fullmatch(name):
        raise ConfigError("parameter 'llm_api_key_env': must be the NAME of an environment variable "
                          "(capital letters, digits and '_', e.g. KGIR_LLM_API_KEY); the value given does "
                          f"not look like one (not shown: it may be a secret). {_SECRET_HINT}")
    if name and looks_like_secret(name):
        raise ConfigError("parameter 'llm_api_key_env': must be the NAME of an environment variable "
                          "(e.g. KGIR_LLM_API_KEY), and the value given looks like a key (a word of more than "
                          f"{SECRET_PART_CHARS} characters, or of letters and {SECRET_PART_DIGITS}+ digits; not "
                          f"shown). Put the key in the environment and name its variable here. {_SECRET_HINT}")
