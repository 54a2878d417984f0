"""Profiles: reading a profile's YAML (with ``extends``), the effective config, and where a run records it.

A profile is a YAML file in ``kgir_lib/profiles/`` (``sample``, ``ci``, ``local``, ``rehearsal``, ``paper``,
``paper_llama3``), optionally ``extends``-ing another. Papermill parameters override single fields; ``None``
means "keep the profile's value", the text ``"null"`` sets a nullable field to null. The effective config is
written into the run directory by :func:`start_run`.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import os
from pathlib import Path
from typing import Any, Optional

import yaml

from .checks import coerce, validate
from .fields import _FIELDS, _SECRET_HINT, LOCATION_ENV, PROFILE_DIR, Config, ConfigError, builtin_profiles


def _check_key(key, where: str) -> None:
    if not isinstance(key, str):  # YAML reads `5:` as a number and `yes:` as a bool
        raise ConfigError(f"{where}: field names are text, got {key!r} ({type(key).__name__})")
    if key in _FIELDS:
        return
    if any(word in key.lower() for word in ("api_key", "apikey", "secret", "password")):
        raise ConfigError(f"{where}: field {key!r} is not allowed: {_SECRET_HINT}")
    raise ConfigError(f"{where}: unknown field {key!r} (not a field of kgir_lib.config.Config)")


def profile_identity(name: str) -> str:
    """The name a profile's results go under: a built-in profile's name; for a profile file, its stem and the
    first 8 hex digits of SHA-256 over its resolved path, so two files (``a/fake.yaml``, ``b/fake.yaml``)
    never share a run directory and a file elsewhere never writes into a built-in profile's (a file that
    *is* a built-in profile, by any path, is that profile)."""
    if not name.endswith(".yaml"):
        return name
    path = Path(name).expanduser().resolve()
    builtin = PROFILE_DIR / path.name
    if builtin.is_file() and builtin.resolve() == path:
        return path.stem
    return f"{path.stem}-{hashlib.sha256(str(path).encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping (YAML itself lets the last one win,
    so an edited profile could silently keep a stale value)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"field {key!r} is written twice",
                                                        key_node.start_mark)
            if isinstance(key, str):
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


@functools.lru_cache(maxsize=64)
def _parse_profile_text(text: str) -> Any:
    """The YAML value of a profile file's text, parsed once per process and text: the pure-Python YAML parser
    costs about 9 ms a profile, and the tests, the runner and the notebooks build a config hundreds of times from
    the same few files. Keyed by the text itself (not the file's modification time), so an edited file is never
    answered from the cache. Callers get :func:`_read_profile_text`'s copy, never this cached value."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def _read_profile_text(text: str) -> Any:
    """A fresh copy of the parsed ``text`` (:func:`_parse_profile_text`): a caller may change what it gets
    (``load_config`` pops ``extends`` and merges overrides) without changing what the next call reads."""
    return copy.deepcopy(_parse_profile_text(text))


def _profile_path(name: str, base: Optional[Path] = None) -> Path:
    """The file of profile ``name``: a ``.yaml`` path (relative ones against ``base``, the folder of the
    profile that ``extends`` it, else the current directory) or a name in ``kgir_lib/profiles/``."""
    if not name.endswith(".yaml"):
        return PROFILE_DIR / f"{name}.yaml"
    path = Path(name).expanduser()
    return path if path.is_absolute() or base is None else base / path


def _read_profile(name: str, seen: tuple = (), base: Optional[Path] = None) -> dict:
    """Fields of profile ``name`` (a profile name or a ``.yaml`` path), its ``extends`` chain merged in."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"profile name must be a non-empty string, got {name!r}")
    path = _profile_path(name, base)
    if not path.exists():
        known = builtin_profiles()
        raise ConfigError(f"unknown profile {name!r}: no file {path} (known profiles: {known})")
    ident = str(path.resolve())
    if ident in seen:
        raise ConfigError(f"profile {path}: 'extends' forms a cycle {seen + (ident,)}")
    try:
        data = _read_profile_text(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"profile {path}: not valid YAML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"profile {path}: not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"profile {path}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"profile {path}: expected a mapping of fields")
    parent = data.pop("extends", None)
    if parent is not None and not isinstance(parent, str):
        raise ConfigError(f"profile {path}: 'extends' must name a profile, got {parent!r}")
    merged = _read_profile(parent, seen + (ident,), path.parent) if parent else {}
    for key in data:
        _check_key(key, f"profile {path}")
    merged.update(data)
    return merged


def load_config(profile: Optional[str | os.PathLike] = None, **overrides: Any) -> Config:
    """Build the effective config: profile YAML, then non-None ``overrides``.

    ``None`` keeps the profile's value (a notebook's parameters default to it); the text ``"null"``
    (:data:`~kgir_lib.config.fields.NULL`) sets a nullable field to null (``passage_chars="null"``: the whole
    passage), and is refused, naming the field, for a field that may not be null.

    ``profile``: a profile name or the path of a profile file (``str`` or ``Path``, ending in ``.yaml``);
    ``None`` reads ``$KGIR_PROFILE`` (the test suite sets ``ci``), else ``sample``.
    Every value is type-checked; a bad one raises :class:`ConfigError` naming the field.
    """
    if isinstance(profile, os.PathLike):
        profile = os.fspath(profile)
    profile = str(profile or os.environ.get("KGIR_PROFILE") or "sample")
    values = _read_profile(profile)
    for key, env in LOCATION_ENV.items():  # the environment wins over a profile's location
        if os.environ.get(env):
            values[key] = os.environ[env]
    for key, value in overrides.items():
        _check_key(key, "papermill parameters")
        if value is not None:
            values[key] = value
    values["profile"] = profile_identity(profile)
    for key in list(values):
        values[key] = coerce(key, values[key], f" (profile {values['profile']!r})")
    cfg = Config(**values)
    validate(cfg)
    return cfg


def start_run(cfg: Config, notebook: str) -> Path:
    """Record the effective config of ``notebook`` in the run directory; return its path. The locations
    (``data_dir``, ``results_dir``, ``figures_dir``) are recorded as null: they say where this machine keeps
    the files, not what was computed, and the same run on another machine must write the same record."""
    path = cfg.path("config", f"{notebook}.yaml")
    path.write_text(config_record(cfg))
    return path


def config_record(cfg: Config) -> str:
    """The text :func:`start_run` writes: every field of ``cfg`` as sorted YAML, the locations as null. A committed
    run's records are this text for the profile as it stands (``tests/test_committed_configs.py``), so a profile
    edited after its run fails a fast test instead of surfacing as a changed file in the next ``--regenerate``."""
    return yaml.safe_dump({**cfg.to_dict(), **dict.fromkeys(LOCATION_ENV)}, sort_keys=True)
