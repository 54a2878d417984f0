"""A fake OpenAI-compatible server for tests: a small threaded HTTP server on 127.0.0.1 (random port).

``/v1/chat/completions`` answers ``fake: <last user message>``. A ``plan`` of steps is
served first, one per request, then ``ok`` forever. A step is:

- ``"ok"`` (or ``200``): a normal completion;
- an HTTP status (``500``, ``502``, ``503``, ``400``, ...): an error body with that status;
- ``("429", seconds)`` / ``(503, seconds)``: that status with ``Retry-After: <seconds>``;
- ``"drop"``: the connection is closed without an answer;
- ``"trickle"``: a valid completion sent one byte every ``trickle_s`` seconds (headers included);
- ``"timeout"``: a valid completion after ``slow_s`` seconds of silence;
- ``"garbage"``: a 200 whose body is not JSON;
- ``"null"``, ``"empty"``, ``"list"``: a completion whose ``content`` is null, ``""``, or a list of parts;
- ``"surrogate"``: a completion whose content holds a lone surrogate (``\\ud800`` in the JSON);
- ``("tokens", "<JSON number>")``: a completion whose ``usage.prompt_tokens`` is that literal text
  (``"Infinity"``, ``"1e400"``, ``"-3"``);
- ``"echo401"``: a 401 whose body quotes every request header (the ``Authorization`` header included), as
  some proxies do.

``GET /v1/models`` lists ``models`` (default ``["m"]``), as vLLM and llama.cpp's server do.

Every loop is bounded (a trickle stops when the client hangs up or after the body),
handler threads are daemons, and the server shuts itself down after ``lifetime_s``
even if a test forgets to close it. Use it through the ``fake`` / ``make_fake`` fixtures
(import them into a test module: ``from fake_server import fake, make_fake``).
"""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable

import pytest


def completion(text: Any, finish_reason: str = "stop") -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3}}


class FakeOpenAI:
    """The server; ``seen`` holds ``(headers, body, path)`` of every request, ``max_in_flight`` the peak."""

    def __init__(self, plan: Iterable = (), delay: float = 0.0, trickle_s: float = 0.2, slow_s: float = 1.5,
                 lifetime_s: float = 120.0, models: Iterable = ("m",)):
        self.plan, self.delay, self.trickle_s, self.slow_s = list(plan), delay, trickle_s, slow_s
        self.models = list(models)
        self.gets: list = []  # (headers, path) of every GET
        self.seen: list = []
        self.trickled: list = []  # bytes each "trickle" step had written, counted as they go
        self.trickle_total = 0    # bytes of a whole trickled answer (headers included)
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self._timer = threading.Timer(lifetime_s, self.close)
        self._timer.daemon = True
        self._timer.start()
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def next_step(self, headers: dict, body: dict, path: str) -> Any:
        with self.lock:
            self.seen.append((headers, body, path))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.plan.pop(0) if self.plan else "ok"

    def done(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def close(self) -> None:
        with self.lock:
            if self._closed:
                return
            self._closed = True
        self._timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(server: FakeOpenAI) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            with server.lock:
                server.gets.append((dict(self.headers), self.path))
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            step = server.next_step(dict(self.headers), body, self.path)
            try:
                time.sleep(server.delay)
                if step == "echo401":
                    self._send(401, {"error": {"message": "invalid key", "request_headers": dict(self.headers)}})
                    return
                self._serve(step, "fake: " + body["messages"][-1]["content"])
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (deadline): nothing more to send
            finally:
                server.done()

        def _serve(self, step: Any, text: str) -> None:
            retry_after = None
            if isinstance(step, tuple) and step[0] == "tokens":
                body = json.dumps(completion(text)).replace('"prompt_tokens": 7', f'"prompt_tokens": {step[1]}')
                self._send(200, body)
                return
            if isinstance(step, tuple):
                step, retry_after = int(step[0]), step[1]
            if step in ("ok", 200):
                self._send(200, completion(text))
            elif step == "timeout":
                time.sleep(server.slow_s)
                self._send(200, completion(text))
            elif step == "trickle":
                self._trickle(completion(text))
            elif step == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif step == "garbage":
                self._send(200, "<html>proxy error</html>")
            elif step in ("null", "empty", "list"):
                content = {"null": None, "empty": "", "list": [{"type": "text", "text": text}]}[step]
                self._send(200, completion(content))
            elif step == "surrogate":
                self._send(200, json.dumps(completion("bad \ud800 char"), ensure_ascii=True))
            else:
                self._send(int(step), {"error": {"message": f"scripted {step}"}},
                           {"Retry-After": str(retry_after)} if retry_after is not None else {})

        def _raw(self, status: int, payload: Any, headers: dict) -> bytes:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            head = [f"HTTP/1.1 {status} X", "Content-Type: application/json", f"Content-Length: {len(data)}",
                    *(f"{k}: {v}" for k, v in headers.items())]
            return ("\r\n".join(head) + "\r\n\r\n").encode() + data

        def _send(self, status: int, payload: Any, headers: dict | None = None) -> None:
            self.wfile.write(self._raw(status, payload, headers or {}))
            self.wfile.flush()

        def _trickle(self, payload: dict) -> None:
            """One byte at a time, headers included: at most len(response) writes, each counted."""
            raw = self._raw(200, payload, {})
            with server.lock:
                server.trickle_total = len(raw)
                server.trickled.append(0)
                slot = len(server.trickled) - 1
            for byte in raw:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                server.trickled[slot] += 1
                time.sleep(server.trickle_s)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def fake():
    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture
def make_fake():
    """``make_fake(plan=(), delay=0.0, trickle_s=0.2, slow_s=1.5)`` -> a started :class:`FakeOpenAI`."""
    servers = []

    def make(plan: Iterable = (), delay: float = 0.0, **kw) -> FakeOpenAI:
        servers.append(FakeOpenAI(plan, delay, **kw))
        return servers[-1]
    yield make
    for s in servers:
        s.close()
