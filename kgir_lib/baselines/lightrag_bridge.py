"""What LightRAG is given in place of its own providers: the suite's LLM, encoder, a tokenizer and an event loop.

LightRAG (``lightrag-hku``) takes its LLM and its embedder as plain async functions. Here they are the
suite's own, so LightRAG's calls are cached, logged and counted like every other method's:

- :class:`LLMBridge`: one async function per LightRAG LLM role (``extract``, ``keyword``, ``query``) that
  turns LightRAG's ``(prompt, system_prompt, history_messages, response_format)`` into a
  :class:`~kgir_lib.llm.ChatRequest` and answers it with ``ws.llm.generate`` under a ``lightrag_*`` stage
  (:func:`stage_of`). Calls LightRAG makes concurrently are gathered into ONE ``generate`` call a stage (the
  suite's batch-first rule; a server backend then runs them in parallel); every call is kept in
  :attr:`LLMBridge.records` for the index's cost. A completion cut at its budget is handed back as LightRAG's
  ``TruncatedResponse``, so LightRAG reports the truncation as it does for its own providers. LightRAG's own
  LLM cache is switched off (:mod:`kgir_lib.baselines.lightrag_index`): the suite's is the one cache.
- :func:`embedding_function`: the workspace encoder (``ws.dense.encoder``); a pool passage's text gets
  exactly its dense-index vector, so LightRAG's chunk vectors are the ones Naive RAG searches.
- :class:`RegexTokenizer`: LightRAG counts tokens to size chunks, summaries and its context; its default
  (tiktoken) downloads its encoding files at first use, which this suite cannot rely on. Tokens here are
  words and single punctuation marks, each with the white space before it, so ``decode(encode(s)) == s``
  (token counts come out near a BPE tokenizer's on English text: one a word or mark).
- :class:`LoopThread`: LightRAG binds its storages to the event loop that opened them, and a notebook
  kernel already runs a loop on the main thread; each index gets one private loop on its own thread.
"""
from __future__ import annotations

import asyncio
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..llm import ChatRequest, ChatResult

TOKENIZER_NAME = "regex-words-v1"
_PIECE = re.compile(r"\s*(?:\w+|[^\w\s])|\s+$")

# LightRAG's LLM roles -> the suite's stage names (the extract role also writes summaries and gleanings).
ROLE_STAGES = {"extract": "lightrag_extract", "keyword": "lightrag_keywords", "query": "lightrag_answer"}
GLEANING_STAGE, SUMMARY_STAGE, OTHER_STAGE = "lightrag_gleaning", "lightrag_summary", "lightrag_other"
INDEX_STAGES = ("lightrag_extract", GLEANING_STAGE, SUMMARY_STAGE)  # the LLM work of building a native index


class RegexTokenizer:
    """Words and punctuation marks as tokens (with their leading white space); reversible and thread-safe.

    Ids are handed out in first-seen order under a lock; ``__deepcopy__`` returns the instance itself, as
    LightRAG requires of an injected tokenizer (it deep-copies its settings and must keep one vocabulary).
    """

    def __init__(self) -> None:
        self._ids: dict = {}
        self._pieces: list = []
        self._lock = threading.Lock()

    def encode(self, content: str) -> list:
        out = []
        for piece in _PIECE.findall(content or ""):
            i = self._ids.get(piece)
            if i is None:
                with self._lock:
                    i = self._ids.setdefault(piece, len(self._pieces))
                    if i == len(self._pieces):
                        self._pieces.append(piece)
            out.append(i)
        return out

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(self._pieces[i] for i in tokens)

    def __deepcopy__(self, memo: dict) -> "RegexTokenizer":
        return self


def lightrag_tokenizer():
    """A LightRAG ``Tokenizer`` over :class:`RegexTokenizer`."""
    from lightrag.utils import Tokenizer

    return Tokenizer(TOKENIZER_NAME, RegexTokenizer())


def stage_of(role: str, system_prompt: Optional[str], history: Sequence) -> str:
    """The suite stage of one LightRAG call: extraction, its gleaning (a call with history), a description
    summary (the extract role without a system prompt), keywords, or the answer (never used: the shared
    reader answers)."""
    if role == "extract":
        if history:
            return GLEANING_STAGE
        return SUMMARY_STAGE if not system_prompt else ROLE_STAGES["extract"]
    return ROLE_STAGES.get(role, OTHER_STAGE)


@dataclass
class CallRecord:
    """One LightRAG LLM call as the suite answered it."""

    stage: str
    request: ChatRequest
    result: ChatResult


def lightrag_request(stage: str, prompt: str, max_tokens: int, system_prompt: Optional[str] = None,
                     history: Sequence = (), response_format: Optional[dict] = None) -> ChatRequest:
    """The suite request of one LightRAG call (system prompt, history, then the prompt as the user turn);
    ``response_format={"type": "json_object"}`` (LightRAG's JSON mode) becomes the schema of any JSON object.
    Tagged with ``stage`` (scripted test backends pick replies by it; not part of the cache key)."""
    msgs = [("system", system_prompt)] if system_prompt else []
    msgs += [(m.get("role", "user"), m.get("content", "")) for m in history or ()]
    msgs.append(("user", prompt))
    schema = {"type": "object"} if (response_format or {}).get("type") == "json_object" else None
    return ChatRequest(messages=tuple(msgs), max_tokens=int(max_tokens), json_schema=schema, prompt=stage)


class LLMBridge:
    """LightRAG's LLM roles answered by the suite's LLM (see the module docstring).

    ``budgets``: max new tokens by stage (LightRAG sets none of its own); a stage missing here gets
    ``default_budget``.
    """

    def __init__(self, llm, budgets: dict, default_budget: int):
        self.llm = llm
        self.budgets = dict(budgets)
        self.default_budget = int(default_budget)
        self.records: list = []
        self._pending: dict = {}
        self._flush_lock: Optional[asyncio.Lock] = None

    def request(self, stage: str, prompt: str, system_prompt: Optional[str] = None,
                history: Sequence = (), response_format: Optional[dict] = None,
                max_tokens: Optional[int] = None) -> ChatRequest:
        budget = int(max_tokens) if max_tokens else int(self.budgets.get(stage, self.default_budget))
        return lightrag_request(stage, prompt, budget, system_prompt, history, response_format)

    def role_func(self, role: str) -> Callable:
        """The async function LightRAG calls for ``role``."""
        async def call(prompt: str, system_prompt: Optional[str] = None, history_messages=None, **kw: Any) -> str:
            stage = stage_of(role, system_prompt, history_messages or ())
            req = self.request(stage, prompt, system_prompt, history_messages or (), kw.get("response_format"),
                               kw.get("max_tokens"))
            res = await self._answer(stage, req)
            if res.truncated:
                from lightrag.utils import TruncatedResponse

                return TruncatedResponse(res.text)
            return res.text
        return call

    async def _answer(self, stage: str, req: ChatRequest) -> ChatResult:
        fut = asyncio.get_running_loop().create_future()
        batch = self._pending.setdefault(stage, [])
        batch.append((req, fut))
        if len(batch) == 1:  # the first call of a batch flushes it once the loop has run every ready call
            asyncio.get_running_loop().create_task(self._flush(stage))
        return await fut

    async def _flush(self, stage: str) -> None:
        await asyncio.sleep(0)
        if self._flush_lock is None:
            self._flush_lock = asyncio.Lock()
        async with self._flush_lock:  # one generate() at a time: the LLM is not shared across threads
            batch = self._pending.pop(stage, [])
            if not batch:
                return
            reqs = [r for r, _ in batch]
            try:
                results = await asyncio.to_thread(self.llm.generate, reqs, stage)
            except Exception as exc:  # noqa: BLE001 (handed to every waiting call; LightRAG records the failure)
                for _, fut in batch:
                    fut.set_exception(exc)
                return
            for (req, fut), res in zip(batch, results):
                self.records.append(CallRecord(stage, req, res))
                fut.set_result(res)


def embedding_function(encoder, known: Optional[dict] = None, dim: Optional[int] = None):
    """A LightRAG ``EmbeddingFunc`` over ``encoder`` (normalised vectors); texts in ``known`` (text -> vector,
    the pool passages' dense-index rows) are not encoded again."""
    from lightrag.utils import EmbeddingFunc

    known = known or {}

    async def embed(texts: Sequence[str], **_: Any) -> np.ndarray:
        texts = list(texts)
        todo = [t for t in dict.fromkeys(texts) if t not in known]
        fresh = dict(zip(todo, np.asarray(encoder.encode(todo), dtype=np.float32))) if todo else {}
        return np.stack([known[t] if t in known else fresh[t] for t in texts]).astype(np.float32)

    width = int(dim) if dim else int(encoder.dim)
    return EmbeddingFunc(embedding_dim=width, func=embed, max_token_size=None,
                         model_name=getattr(encoder, "cache_name", getattr(encoder, "model_name", "encoder")))


class LoopThread:
    """One private asyncio loop running on its own (daemon) thread; :meth:`run` hands it a coroutine and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="lightrag-loop", daemon=True)
        self._thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        """Cancel what LightRAG left running on the loop (its LLM and embedding workers), then stop and close it."""
        async def cancel_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            await self.loop.shutdown_asyncgens()
        try:
            self.run(cancel_rest())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()
