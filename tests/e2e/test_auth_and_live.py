"""Sign-in, token verification and live status on the real local stack (issue 8, local side).

Every route of the template's HTTP API is authorized as API Gateway's JWT authorizer does it;
the live-status WebSocket pushes a document's transitions to its tenant and to no one else; the
page's /config.json has the contract's local shape.
"""

from __future__ import annotations

import json
import queue
import re
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from local.runtime.settings import REPO_ROOT, stack_name_from_cdk_json
from tests.support.live import live_socket, refusal_status
from tests.support.tokens import TokenForge, bad_tokens

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def template_routes() -> dict[str, str]:
    """Route key -> AuthorizationType of the synthesized template's HTTP API."""
    template = json.loads((REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json").read_text())
    resources = template["Resources"]
    http_apis = {
        logical_id
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::ApiGatewayV2::Api" and resource["Properties"].get("ProtocolType") == "HTTP"
    }
    return {
        resource["Properties"]["RouteKey"]: str(resource["Properties"].get("AuthorizationType", "NONE"))
        for resource in resources.values()
        if resource["Type"] == "AWS::ApiGatewayV2::Route" and resource["Properties"]["ApiId"].get("Ref") in http_apis
    }


ROUTES = template_routes()
JWT_ROUTES = sorted(key for key, kind in ROUTES.items() if kind == "JWT")
NONE_ROUTES = sorted(key for key, kind in ROUTES.items() if kind == "NONE")


def call(api_url: str, route_key: str, headers: dict[str, str] | None = None) -> requests.Response:
    method, _, path = route_key.partition(" ")
    path = re.sub(r"\{[^}]+\}", "01ARZ3NDEKTSV4RRFFQ69G5FAV", path)
    bodies: dict[str, Any] = {
        "POST /documents": {"filename": "a.pdf", "content_type": "application/pdf"},
        "POST /search": {"query": "q"},
    }
    body = bodies.get(route_key)
    return requests.request(method, f"{api_url}{path}", headers=headers or {}, json=body, timeout=60)


def test_the_template_has_jwt_routes() -> None:
    assert {"POST /documents", "GET /documents/{document_id}", "POST /search"} <= set(JWT_ROUTES)


@pytest.mark.parametrize("route_key", JWT_ROUTES)
def test_every_jwt_route_refuses_requests_without_a_valid_token(
    route_key: str, local_stack: dict[str, Any], token_forge: TokenForge
) -> None:
    api_url = local_stack["ApiUrl"]
    refusals = {"no token": {}, "X-Tenant-Id only": {"X-Tenant-Id": "demo"}}
    refusals |= {kind: {"Authorization": f"Bearer {token}"} for kind, token in bad_tokens(token_forge).items()}
    for kind, headers in refusals.items():
        response = call(api_url, route_key, headers)
        assert response.status_code == 401, kind
        if not route_key.startswith("HEAD "):  # a HEAD answer has no body
            assert response.json() == {"message": "Unauthorized"}, kind
        assert response.headers["WWW-Authenticate"].startswith("Bearer"), kind


@pytest.mark.parametrize("route_key", JWT_ROUTES)
def test_a_valid_token_reaches_the_function(route_key: str, client: OfflineClient) -> None:
    response = call(client.api_url, route_key, client._headers())
    # The function answered (created, listed, searched, or its own error: no such document, a
    # method the route does not allow), not the authorizer.
    assert response.status_code not in (401, 403), response.text
    if route_key.startswith("HEAD "):
        return  # no body
    assert response.status_code < 300 or "error" in response.json(), response.text


# The MCP endpoint has no gateway authorizer: its function verifies the token and answers 401 with
# the protected-resource metadata (docs/decisions/mcp-over-http.md; tests/e2e/test_mcp_http_on_stack.py).
FUNCTION_VERIFIED = [key for key in NONE_ROUTES if key.split(" ", 1)[1] == "/mcp"]


def test_the_openapi_and_mcp_routes_are_the_ones_without_a_gateway_authorizer() -> None:
    public = [key for key in NONE_ROUTES if key not in FUNCTION_VERIFIED]
    assert [key for key in public if "/.well-known/" not in key] == ["GET /openapi.json"]
    assert FUNCTION_VERIFIED, NONE_ROUTES


@pytest.mark.parametrize("route_key", [key for key in NONE_ROUTES if key not in FUNCTION_VERIFIED])
def test_routes_without_authorization_need_no_token(route_key: str, local_stack: dict[str, Any]) -> None:
    response = call(local_stack["ApiUrl"], route_key)
    assert response.status_code not in (401, 403), response.text


def test_an_expired_token_from_the_provider_is_refused(client: OfflineClient) -> None:
    # exp is in whole seconds (as Cognito's): a token of 2 s issued at x.99 lives 1.01 s. Signing in
    # at the start of a second gives the fresh request the whole lifetime.
    time.sleep(1 - time.time() % 1)
    token, lifetime = client.sign_in(expires_in=2)
    assert lifetime == 2
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    fresh = requests.post(f"{client.api_url}/search", json={"query": "q"}, headers=headers, timeout=30)
    assert fresh.status_code == 200, fresh.text
    time.sleep(3.1)
    expired = requests.post(f"{client.api_url}/search", json={"query": "q"}, headers=headers, timeout=30)
    assert (expired.status_code, expired.json()) == (401, {"message": "Unauthorized"})


def test_a_token_with_an_invalid_tenant_is_forbidden(local_stack: dict[str, Any], token_forge: TokenForge) -> None:
    for tenant in ("a/b", "", "x" * 65, None):
        token = token_forge.token(**{"custom:tenant_id": tenant})
        response = call(local_stack["ApiUrl"], "GET /documents/{document_id}", {"Authorization": f"Bearer {token}"})
        assert response.status_code == 403, (tenant, response.text)
        assert response.json()["error"]["code"]


def test_the_identity_provider_publishes_its_configuration_and_keys(client: OfflineClient) -> None:
    issuer = f"{client.api_url}/_local/oidc"
    configuration = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()
    assert configuration["issuer"] == issuer and configuration["jwks_uri"] == f"{issuer}/jwks.json"
    [key] = requests.get(configuration["jwks_uri"], timeout=10).json()["keys"]
    # Also where Cognito publishes it (the WebSocket authorizer fetches it there).
    assert requests.get(f"{issuer}/.well-known/jwks.json", timeout=10).json() == {"keys": [key]}
    assert (key["kty"], key["alg"], key["use"]) == ("RSA", "RS256", "sig")

    token = client.token()
    header = jwt.get_unverified_header(token)
    assert (header["alg"], header["kid"]) == ("RS256", key["kid"])
    claims = jwt.decode(
        token,
        jwt.PyJWK(key).key,
        algorithms=["RS256"],
        audience=jwt.decode(token, options={"verify_signature": False})["aud"],
        issuer=issuer,
    )
    assert claims["token_use"] == "id" and claims["custom:tenant_id"] == client.tenant_id
    assert claims["cognito:username"] == client.username and claims["email"] and claims["sub"]
    assert claims["exp"] - claims["iat"] == 3600


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"username": "ann", "tenant_id": "a b"}, "INVALID_TENANT"),
        ({"username": "ann", "tenant_id": "x" * 65}, "INVALID_TENANT"),
        ({"username": "ann"}, "INVALID_TENANT"),
        ({"username": "", "tenant_id": "acme"}, "INVALID_USERNAME"),
        ({"username": "ann", "tenant_id": "acme", "expires_in": 7200}, "INVALID_REQUEST"),
        ("not json", "INVALID_REQUEST"),
        ([], "INVALID_REQUEST"),
    ],
)
def test_the_token_endpoint_refuses_bad_requests_with_400(body: Any, code: str, local_stack: dict[str, Any]) -> None:
    data = body if isinstance(body, str) else json.dumps(body)
    response = requests.post(f"{local_stack['ApiUrl']}/_local/oidc/token", data=data, timeout=10)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == code


def test_config_json_has_the_local_shape(local_stack: dict[str, Any]) -> None:
    api_url = local_stack["ApiUrl"]
    response = requests.get(f"{api_url}/config.json", timeout=10)
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
    cdk = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]["rag-ingest"]
    max_bytes = (cdk.get("upload") or {}).get("maxUploadBytes", 52428800)
    assert response.json() == {
        "apiUrl": api_url,
        "maxUploadBytes": max_bytes,
        "live": {"kind": "websocket", "url": f"{api_url.replace('http://', 'ws://')}/_local/live"},
        "auth": {"kind": "local", "tokenUrl": f"{api_url}/_local/oidc/token"},
    }


def _preflight(client: OfflineClient, origin: str) -> requests.Response:
    return requests.options(
        f"{client.api_url}/documents",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
        timeout=10,
    )


def test_cors_follows_the_template_and_the_local_page_origin(client: OfflineClient) -> None:
    configured = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]["rag-ingest"]["allowedOrigins"]
    # An origin nobody configured (cdk.json lists none by default: no localhost reaches production).
    foreign = "http://localhost:8000"
    assert foreign not in configured
    assert "Access-Control-Allow-Origin" not in _preflight(client, foreign).headers
    for origin in (*configured, client.api_url):
        preflight = _preflight(client, origin)
        assert preflight.status_code == 204
        assert preflight.headers["Access-Control-Allow-Origin"] == origin
        assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
        assert "x-tenant-id" not in preflight.headers["Access-Control-Allow-Headers"].lower()
        answer = requests.post(
            f"{client.api_url}/search", json={"query": "q"}, headers={**client._headers(), "Origin": origin}, timeout=30
        )
        assert answer.headers["Access-Control-Allow-Origin"] == origin
    no_origin = client.request("POST", "/search", {"query": "q"})
    assert "Access-Control-Allow-Origin" not in no_origin.headers
    evil = requests.options(
        f"{client.api_url}/documents",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert evil.status_code == 204 and "Access-Control-Allow-Origin" not in evil.headers
    headers = {**client._headers(), "Origin": "https://evil.example"}
    answer = requests.post(f"{client.api_url}/search", json={"query": "q"}, headers=headers, timeout=30)
    assert "Access-Control-Allow-Origin" not in answer.headers


# -- live status --------------------------------------------------------------------------------


def test_live_status_pushes_every_transition_to_the_tenant_only(stack_process: OfflineStackProcess) -> None:
    api_url = stack_process.outputs["ApiUrl"]
    owner = OfflineClient(api_url, tenant_id=f"live-{uuid.uuid4().hex[:8]}")
    other = OfflineClient(api_url, tenant_id=f"live-other-{uuid.uuid4().hex[:8]}")
    with live_socket(owner.live_url()) as updates, live_socket(other.live_url()) as others:
        assert updates.connected and others.connected
        document_id = owner.upload(SAMPLES / "sourdough.pdf")
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 300
        while not seen or seen[-1]["status"] not in ("READY", "FAILED"):
            assert time.monotonic() < deadline, f"no READY pushed; seen {[d['status'] for d in seen]}"
            try:
                message = updates.next(timeout=5)
            except queue.Empty:
                continue
            assert message["type"] == "document.updated"
            assert message["document"]["document_id"] == document_id
            seen.append(message["document"])
        # The last pushed document is exactly what GET /documents/{id} answers.
        assert seen[-1] == owner.document(document_id)
        time.sleep(2)
        leaked = others.drain()
        # The connections stay open while nothing is sent (the SSE stream needed keep-alives for that).
        still_open = updates.connected and others.connected

    statuses = [document["status"] for document in seen]
    assert statuses[-1] == "READY", statuses
    assert statuses.index("QUEUED") < statuses.index("PROCESSING") < statuses.index("READY")
    stages = [document["stage"] for document in seen if document["status"] == "PROCESSING"]
    assert {"VALIDATE", "PARSE", "CHUNK", "EMBED", "INDEX", "FINALIZE"} <= set(stages), stages
    assert leaked == [], "another tenant received this tenant's updates"
    assert still_open, "a live connection closed"


def test_live_status_refuses_bad_tokens(local_stack: dict[str, Any], token_forge: TokenForge) -> None:
    live = local_stack["LiveUrl"]
    assert live.startswith("ws://") and live.endswith("/_local/live")
    for kind, token in {"no token": "", **bad_tokens(token_forge)}.items():
        # The template's $connect authorizer: 401 without the token or for one it cannot verify.
        assert refusal_status(f"{live}?token={token}" if token else live) == 401, kind
    invalid_tenant = token_forge.token(**{"custom:tenant_id": "not a tenant"})
    assert refusal_status(f"{live}?token={invalid_tenant}") == 403
    # A plain request is no upgrade.
    plain = requests.get(live.replace("ws://", "http://", 1), params={"token": token_forge.token()}, timeout=10)
    assert (plain.status_code, plain.json()) == (426, {"message": "a WebSocket upgrade is expected"})
