"""The MCP server over streamable HTTP, served by the local stack (``McpUrl``), driven by the MCP
SDK's own client with each user's ID token: the access matrix (a reader of a group-restricted
document finds, lists and reads it; a user of the same tenant outside the group and a user of
another tenant never see it in any tool), a filtered search, the 401 challenge a request without a
valid token gets, and the protected-resource metadata naming the token issuer."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from local.client import OfflineClient
from tests.support.mcp import tool
from tests.support.tokens import TokenForge, bad_tokens

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
ANSWER_QUESTION = "What did the Argand burner draw through the flame from both sides?"
QUESTION = "Argand burner hollow circular wick"
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}},
}
JSON_RPC = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def session(url: str, token: str, work: Callable[[Client], Awaitable[Any]]) -> Any:
    """``work`` with the SDK's client of the endpoint at ``url``, sending ``token`` as the Bearer."""

    async def main() -> Any:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http,
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client,
        ):
            return await work(client)

    return anyio.run(main)


@pytest.fixture(scope="module")
def world(local_stack: dict[str, Any]) -> dict[str, Any]:
    api = local_stack["ApiUrl"]
    tenant = f"mcph-{uuid.uuid4().hex[:8]}"
    owner = OfflineClient(api_url=api, tenant_id=tenant, username="ana")
    restricted = owner.upload(
        REPO / "samples/lighthouses.pdf", metadata={"team": "lights"}, access={"groups": ["keepers"]}
    )
    markdown = owner.upload(REPO / "samples/formats/sourdough-starter.md", "text/markdown", metadata={"team": "bakery"})
    states = owner.wait_until_done([restricted, markdown], timeout_seconds=600)
    assert {state["status"] for state in states.values()} == {"READY"}, states
    users = {
        "reader": OfflineClient(api_url=api, tenant_id=tenant, username="kim", groups=("keepers",)),
        "outsider": OfflineClient(api_url=api, tenant_id=tenant, username="bob"),
        "other_tenant": OfflineClient(api_url=api, tenant_id=f"{tenant}-other", username="eve", groups=("keepers",)),
    }
    return {
        "url": local_stack["McpUrl"],
        "restricted": restricted,
        "tokens": {name: user.token() for name, user in users.items()},
    }


def test_the_endpoint_is_the_stacks_and_lists_the_read_only_tools(
    world: dict[str, Any], local_stack: dict[str, Any]
) -> None:
    assert world["url"] == local_stack["ApiUrl"].rstrip("/") + "/mcp"

    async def names(client: Client) -> list[str]:
        return sorted(t.name for t in (await client.list_tools()).tools)

    assert session(world["url"], world["tokens"]["reader"], names) == ["answer", "fetch", "list_documents", "search"]


def test_a_reader_finds_lists_and_reads_the_restricted_document_with_a_filter(world: dict[str, Any]) -> None:
    url, reader = world["url"], world["tokens"]["reader"]
    found = session(url, reader, tool("search", {"query": QUESTION, "k": 3, "mode": "bm25"})).structured_content
    top = found["passages"][0]
    assert top["citation"]["document_id"] == world["restricted"]
    assert top["citation"]["filename"] == "lighthouses.pdf" and top["citation"]["page_start"] == 2
    assert top["citation"]["boxes"], top

    lights = {"equals": {"key": "team", "value": "lights"}}
    filtered = session(url, reader, tool("search", {"query": "sourdough starter", "k": 5, "filter": lights}))
    assert filtered.structured_content["passages"]
    assert {p["citation"]["filename"] for p in filtered.structured_content["passages"]} == {"lighthouses.pdf"}

    listed = session(url, reader, tool("list_documents", {})).structured_content["documents"]
    assert sorted(d["filename"] for d in listed) == ["lighthouses.pdf", "sourdough-starter.md"]
    page = session(url, reader, tool("fetch", {"document_id": world["restricted"], "page": 2, "neighbours": 0}))
    assert not page.is_error, page.content
    assert [p["page"] for p in page.structured_content["pages"]] == [2]
    assert "Argand" in page.structured_content["pages"][0]["text"]


@pytest.mark.parametrize("user", ["outsider", "other_tenant"])
def test_a_user_outside_the_group_or_the_tenant_never_sees_it(world: dict[str, Any], user: str) -> None:
    url, token, restricted = world["url"], world["tokens"][user], world["restricted"]
    hits = session(url, token, tool("search", {"query": QUESTION, "k": 10})).structured_content["passages"]
    assert all(p["citation"]["document_id"] != restricted for p in hits)
    listed = session(url, token, tool("list_documents", {})).structured_content["documents"]
    assert restricted not in {d["document_id"] for d in listed}
    assert [d["filename"] for d in listed] == (["sourdough-starter.md"] if user == "outsider" else [])
    refused = session(url, token, tool("fetch", {"document_id": restricted, "page": 2}))
    assert refused.is_error and "404" in refused.content[0].text
    answered = session(url, token, tool("answer", {"query": ANSWER_QUESTION})).structured_content
    assert all(c["citation"]["document_id"] != restricted for c in answered["citations"])


def test_a_reader_gets_an_answer_citing_the_restricted_page(world: dict[str, Any]) -> None:
    answered = session(world["url"], world["tokens"]["reader"], tool("answer", {"query": ANSWER_QUESTION, "k": 3}))
    content = answered.structured_content
    assert content["supported"] and content["stand_in"] == "extractive-stand-in", content
    cited = content["citations"][0]["citation"]
    assert (cited["document_id"], cited["page_start"]) == (world["restricted"], 2)


def test_a_request_without_a_valid_token_is_challenged_with_the_metadata_url(
    world: dict[str, Any], token_forge: TokenForge
) -> None:
    url = world["url"]
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
    metadata_url = f"{origin}/.well-known/oauth-protected-resource/mcp"
    refused = {"no token": requests.post(url, json=INITIALIZE, headers=JSON_RPC, timeout=30)}
    for name, token in bad_tokens(token_forge).items():
        headers = {**JSON_RPC, "Authorization": f"Bearer {token}"}
        refused[name] = requests.post(url, json=INITIALIZE, headers=headers, timeout=30)
    for name, response in refused.items():
        assert response.status_code == 401, (name, response.text)
        challenge = response.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in challenge, (name, challenge)
    allowed = {**JSON_RPC, "Authorization": f"Bearer {world['tokens']['reader']}"}
    assert requests.post(url, json=INITIALIZE, headers=allowed, timeout=30).status_code == 200
    # Stateless: no stream to open, no session to end.
    for method in ("GET", "DELETE"):
        answer = requests.request(method, url, headers=allowed, timeout=30)
        assert (answer.status_code, answer.headers.get("Allow")) == (405, "POST"), method


def test_the_metadata_names_the_token_issuer_as_the_authorization_server(
    world: dict[str, Any], local_stack: dict[str, Any]
) -> None:
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(world["url"]))
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        response = requests.get(f"{origin}{path}", timeout=30)
        assert response.status_code == 200, (path, response.text)
        metadata = response.json()
        assert metadata["resource"] == world["url"]
        # Locally the identity provider stands in for the user pool (in AWS: cognito-idp.<region>/<pool>).
        assert metadata["authorization_servers"] == [local_stack["IdentityIssuer"]]
        assert metadata["bearer_methods_supported"] == ["header"]
