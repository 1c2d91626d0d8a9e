"""The API function invoked with crafted API Gateway (payload 2.0) events: the one error body for
every 4xx/5xx, 403 for a token without a valid tenant, 400 for malformed bodies, 404/405 routing,
and the OpenAPI document (served without a token, checked in as docs/openapi.json).

Every request here is refused before the function touches AWS; the happy paths run against moto
in tests/integration/test_api_documents_moto.py and through the local stack in test_api_fuzz.py.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from rag_ingest.core.errors import TransientError
from rag_ingest.core.ids import new_document_id

from tests.support.aws import FakeLambdaContext, import_handler
from tools import openapi as openapi_tool

pytestmark = pytest.mark.unit
VALID_BODIES = {
    "/documents": {"filename": "report.pdf"},
    "/search": {"query": "revenue"},
    "/answer": {"query": "How did revenue change?"},
    "/documents/{document_id}": {"metadata": {"customer": "acme"}},
    "/webhooks": {"url": "https://hooks.example.com/in", "events": ["document.ready"]},
    "/sources": {"kind": "custom", "name": "wiki"},
    "/sources/{source_id}": {"name": "wiki"},
    "/sources/{source_id}/items/{external_id}": {"filename": "faq.md", "text": "# FAQ"},
}


# The routes whose body is not POSTed.
BODY_METHODS = {
    "/documents/{document_id}": "PATCH",
    "/sources/{source_id}": "PATCH",
    "/sources/{source_id}/items/{external_id}": "PUT",
}


@pytest.fixture(scope="module")
def api() -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:
        # Nothing listens there: a request that reached AWS would fail loudly, not leave the machine.
        env = {**openapi_tool.PLACEHOLDER_ENV, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
        env |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        for name, value in env.items():
            patch.setenv(name, value)
        yield import_handler("api", {})


def event(
    method: str,
    path: str,
    body: str | None = None,
    *,
    claims: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    base64_encoded: bool = False,
) -> dict[str, Any]:
    """An HTTP API payload 2.0 event as API Gateway sends it after the JWT authorizer."""
    request_context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "api",
        "domainName": "api.example",
        "domainPrefix": "api",
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "t"},
        "requestId": "request-1",
        "routeKey": f"{method} {path}",
        "stage": "$default",
        "time": "01/Dec/2026:05:00:00 +0000",
        "timeEpoch": 1796101200000,
    }
    if claims is not None:
        request_context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    result: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers if headers is not None else {"content-type": "application/json"},
        "requestContext": request_context,
        "isBase64Encoded": base64_encoded,
    }
    if body is not None:
        result["body"] = body
    if query:
        result["queryStringParameters"] = query
    return result


def call(api: ModuleType, *args: Any, tenant: Any = "acme", **kwargs: Any) -> tuple[int, dict[str, str], Any]:
    kwargs.setdefault("claims", {"sub": "user-1", "custom:tenant_id": tenant} if tenant is not None else None)
    response = api.handler(event(*args, **kwargs), FakeLambdaContext())
    return response["statusCode"], response.get("headers") or {}, json.loads(response["body"] or "null")


def assert_error(body: Any, code: str) -> str:
    """The one error shape, exactly: {"error": {"code", "message"}}."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return str(body["error"]["message"])


def operations() -> list[tuple[str, str]]:
    document = openapi_tool.generate()
    return [(method.upper(), path) for path, item in document["paths"].items() for method in item]


def concrete(path: str) -> str:
    ids = {
        "{document_id}": new_document_id(),
        "{endpoint_id}": "wh_0123456789abcdef",
        "{source_id}": "src_01J0000000000000000000000",
        "{sync_id}": "sync_01J0000000000000000000000",
        "{external_id}": "kb-42",
    }
    for name, value in ids.items():
        path = path.replace(name, value)
    return path


# -- the tenant ------------------------------------------------------------------------------------
INVALID_TENANTS = [None, "", "a b", "x" * 65, "../globex", "acme/other", "ümlaut", 5, ["acme"]]


@pytest.mark.parametrize(("method", "path"), [op for op in operations() if op[1] != "/openapi.json"])
@pytest.mark.parametrize("tenant", INVALID_TENANTS, ids=repr)
def test_every_route_refuses_a_token_without_a_valid_tenant(
    api: ModuleType, method: str, path: str, tenant: Any
) -> None:
    claims = {"sub": "user-1"} if tenant is None else {"sub": "user-1", "custom:tenant_id": tenant}
    body = json.dumps(VALID_BODIES[path]) if path in VALID_BODIES else None
    # A required query parameter is validated before the tenant: give the valid one.
    query = {"documents": "keep"} if (method, path) == ("DELETE", "/sources/{source_id}") else None
    status, _, payload = call(api, method, concrete(path), body, claims=claims, query=query)
    assert status == 403
    assert_error(payload, "FORBIDDEN")


def test_a_request_without_any_claims_is_forbidden(api: ModuleType) -> None:
    status, _, payload = call(api, "GET", "/documents", tenant=None)
    assert status == 403
    assert_error(payload, "FORBIDDEN")


# -- bodies ----------------------------------------------------------------------------------------
MALFORMED = [
    "{{{",
    "not json",
    '{"filename": "a.pdf"',
    "[" * 5000 + "]" * 5000,
    '{"a":' * 1000 + "1" + "}" * 1000,
    '{"filename": NaN}',
    '{"query": Infinity}',
    "\x00",
    "'single quotes'",
]


@pytest.mark.parametrize("path", sorted(VALID_BODIES))
@pytest.mark.parametrize("body", MALFORMED, ids=lambda b: repr(b[:20]))
def test_malformed_json_is_400(api: ModuleType, path: str, body: str) -> None:
    status, _, payload = call(api, BODY_METHODS.get(path, "POST"), concrete(path), body)
    assert status == 400
    assert assert_error(payload, "INVALID_REQUEST") == "the body is not valid JSON"


WRONG_TYPES = {
    "/documents": [
        "",
        "[]",
        "null",
        '"report.pdf"',
        "5",
        '{"filename": 5}',
        '{"filename": ["a.pdf"]}',
        '{"filename": {"name": "a.pdf"}}',
        '{"filename": null}',
        '{"filename": "a.pdf", "content_type": 5}',
        '{"filename": "a.pdf", "unexpected": 1}',
        json.dumps({"filename": "x" * 201 + ".pdf"}),
        json.dumps({"filename": "///"}),
    ],
    "/search": [
        "{}",
        '{"query": 1}',
        '{"query": "x", "k": "5"}',
        '{"query": "x", "k": 1.5}',
        '{"query": "x", "k": true}',
        '{"query": "x", "k": 0}',
        '{"query": "x", "k": 51}',
        '{"query": "x", "mode": "nope"}',
        '{"query": "   "}',
        json.dumps({"query": "x" * 1001}),
        '{"query": "x", "tenant_id": "globex"}',
    ],
}


@pytest.mark.parametrize(("path", "body"), [(p, b) for p, bodies in WRONG_TYPES.items() for b in bodies])
def test_wrong_shapes_are_400_naming_the_field(api: ModuleType, path: str, body: str) -> None:
    status, _, payload = call(api, "POST", path, body)
    assert status == 400
    message = assert_error(payload, "INVALID_REQUEST")
    assert "Traceback" not in message and "pydantic" not in message.lower()


@pytest.mark.parametrize("body", ["[]", '["query"]', "null", '"text"', "5", ""])
def test_a_body_that_is_not_an_object_says_so(api: ModuleType, body: str) -> None:
    status, _, payload = call(api, "POST", "/search", body)
    assert status == 400
    message = assert_error(payload, "INVALID_REQUEST")
    assert message in ("the body must be a JSON object", "a JSON object body is required")


def test_oversized_body_is_413(api: ModuleType) -> None:
    status, _, payload = call(api, "POST", "/search", json.dumps({"query": "x" * 70_000}))
    assert status == 413
    assert_error(payload, "PAYLOAD_TOO_LARGE")


def test_a_body_that_is_not_json_by_type_is_415(api: ModuleType) -> None:
    status, _, payload = call(api, "POST", "/documents", '{"filename": "a.pdf"}', headers={"content-type": "text/csv"})
    assert status == 415
    assert_error(payload, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize("raw", ["!!!not base64", base64.b64encode(b'\xff\xfe{"filename"').decode()])
def test_undecodable_bodies_are_400(api: ModuleType, raw: str) -> None:
    status, _, payload = call(api, "POST", "/documents", raw, base64_encoded=True)
    assert status == 400
    assert_error(payload, "INVALID_REQUEST")


# -- routing -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/documents", "GET, POST"),
        ("PATCH", "/documents", "GET, POST"),
        ("DELETE", "/documents", "GET, POST"),
        ("HEAD", "/documents", "GET, POST"),
        ("POST", "/documents/{document_id}", "DELETE, GET, PATCH"),
        ("GET", "/documents/{document_id}/retry", "POST"),
        ("DELETE", "/documents/{document_id}/download", "GET"),
        ("GET", "/search", "POST"),
        ("POST", "/openapi.json", "GET"),
    ],
)
def test_unknown_method_on_a_known_path_is_405_with_allow(
    api: ModuleType, method: str, path: str, allowed: str
) -> None:
    status, headers, payload = call(api, method, concrete(path))
    assert status == 405
    assert headers["Allow"] == allowed
    assert_error(payload, "METHOD_NOT_ALLOWED")


@pytest.mark.parametrize("path", ["/", "/nope", "/documents/a/b/c", "/documents/x/retry/again", "/search/x"])
def test_unknown_path_is_404(api: ModuleType, path: str) -> None:
    status, _, payload = call(api, "GET", path)
    assert status == 404
    assert_error(payload, "NOT_FOUND")


# A well-formed id in lower case (the system issues upper case); fixed, so every pytest-xdist worker
# collects the same test ids.
LOWER_CASE_ID = "01JDX3ZK5Q8W7N2M4P6R8T0V2X".lower()


@pytest.mark.parametrize("suffix", ["", "/retry", "/download"])
@pytest.mark.parametrize("odd_id", ["..", "%2F", "%2e%2e", "ü" * 26, "A" * 2048, "a'b\"c", LOWER_CASE_ID])
def test_ids_the_system_never_issues_are_404_without_a_table_read(api: ModuleType, odd_id: str, suffix: str) -> None:
    methods = {"": ("GET", "DELETE"), "/retry": ("POST",), "/download": ("GET",)}[suffix]
    for method in methods:
        status, _, payload = call(api, method, f"/documents/{odd_id}{suffix}")
        assert status == 404, (method, payload)
        assert_error(payload, "NOT_FOUND")


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"limit": "0"}, "INVALID_REQUEST"),
        ({"limit": "101"}, "INVALID_REQUEST"),
        ({"limit": "ten"}, "INVALID_REQUEST"),
        ({"cursor": "garbage!!"}, "INVALID_CURSOR"),
        ({"cursor": "x" * 2000}, "INVALID_REQUEST"),
    ],
)
def test_bad_list_parameters_are_400(api: ModuleType, query: dict[str, str], code: str) -> None:
    status, _, payload = call(api, "GET", "/documents", query=query)
    assert status == 400
    assert_error(payload, code)


# -- failures of the function itself -------------------------------------------------------------
def test_an_unexpected_error_is_500_without_internals(api: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*_: Any) -> Any:
        raise RuntimeError("secret-internal-detail at /var/task/rag_ingest/documents/service.py")

    monkeypatch.setattr(api.documents.get_services().documents, "get", explode)
    status, _, payload = call(api, "GET", f"/documents/{new_document_id()}")
    assert status == 500
    message = assert_error(payload, "INTERNAL_ERROR")
    assert "secret" not in message and "/var/task" not in message


def test_a_transient_failure_is_503_with_retry_after(api: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def throttled(*_: Any) -> Any:
        raise TransientError("ProvisionedThroughputExceededException")

    monkeypatch.setattr(api.documents.get_services().documents, "get", throttled)
    status, headers, payload = call(api, "GET", f"/documents/{new_document_id()}")
    assert status == 503 and headers["Retry-After"]
    assert_error(payload, "SERVICE_UNAVAILABLE")


# -- the OpenAPI document ------------------------------------------------------------------------
def test_openapi_document_is_served_without_a_token(api: ModuleType) -> None:
    status, _, document = call(api, "GET", "/openapi.json", tenant=None, claims=None)
    assert status == 200
    assert document["openapi"].startswith("3.")
    assert document == json.loads(openapi_tool.DOCUMENT.read_text())
    assert document["paths"]["/openapi.json"]["get"]["security"] == []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert "422" not in operation["responses"], f"{method} {path}: validation errors answer 400"
            if path != "/openapi.json":
                assert "security" not in operation  # the document-wide bearer token applies


def test_checked_in_openapi_document_is_current() -> None:
    assert openapi_tool.main(["--check"]) == 0, "docs/openapi.json is stale: run `make openapi`"


def test_every_error_response_in_the_document_is_the_one_error_body() -> None:
    document = openapi_tool.generate()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) < 400 or int(status) in (401, 429):  # 401/429 come from API Gateway itself
                    continue
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, f"{method} {path} {status}"


# -- metadata and filters: 400 with the JSON path of the bad part, before any AWS call -----------
@pytest.mark.parametrize(
    ("metadata", "path"),
    [
        ({"filename": "x"}, "metadata.filename"),
        ({"created_at": "2024-01-01"}, "metadata.created_at"),
        ({"embedding": 1}, "metadata.embedding"),
        ({"ok": {"nested": 1}}, "metadata.ok"),
        ({"tags": ["a"] * 51}, "metadata.tags"),
        ({f"k{i}": 1 for i in range(33)}, "metadata"),
    ],
)
def test_bad_metadata_is_400_naming_the_key(api: ModuleType, metadata: dict[str, Any], path: str) -> None:
    status, _, body = call(api, "POST", "/documents", json.dumps({"filename": "c.pdf", "metadata": metadata}))
    assert status == 400
    assert assert_error(body, "INVALID_REQUEST").startswith(f"{path}: ")


def test_metadata_that_is_not_an_object_is_400(api: ModuleType) -> None:
    status, _, body = call(api, "POST", "/documents", json.dumps({"filename": "c.pdf", "metadata": ["a"]}))
    assert status == 400
    assert "metadata" in assert_error(body, "INVALID_REQUEST")


@pytest.mark.parametrize(
    ("where", "path"),
    [
        (
            {"andAll": [{"equals": {"key": "a", "value": 1}}, {"equals": {"key": "A", "value": 1}}]},
            "filter.andAll[1].equals.key",
        ),
        ({"like": {"key": "a", "value": 1}}, "filter.like"),
        ({"greaterThan": {"key": "a", "value": "tomorrow"}}, "filter.greaterThan.value"),
        ({"orAll": [{"equals": {"key": "a", "value": 1}}]}, "filter.orAll"),
        ({"in": {"key": "a", "value": ["x", [1]]}}, "filter.in.value[1]"),
    ],
)
def test_a_bad_search_filter_is_400_naming_its_json_path(api: ModuleType, where: dict[str, Any], path: str) -> None:
    status, _, body = call(api, "POST", "/search", json.dumps({"query": "rent", "filter": where}))
    assert status == 400
    assert assert_error(body, "INVALID_REQUEST").startswith(f"{path}: ")


@pytest.mark.parametrize("rerank", ["true", 1, {"on": True}])
def test_a_search_rerank_that_is_not_a_boolean_is_400(api: ModuleType, rerank: Any) -> None:
    status, _, body = call(api, "POST", "/search", json.dumps({"query": "rent", "rerank": rerank}))
    assert status == 400
    assert "rerank" in assert_error(body, "INVALID_REQUEST")


def test_a_too_deep_or_too_large_search_filter_is_400(api: ModuleType) -> None:
    deep: dict[str, Any] = {"equals": {"key": "a", "value": 1}}
    for _ in range(5):
        deep = {"andAll": [deep, {"equals": {"key": "b", "value": 1}}]}
    status, _, body = call(api, "POST", "/search", json.dumps({"query": "rent", "filter": deep}))
    assert status == 400 and "nested deeper than 5 levels" in assert_error(body, "INVALID_REQUEST")
    wide = {"orAll": [{"equals": {"key": "a", "value": i}} for i in range(101)]}
    status, _, body = call(api, "POST", "/search", json.dumps({"query": "rent", "filter": wide}))
    assert status == 400 and "at most 100" in assert_error(body, "INVALID_REQUEST")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "filter: not valid JSON"),
        ('{"equals": {"key": "page", "value": 2}}', "filter.equals.key: "),
        ('{"equals": {"key": "customer"}}', "filter.equals.value: missing"),
    ],
)
def test_a_bad_listing_filter_is_400(api: ModuleType, raw: str, message: str) -> None:
    status, _, body = call(api, "GET", "/documents", query={"filter": raw})
    assert status == 400
    assert assert_error(body, "INVALID_REQUEST").startswith(message)
