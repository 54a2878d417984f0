"""Every HTTP client of the suite shares one TLS context a process (``kgir_lib.tls``), the one httpx would build, and
a changed ``SSL_CERT_FILE`` is honoured as httpx honours it."""
from __future__ import annotations

import ssl

import certifi

from kgir_lib import tls
from kgir_lib.data_sources import fetch
from kgir_lib.llm.backends import OpenAIBackend


def _ca_count(ctx: ssl.SSLContext) -> int:
    return ctx.cert_store_stats()["x509_ca"]


def test_the_context_is_built_once_and_verifies_as_httpx_s_default(monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    ctx = tls.ssl_context()
    assert tls.ssl_context() is ctx
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert _ca_count(ctx) == _ca_count(ssl.create_default_context(cafile=certifi.where())) > 0


def test_a_changed_certificate_file_gives_its_own_context(monkeypatch, tmp_path):
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    default = tls.ssl_context()
    one = tmp_path / "one.pem"  # the first certificate of certifi's bundle alone
    text = open(certifi.where(), encoding="ascii").read()
    one.write_text(text[:text.index("-----END CERTIFICATE-----") + 26], encoding="ascii")
    monkeypatch.setenv("SSL_CERT_FILE", str(one))
    own = tls.ssl_context()
    assert own is not default and _ca_count(own) == 1
    monkeypatch.delenv("SSL_CERT_FILE")
    assert tls.ssl_context() is default


def test_the_download_client_and_the_llm_client_use_the_shared_context(monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    ctx = tls.ssl_context()

    def contexts(client) -> list:
        pools = [client._transport._pool, *(t._pool for t in client._mounts.values() if t is not None)]
        return [pool._ssl_context for pool in pools]

    with fetch.client(timeout_s=1) as http:
        assert contexts(http) and all(c is ctx for c in contexts(http))
    backend = OpenAIBackend("m", ["http://127.0.0.1:9/v1"], api_key_env="")
    assert contexts(backend._client) and all(c is ctx for c in contexts(backend._client))
