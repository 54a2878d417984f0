"""Secrets never reach an error message, a log, a config dump or a notebook output.

The API key lives in the environment only (the variable named by ``llm_api_key_env``). What a server
sends back can quote it (a 401 body echoing the request's ``Authorization`` header), and a URL can carry
``user:password@``. :func:`redact` removes from a text the key's value, anything after ``Authorization``
or ``Bearer``, ``key=value`` pairs whose name says secret, and URL credentials (:func:`mask_url`, the one
helper for every URL printed: ``user:password@`` becomes ``***@``); every message that quotes a server or a URL
passes through it. :func:`secret_name` tells which parameter names must never be echoed.
"""
from __future__ import annotations

import os
import re
from typing import Iterable, Optional

MASK = "***"
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "credential")
_PATTERNS = (
    # Authorization / Proxy-Authorization headers, as text or as JSON ("authorization": "Bearer ...")
    re.compile(r"(?i)(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)[^\"'\r\n,}]*"),
    re.compile(r"(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]+"),
    # name=value or "name": "value" where the name says secret (api_key, access_token, x-api-key, password)
    re.compile(r"(?i)([\"']?[\w-]*(?:api[_-]?key|token|secret|password|passwd)[\"']?\s*[:=]\s*[\"']?)"
               r"[^\"'&,;\s}]+"),
)
# URL credentials: scheme://user:password@host, or user:password@host written without a scheme
_URL_CREDENTIALS = (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@"),
                    re.compile(r"(^|[\s\[\"',(=])[^/\s@\[\]\"',(=:]+:[^/\s@\[\]\"',]+@"))


def mask_url(text: str) -> str:
    """``text`` (a URL, a list of URLs, or a message quoting them) with the ``user:password@`` part of every URL
    replaced by ``***@``: ``http://user:sk-1@host:8000/v1`` becomes ``http://***@host:8000/v1``, and
    ``user:sk-1@host`` (no scheme) becomes ``***@host``. The one helper for every URL a script or the runner
    prints (``python -m kgir_lib.redact URL...`` for the shell scripts)."""
    for pattern in _URL_CREDENTIALS:
        text = pattern.sub(lambda m: m.group(1) + MASK + "@", text)
    return text


def redact(text: str, secrets: Iterable[Optional[str]] = ()) -> str:
    """``text`` with every value in ``secrets`` (4 characters or more) and every credential-looking part
    (see the module docstring) replaced by ``***``."""
    for value in secrets:
        if value and len(value) >= 4:
            text = text.replace(value, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return mask_url(text)


SECRET_PART_CHARS = 16  # longer than any word of an environment variable's name (OPENROUTERAPIKEY is 16)
SECRET_PART_DIGITS = 4  # a word of 8+ characters mixing letters and this many digits reads as a key


def looks_like_secret(name: str) -> bool:
    """Whether ``name``, given where the NAME of an environment variable belongs (``llm_api_key_env``), looks
    like a pasted key instead: one of its ``_``-separated words is longer than :data:`SECRET_PART_CHARS`
    characters, or has 8 or more characters mixing letters with at least :data:`SECRET_PART_DIGITS` digits
    (``SKRELFOURUPPER0123456789``, ``AKIAIOSFODNN7EXAMPLE``). Variable names are short words: ``KGIR_LLM_API_KEY``,
    ``OPENAI_API_KEY``, ``HF_TOKEN``, ``GPU2_KEY``."""
    for part in str(name).split("_"):
        digits = sum(ch.isdigit() for ch in part)
        if len(part) > SECRET_PART_CHARS:
            return True
        if len(part) >= 8 and digits >= SECRET_PART_DIGITS and any(ch.isalpha() for ch in part):
            return True
    return False


def env_secrets(*names: Optional[str]) -> list:
    """The values of the environment variables ``names`` that are set (e.g. ``cfg.llm_api_key_env``)."""
    return [os.environ[n] for n in names if n and os.environ.get(n)]


def secret_name(name: str) -> bool:
    """Whether a parameter called ``name`` may hold a secret (its value is then never echoed): its name holds
    key, token, secret, password, auth or credential (``llm_api_key_env`` too: a key pasted there must not be
    shown), except the token budgets ``max_new_tokens`` and ``max_tokens_*``."""
    lowered = str(name).lower()
    if lowered == "max_new_tokens" or lowered.startswith("max_tokens_"):
        return False
    return any(word in lowered for word in _SECRET_WORDS)


if __name__ == "__main__":  # python -m kgir_lib.redact URL...: the URLs as a script may print them
    import sys

    print(" ".join(mask_url(arg) for arg in sys.argv[1:]))
