"""The main job's parameters (:mod:`kgir_lib.runner`): the ``-p NAME VALUE`` pairs read as YAML, split into
config overrides and the notebook-only parameters of :data:`NOTEBOOK_PARAMS` (each checked here), the relative
paths among them made absolute once, and the scratch run directory they imply (:func:`scratch_name`). The runner
exports every name here too.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .config import NULL, ConfigError
from .config.fields import _FIELDS, LOCATION_ENV, _field_kind
from .redact import redact, secret_name

NAME_MAX = 100  # characters of a qid or dataset name: notebook 07's file names hold both (a file name: 255 bytes)
# Parameters some notebooks take that are not config fields: name -> (check, what it must be).
NOTEBOOK_PARAMS: dict = {
    "resume": (lambda v: isinstance(v, bool), "true or false"),
    "methods": (lambda v: isinstance(v, list) and bool(v) and all(isinstance(m, str) and m for m in v),
                "a non-empty list of method keys, e.g. [kgir, ircot]"),
    "n_boot": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number >= 1"),
    "qid": (lambda v: isinstance(v, (str, int)) and not isinstance(v, bool) and 0 < len(str(v).strip()) <= NAME_MAX,
            f"a question id of 1 to {NAME_MAX} characters (notebook 07 names its files after it)"),
    "dataset": (lambda v: isinstance(v, str) and 0 < len(v.strip()) <= NAME_MAX,
                f"a dataset name of 1 to {NAME_MAX} characters"),
}
PATH_PARAMS = ("data_dir", "results_dir", "figures_dir", "llm_model_path")
DATASET_LISTS = ("datasets", "extract_datasets", "ablation_datasets", "study_datasets")


def split_params(params: dict) -> tuple:
    """``(config overrides, notebook-only parameters)``; a notebook-only value is checked here."""
    config, notebook = {}, {}
    for name, value in params.items():
        if name == "profile":
            raise ConfigError("parameter 'profile': choose the profile with --profile NAME (or $KGIR_PROFILE), "
                              "not with -p")
        if name in NOTEBOOK_PARAMS:
            check, what = NOTEBOOK_PARAMS[name]
            value = _normalise(name, value)
            if value is not None and not check(value):
                raise ConfigError(f"parameter {name!r}: must be {what}, got {value!r}")
            notebook[name] = value
        else:
            config[name] = value
    return config, notebook


def _normalise(name: str, value: object) -> object:
    """``n_boot`` written as ``1e3`` (YAML reads it as text) is the number; a numeric ``qid`` is its text; a
    config field given as ``null`` is the explicit null (:data:`~kgir_lib.config.NULL`: papermill's ``None``
    would keep the profile's value), refused for a field that may not be null."""
    if value is None and name in _FIELDS and name != "profile":
        if not _field_kind(name)[1]:
            raise ConfigError(f"parameter {name!r}: must not be null (only a field whose help says 'null: ...' "
                              f"may be)")
        return NULL
    if name == "n_boot" and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else value
    if name == "qid" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _parse_params(pairs: list) -> dict:
    """``-p NAME VALUE`` pairs, each value read as YAML (so ``[a, b]`` is a list and ``4`` a number). The value
    of a name that suggests a secret (:func:`kgir_lib.redact.secret_name`) is never echoed."""
    import yaml

    params = {}
    for name, value in pairs:
        try:
            params[name] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            if secret_name(name):
                raise ConfigError(f"parameter {name!r}: the value is not valid YAML (not shown: the name "
                                  f"suggests a secret; secrets come from the environment only)") from None
            raise ConfigError(f"parameter {name!r}: value {redact(value)!r} is not valid YAML "
                              f"({redact(str(exc))})") from None
    return params


def resolve_paths(profile: str, params: dict, cwd: Path | None = None) -> str:
    """Make every relative location absolute against ``cwd`` (default: the current directory), once:
    the ``KGIR_*_DIR`` variables (in ``os.environ``, inherited by the kernels), the ``-p`` paths in
    ``params`` (in place) and a profile given as a ``.yaml`` path (returned)."""
    base = Path(cwd or os.getcwd())
    for env in LOCATION_ENV.values():
        value = os.environ.get(env)
        if value and not Path(value).expanduser().is_absolute():
            os.environ[env] = os.path.abspath(base / Path(value).expanduser())
    for name in PATH_PARAMS:
        value = params.get(name)
        if isinstance(value, str) and value and value != NULL and not Path(value).expanduser().is_absolute():
            params[name] = os.path.abspath(base / Path(value).expanduser())
    if profile.endswith(".yaml") and not Path(profile).expanduser().is_absolute():
        profile = os.path.abspath(base / Path(profile).expanduser())
    return profile


# Parameters that say only where things are or how the LLM server is reached: they change no number, so
# a run given only these still writes the profile's own run directory (a scratch run otherwise).
WHERE_PARAMS = ("results_dir", "figures_dir", "llm_base_urls", "kg_llm_base_urls", "llm_api_key_env",
                "llm_max_concurrency", "llm_timeout_s", "llm_max_retries", "llm_retry_window_s")


def scratch_name(profile: str, params: dict) -> str | None:
    """The scratch run directory of a run of ``profile`` (its :func:`~kgir_lib.config.profile_identity`) with
    ``-p`` parameters ``params``: ``<profile>-<first 8 hex of SHA-256 over the parameters>``, so a rerun with
    the same parameters continues the same scratch run; None when only :data:`WHERE_PARAMS` are given (the
    run writes the profile's own directory, e.g. the committed ``results/<profile>/`` of the main job)."""
    if "run_name" in params:
        raise ConfigError("parameter 'run_name': set by the runner (a run with parameters writes a scratch "
                          "directory <profile>-<hash>; --write-reference writes the profile's own)")
    what = {k: v for k, v in params.items() if k not in WHERE_PARAMS}
    if not what:
        return None
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:8]
    return f"{profile}-{digest}"
