"""One test per finding of ``make fuzz`` fixed in the API function (docs/fuzzing.md): route parameters
arrive percent-decoded, a form body is 415 (a multipart one without a boundary was a 500), DELETE
/sources/{id} requires its documents= choice, the document's OpenAPI links name real operations, and
the hooks' cross-tenant rule tells an echoed id from a disclosed one."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from rag_ingest.core.access import NAME_PATTERN, AccessError, _names

from tests.support.aws import FakeLambdaContext, import_handler
from tests.unit.test_api_handler import assert_error, event
from tools import openapi as openapi_tool

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def api() -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:
        env = {**openapi_tool.PLACEHOLDER_ENV, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
        env |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        for name, value in env.items():
            patch.setenv(name, value)
        yield import_handler("api", {})


class RecordingSources:
    """What the source routes hand the service (the decoding under test happens before it)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def put_item(self, tenant_id: str, source_id: str, external_id: str, request: Any) -> dict[str, str]:
        self.calls.append(("put_item", (source_id, external_id)))
        return {"external_id": external_id, "document_id": "01HZY8C6Q3V5W7X9A1B3D5F7G9", "outcome": "added"}

    def delete(self, tenant_id: str, source_id: str, documents: str | None) -> None:
        self.calls.append(("delete", (source_id, documents)))


@pytest.fixture
def sources(api: ModuleType, monkeypatch: pytest.MonkeyPatch) -> RecordingSources:
    recorder = RecordingSources()
    monkeypatch.setattr(api.sources, "get_sources", lambda: recorder)  # the route module of this import
    return recorder


def call(api: ModuleType, method: str, path: str, body: str | None = None, **kwargs: Any) -> tuple[int, Any]:
    claims = {"sub": "user-1", "custom:tenant_id": "acme"}
    response = api.handler(event(method, path, body, claims=claims, **kwargs), FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"] or "null")


def test_route_parameters_are_percent_decoded(api: ModuleType, sources: RecordingSources) -> None:
    # rawPath keeps the client's encoding: the item's id is "café menu/2", not "caf%C3%A9%20menu%2F2".
    status, body = call(api, "PUT", "/sources/src_1/items/caf%C3%A9%20menu%2F2", json.dumps({"filename": "a.txt"}))
    assert status == 200, body
    assert sources.calls == [("put_item", ("src_1", "café menu/2"))]
    assert body["external_id"] == "café menu/2"


@pytest.mark.parametrize(
    "media_type", ["multipart/form-data", "multipart/form-data; charset=utf-8", "application/x-www-form-urlencoded"]
)
def test_a_form_body_is_415_not_a_500(api: ModuleType, media_type: str) -> None:
    status, body = call(api, "POST", "/search", '{"query": "x"}', headers={"content-type": media_type})
    assert status == 415
    assert_error(body, "UNSUPPORTED_MEDIA_TYPE")


def test_deleting_a_source_requires_the_documents_choice(api: ModuleType, sources: RecordingSources) -> None:
    status, body = call(api, "DELETE", "/sources/src_1")
    assert status == 400 and "documents" in assert_error(body, "INVALID_REQUEST")
    status, _ = call(api, "DELETE", "/sources/src_1", query={"documents": "keep"})
    assert status == 204
    assert sources.calls == [("delete", ("src_1", "keep"))]
    parameter = next(
        p
        for p in openapi_tool.generate()["paths"]["/sources/{source_id}"]["delete"]["parameters"]
        if p["name"] == "documents"
    )
    assert parameter["required"] is True and parameter["schema"]["enum"] == ["delete", "keep"]


def test_links_chain_creation_to_reads_changes_and_deletion() -> None:
    document = openapi_tool.generate()
    operations = {op["operationId"]: op for item in document["paths"].values() for op in item.values()}
    links = operations["createDocument"]["responses"]["201"]["links"]
    assert {link["operationId"] for link in links.values()} >= {"getDocument", "updateDocument", "deleteDocument"}
    for operation in operations.values():
        for response in operation["responses"].values():
            for link in response.get("links", {}).values():
                target = operations[link["operationId"]]
                names = {p["name"] for p in target.get("parameters", [])}
                assert {name.removeprefix("header.") for name in link["parameters"]} <= names, link


@pytest.mark.parametrize("name", ["", " ", "\t", "a\x01", "a\n"])
def test_the_access_name_schema_refuses_what_the_validator_refuses(name: str) -> None:
    with pytest.raises(AccessError):
        _names([name], "access.users")
    assert re.fullmatch(NAME_PATTERN, name) is None


def test_the_tenant_check_tells_an_echoed_id_from_a_disclosed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from tools import fuzz_hooks

    monkeypatch.setattr(fuzz_hooks, "SECRETS", ("01HZYB0000000000000000000B",))
    monkeypatch.setattr(fuzz_hooks, "OWNED", frozenset({"01HZYB0000000000000000000B"}))
    body = '{"error": {"code": "NOT_FOUND", "message": "no document 01HZYB0000000000000000000B"}}'
    asked = "http://api/documents/01HZYB0000000000000000000B"
    assert fuzz_hooks.leaks(404, {"documents", "01HZYB0000000000000000000B"}, body, asked) == []
    assert fuzz_hooks.leaks(200, {"documents", "01HZYB0000000000000000000B"}, "{}", asked) != []
    assert fuzz_hooks.leaks(200, {"documents"}, '{"items": ["01HZYB0000000000000000000B"]}', "http://api/documents")


def test_the_fronts_414_is_accepted_and_the_apis_own_refusals_are_not() -> None:
    from tools import fuzz_hooks

    assert fuzz_hooks.accepted_reason("UndocumentedStatusCode", "GET", 414, None) is not None
    refusal = {"error": {"code": "INVALID_REQUEST", "message": "filter: too long"}}
    assert fuzz_hooks.accepted_reason("UndocumentedStatusCode", "GET", 414, refusal) is None
    assert fuzz_hooks.accepted_reason("UndocumentedStatusCode", "GET", 500, None) is None


def test_a_204_has_no_json_content_type(api: ModuleType, sources: RecordingSources) -> None:
    # An empty body labelled application/json is not JSON (schemathesis ST109).
    response = api.handler(
        event(
            "DELETE",
            "/sources/src_1",
            None,
            claims={"sub": "u", "custom:tenant_id": "acme"},
            query={"documents": "keep"},
        ),
        FakeLambdaContext(),
    )
    assert response["statusCode"] == 204 and not response["body"]
    assert "content-type" not in {name.lower() for name in response.get("headers") or {}}


def test_no_204_is_documented_with_a_body() -> None:
    for item in openapi_tool.generate()["paths"].values():
        for operation in item.values():
            assert "content" not in operation["responses"].get("204", {}), operation["operationId"]
