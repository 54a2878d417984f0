"""LLM backends behind :class:`kgir_lib.llm.core.LLM`.

- ``llamacpp``: llama.cpp in process (the embedded GGUF models of :mod:`kgir_lib.llm.embedded`, or any GGUF),
  in :mod:`kgir_lib.llm.llamacpp`.
- ``openai``: any OpenAI-compatible server (``vllm serve``, ``python -m llama_cpp.server``,
  Ollama). Many requests in flight up to a limit, round-robin over several base URLs,
  retries with exponential backoff on timeouts and 5xx, API key from an environment
  variable only.
- ``vllm``: vLLM's offline engine in process, for the GPU server (import-guarded).
- ``scripted``: a deterministic function of the request, for tests and dry runs.

Structured output: a request's ``json_schema`` is passed in the form the server
understands (``llm_json_mode``): llama.cpp's ``response_format={"type":
"json_object", "schema": ...}``, vLLM's ``structured_outputs={"json": ...}`` (the
``guided_json`` field was removed in vLLM 0.12), OpenAI's
``response_format={"type": "json_schema", ...}``, or not at all (``none``). Parsing
is tolerant either way (:mod:`kgir_lib.llm.parsing`).
"""
from __future__ import annotations

import itertools
import math
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable, Optional, Sequence
from urllib.parse import urlsplit

from ..redact import env_secrets, redact
from ..tls import ssl_context
from .core import ChatRequest, ChatResult, LLMError


class _RetryableError(Exception):
    """One failed attempt worth retrying; ``retry_after``: seconds the server asked to wait (429/503)."""

    def __init__(self, message: str, retry_after: Optional[float] = None):
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(value: Optional[str]) -> Optional[float]:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def _token_count(value: object) -> int:
    """A ``usage`` token count: absent or null is 0; otherwise a finite whole number >= 0 (JSON lets a server
    send ``Infinity`` or ``1e400``, which would crash the run later), else :class:`ValueError`."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"token count {value!r} is not a number")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"token count {value!r} is not a finite whole number")
    if value < 0:
        raise ValueError(f"token count {value!r} is negative")
    return int(value)


# ---------------------------------------------------------------------------- OpenAI-compatible
class OpenAIBackend:
    """An OpenAI-compatible ``/v1/chat/completions`` server, or several replicas of one."""

    RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
    MAX_BACKOFF_S = 60.0  # one pause between attempts never exceeds this (Retry-After aside)

    def __init__(self, model_id: str, base_urls: Sequence[str], api_key_env: str = "KGIR_LLM_API_KEY",
                 max_concurrency: int = 8, timeout_s: float = 120.0, max_retries: int = 3,
                 json_mode: str = "vllm", backoff_s: float = 0.5, retry_window_s: float = 60.0):
        """``timeout_s``: the total deadline of one HTTP attempt (connect, send, wait, read; not per read).
        ``max_retries`` / ``retry_window_s``: a failed attempt (timeout, connection error, 408/409/429/5xx,
        empty completion) is retried after ``backoff_s * 2**n`` seconds (+ up to 50 % jitter, at least the
        server's ``Retry-After``) while fewer than ``max_retries`` retries were made and the next attempt
        would start within ``retry_window_s`` of the first."""
        import httpx

        from .deadline import install

        if not base_urls:
            raise LLMError("parameter 'llm_base_urls': the openai backend needs at least one base URL")
        if any("@" in (urlsplit(u).netloc or "") for u in base_urls):
            raise LLMError("parameter 'llm_base_urls': a URL with a user name or password (user:key@host) is "
                           f"refused; give the key in ${api_key_env} (URL not shown: it holds a secret)")
        self.model = model_id
        self.model_id = f"openai:{model_id}"
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.json_mode = json_mode
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.retry_window_s = retry_window_s
        self.api_key_env = api_key_env
        # the key is read from the environment only, and kept in the HTTP client's headers, nowhere else
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        limits = httpx.Limits(max_connections=max_concurrency * 2, max_keepalive_connections=max_concurrency)
        transport = httpx.HTTPTransport(limits=limits, verify=ssl_context())  # one TLS context a process
        install(transport)  # every socket operation is bounded by the attempt's total deadline
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        self._client = httpx.Client(timeout=timeout, headers=headers, transport=transport, verify=ssl_context())
        self._rr = itertools.cycle(range(len(self.base_urls)))
        self._rr_lock = threading.Lock()

    def _body(self, req: ChatRequest) -> dict:
        """The ``/v1/chat/completions`` JSON body of one request (checked against vLLM 0.33.0's
        ``ChatCompletionRequest`` and llama-cpp-python 0.3.36's server types; tests/test_vllm_request.py).

        Always ``model``, ``messages``, ``max_tokens``, ``temperature``, ``seed`` and, when set,
        ``stop``. ``max_tokens`` is kept for every server: llama.cpp's server knows no
        ``max_completion_tokens``, and vLLM 0.33 still honours ``max_tokens`` (deprecated
        there in favour of ``max_completion_tokens``, used when the latter is absent).
        Structured output by ``json_mode``: ``vllm`` → ``structured_outputs: {"json": schema}``
        (vLLM ≥ 0.10.2; the old ``guided_json`` field is *ignored* by 0.33 with only a warning,
        so output would not be constrained); ``llamacpp`` → ``response_format: {"type":
        "json_object", "schema": schema}`` (llama.cpp's grammar from the schema; vLLM would
        treat it as plain JSON mode); ``openai`` → ``response_format: {"type": "json_schema",
        "json_schema": {"name": "output", "schema": schema}}`` (OpenAI's form; vLLM reads it too);
        ``none`` → nothing.
        """
        body = {"model": self.model, "messages": req.message_dicts(), "max_tokens": req.max_tokens,
                "temperature": req.temperature, "seed": req.seed}
        if req.stop:
            body["stop"] = list(req.stop)
        if req.json_schema is not None:
            if self.json_mode == "vllm":
                body["structured_outputs"] = {"json": req.json_schema}
            elif self.json_mode == "llamacpp":
                body["response_format"] = {"type": "json_object", "schema": req.json_schema}
            elif self.json_mode == "openai":
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": "output", "schema": req.json_schema}}
        return body

    def _next_url(self) -> str:
        with self._rr_lock:
            return self.base_urls[next(self._rr)]

    def _refused(self, url: str, resp) -> LLMError:
        hint = {401: f"check the API key in ${self.api_key_env}", 403: f"check the API key in ${self.api_key_env}",
                404: "check 'llm_base_urls' (it usually ends in /v1) and 'llm_model'"}.get(resp.status_code, "")
        return LLMError(f"LLM server refused the request: HTTP {resp.status_code} from {url}: "
                        f"{resp.text[:300]}" + (f" ({hint})" if hint else ""))

    def _post(self, req: ChatRequest) -> ChatResult:
        """One request: attempts with a total deadline each, retried with backoff over the retry window."""
        body = self._body(req)
        start = time.monotonic()
        failures: list = []
        tried_urls: set = set()
        while True:
            url = self._next_url()
            tried_urls.add(url)
            try:
                return self._attempt(url, body)
            except _RetryableError as exc:
                failures.append(str(exc))
                wait = self._backoff(len(failures), exc.retry_after)
            elapsed = time.monotonic() - start
            if len(failures) > self.max_retries or elapsed + wait > self.retry_window_s:
                raise LLMError(self._give_up(failures, tried_urls, elapsed, wait))
            time.sleep(wait)

    def _attempt(self, url: str, body: dict) -> ChatResult:
        """One HTTP attempt under a total deadline of ``timeout_s``; :class:`_RetryableError` if worth retrying."""
        import httpx

        from .deadline import deadline

        t0 = time.monotonic()
        try:
            with deadline(t0 + self.timeout_s):
                with self._client.stream("POST", f"{url}/chat/completions", json=body) as resp:
                    raw = bytearray()
                    for chunk in resp.iter_bytes():
                        raw += chunk
                        if time.monotonic() - t0 > self.timeout_s:
                            raise httpx.ReadTimeout("total deadline passed while reading the body")
                    status, headers = resp.status_code, resp.headers
        except httpx.TimeoutException:
            raise _RetryableError(f"no complete answer within the {self.timeout_s:g} s deadline from {url}") from None
        except httpx.TransportError as exc:
            raise _RetryableError(f"cannot connect to {url} or the connection dropped "
                                  f"({type(exc).__name__}: {exc})") from None
        if status == 200:
            return self._parse(url, bytes(raw), time.monotonic() - t0)
        text = bytes(raw[:300]).decode("utf-8", "replace")
        if status in self.RETRY_STATUS:
            raise _RetryableError(f"HTTP {status} from {url}: {text}", _retry_after(headers.get("retry-after")))
        raise self._refused(url, httpx.Response(status, content=bytes(raw)))

    def _backoff(self, n: int, retry_after: Optional[float] = None) -> float:
        """The pause before retry ``n`` (1, 2, ...): exponential with up to 50 % jitter, at least Retry-After."""
        wait = min(self.MAX_BACKOFF_S, self.backoff_s * (2 ** (n - 1))) * (1.0 + 0.5 * random.random())
        return max(wait, retry_after or 0.0)

    def _give_up(self, failures: list, urls: set, elapsed: float, wait: float) -> str:
        why = (f"{len(failures) - 1} retries (llm_max_retries={self.max_retries})"
               if len(failures) > self.max_retries else
               f"the next attempt (in {wait:.1f} s) would leave the retry window "
               f"llm_retry_window_s={self.retry_window_s:g} s")
        return (f"LLM server unreachable or failing after {len(failures)} attempts in {elapsed:.1f} s, "
                f"stopped by {why} (base URLs {sorted(urls)}): {failures[-1]}. Is the server running? "
                f"Check 'llm_base_urls', 'llm_timeout_s', 'llm_retry_window_s'.")

    @staticmethod
    def _parse(url: str, raw: bytes, seconds: float) -> ChatResult:
        """A chat completion from a 200 body. Null or empty content is a failed attempt (retried, never
        cached); content that is not text is an :class:`LLMError`; lone surrogates become U+FFFD."""
        import json

        from ..traces import REPLACED, replace_surrogates

        snippet = raw[:300].decode("utf-8", "replace")
        try:
            data = json.loads(raw)
            choice = data["choices"][0]
            content = choice["message"].get("content")
            usage = data.get("usage") or {}
            ptok, ctok = (_token_count(usage.get(name)) for name in ("prompt_tokens", "completion_tokens"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMError(f"LLM server at {url} sent a response that is not a chat completion "
                           f"({type(exc).__name__}: {exc}): {snippet}") from None
        if content is None or content == "":
            raise _RetryableError(f"LLM server at {url} sent an empty completion (content "
                                  f"{'null' if content is None else 'empty'}, finish_reason "
                                  f"{choice.get('finish_reason')!r}): {snippet}")
        if not isinstance(content, str):
            raise LLMError(f"LLM server at {url} sent message content of type {type(content).__name__}, "
                           f"not text (a multi-part or tool answer is not supported): {snippet}")
        content, n = replace_surrogates(content)
        REPLACED["llm"] += n
        return ChatResult(content, ptok, ctok, seconds, finish_reason=choice.get("finish_reason"))

    def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None:
        """Up to ``max_concurrency`` requests in flight; ``on_result`` runs in the caller's thread.

        When a request fails, the queued ones are dropped, but every completion that still arrives from
        the requests in flight is handed to ``on_result`` (so it is cached) before the error is raised;
        the error says how many completions of the batch were kept. Its message never holds the API key,
        an ``Authorization`` header or URL credentials a server echoed (:func:`kgir_lib.redact.redact`)."""
        try:
            self._run(requests, on_result)
        except LLMError as exc:
            raise LLMError(redact(str(exc), env_secrets(self.api_key_env))) from None

    def _run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None:
        if self.max_concurrency <= 1 or len(requests) <= 1:
            for i, req in enumerate(requests):
                on_result(i, self._post(req))
            return
        pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests)))
        error: Optional[BaseException] = None
        kept = 0
        try:
            futures = {pool.submit(self._post, req): i for i, req in enumerate(requests)}
            for fut in as_completed(futures):
                if fut.cancelled():
                    continue
                exc = fut.exception()
                if exc is not None:
                    if error is None:
                        error = exc
                        for other in futures:  # drop what has not started; the ones in flight finish
                            other.cancel()
                    continue
                on_result(futures[fut], fut.result())
                kept += 1
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if error is not None:
            note = (f" ({kept} of {len(requests)} completions of this batch arrived and were kept before the "
                    f"error; a rerun resumes from them)")
            if isinstance(error, LLMError):
                raise LLMError(f"{error}{note}") from None
            raise error

    def close(self) -> None:
        self._client.close()


# ---------------------------------------------------------------------------- vLLM offline
class VLLMBackend:  # pragma: no cover - needs a GPU and the vllm package
    """vLLM's offline engine in process: the whole batch goes to ``LLM.chat`` at once."""

    def __init__(self, model_id: str, json_mode: str = "vllm", **engine_kw):
        try:
            from vllm import LLM as VLLM
        except ImportError as exc:
            raise LLMError("the vllm backend needs the vllm package on a GPU server "
                           "(pip install 'kgir_lib[gpu]')") from exc
        self.model_id = f"vllm:{model_id}"
        self.json_mode = json_mode
        self._engine = VLLM(model=model_id, **engine_kw)

    def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None:
        """ONE ``LLM.chat`` call for the batch; ``SamplingParams(max_tokens, temperature, stop, seed)`` and,
        for a schema, ``structured_outputs=StructuredOutputsParams(json=schema)`` (vLLM 0.33.0's fields)."""
        from vllm import SamplingParams

        structured = _vllm_structured_output()
        params = []
        for req in requests:
            kw = dict(max_tokens=req.max_tokens, temperature=req.temperature, stop=list(req.stop) or None,
                      seed=req.seed)
            if req.json_schema is not None and self.json_mode != "none" and structured is not None:
                kw.update(structured(req.json_schema))
            params.append(SamplingParams(**kw))
        t0 = time.perf_counter()
        outs = self._engine.chat([r.message_dicts() for r in requests], params, use_tqdm=True)
        per = (time.perf_counter() - t0) / max(len(requests), 1)
        for i, out in enumerate(outs):
            on_result(i, ChatResult(out.outputs[0].text, len(out.prompt_token_ids),
                                    len(out.outputs[0].token_ids), per, finish_reason=out.outputs[0].finish_reason))


def _vllm_structured_output():  # pragma: no cover - needs vllm
    """SamplingParams keywords for a JSON schema: ``structured_outputs`` (vLLM >= 0.10.2), else ``guided_decoding``."""
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return lambda schema: {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:
        pass
    try:
        from vllm.sampling_params import GuidedDecodingParams

        return lambda schema: {"guided_decoding": GuidedDecodingParams(json=schema)}
    except ImportError:
        return None


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
