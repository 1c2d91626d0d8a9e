"""The webhook routes through the API function (an in-memory store behind the service): status codes,
the secret shown only on create and rotate, clear 400 codes, another tenant's endpoint a 404; and
DELETE /documents' DocumentDeleted event (the webhooks' document.deleted)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.core.url_policy import UrlPolicy
from rag_ingest.documents.deletion import DocumentDeletion
from rag_ingest.webhooks.model import DeliveryAttempt, DeliveryOutcome
from rag_ingest.webhooks.service import WebhookService

from tests.support.aws import FakeLambdaContext, import_handler
from tests.support.webhooks import MemoryDeliveries, MemoryEndpoints
from tests.unit.test_api_handler import assert_error, event
from tools import openapi as openapi_tool

pytestmark = pytest.mark.unit
PUBLIC = "93.184.215.14"


@pytest.fixture(scope="module")
def api() -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:
        env = {**openapi_tool.PLACEHOLDER_ENV, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
        env |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        for name, value in env.items():
            patch.setenv(name, value)
        yield import_handler("api", {})


@pytest.fixture
def store(api: ModuleType, monkeypatch: pytest.MonkeyPatch) -> MemoryEndpoints:
    memory = MemoryEndpoints()
    routes = sys.modules["functions.api.routes.webhooks"]
    resolver = {"hooks.example.com": [PUBLIC], "intranet.example.com": ["10.0.0.8"]}
    service = WebhookService(memory, UrlPolicy(resolver=lambda host, port: resolver.get(host, [])))
    monkeypatch.setattr(routes, "get_webhooks", lambda: service)
    return memory


def call(api: ModuleType, method: str, path: str, body: Any = None, tenant: str = "acme") -> tuple[int, Any]:
    raw = None if body is None else json.dumps(body)
    claims = {"sub": "user-1", "custom:tenant_id": tenant}
    response = api.handler(event(method, path, raw, claims=claims), FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"] or "null")


def test_the_lifecycle_of_an_endpoint(api: ModuleType, store: MemoryEndpoints) -> None:
    status, created = call(
        api, "POST", "/webhooks", {"url": "https://hooks.example.com/in", "events": ["document.ready"]}
    )
    assert status == 201, created
    assert set(created) == {"id", "url", "events", "created_at", "secret"}
    assert created["secret"].startswith("whsec_")
    status, listed = call(api, "GET", "/webhooks")
    assert status == 200 and [e["id"] for e in listed["endpoints"]] == [created["id"]]
    assert "secret" not in json.dumps(listed)
    status, rotated = call(api, "POST", f"/webhooks/{created['id']}/rotate-secret")
    assert status == 200 and rotated["secret"] not in (created["secret"], None)
    status, _ = call(api, "DELETE", f"/webhooks/{created['id']}")
    assert status == 204
    assert call(api, "GET", "/webhooks")[1] == {"endpoints": []}
    status, body = call(api, "DELETE", f"/webhooks/{created['id']}")
    assert status == 404
    assert_error(body, "NOT_FOUND")


def test_another_tenants_endpoint_is_a_404(api: ModuleType, store: MemoryEndpoints) -> None:
    _, created = call(api, "POST", "/webhooks", {"url": "https://hooks.example.com/", "events": ["document.failed"]})
    for method, path in (
        ("DELETE", f"/webhooks/{created['id']}"),
        ("POST", f"/webhooks/{created['id']}/rotate-secret"),
        ("GET", f"/webhooks/{created['id']}/deliveries"),
    ):
        status, body = call(api, method, path, tenant="globex")
        assert status == 404, body
        assert_error(body, "NOT_FOUND")
    assert call(api, "GET", "/webhooks", tenant="globex")[1] == {"endpoints": []}
    assert len(store.items) == 1


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"url": "http://hooks.example.com/", "events": ["document.ready"]}, "WEBHOOK_URL_NOT_HTTPS"),
        ({"url": "https://intranet.example.com/", "events": ["document.ready"]}, "WEBHOOK_URL_FORBIDDEN_ADDRESS"),
        ({"url": "https://169.254.169.254/latest", "events": ["document.ready"]}, "WEBHOOK_URL_FORBIDDEN_ADDRESS"),
        ({"url": "https://nowhere.example.com/", "events": ["document.ready"]}, "WEBHOOK_URL_UNRESOLVABLE"),
        ({"url": "https://hooks.example.com/", "events": ["document.created"]}, "WEBHOOK_EVENTS_INVALID"),
        ({"url": "https://hooks.example.com/", "events": []}, "INVALID_REQUEST"),
        ({"url": "https://hooks.example.com/"}, "INVALID_REQUEST"),
        ({"url": "https://hooks.example.com/", "events": ["document.ready"], "secret": "mine"}, "INVALID_REQUEST"),
    ],
)
def test_bad_registrations_are_400_with_a_clear_code(
    api: ModuleType, store: MemoryEndpoints, body: dict[str, Any], code: str
) -> None:
    status, answer = call(api, "POST", "/webhooks", body)
    assert status == 400, answer
    assert_error(answer, code)
    assert store.items == {}


def test_an_endpoints_deliveries_are_listed_newest_first(
    api: ModuleType, store: MemoryEndpoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = MemoryDeliveries()
    routes = sys.modules["functions.api.routes.webhooks"]
    service = WebhookService(store, UrlPolicy(resolver=lambda host, port: [PUBLIC]), history=history)
    monkeypatch.setattr(routes, "get_webhooks", lambda: service)
    _, created = call(api, "POST", "/webhooks", {"url": "https://hooks.example.com/", "events": ["document.ready"]})
    assert call(api, "GET", f"/webhooks/{created['id']}/deliveries") == (
        200,
        {"endpoint_id": created["id"], "deliveries": []},
    )
    attempts: list[tuple[DeliveryOutcome, int]] = [("failed", 503), ("delivered", 200)]
    for attempt, (outcome, status) in enumerate(attempts, start=1):
        history.record_delivery(
            "acme",
            created["id"],
            DeliveryAttempt(
                event_id="evt-1", webhook_id="msg_1", type="document.ready", document_id="01JDOC", attempt=attempt,
                outcome=outcome, status_code=status, error=None if status == 200 else "HTTP 503",
                duration_ms=12, at=f"2026-12-03T18:00:0{attempt}.000+00:00",
            ),
        )  # fmt: skip
    status, listed = call(api, "GET", f"/webhooks/{created['id']}/deliveries")
    assert status == 200
    assert [(d["attempt"], d["outcome"], d["status_code"]) for d in listed["deliveries"]] == [
        (2, "delivered", 200),
        (1, "failed", 503),
    ]
    assert set(listed["deliveries"][0]) == {
        "event_id", "webhook_id", "type", "document_id", "attempt", "outcome", "status_code", "error",
        "duration_ms", "at",
    }  # fmt: skip
    status, body = call(api, "GET", "/webhooks/not-an-endpoint/deliveries")
    assert status == 404
    assert_error(body, "NOT_FOUND")


# -- DocumentDeleted -------------------------------------------------------------------------------
class Documents:
    def __init__(self, status: DocumentStatus) -> None:
        self.record = DocumentRecord.model_validate(
            {
                "document_id": "01JDOC",
                "tenant_id": "acme",
                "status": status,
                "filename": "a.pdf",
                "bucket": "b",
                "key": "raw/acme/01JDOC/a.pdf",
                "version": "v7",
                "created_at": "2026-12-03T18:00:00.000+00:00",
                "updated_at": "2026-12-03T18:00:00.000+00:00",
            }
        )

    def mark_deleting(self, document_id: str, tenant_id: str) -> DocumentRecord | None:
        return self.record if tenant_id == self.record.tenant_id else None

    def mark_deleted(self, document_id: str) -> None:
        self.record = self.record.model_copy(update={"status": DocumentStatus.DELETED})

    def get(self, document_id: str) -> DocumentRecord:
        return self.record


class Nothing:
    def delete_document(self, document_id: str) -> int:
        return 0

    def delete_all(self, bucket: str, prefix: str, exact_key: str | None = None) -> int:
        return 0


class Events:
    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, Any]]] = []

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        self.published.append((detail_type, detail))


@pytest.mark.parametrize("status", [DocumentStatus.READY, DocumentStatus.DELETED])
def test_a_delete_publishes_document_deleted_once(status: DocumentStatus) -> None:
    events = Events()
    deletion = DocumentDeletion(
        documents=Documents(status),  # type: ignore[arg-type]
        vector_store=Nothing,  # type: ignore[arg-type]
        objects=Nothing(),  # type: ignore[arg-type]
        bucket="b",
        artifacts_prefix="artifacts/",
        events=events,
    )
    deletion.delete("acme", "01JDOC")
    expected = [("DocumentDeleted", {"document_id": "01JDOC", "tenant_id": "acme", "version": "v7"})]
    # A DELETE of a DELETED document changes nothing and announces nothing.
    assert events.published == (expected if status == DocumentStatus.READY else [])
