"""How the adapters reach OpenSearch: a local server over plain HTTP, an AWS domain over HTTPS with
every request signed with SigV4 for the ``es`` service (botocore's signer, computed here)."""

from __future__ import annotations

import re

import pytest
from opensearchpy import Urllib3AWSV4SignerAuth, Urllib3HttpConnection
from rag_ingest.adapters.vector_store import connect

pytestmark = pytest.mark.unit

DOMAIN = "https://search-rag.eu-west-1.es.amazonaws.com"


def _connection(endpoint: str) -> Urllib3HttpConnection:
    [connection] = connect(endpoint).transport.connection_pool.connections
    assert isinstance(connection, Urllib3HttpConnection)
    return connection


def test_a_local_endpoint_is_plain_http_and_unsigned() -> None:
    connection = _connection("http://127.0.0.1:9200")
    assert connection.host == "http://127.0.0.1:9200"
    assert connection.http_auth is None


def test_an_aws_domain_is_https_and_every_request_is_signed_for_es(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    connection = _connection(DOMAIN)
    assert connection.host == f"{DOMAIN}:443"
    assert isinstance(connection.http_auth, Urllib3AWSV4SignerAuth)

    headers = connection.http_auth("POST", f"{DOMAIN}/rag-chunks/_search", b'{"size": 1}')
    authorization = headers["Authorization"]
    assert re.match(r"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/\d{8}/eu-west-1/es/aws4_request, ", authorization)
    signed = re.search(r"SignedHeaders=([^,]+)", authorization)
    assert signed is not None and "host" in signed.group(1).split(";")
    assert headers["X-Amz-Content-SHA256"] != "UNSIGNED-PAYLOAD"  # the body is part of the signature
