"""A caching, timing proxy for an OpenAI-compatible chat endpoint (127.0.0.1), for peer systems with no LLM cache.

FlashRAG's pipelines keep no response cache: a killed run would ask every question again. Between FlashRAG's
OpenAI generator and ``python -m llama_cpp.server`` this proxy answers a request it has seen from its cache file
and forwards any other, one at a time, appending request, response, seconds and the load average to the file
as each one returns. A rerun after a kill repeats no finished call, and the file is the record of every call's
LLM seconds and tokens.

    .venv/bin/python benchmarks/peers/llm_cache_proxy.py --port P --upstream http://127.0.0.1:Q --cache F.jsonl
        [--cache-only] [--seed G.jsonl.gz ...]

The cache key is the SHA-256 of the request body as canonical JSON (sorted keys) after the proxy's one change:
``repeat_penalty`` 1.0 unless the request sets it (``llama_cpp.server`` applies 1.1 otherwise; the suite's
in-process llama.cpp backend decodes greedily with 1.0). ``--cache-only`` answers a miss with HTTP 503 instead of
forwarding it (a check that a finished run makes no LLM call). Only ``/v1/chat/completions`` is cached; other paths
(``/v1/models``) are forwarded. ``--seed`` names cache files (plain or gzip, such as a committed run's answers) that
answer requests too but are never written: the ``--cache`` file then holds only the calls this run made.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional, Sequence

CHAT = "/v1/chat/completions"


def prepare(request: dict) -> dict:
    """The request as forwarded: ``repeat_penalty`` 1.0 unless it sets one (greedy decoding as the suite's)."""
    out = dict(request)
    out.setdefault("repeat_penalty", 1.0)
    return out


def request_key(request: dict) -> str:
    """The cache key of a (prepared) request: SHA-256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def load_cache(path: Path) -> dict:
    """``key -> record`` of a cache file (one JSON record a line, later lines win); a torn last line (a kill
    mid-write) is skipped, any other unreadable line is an error naming the file and line."""
    cache: dict = {}
    if not path.exists():
        return cache
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                continue
            raise ValueError(f"{path}:{n}: not a JSON record") from None
        if "key" not in rec or "response" not in rec:
            raise ValueError(f"{path}:{n}: a cache record needs 'key' and 'response'")
        cache[rec["key"]] = rec
    return cache


def _loadavg() -> Optional[float]:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class CachingProxy:
    """Answers chat requests from ``cache`` (and the read-only ``seeds``) or forwards them to ``upstream`` one at a
    time, recording each in ``cache_file``."""

    def __init__(self, upstream: str, cache_file: Path, cache_only: bool = False, seeds: Sequence[Path] = ()):
        self.upstream = upstream.rstrip("/")
        self.cache_file = cache_file
        self.cache = {}
        for seed in seeds:
            self.cache.update(load_cache(seed))
        self.seeded = len(self.cache)
        self.cache.update(load_cache(cache_file))
        self.cache_only = cache_only
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def chat(self, body: bytes) -> tuple:
        """``(status, response bytes)`` for one chat request body."""
        try:
            request = prepare(json.loads(body))
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError) as exc:
            return 400, json.dumps({"error": {"message": f"request body is not a JSON object ({exc})"}}).encode()
        key = request_key(request)
        with self.lock:  # one request at a time: the seconds recorded are the model's, not a queue's
            if key in self.cache:
                self.hits += 1
                return 200, json.dumps(self.cache[key]["response"]).encode()
            if self.cache_only:
                return 503, json.dumps({"error": {"message": "cache-only proxy: request not in the cache"}}).encode()
            t0 = time.time()
            try:
                with urllib.request.urlopen(urllib.request.Request(
                        self.upstream + CHAT, data=json.dumps(request).encode("utf-8"), method="POST",
                        headers={"Content-Type": "application/json"}), timeout=3600) as r:
                    status, data = r.status, r.read()
            except urllib.error.HTTPError as e:
                status, data = e.code, e.read()
            except (urllib.error.URLError, OSError) as e:
                return 502, json.dumps({"error": {"message": f"upstream unreachable: {e}"}}).encode()
            seconds = time.time() - t0
            if status == 200:
                self.misses += 1
                rec = {"key": key, "request": request, "response": json.loads(data), "t_start": round(t0, 3),
                       "seconds": round(seconds, 3), "loadavg_1min": _loadavg()}
                self.cache[key] = rec
                with self.cache_file.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            return status, data

    def forward(self, path: str) -> tuple:
        try:
            with urllib.request.urlopen(self.upstream + path, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            return 502, json.dumps({"error": {"message": f"upstream unreachable: {e}"}}).encode()


def make_handler(proxy: CachingProxy):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.rstrip("/") == CHAT:
                self._send(*proxy.chat(body))
            else:
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())

        def do_GET(self) -> None:  # noqa: N802
            self._send(*proxy.forward(self.path))

        def log_message(self, *args) -> None:
            pass
    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True, help="the chat server's base URL (without /v1)")
    ap.add_argument("--cache", type=Path, required=True, help="the cache file (JSON lines, appended)")
    ap.add_argument("--cache-only", action="store_true", help="answer a miss with 503 instead of forwarding it")
    ap.add_argument("--seed", type=Path, nargs="*", default=[],
                    help="cache files (plain or .gz) that answer requests too and are never written")
    args = ap.parse_args()
    for seed in args.seed:
        if not seed.exists():
            raise SystemExit(f"--seed {seed}: no such file")
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    proxy = CachingProxy(args.upstream, args.cache, args.cache_only, args.seed)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(proxy))
    print(f"llm_cache_proxy: {len(proxy.cache)} cached responses ({args.cache}, {proxy.seeded} of them from "
          f"{len(args.seed)} seed file(s)); forwarding to {args.upstream}"
          f"{' (cache only)' if args.cache_only else ''} on http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
