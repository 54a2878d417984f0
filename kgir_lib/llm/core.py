"""The one LLM interface: a batch of chat requests in, results out, cached and accounted.

Every stage of every method calls :meth:`LLM.generate` with a list of
:class:`ChatRequest` and a ``stage`` name. Cache hits are answered from the
SQLite cache; misses go to the backend as one batch, and each result is written
to the cache the moment it arrives, so a run killed half way repeats no finished
call when started again. :class:`Usage` counts calls, cache hits, tokens and
seconds per stage; notebooks turn it into cost tables.

Truncation: a completion that stopped at its ``max_tokens``
budget (``finish_reason == "length"``) is counted per stage in
:attr:`LLMUsage.truncated`. Backends report ``finish_reason`` where the server
does (llama.cpp, OpenAI-compatible servers, vLLM); the cache does not store it,
so for a cache hit, or a backend that gives none, a completion of at least
``max_tokens`` tokens counts as truncated (:func:`infer_finish_reason`).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import Callable, Optional, Protocol, Sequence

from ..progress import progress as tqdm  # one line per bar in executed notebooks

from .cache import LLMCache, cache_key


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion. ``json_schema`` asks for structured output where the backend can."""

    messages: tuple  # tuple of (role, content) pairs
    max_tokens: int = 192
    temperature: float = 0.0
    stop: tuple = ()
    json_schema: Optional[dict] = None
    seed: int = 0
    prompt: Optional[str] = field(default=None, compare=False)  # the prompt file it was built from; not in
    # the payload (so not in the cache key): it lets scripted test backends pick replies by prompt

    def __post_init__(self) -> None:
        # Normalise so equal requests give equal cache keys: (role, content) tuples, a tuple of
        # stop strings (a bare string is one stop, not its characters), numbers of one type.
        try:
            messages = tuple((str(role), str(content)) for role, content in self.messages)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ChatRequest.messages must be (role, content) pairs, got {self.messages!r}") from exc
        if not messages:
            raise ValueError("ChatRequest.messages is empty")
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(str(s) for s in (self.stop or ()))
        if isinstance(self.max_tokens, bool) or int(self.max_tokens) < 1:
            raise ValueError(f"ChatRequest.max_tokens must be >= 1, got {self.max_tokens!r}")
        object.__setattr__(self, "messages", messages)
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "max_tokens", int(self.max_tokens))
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "seed", int(self.seed))

    @staticmethod
    def chat(system: Optional[str], user: str, **kw) -> "ChatRequest":
        msgs = ((("system", system),) if system else ()) + (("user", user),)
        return ChatRequest(messages=msgs, **kw)

    def message_dicts(self) -> list:
        return [{"role": r, "content": c} for r, c in self.messages]

    def payload(self) -> dict:
        """Everything that determines the completion (the cache key's content)."""
        return {
            "messages": self.message_dicts(),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stop": list(self.stop),
            "json_schema": self.json_schema,
            "seed": self.seed,
        }


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    finish_reason: Optional[str] = None  # "stop" | "length" | None (unknown); see infer_finish_reason

    @property
    def truncated(self) -> bool:
        """The completion hit its token budget (``finish_reason == "length"``)."""
        return self.finish_reason == "length"


def infer_finish_reason(result: ChatResult, request: ChatRequest) -> str:
    """``result.finish_reason`` if the backend gave one, else ``"length"`` when the completion used the
    whole budget (``completion_tokens >= request.max_tokens``), else ``"stop"``."""
    if result.finish_reason:
        return result.finish_reason
    return "length" if result.completion_tokens >= request.max_tokens else "stop"


class Backend(Protocol):
    """What a backend implements. ``run`` calls ``on_result(i, result)`` as each request finishes."""

    model_id: str

    def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None: ...


@dataclass
class LLMUsage:
    """LLM usage summed over some calls: the one usage record, per stage (:class:`Usage`), per question
    (:attr:`kgir_lib.methods.base.MethodOutput.usage`) and per question and stage (KGIR-RAG's traces)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0  # for a stage: wall time of its generate() calls; for a question: its results' seconds
    failures: int = 0     # requests the backend gave up on (answered empty, finish_reason "error")
    truncated: int = 0    # completions cut at the token budget (finish_reason "length"), cache hits included

    def add(self, result: "ChatResult") -> "LLMUsage":
        """Count one call's result."""
        self.calls += 1
        self.cache_hits += int(result.cached)
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.seconds += result.seconds
        self.failures += int(result.finish_reason == "error")
        self.truncated += int(bool(result.truncated))
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Optional[dict]) -> "LLMUsage":
        """The record back from :meth:`to_dict`; keys it does not know are ignored, missing ones are 0."""
        d = d or {}
        return cls(**{f.name: d.get(f.name, 0) for f in fields(cls)})


@dataclass
class Usage:
    """LLM usage per stage. Token counts include cache hits (they are what the method costs)."""

    stages: dict = field(default_factory=dict)

    def stage(self, name: str) -> LLMUsage:
        return self.stages.setdefault(name, LLMUsage())

    def total(self) -> LLMUsage:
        tot = LLMUsage()
        for s in self.stages.values():
            for k, v in asdict(s).items():
                setattr(tot, k, getattr(tot, k) + v)
        return tot

    def snapshot(self) -> dict:
        return {k: asdict(v) for k, v in self.stages.items()}

    def since(self, snap: dict) -> "Usage":
        """Usage accumulated after ``snap`` (from :meth:`snapshot`)."""
        out = Usage()
        for name, cur in self.stages.items():
            before = snap.get(name, {})
            out.stages[name] = LLMUsage(**{k: v - before.get(k, 0) for k, v in asdict(cur).items()})
        return out

    def table(self):
        """One row a stage and a total; a stage's ``seconds`` are the wall time of its calls, so the column is
        named ``wall seconds`` (with ``cache_hits`` it describes the execution, not the result)."""
        import pandas as pd

        rows = [{"stage": k, **asdict(v)} for k, v in self.stages.items()]
        rows.append({"stage": "total", **asdict(self.total())})
        return pd.DataFrame(rows).set_index("stage").rename(columns={"seconds": "wall seconds"})


class LLMError(RuntimeError):
    """A backend could not answer (server unreachable, model file missing, ...)."""


class CacheMissError(RuntimeError):
    """A cache-only LLM was asked for a completion that is not in the cache."""


class LLM:
    """Cache + usage accounting in front of one backend.

    ``cache_only=True`` (the regeneration command, ``KGIR_LLM_CACHE_ONLY=1``) answers from
    the cache alone and raises :class:`CacheMissError` instead of calling the backend.
    """

    def __init__(self, backend: Backend, cache: Optional[LLMCache] = None, progress: bool = True,
                 cache_only: bool = False):
        self.backend = backend
        self.cache = cache
        self.usage = Usage()
        self.progress = progress
        self.cache_only = cache_only

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def generate(self, requests: Sequence[ChatRequest], stage: str = "default",
                 desc: Optional[str] = None) -> list:
        """Answer every request; returns one :class:`ChatResult` per request, in order.

        Cache hits never reach the backend; identical requests within the batch are sent
        once (the repeats count as cache hits). Each backend result is written to the
        cache as it arrives, so an interrupted batch resumes where it stopped. A request
        the backend gave up on is counted in ``failures`` and answered with empty text.
        """
        start = time.perf_counter()
        results: list = [None] * len(requests)
        usage = self.usage.stage(stage)
        todo: list = []      # indices of the first occurrence of each uncached request
        keys: dict = {}      # request index -> (key, payload)
        repeats: dict = {}   # key -> indices of later identical uncached requests in this batch
        first_of: dict = {}  # key -> index of the first occurrence of an uncached request
        for i, req in enumerate(requests):
            payload = req.payload()
            key = cache_key(self.model_id, payload)
            if key in first_of:
                repeats.setdefault(key, []).append(i)
                continue
            hit = self.cache.get(key) if self.cache is not None else None  # (an empty cache is falsy)
            if hit is not None:
                results[i] = ChatResult(hit["text"], hit["prompt_tokens"], hit["completion_tokens"], 0.0, True)
                usage.cache_hits += 1
            else:
                first_of[key] = i
                keys[i] = (key, payload)
                todo.append(i)
        usage.calls += len(requests)
        if todo and self.cache_only:
            where = self.cache.path if self.cache is not None else "(no cache)"
            raise CacheMissError(f"cache-only run: {len(todo)} request(s) of stage {stage!r} are not in the LLM "
                                 f"cache {where}; run the main job (scripts/main.sh) first")

        if todo:
            bar = tqdm(total=len(todo), desc=desc or f"LLM {stage}", disable=not self.progress or len(todo) < 2,
                       leave=False)

            def on_result(j: int, res: ChatResult) -> None:
                i = todo[j]
                results[i] = res
                if self.cache is not None:
                    key, payload = keys[i]
                    self.cache.put(key, self.model_id, payload, res.text, res.prompt_tokens,
                                   res.completion_tokens, res.seconds)
                bar.update(1)

            try:
                self.backend.run([requests[i] for i in todo], on_result)
            finally:
                bar.close()
                usage.seconds += time.perf_counter() - start
                start = time.perf_counter()
        for key, idxs in repeats.items():
            first = results[first_of[key]]
            for i in idxs:
                if first is not None:
                    results[i] = ChatResult(first.text, first.prompt_tokens, first.completion_tokens, 0.0, True)
                    usage.cache_hits += 1
        for res in results:
            if res is None:  # a backend that gave up on a request: counted, answered empty
                usage.failures += 1
        results = [r if r is not None else ChatResult("", 0, 0, 0.0, False, "error") for r in results]
        for r, req in zip(results, requests):
            if r.finish_reason != "error":
                r.finish_reason = infer_finish_reason(r, req)
            usage.prompt_tokens += r.prompt_tokens
            usage.completion_tokens += r.completion_tokens
            usage.truncated += int(r.truncated)
        usage.seconds += time.perf_counter() - start
        return results

    def complete(self, requests: Sequence[ChatRequest], stage: str = "default") -> list:
        """Texts only."""
        return [r.text for r in self.generate(requests, stage)]
