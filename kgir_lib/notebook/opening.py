"""The one opening call of every notebook: config, run record, LLM, and a caveat for the configured model.

Each notebook has one cell tagged ``parameters`` (papermill) naming its common parameters with ``None``
defaults, then::

    cfg, llm = open_notebook("05_eval", globals())

:func:`open_notebook` reads the notebook's namespace: ``profile``, and **every** name that is a field
of :class:`kgir_lib.config.Config` — whether the parameters cell declares it or papermill injected it
(``papermill nb.ipynb out.ipynb -p top_k 5``, or ``python -m kgir_lib.runner -p top_k 5``, which
passes every ``-p`` to every notebook). A dict ``config_overrides`` in the namespace (e.g.
``-p config_overrides '{top_k: 5}'``) is applied too. ``None`` keeps the profile's value. So a field
given to the runner reaches the config of every notebook, not a hand-picked few; names of Config
fields are therefore reserved for parameters in the notebooks.

It then writes the effective config to ``results/<profile>/config/<notebook>.yaml``
(:func:`kgir_lib.config.start_run`), builds the LLM with the run's cache (unless ``llm=False``) and
prints the profile, the models and :func:`kgir_lib.report.model_note` — what the configured LLM is
and that a small model's numbers are not the paper's.
"""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import fields
from typing import Any, Mapping, Optional

from ..config import Config, ConfigError, load_config, start_run

__all__ = ["open_notebook", "config_params", "quiet_progress_bars"]

OVERRIDES_NAME = "config_overrides"


def config_params(namespace: Mapping[str, Any]) -> dict:
    """The Config fields set in ``namespace`` (a notebook's globals), ``config_overrides`` merged in.

    A name given both ways must agree; ``None`` values are dropped (they keep the profile's value).
    """
    names = {f.name for f in fields(Config)} - {"profile"}
    out = {k: namespace[k] for k in names if k in namespace and namespace[k] is not None}
    extra = namespace.get(OVERRIDES_NAME) or {}
    if not isinstance(extra, Mapping):
        raise ConfigError(f"parameter {OVERRIDES_NAME!r}: expected a mapping of Config fields, got {extra!r}")
    for key, value in extra.items():
        if value is None:
            continue
        if key in out and out[key] != value:
            raise ConfigError(f"parameter {key!r} given twice with different values: {out[key]!r} and "
                              f"{OVERRIDES_NAME}[{key!r}] = {value!r}")
        out[key] = value
    return out


def quiet_progress_bars() -> None:
    """Turn off Hugging Face's own text bars ("Loading weights ...") that would pile up in a stored notebook,
    and tqdm's "IProgress not found" warning (a library importing ``tqdm.autonotebook``; our bars need no
    ipywidgets, see :mod:`kgir_lib.progress`)."""
    warnings.filterwarnings("ignore", message="IProgress not found")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        try:
            sys.modules["transformers"].utils.logging.disable_progress_bar()
        except AttributeError:  # pragma: no cover
            pass
    if "huggingface_hub" in sys.modules:
        try:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        except ImportError:  # pragma: no cover
            pass


def open_notebook(name: str, namespace: Optional[Mapping[str, Any]] = None, *, llm: bool = True,
                  progress: bool = False, quiet: bool = False, **overrides: Any) -> tuple:
    """Load the profile with every parameter, record the run, build the LLM, print what runs.

    ``namespace``: the notebook's ``globals()`` (parameters cell + papermill's injected cell);
    ``overrides``: further Config fields (win over the namespace). Returns ``(cfg, llm)``; ``llm`` is
    ``None`` with ``llm=False`` (a notebook that makes no LLM call). ``progress`` is the LLM's per-call
    progress bar.
    """
    from .. import report

    namespace = dict(namespace or {})
    params = config_params(namespace)
    params.update({k: v for k, v in overrides.items() if v is not None})
    quiet_progress_bars()
    cfg = load_config(namespace.get("profile"), **params)
    start_run(cfg, name)
    model = None
    if llm:
        from ..llm import build_llm

        model = build_llm(cfg, progress=progress)
    if not quiet:
        print(report.run_header(cfg, name, with_llm=llm))
        if llm:
            print(report.model_note(cfg))
    return cfg, model
