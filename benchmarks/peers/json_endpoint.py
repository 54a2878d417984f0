"""The small JSON servers of the peer cross-checks (the suite's dense search, the suite's encoder) on 127.0.0.1:
a route is the path's ending, a request is a JSON object, an answer is a JSON object, and a bad request answers
400 with a message that names the field. Standard library only, so a server runs in any environment."""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Callable, Mapping


def json_object(body: bytes) -> dict:
    """The JSON object a request body holds; ``ValueError`` when it is not JSON or not an object."""
    try:
        req = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"request body is not JSON ({exc})") from None
    if not isinstance(req, dict):
        raise ValueError("request body must be a JSON object")
    return req


def json_handler(get: Mapping[str, Callable[[], dict]], post: Mapping[str, Callable[[bytes], dict]]):
    """An HTTP handler class: ``GET`` and ``POST`` routes by path ending (``"/health"``, ``"/search"``); a POST
    route takes the request body and raises ``ValueError`` for a bad one (answered 400); any other path is 404."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, payload: dict) -> None:
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _route(self, routes: Mapping[str, Callable]):
            path = self.path.rstrip("/")
            answer = next((fn for end, fn in routes.items() if path.endswith(end)), None)
            if answer is None:
                self._send(404, {"error": {"message": f"no route {self.path}"}})
            return answer

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            answer = self._route(get)
            if answer is not None:
                self._send(200, answer())

        def do_POST(self) -> None:  # noqa: N802
            answer = self._route(post)
            if answer is None:
                return
            try:
                self._send(200, answer(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            except ValueError as exc:
                self._send(400, {"error": {"message": str(exc)}})

        def log_message(self, *args) -> None:  # quiet: thousands of requests
            pass

    return Handler


def serve(handler, port: int, banner: str) -> None:
    """Serve ``handler`` on 127.0.0.1:``port`` until killed, after printing ``banner`` (the scripts wait for it)."""
    server = HTTPServer(("127.0.0.1", port), handler)
    print(banner, flush=True)
    server.serve_forever()
