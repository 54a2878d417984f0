"""A total deadline per HTTP request for the ``openai`` backend.

httpx's timeouts bound each socket operation, not the request: a server that
trickles one byte every half second never trips a 2 s read timeout. Here every
connect, read and write of a request made by the calling thread is bounded by
what is left of that thread's deadline (:func:`deadline`), and raises a timeout
once it has passed, whatever phase the request is in (headers or body).

The deadline is installed as an httpcore network backend wrapper on an
``httpx.HTTPTransport``'s connection pool (:func:`install`). The caller also
checks the deadline between body chunks, so the bound holds even where the
wrapper cannot be installed.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator, Optional

import httpcore

_local = threading.local()


@contextlib.contextmanager
def deadline(at: float) -> Iterator[None]:
    """Bound every socket operation of this thread's requests by ``at`` (a ``time.monotonic()`` value)."""
    previous = getattr(_local, "at", None)
    _local.at = at
    try:
        yield
    finally:
        _local.at = previous


def remaining() -> Optional[float]:
    """Seconds left before this thread's deadline (``None``: no deadline set)."""
    at = getattr(_local, "at", None)
    return None if at is None else at - time.monotonic()


def _cap(timeout: Optional[float], exc: type) -> Optional[float]:
    left = remaining()
    if left is None:
        return timeout
    if left <= 0:
        raise exc("the request's total deadline has passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A network stream whose reads and writes never outlive the calling thread's deadline."""

    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: Optional[float] = None) -> bytes:
        return self._inner.read(max_bytes, _cap(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: Optional[float] = None) -> None:
        self._inner.write(buffer, _cap(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: Optional[str] = None,
                  timeout: Optional[float] = None) -> "DeadlineStream":
        return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                    _cap(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's synchronous backend with :class:`DeadlineStream` connections."""

    def __init__(self, inner: Optional[httpcore.NetworkBackend] = None):
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: Optional[float] = None,
                    local_address: Optional[str] = None, socket_options: Any = None) -> DeadlineStream:
        return DeadlineStream(self._inner.connect_tcp(host, port, _cap(timeout, httpcore.ConnectTimeout),
                                                      local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: Optional[float] = None,
                            socket_options: Any = None) -> DeadlineStream:
        return DeadlineStream(self._inner.connect_unix_socket(path, _cap(timeout, httpcore.ConnectTimeout),
                                                              socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install(transport: Any) -> bool:
    """Put :class:`DeadlineBackend` under ``transport`` (an ``httpx.HTTPTransport``); False if it has no
    httpcore pool to put it under (then only the between-chunks check bounds a request)."""
    pool = getattr(transport, "_pool", None)
    if pool is None or not hasattr(pool, "_network_backend"):
        return False
    pool._network_backend = DeadlineBackend(pool._network_backend)
    return True
