"""The stack's MCP endpoint (functions/mcp_http) one API Gateway event at a time, in process: the 401
challenge naming the protected-resource metadata, the metadata, 405 for GET and DELETE, and the
tools run as the verified caller over the in-process Api, whose refusals read as the API's."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from rag_ingest.core.auth import TokenVerifier
from rag_ingest.documents.errors import DocumentNotFoundError
from rag_ingest.retrieval.search import SearchRequest
from rag_ingest_client.mcp_server import build_server

from functions.mcp_http.serving.auth import IdTokenVerifier, current_principal
from functions.mcp_http.serving.endpoint import McpEndpoint, auth_settings, metadata_path
from functions.mcp_http.serving.tools_api import InProcessApi

pytestmark = pytest.mark.unit
ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_pool"
AUDIENCE = "app-client"
HOST = "abc123.execute-api.eu-west-1.amazonaws.com"
URL = f"https://{HOST}/mcp"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
JWK = {**RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True), "kid": "k1", "alg": "RS256", "use": "sig"}
HEADERS = {"host": HOST, "content-type": "application/json", "accept": "application/json, text/event-stream"}


def token(**claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, "sub": "sub-kim", "token_use": "id"}
    return jwt.encode({**body, **claims}, KEY, algorithm="RS256", headers={"kid": "k1"})


class Documents:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def get(self, tenant_id: str, document_id: str, principal: Any) -> Any:
        self.calls.append(("get", (tenant_id, document_id, principal.groups)))
        raise DocumentNotFoundError(document_id)


class Search:
    def __init__(self) -> None:
        self.calls: list[tuple[str, SearchRequest, Any]] = []

    def search(self, tenant_id: str, request: SearchRequest, reader: Any) -> Any:
        self.calls.append((tenant_id, request, reader))
        return type("Found", (), {"model_dump": lambda self, mode: {"passages": []}})()


class Services:
    def __init__(self) -> None:
        self.documents = Documents()
        self.search = Search()


@pytest.fixture
def served() -> tuple[McpEndpoint, Services]:
    services = Services()
    api = InProcessApi(lambda: services, lambda: current_principal("tenant-admins"))  # type: ignore[arg-type,return-value]
    verifier = IdTokenVerifier(TokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=lambda: {"keys": [JWK]}))
    server = build_server(api, auth=auth_settings(URL, ISSUER), token_verifier=verifier)
    return McpEndpoint(server, URL, ISSUER), services


def event(method: str, path: str, body: Any = None, **headers: str) -> dict[str, Any]:
    return {
        "version": "2.0",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {**HEADERS, **headers},
        "requestContext": {"http": {"method": method, "path": path, "sourceIp": "198.51.100.7"}},
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-jwt", f"Bearer {token(aud='another-client')}"])
def test_a_request_without_a_valid_token_is_challenged_with_the_metadata_url(
    served: tuple[McpEndpoint, Services], authorization: str | None
) -> None:
    endpoint, _ = served
    headers = {"authorization": authorization} if authorization else {}
    answer = endpoint.handle(event("POST", "/mcp", call("search", {"query": "tides"}), **headers))
    assert answer["statusCode"] == 401
    challenge = answer["headers"]["www-authenticate"]
    expected = f'resource_metadata="https://{HOST}/.well-known/oauth-protected-resource/mcp"'
    assert challenge.startswith("Bearer ") and expected in challenge


def test_the_metadata_names_the_issuer_at_both_well_known_paths(served: tuple[McpEndpoint, Services]) -> None:
    endpoint, _ = served
    assert metadata_path(URL) == "/.well-known/oauth-protected-resource/mcp"
    for path in (metadata_path(URL), "/.well-known/oauth-protected-resource"):
        answer = endpoint.handle(event("GET", path))
        assert answer["statusCode"] == 200, answer
        assert json.loads(answer["body"]) == {
            "resource": URL,
            "authorization_servers": [ISSUER],
            "bearer_methods_supported": ["header"],
        }


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_only_post_is_served_on_the_endpoint(served: tuple[McpEndpoint, Services], method: str) -> None:
    endpoint, _ = served
    answer = endpoint.handle(event(method, "/mcp", authorization=f"Bearer {token()}"))
    assert (answer["statusCode"], answer["headers"]["allow"]) == (405, "POST")


def test_another_host_is_refused(served: tuple[McpEndpoint, Services]) -> None:
    endpoint, _ = served
    answer = endpoint.handle(
        event("POST", "/mcp", call("search", {"query": "t"}), host="evil.example", authorization=f"Bearer {token()}")
    )
    assert answer["statusCode"] == 421


def test_a_tool_runs_as_the_verified_caller_and_a_refusal_reads_as_the_apis(
    served: tuple[McpEndpoint, Services],
) -> None:
    endpoint, services = served
    bearer = f"Bearer {token(**{'custom:tenant_id': 'acme', 'cognito:groups': ['keepers']})}"
    found = endpoint.handle(event("POST", "/mcp", call("search", {"query": "tides", "k": 3}), authorization=bearer))
    assert found["statusCode"] == 200 and json.loads(found["body"])["result"]["structuredContent"] == {"passages": []}
    [(tenant, request, reader)] = services.search.calls
    assert (tenant, request.query, request.k, reader.groups) == ("acme", "tides", 3, frozenset({"keepers"}))

    fetch = call("fetch", {"document_id": "01JNOTYOURS"})
    refused = endpoint.handle(event("POST", "/mcp", fetch, authorization=bearer))
    result = json.loads(refused["body"])["result"]
    assert result["isError"] and "404 NOT_FOUND: no such document" in result["content"][0]["text"]

    no_tenant = f"Bearer {token()}"
    tenantless = endpoint.handle(event("POST", "/mcp", call("search", {"query": "t"}), authorization=no_tenant))
    result = json.loads(tenantless["body"])["result"]
    assert result["isError"] and "403 FORBIDDEN" in result["content"][0]["text"]
