"""The one LLM interface (:class:`LLM`) and its backends. Build it with :func:`build_llm`."""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, cast

from .backends import OpenAIBackend, ScriptedBackend, VLLMBackend
from .cache import LLMCache, LLMCacheError, cache_key
from .core import LLM, CacheMissError, ChatRequest, ChatResult, LLMError, LLMUsage, Usage
from .llamacpp import LlamaCppBackend, smollm2_gguf_path
from .parsing import extract_json
from .router import RoutedLLM

__all__ = ["LLM", "ChatRequest", "ChatResult", "Usage", "LLMUsage", "LLMCache", "LLMCacheError", "LLMError",
           "CacheMissError", "build_llm", "build_backend", "extract_json", "cache_key", "smollm2_gguf_path",
           "ScriptedBackend", "OpenAIBackend", "LlamaCppBackend", "VLLMBackend", "RoutedLLM"]

_BACKENDS: dict = {}


def build_backend(cfg, script: Optional[Callable] = None):
    """The backend named by ``cfg.llm_backend``; in-process engines are loaded once per process."""
    if cfg.llm_backend == "scripted":
        if script is None:
            raise LLMError("parameter 'llm_backend': 'scripted' needs a script function (tests only)")
        return ScriptedBackend(script, cfg.llm_model)
    if cfg.llm_backend == "openai":
        return OpenAIBackend(cfg.llm_model, cfg.llm_base_urls, cfg.llm_api_key_env, cfg.llm_max_concurrency,
                             cfg.llm_timeout_s, cfg.llm_max_retries, cfg.llm_json_mode,
                             retry_window_s=cfg.llm_retry_window_s)
    key = (cfg.llm_backend, cfg.llm_model, cfg.llm_model_path, cfg.llm_n_ctx, cfg.llm_n_threads, cfg.llm_json_mode,
           cfg.llm_seed)
    if key not in _BACKENDS:
        if cfg.llm_backend == "llamacpp":
            _BACKENDS[key] = LlamaCppBackend(cfg.llm_model, cfg.llm_model_path, cfg.llm_n_ctx,
                                             cfg.llm_n_threads, cfg.llm_json_mode, cfg.llm_seed)
        else:
            _BACKENDS[key] = VLLMBackend(cfg.llm_model, cfg.llm_json_mode)
    return _BACKENDS[key]


def cache_only_mode() -> bool:
    """True when ``$KGIR_LLM_CACHE_ONLY`` is set (regenerating tables and figures with no new LLM call)."""
    return os.environ.get("KGIR_LLM_CACHE_ONLY", "").strip().lower() in {"1", "true", "yes"}


def build_llm(cfg, script: Optional[Callable] = None, progress: bool = True) -> LLM:
    """LLM for ``cfg`` with the run directory's cache (``cache/llm.sqlite``).

    Under :func:`cache_only_mode` every answer must come from the cache (see :class:`CacheMissError`).
    """
    from .response_log import import_once

    cache = LLMCache(cfg.path("cache", "llm.sqlite"))
    import_once(cfg, cache)  # the committed response log (results/<profile>/llm_responses.jsonl.gz), if any
    main = LLM(build_backend(cfg, script), cache, progress=progress, cache_only=cache_only_mode())
    if not cfg.kg_llm_model:
        return main
    kg_cfg = dataclasses.replace(cfg, llm_model=cfg.kg_llm_model, llm_model_path=None,
                                 llm_base_urls=list(cfg.kg_llm_base_urls) or list(cfg.llm_base_urls))
    other = LLM(build_backend(kg_cfg, script), cache, progress=progress, cache_only=cache_only_mode())
    return cast(LLM, RoutedLLM(main, other))  # (an LLM: its own generate, every other attribute the main LLM's)
