"""The TLS settings every HTTP client of the suite shares (the downloads' and the OpenAI-compatible LLM client's).

httpx builds a fresh :class:`ssl.SSLContext` for each client unless it is handed one, and loading the certificate
authorities into it costs about 45 ms of CPU each time: a run that opens a client per download, or a test suite that
opens a hundred, pays it every time. :func:`ssl_context` builds the context httpx would build, once per process and
per certificate setting, and hands the same one to every client (a context is meant to be shared by connections).
"""
from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import ssl


@functools.lru_cache(maxsize=8)
def _context(cert_file: Optional[str], cert_dir: Optional[str]) -> ssl.SSLContext:
    """httpx's default context while ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` hold these values (httpx reads them
    itself, so the context is the one a client made without ``verify`` gets)."""
    import httpx

    return httpx.create_ssl_context(verify=True, trust_env=True)


def ssl_context() -> ssl.SSLContext:
    """The context to pass as ``verify=`` to an httpx client or transport: httpx's default (the certificate
    authorities of ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's bundle), built once per process for each
    value of the two variables, so a changed variable is honoured as httpx would honour it."""
    return _context(os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)
