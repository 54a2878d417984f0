"""What must hold before a run starts, beyond a valid config: enough questions, and the LLM servers.

- **Questions** (:func:`check_question_counts`): a profile asks ``n_questions`` a dataset (``study_n_questions``
  for the sweeps). If a dataset it names has fewer, the run would silently evaluate on fewer questions than
  the profile promises: the ``paper`` profile asks 1000 over HippoRAG 2's release, and the shared samples
  hold 84. That is refused (naming the download command), unless the profile sets
  ``allow_fewer_questions: true`` (``local`` asks 100 a dataset and hotpotqa has 84).
- **Servers** (:func:`check_servers`): for the ``openai`` backend, each base URL must answer
  ``GET <url>/models`` and list ``llm_model`` (vLLM and ``llama_cpp.server`` both do), so a wrong port, a
  server still loading or another model is reported before the first notebook, not as retries in one.
"""
from __future__ import annotations

import json
from typing import Iterable

from .data import DataError
from .redact import env_secrets, mask_url, redact

DOWNLOAD = "python -m kgir_lib.data_sources full --target data {names} && export KGIR_DATA_DIR=$PWD/data"


class QuestionShortfall(DataError):
    """A dataset holds fewer questions than the profile asks (the runner exits with code 3)."""


class ServerError(RuntimeError):
    """An LLM server does not answer ``/models`` or does not serve the configured model."""


def shortfalls(cfg, loaded: dict) -> list:
    """``(dataset, field, asked, present)`` for every dataset of ``loaded`` (name -> Dataset) that holds fewer
    questions than ``cfg`` asks of it: ``n_questions`` for ``datasets`` and ``ablation_datasets``,
    ``study_n_questions`` (else ``n_questions``) for ``study_datasets``."""
    asks = [(name, "n_questions", cfg.n_questions) for name in [*cfg.datasets, *cfg.ablation_datasets]]
    study = cfg.study_n_questions if cfg.study_n_questions is not None else cfg.n_questions
    asks += [(name, "study_n_questions" if cfg.study_n_questions is not None else "n_questions", study)
             for name in cfg.study_datasets]
    out, seen = [], set()
    for name, field, asked in asks:
        present = len(loaded[name].questions)
        if asked is not None and asked > present and (name, field) not in seen:
            seen.add((name, field))
            out.append((name, field, asked, present))
    return out


def check_question_counts(cfg, loaded: dict) -> None:
    """Refuse a profile that asks more questions than a dataset holds, unless ``cfg.allow_fewer_questions``."""
    short = shortfalls(cfg, loaded)
    if not short or cfg.allow_fewer_questions:
        return
    what = "; ".join(f"{name} holds {present} in {cfg.data_path}, the profile asks {field} {asked}"
                     for name, field, asked, present in short)
    names = sorted({name for name, *_ in short})
    raise QuestionShortfall(
        f"profile {cfg.profile!r} asks for more questions than the data holds ({what}). Get the full sets: "
        f"{DOWNLOAD.format(names=' '.join(names))} (needs internet), or set allow_fewer_questions: true in a profile "
        f"(or -p allow_fewer_questions true) to run on the questions present")


def check_servers(cfg, timeout_s: float = 10.0) -> list:
    """For the ``openai`` backend: each of ``cfg.llm_base_urls`` must answer ``GET <url>/models`` and list
    ``cfg.llm_model`` (and each of ``kg_llm_base_urls`` ``kg_llm_model``, when the profile extracts with a
    second model); one line per server, else a :class:`ServerError` naming the URL and what to do. When the
    variable ``llm_api_key_env`` names is not set, a last line says that requests go out without a key."""
    if cfg.llm_backend != "openai":
        return []
    import httpx

    key = env_secrets(cfg.llm_api_key_env)
    headers = {"Authorization": f"Bearer {key[0]}"} if key else {}
    wanted = [("llm_model", cfg.llm_model, cfg.llm_base_urls)]
    if cfg.kg_llm_model:
        wanted.append(("kg_llm_model", cfg.kg_llm_model, cfg.kg_llm_base_urls or cfg.llm_base_urls))
    lines = []
    for field, model, urls in wanted:
        for url in urls:
            models = _served_models(httpx, url.rstrip("/"), headers, timeout_s, cfg)
            if model not in models:
                raise ServerError(redact(
                    f"LLM server {url} serves {sorted(models)}, not {field} {model!r}: serve that model "
                    f"(vllm serve {model} ...) or set '{field}' to the name the server lists", key))
            lines.append(f"LLM server {mask_url(url)}: serves {model}")
    if cfg.llm_api_key_env and not key:
        lines.append(f"note: ${cfg.llm_api_key_env} (llm_api_key_env) is not set: requests go out without an API "
                     f"key, which a local vLLM server accepts and a hosted one refuses")
    return lines


def _served_models(httpx, url: str, headers: dict, timeout_s: float, cfg) -> set:
    hint = (f"is the server running and loaded? Start it (e.g. vllm serve {cfg.llm_model}; bash scripts/paper.sh "
            f"does it for the paper profile) or fix 'llm_base_urls'; --no-server-check skips this check")
    try:
        resp = httpx.get(f"{url}/models", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ServerError(redact(f"LLM server {url}: GET {url}/models failed ({type(exc).__name__}: {exc}); "
                                 f"{hint}", env_secrets(cfg.llm_api_key_env))) from None
    if resp.status_code != 200:
        extra = f" (check the API key in ${cfg.llm_api_key_env})" if resp.status_code in (401, 403) else ""
        raise ServerError(redact(f"LLM server {url}: GET {url}/models answered HTTP {resp.status_code}{extra}: "
                                 f"{resp.text[:200]}; {hint}", env_secrets(cfg.llm_api_key_env)))
    try:
        return set(_ids(json.loads(resp.content)["data"]))
    except (ValueError, KeyError, TypeError):
        raise ServerError(redact(f"LLM server {url}: GET {url}/models did not answer an OpenAI model list: "
                                 f"{resp.text[:200]}", env_secrets(cfg.llm_api_key_env))) from None


def _ids(entries: Iterable) -> list:
    return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]
