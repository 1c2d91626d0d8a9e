"""Fuzzing the HTTP API through the local stack's real server: every route and method, malformed and
deeply nested JSON, wrong types, oversized fields and bodies, odd ids and paths, unicode filenames,
and another tenant's documents. Nothing a client sends may produce a 5xx, and every 4xx from the
function has the one body ``{"error": {"code", "message"}}``.

API Gateway's own answers are told apart: a path no route matches is its bare 404
``{"message": "Not Found"}``, and CORS preflights (OPTIONS) are answered without the function.
Auth headers come from ``OfflineClient._headers()``, the one place that builds them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from rag_ingest.core.ids import new_document_id

from local.client import OfflineClient
from tools import openapi as openapi_tool

pytestmark = pytest.mark.integration
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
DOCUMENT = openapi_tool.generate()
ROUTE_PATTERNS = [re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(p)) + "$") for p in DOCUMENT["paths"]]


@pytest.fixture(scope="module")
def tenant_client(local_stack: dict[str, Any]) -> OfflineClient:
    return OfflineClient(api_url=local_stack["ApiUrl"].rstrip("/"), tenant_id=f"fuzz-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def other_client(local_stack: dict[str, Any]) -> OfflineClient:
    return OfflineClient(api_url=local_stack["ApiUrl"].rstrip("/"), tenant_id=f"other-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as http:
        yield http


def send(
    http: requests.Session,
    client: OfflineClient,
    method: str,
    path: str,
    body: str | bytes | None = None,
    *,
    content_type: str | None = "application/json",
) -> requests.Response:
    headers = client._headers()
    if content_type is None:
        headers.pop("Content-Type", None)
    else:
        headers["Content-Type"] = content_type
    # A prepared request keeps the path exactly as written (no normalisation of %2F, .., unicode).
    request = requests.Request(method, client.api_url, headers=headers, data=body).prepare()
    request.url = client.api_url + path
    return http.send(request, timeout=60)


def routed(path: str) -> bool:
    return any(pattern.fullmatch(path.split("?", 1)[0]) for pattern in ROUTE_PATTERNS)


def check(response: requests.Response, method: str, path: str) -> None:
    """Never 5xx; a 4xx from the function is the one error body."""
    where = f"{method} {path[:80]} -> {response.status_code} {response.text[:300]}"
    assert response.status_code < 500, where
    if response.status_code < 400 or method in ("HEAD", "OPTIONS"):
        return
    body = response.json()
    if not routed(path) and body == {"message": "Not Found"}:
        assert response.status_code == 404, where  # API Gateway's own: no route matched
        return
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, where
    assert isinstance(body["error"]["code"], str) and isinstance(body["error"]["message"], str), where
    assert "Traceback" not in response.text, where


def concrete(path: str) -> str:
    return path.replace("{document_id}", new_document_id())


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("path", sorted(DOCUMENT["paths"]))
def test_every_route_and_method(
    session: requests.Session, tenant_client: OfflineClient, path: str, method: str
) -> None:
    response = send(session, tenant_client, method, concrete(path))
    check(response, method, path)
    served = method.lower() in DOCUMENT["paths"][path]
    if not served and method not in ("HEAD", "OPTIONS"):
        assert response.status_code == 405, response.text
        assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
        assert set(response.headers["Allow"].split(", ")) == {m.upper() for m in DOCUMENT["paths"][path]}


def test_openapi_json_needs_no_token(session: requests.Session, tenant_client: OfflineClient) -> None:
    response = session.get(f"{tenant_client.api_url}/openapi.json", timeout=30)
    assert response.status_code == 200, response.text
    assert response.json() == DOCUMENT


BODY_ROUTES = ["/documents", "/search"]
MALFORMED = [
    "{{{",
    "not json",
    '{"filename": "a.pdf"',
    "",
    "[" * 5000 + "]" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,
    '{"filename": NaN}',
    '{"query": Infinity, "k": -Infinity}',
    "\x00\x01\x02",
    "\ufeff{}",
    '{"filename": "\\ud800.pdf"}',
    "null",
    "[]",
    "1e999999",
    '"just a string"',
]


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize("body", MALFORMED, ids=lambda b: repr(b[:16]))
def test_malformed_json_is_400(session: requests.Session, tenant_client: OfflineClient, path: str, body: str) -> None:
    response = send(session, tenant_client, "POST", path, body.encode("utf-8", "surrogatepass"))
    check(response, "POST", path)
    assert response.status_code == 400, response.text


WRONG = {
    "/documents": [
        {"filename": 5},
        {"filename": None},
        {"filename": ["a.pdf"]},
        {"filename": {"$ne": ""}},
        {"filename": True},
        {"filename": "a.pdf", "content_type": ["application/pdf"]},
        # The name decides nothing (a text file may be named a.pdf): types that are not accepted are refused.
        {"filename": "a.pdf", "content_type": "image/gif"},
        {"filename": "notes.doc", "content_type": "application/msword"},
        {"filename": "x" * 100_000 + ".pdf"},
        {"filename": "a.pdf", "tenant_id": "someone-else"},
        {"filename": "/" * 50},
    ],
    "/search": [
        {"query": ""},
        {"query": 5},
        {"query": ["x"]},
        {"query": "x" * 50_000},
        {"query": "x", "k": "5"},
        {"query": "x", "k": 10**30},
        {"query": "x", "k": -1},
        {"query": "x", "mode": "sql"},
        {"query": "x", "mode": None},
        {"query": {"match_all": {}}},
    ],
}


@pytest.mark.parametrize(("path", "body"), [(p, b) for p, bodies in WRONG.items() for b in bodies])
def test_wrong_types_and_oversized_fields_are_4xx(
    session: requests.Session, tenant_client: OfflineClient, path: str, body: dict[str, Any]
) -> None:
    response = send(session, tenant_client, "POST", path, json.dumps(body))
    check(response, "POST", path)
    assert 400 <= response.status_code < 500


@pytest.mark.parametrize("size", [70_000, 1_000_000, 5_000_000])
def test_oversized_bodies_are_413(session: requests.Session, tenant_client: OfflineClient, size: int) -> None:
    body = json.dumps({"query": "x" * size})
    response = send(session, tenant_client, "POST", "/search", body)
    check(response, "POST", "/search")
    assert response.status_code == 413


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "image/png"])
def test_other_content_types_never_5xx(
    session: requests.Session, tenant_client: OfflineClient, content_type: str | None
) -> None:
    response = send(session, tenant_client, "POST", "/documents", b"filename=a.pdf", content_type=content_type)
    check(response, "POST", "/documents")
    assert 400 <= response.status_code < 500


ODD_IDS = [
    "..",
    "%2E%2E",
    "%2F",
    "a%2Fb",
    "%00",
    "%25",
    "%C3%BC" * 20,
    "%F0%9F%93%84",
    "A" * 2048,
    "'%20OR%201=1--",
    # A ULID in lower case (fixed: xdist workers must collect the same ids).
    "01hzy8c6q3v5w7x9a1b3d5f7g9",
    "obj-" + "g" * 32,
]


@pytest.mark.parametrize("suffix", ["", "/retry", "/download"])
@pytest.mark.parametrize("odd_id", ODD_IDS, ids=lambda i: i[:24])
def test_odd_ids_are_404(session: requests.Session, tenant_client: OfflineClient, odd_id: str, suffix: str) -> None:
    for method in ("GET", "DELETE", "POST"):
        path = f"/documents/{odd_id}{suffix}"
        response = send(session, tenant_client, method, path)
        check(response, method, path)
        if odd_id in ("..", "%2E%2E") and not suffix and method == "GET":
            # /documents/.. is / (RFC 3986 dot segments; the client sends it so): the page, not the API.
            assert response.status_code == 404 or response.headers["Content-Type"].startswith("text/html")
            continue
        assert response.status_code in (404, 405), response.text


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/documents/",
        "/documents//retry",
        "/DOCUMENTS",
        "/documents/../search",
        "/documents/x/retry/again",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/search?" + "a=1&" * 500,
        "/documents?limit=1e9&cursor=%00",
        "/documents?limit=-1",
        "/documents?cursor=" + "A" * 3000,
        "/documents?cursor=eyJ0ZW5hbnRfaWQiOiJvdGhlciJ9",
    ],
)
def test_odd_paths_never_5xx(session: requests.Session, tenant_client: OfflineClient, path: str) -> None:
    for method in ("GET", "POST", "DELETE"):
        check(send(session, tenant_client, method, path), method, path)


@pytest.mark.parametrize(
    "filename",
    [
        "Отчёт за 2026.pdf",
        "报告.pdf",
        "📄 notes.pdf",
        "a\u202egnp.pdf",
        "../../etc/passwd.pdf",
        "con.pdf",
        "ü" * 150 + ".pdf",
    ],
)
def test_unicode_filenames_get_an_upload_with_a_safe_key(
    session: requests.Session, tenant_client: OfflineClient, filename: str
) -> None:
    response = send(session, tenant_client, "POST", "/documents", json.dumps({"filename": filename}))
    check(response, "POST", "/documents")
    assert response.status_code == 201, response.text
    key = response.json()["upload"]["fields"]["key"]
    assert key.startswith(f"raw/{tenant_client.tenant_id}/") and key.endswith(".pdf")
    assert re.fullmatch(r"raw/[A-Za-z0-9_-]+/[0-9A-Z]{26}/[A-Za-z0-9._ -]+", key), key


# -- another tenant ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ready_document(tenant_client: OfflineClient) -> str:
    document_id = tenant_client.upload(SAMPLES / "lighthouses.pdf")
    state = tenant_client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    assert state["status"] == "READY", state
    return document_id


def test_another_tenant_sees_nothing_of_it(
    session: requests.Session, tenant_client: OfflineClient, other_client: OfflineClient, ready_document: str
) -> None:
    for method, suffix in (("GET", ""), ("GET", "/download"), ("POST", "/retry"), ("DELETE", "")):
        path = f"/documents/{ready_document}{suffix}"
        response = send(session, other_client, method, path)
        check(response, method, path)
        assert response.status_code == 404, f"{method} {suffix}: {response.text}"
        assert response.json()["error"]["code"] == "NOT_FOUND"

    listing = send(session, other_client, "GET", "/documents?limit=100").json()
    assert ready_document not in {d["document_id"] for d in listing["items"]}

    query = json.dumps({"query": "lighthouse keeper lamp", "k": 10, "mode": "bm25"})
    mine = send(session, tenant_client, "POST", "/search", query).json()["passages"]
    assert ready_document in {p["document_id"] for p in mine}, "the owner finds it (the check below means something)"
    theirs = send(session, other_client, "POST", "/search", query).json()["passages"]
    assert ready_document not in {p["document_id"] for p in theirs}

    # The owner still has it, untouched by the other tenant's DELETE and retry.
    owner = send(session, tenant_client, "GET", f"/documents/{ready_document}").json()
    assert owner["status"] == "READY"
    link = send(session, tenant_client, "GET", f"/documents/{ready_document}/download").json()
    pdf = session.get(link["url"], timeout=30)
    assert pdf.status_code == 200 and pdf.content == (SAMPLES / "lighthouses.pdf").read_bytes()
    retry = send(session, tenant_client, "POST", f"/documents/{ready_document}/retry")
    assert retry.status_code == 409 and retry.json()["error"]["code"] == "NOT_RETRYABLE"
