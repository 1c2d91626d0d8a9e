"""Per-document access on the real local stack: a matrix of users x documents x every path.

Nine users (uploader, listed reader, group member, editor, member of an editors' group, tenant
admin, a denied user, another user of the tenant, a user of another tenant) and three documents,
each with readers, editors and deny lists (``ACCESS``). Who reads, edits and manages each is written
out by hand (``READERS``, ``EDITORS``, ``MANAGERS``); search in each mode, get, download, the
listing (with and without a filter), retry, the live channel, PATCH of access and of metadata, and
delete must agree: 200, 403 (a reader who may not do it) or the very 404 of a missing document.
The rules: docs/api.md, "Per-document access"; ``MATRIX_CELLS`` is the matrix's size.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jwt
import pytest
import requests
from simple_websocket import ConnectionError as WebSocketRefused

from local.client import OfflineClient
from tests.support.live import LiveSocket

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
ADMIN_GROUP = "tenant-admins"  # cdk.json auth.tenantAdminGroup
USERS = ("uploader", "listed", "member", "editor", "lead", "admin", "denied", "other", "stranger")
GROUPS = {"member": ("legal",), "lead": ("leads",), "admin": (ADMIN_GROUP,), "denied": ("legal", "leads")}
DOCUMENTS = ("open", "for_user", "for_group")
#: Each document's access; a user's name stands for their token's sub.
ACCESS: dict[str, dict[str, Any]] = {
    "open": {"editors": {"users": ["editor"]}, "deny": {"users": ["denied"]}},
    "for_user": {"users": ["listed"], "editors": {"groups": ["leads"]}},
    "for_group": {"groups": ["legal"], "deny": {"users": ["denied"], "groups": [ADMIN_GROUP]}},
}
READERS = {
    "open": {"uploader", "listed", "member", "editor", "lead", "admin", "other"},
    "for_user": {"uploader", "listed", "lead", "denied", "admin"},
    "for_group": {"uploader", "member"},  # the denied member of legal and the denied admins: not
}
EDITORS = {
    "open": {"uploader", "editor", "admin"},
    "for_user": {"uploader", "lead", "denied", "admin"},
    "for_group": {"uploader"},
}
MANAGERS = {"open": {"uploader", "admin"}, "for_user": {"uploader", "admin"}, "for_group": {"uploader"}}
SEARCH_MODES = ("hybrid", "knn", "bm25")
ROUTES = (
    *(f"search:{mode}" for mode in SEARCH_MODES),
    *("get", "list", "list:filter", "download", "retry", "live", "patch:access", "patch:metadata"),
)
#: users x documents x routes, plus the delete column (a non-reader's 404, a reader's 403, an editor's delete).
MATRIX_CELLS = len(USERS) * len(DOCUMENTS) * (len(ROUTES) + 1)
MISSING_ID = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"


@dataclass
class Stream:
    """A live-status connection: whether it opened, and the documents its messages named."""

    status: int
    seen: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def documents(self) -> set[str]:
        with self.lock:
            return set(self.seen)


@contextmanager
def live_stream(url: str) -> Iterator[Stream]:
    """The page's WebSocket; ``status`` is 101 once upgraded (else the refusal's status)."""
    try:
        socket = LiveSocket(url)
    except WebSocketRefused as refused:
        yield Stream(int(refused.status_code or 0))
        return
    stream = Stream(101)

    def read() -> None:
        while not socket.closed.is_set():
            try:
                message = socket.next(timeout=1)
            except queue.Empty:
                continue
            with stream.lock:
                stream.seen.add(str(message["document"]["document_id"]))

    threading.Thread(target=read, daemon=True).start()
    try:
        yield stream
    finally:
        socket.close()


def subject_of(client: OfflineClient) -> str:
    return str(jwt.decode(client.token(), options={"verify_signature": False})["sub"])


def upload(client: OfflineClient, path: Path, access: dict[str, Any] | None) -> str:
    body: dict[str, Any] = {"filename": path.name}
    if access is not None:
        body["access"] = access
    ticket = client.request("POST", "/documents", body)
    assert ticket.status_code == 201, ticket.text
    form = ticket.json()["upload"]
    sent = requests.post(
        form["url"], data=form["fields"], files={"file": (path.name, path.read_bytes(), "application/pdf")}, timeout=60
    )
    assert sent.status_code in (200, 201, 204), sent.text
    return str(ticket.json()["document_id"])


@dataclass
class World:
    clients: dict[str, OfflineClient]
    documents: dict[str, str]  # name -> document id
    streams: dict[str, Stream]
    not_found: dict[str, Any]  # the 404 body of a missing document

    def name_of(self, document_id: str) -> str:
        return {v: k for k, v in self.documents.items()}[document_id]


@pytest.fixture(scope="module")
def world(local_stack: dict[str, Any]) -> Iterator[World]:
    api_url = local_stack["ApiUrl"]
    tenant = f"acl-{uuid.uuid4().hex[:8]}"
    groups = {**GROUPS, "other": ("sales",)}
    clients = {
        name: OfflineClient(api_url, tenant_id=tenant, username=f"{name}-user", groups=groups.get(name, ()))
        for name in USERS
        if name != "stranger"
    }
    # Another tenant's user, with every group and even the uploader's user name.
    clients["stranger"] = OfflineClient(
        api_url, tenant_id=f"acl-other-{uuid.uuid4().hex[:8]}", username="uploader-user", groups=(ADMIN_GROUP, "legal")
    )
    with ExitStack() as stack:
        streams = {name: stack.enter_context(live_stream(client.live_url())) for name, client in clients.items()}
        assert {name: s.status for name, s in streams.items()} == dict.fromkeys(USERS, 101)
        uploader = clients["uploader"]
        samples = {"open": "lighthouses.pdf", "for_user": "sourdough.pdf", "for_group": "urban-birds.pdf"}
        documents = {
            name: upload(uploader, SAMPLES / sample, with_subjects(ACCESS[name], clients))
            for name, sample in samples.items()
        }
        states = uploader.wait_until_done(list(documents.values()), timeout_seconds=600)
        assert {state["status"] for state in states.values()} == {"READY"}, states
        missing = uploader.request("GET", f"/documents/{MISSING_ID}")
        assert missing.status_code == 404
        yield World(clients, documents, streams, missing.json())


def with_subjects(access: dict[str, Any], clients: dict[str, OfflineClient]) -> dict[str, Any]:
    """``access`` with each user's name replaced by their token's sub (lists of users at any depth)."""
    shown: dict[str, Any] = {}
    for key, value in access.items():
        if isinstance(value, dict):
            shown[key] = with_subjects(value, clients)
        elif key == "users":
            shown[key] = [subject_of(clients[name]) for name in value]
        else:
            shown[key] = list(value)
    return shown


def full(access: dict[str, Any]) -> dict[str, Any]:
    """An ``access`` as the API shows it: every list present."""
    nobody = {"users": [], "groups": []}
    return {
        **nobody,
        **{k: v for k, v in access.items() if k in nobody},
        "editors": {**nobody, **access.get("editors", {})},
        "deny": {**nobody, **access.get("deny", {})},
    }


def cases() -> list[tuple[str, str]]:
    return [(user, document) for user in USERS for document in DOCUMENTS]


def test_the_record_shows_access_and_uploader(world: World) -> None:
    uploader = world.clients["uploader"]
    for name in DOCUMENTS:
        record = uploader.document(world.documents[name])
        assert record["access"] == full(with_subjects(ACCESS[name], world.clients)), name
        assert record["uploaded_by"] == subject_of(uploader)


@pytest.mark.parametrize("mode", SEARCH_MODES)
@pytest.mark.parametrize("user", USERS)
def test_search_returns_exactly_the_readable_documents(world: World, user: str, mode: str) -> None:
    # "the" occurs in every sample, and k-NN ranks every passage: k=50 reaches all three documents'.
    response = world.clients[user].request("POST", "/search", {"query": "the history of the", "k": 50, "mode": mode})
    assert response.status_code == 200, response.text
    passages = response.json()["passages"]
    found = {p["document_id"] for p in passages} | {c["document_id"] for p in passages for c in p["copies"]}
    expected = {world.documents[d] for d in DOCUMENTS if user in READERS[d]}
    assert found == expected, {world.name_of(d) for d in found if d in world.documents.values()}


@pytest.mark.parametrize(("user", "document"), cases())
def test_get_and_download_answer_404_to_whoever_may_not_read(world: World, user: str, document: str) -> None:
    client, document_id = world.clients[user], world.documents[document]
    for path in (f"/documents/{document_id}", f"/documents/{document_id}/download"):
        response = client.request("GET", path)
        if user in READERS[document]:
            assert response.status_code == 200, (path, response.text)
        else:
            assert (response.status_code, response.json()) == (404, world.not_found), path


@pytest.mark.parametrize(("user", "document"), cases())
def test_retry_of_a_ready_document_is_409_for_editors_403_for_readers_404_for_the_others(
    world: World, user: str, document: str
) -> None:
    response = world.clients[user].request("POST", f"/documents/{world.documents[document]}/retry")
    if user in EDITORS[document]:
        assert (response.status_code, response.json()["error"]["code"]) == (409, "NOT_RETRYABLE")
    elif user in READERS[document]:
        assert (response.status_code, response.json()["error"]["code"]) == (403, "EDIT_FORBIDDEN")
    else:
        assert (response.status_code, response.json()) == (404, world.not_found)


@pytest.mark.parametrize(("user", "document"), cases())
def test_patch_of_access_is_for_the_uploader_and_admins_403_for_readers_404_for_the_others(
    world: World, user: str, document: str
) -> None:
    client, document_id = world.clients[user], world.documents[document]
    # The document's own access, sent back unchanged: the answer is the test, the readers stay.
    current = full(with_subjects(ACCESS[document], world.clients))
    response = client.request("PATCH", f"/documents/{document_id}", {"access": current})
    if user in MANAGERS[document]:
        assert response.status_code == 200, response.text
        assert response.json()["access"] == current
    elif user in READERS[document]:
        assert (response.status_code, response.json()["error"]["code"]) == (403, "ACCESS_CHANGE_FORBIDDEN")
    else:
        assert (response.status_code, response.json()) == (404, world.not_found)


@pytest.mark.parametrize(("user", "document"), cases())
def test_patch_of_metadata_is_for_editors_403_for_readers_404_for_the_others(
    world: World, user: str, document: str
) -> None:
    client, document_id = world.clients[user], world.documents[document]
    response = client.request("PATCH", f"/documents/{document_id}", {"metadata": {"checked_by": user}})
    if user in EDITORS[document]:
        assert response.status_code == 200, response.text
        assert response.json()["metadata"] == {"checked_by": user}
    elif user in READERS[document]:
        assert (response.status_code, response.json()["error"]["code"]) == (403, "EDIT_FORBIDDEN")
    else:
        assert (response.status_code, response.json()) == (404, world.not_found)


@pytest.mark.parametrize("user", USERS)
def test_the_listing_holds_exactly_the_readable_documents(world: World, user: str) -> None:
    expected = {world.documents[d] for d in DOCUMENTS if user in READERS[d]}
    client = world.clients[user]
    listed = client.request("GET", "/documents?limit=100")
    assert listed.status_code == 200, listed.text
    assert {item["document_id"] for item in listed.json()["items"]} == expected
    # With a filter every document matches, and still only the readable ones come back.
    where = quote(json.dumps({"equals": {"key": "content_type", "value": "application/pdf"}}))
    filtered = client.request("GET", f"/documents?limit=100&filter={where}")
    assert filtered.status_code == 200, filtered.text
    assert {item["document_id"] for item in filtered.json()["items"]} == expected


@pytest.mark.parametrize("user", USERS)
def test_the_live_channel_announces_only_readable_documents(world: World, user: str) -> None:
    seen = world.streams[user].documents() & set(world.documents.values())
    expected = {world.documents[d] for d in DOCUMENTS if user in READERS[d]}
    assert seen == expected, sorted(world.name_of(d) for d in seen)


def test_delete_is_404_to_non_readers_403_to_readers_then_an_editor_deletes(world: World) -> None:
    for document in DOCUMENTS:
        document_id = world.documents[document]
        for user in USERS:
            if user in EDITORS[document]:
                continue
            response = world.clients[user].request("DELETE", f"/documents/{document_id}", timeout=60)
            if user in READERS[document]:
                assert (response.status_code, response.json()["error"]["code"]) == (403, "EDIT_FORBIDDEN")
            else:
                assert (response.status_code, response.json()) == (404, world.not_found), (user, document)
        assert world.clients["uploader"].document(document_id)["status"] == "READY"
    deleters = {"open": "editor", "for_user": "lead", "for_group": "uploader"}
    for document, user in deleters.items():
        response = world.clients[user].request("DELETE", f"/documents/{world.documents[document]}", timeout=60)
        assert response.status_code == 200, (user, document, response.text)
    search = world.clients["uploader"].request(
        "POST", "/search", {"query": "the history of the", "k": 50, "mode": "bm25"}
    )
    assert not {p["document_id"] for p in search.json()["passages"]} & set(world.documents.values())


def test_a_change_of_access_reaches_search(world: World) -> None:
    """The uploader restricts an open document to the listed user: the chunks are rewritten in place
    and within seconds another user of the tenant no longer finds it, the listed user does."""
    uploader, other, listed = world.clients["uploader"], world.clients["other"], world.clients["listed"]
    document_id = upload(uploader, SAMPLES / "lighthouses.pdf", None)
    assert uploader.wait_until_done([document_id], timeout_seconds=600)[document_id]["status"] == "READY"

    def found(client: OfflineClient) -> bool:
        response = client.request("POST", "/search", {"query": "lighthouse", "k": 50, "mode": "bm25"})
        passages = response.json()["passages"]
        return document_id in {p["document_id"] for p in passages} | {
            c["document_id"] for p in passages for c in p["copies"]
        }

    assert found(other)
    response = uploader.request(
        "PATCH", f"/documents/{document_id}", {"access": {"users": [subject_of(listed)], "groups": []}}
    )
    assert response.status_code == 200, response.text
    deadline = time.monotonic() + 5
    while found(other) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not found(other) and found(listed) and found(uploader)
    assert other.request("GET", f"/documents/{document_id}").status_code == 404


def test_bad_access_is_a_400_naming_its_path(world: World) -> None:
    response = world.clients["uploader"].request(
        "POST", "/documents", {"filename": "a.pdf", "access": {"users": ["ok", ""]}}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_REQUEST"
    assert "access.users[1]" in response.json()["error"]["message"]


def test_the_matrix_size() -> None:
    assert MATRIX_CELLS == 9 * 3 * 12 == 324
