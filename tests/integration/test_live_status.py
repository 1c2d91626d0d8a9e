"""Live status over the local WebSocket API, against moto's server and the synthesized template.

The API port's WebSocket endpoint runs the template's ``$connect`` authorizer and connections
functions, the stream poller feeds the documents table's stream to the pusher, and the pusher posts
to the local ``@connections`` API: the production functions (imported here, as the runner would
run them) over real WebSockets. Records are written by the real status repository.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import jwt
import pytest
import requests
from botocore.exceptions import ClientError
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.live_connections import DynamoConnectionStore
from rag_ingest.core.access import DocumentAccess
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.job import ObjectRef
from rag_ingest.live.connections import Connection

from local.runtime.cloudformation.provision import Provisioner
from local.runtime.cloudformation.provisioned import ProvisionedStack
from local.runtime.cloudformation.template import CloudFormationTemplate
from local.runtime.http.identity import OIDC_PATH, LocalIdentityProvider
from local.runtime.http.server import ApiServer
from local.runtime.http.stream_poller import LiveStatusUnavailable, StreamPoller
from local.runtime.http.template_api import HttpApiDefinition
from local.runtime.http.websocket_api import StreamMapping, WebSocketApiDefinition, localized_environment
from local.runtime.settings import LIVE_PATH, RuntimeSettings
from tests.support.aws import FakeLambdaContext, free_port, import_handler, moto_server
from tests.support.live import LiveSocket, live_socket, refusal_status

pytestmark = pytest.mark.integration

LIVE_FUNCTIONS = {"LiveAuthorizerFunction": "live_authorizer", "LiveConnectionsFunction": "live_connections",
                  "LivePusherFunction": "live_pusher"}  # fmt: skip


@dataclass
class Live:
    server: ApiServer
    identity: LocalIdentityProvider
    poller: StreamPoller
    documents: DocumentsTable
    connections: DynamoConnectionStore
    ws_url: str
    http_url: str

    def url(self, username: str, tenant: str, groups: list[str] | None = None) -> str:
        return f"{self.ws_url}?token={self.identity.issue(username, tenant, groups=groups)}"

    def subject(self, username: str, tenant: str) -> str:
        token = self.identity.issue(username, tenant)
        return str(self.identity.verifier().verify(token)["sub"])


def _handlers(stack: ProvisionedStack, settings: RuntimeSettings, issuer: str, websocket: Any) -> dict[str, Any]:
    """The live functions' handlers by function name, imported with their localized environment."""
    handlers = {}
    for function in stack.functions:
        prefix = next((p for p in LIVE_FUNCTIONS if function.logical_id.startswith(p)), None)
        if prefix is None:
            continue
        environment = localized_environment(
            function.environment,
            issuer=issuer,
            websocket=websocket,
            region=settings.region,
            live_url=f"{settings.api_url}{LIVE_PATH}",
        )
        handlers[function.name] = import_handler(LIVE_FUNCTIONS[prefix], environment).handler
    return handlers


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    with moto_server() as endpoint:
        # moto's backends are the process's: this module provisions the same template as others.
        requests.post(f"{endpoint}/moto-api/reset", timeout=30)
        port = free_port()
        settings = RuntimeSettings.from_env(
            {"LOCAL_MOTO_PORT": endpoint.rsplit(":", 1)[1], "LOCAL_API_PORT": str(port)}
        )
        assert settings.template_path.is_file(), f"{settings.template_path} is missing: run `make synth` first"
        template = CloudFormationTemplate.load(settings.template_path)
        provisioner = Provisioner(template, settings)
        stack = provisioner.provision()
        identity = LocalIdentityProvider(f"{settings.api_url}{OIDC_PATH}")
        identity.set_audience(next(iter(HttpApiDefinition.from_template(template, provisioner.resolver).audiences)))
        websocket = WebSocketApiDefinition.from_template(template, provisioner.resolver)
        assert websocket is not None
        handlers = _handlers(stack, settings, identity.issuer, websocket)

        def invoke(function_name: str, payload: bytes) -> tuple[int, str, bool]:
            try:
                result = handlers[function_name](json.loads(payload), FakeLambdaContext())
            except Exception as exc:  # as the runner answers: Lambda's error shape
                return 200, json.dumps({"errorMessage": str(exc), "errorType": type(exc).__name__}), True
            return 200, json.dumps(result), False

        pollers: list[StreamPoller] = []
        server = ApiServer(
            host=settings.host,
            port=port,
            account_id=settings.account_id,
            region=settings.region,
            web_dir=None,
            invoke=invoke,
            health=lambda: {"ready": True},
            status=dict,
            outputs=dict,
            identity=identity,
            on_live_connect=lambda: pollers[0].wake(),
        )
        server.live.definition = websocket
        [mapping] = StreamMapping.from_template(template, provisioner.resolver)
        poller = StreamPoller(
            mapping,
            streams=boto3.client("dynamodbstreams"),
            sqs=boto3.client("sqs"),
            invoke=invoke,
            listening=server.live.listening,
            poll_interval_seconds=0.05,
        )
        pollers.append(poller)
        server.start()
        poller.start()
        table = stack.outputs["DocumentsTableName"]
        connections = next(f for f in stack.functions if f.logical_id.startswith("LiveConnectionsFunction"))
        try:
            yield Live(
                server,
                identity,
                poller,
                DocumentsTable(str(table)),
                DynamoConnectionStore(connections.environment["CONNECTIONS_TABLE"]),
                f"ws://127.0.0.1:{port}{LIVE_PATH}",
                f"http://127.0.0.1:{port}{LIVE_PATH}",
            )
        finally:
            poller.close()
            server.stop()
            requests.post(f"{endpoint}/moto-api/reset", timeout=30)


def _awaiting_upload(live: Live, tenant: str, access: DocumentAccess | None = None, by: str | None = None) -> str:
    document_id = new_document_id()
    live.documents.create_awaiting_upload(
        document_id=document_id,
        tenant_id=tenant,
        filename="a.pdf",
        bucket="b",
        key=f"raw/{tenant}/{document_id}/a.pdf",
        access=access,
        uploaded_by=by,
    )
    return document_id


def _documents(socket: LiveSocket, count: int) -> list[dict[str, Any]]:
    messages = [socket.next() for _ in range(count)]
    assert {message["type"] for message in messages} == {"document.updated"}
    return [message["document"] for message in messages]


def test_changes_reach_their_tenants_connections_only(live: Live) -> None:
    before = _awaiting_upload(live, "acme")  # written before anyone connected: never delivered
    with (
        live_socket(live.url("ann", "acme")) as acme,
        live_socket(live.url("bob", "acme")) as acme_again,
        live_socket(live.url("cyd", "other")) as other,
    ):
        document_id = _awaiting_upload(live, "acme")
        ref = ObjectRef(bucket="b", key=f"raw/acme/{document_id}/a.pdf", version="v1")
        live.documents.mark_queued(document_id=document_id, tenant_id="acme", ref=ref, event_time="t1", size_bytes=9)
        for socket in (acme, acme_again):
            first, second = _documents(socket, 2)
            assert [first["status"], second["status"]] == ["AWAITING_UPLOAD", "QUEUED"]
            assert first["document_id"] == document_id != before
            # The pushed document is the API's view of the record: GET /documents/{id}'s JSON.
            assert set(second) >= {"document_id", "status", "filename", "created_at", "updated_at"}
        time.sleep(0.5)
        assert other.drain() == []
        assert live.server.live.stats()["connections"] == 3
        assert sorted(c.connection_id for c in live.connections.connections_for_tenant("acme")) == sorted(
            live.connections.for_tenant("acme")
        )
        assert len(live.connections.for_tenant("acme")) == 2


def test_a_restricted_document_reaches_only_who_may_read_it(live: Live) -> None:
    tenant = f"acl-{uuid.uuid4().hex[:6]}"
    uploader, listed = live.subject("up", tenant), live.subject("listed", tenant)
    users = {"up": [], "listed": [], "member": ["legal"], "admin": ["tenant-admins"], "other": ["sales"]}
    sockets = {name: LiveSocket(live.url(name, tenant, groups)) for name, groups in users.items()}
    stranger = LiveSocket(live.url("listed", f"{tenant}-x", ["tenant-admins", "legal"]))  # same name, other tenant
    try:
        restricted = _awaiting_upload(live, tenant, DocumentAccess(users=[listed], groups=["legal"]), uploader)
        open_to_all = _awaiting_upload(live, tenant, None, uploader)
        for name, socket in sockets.items():
            seen = [document["document_id"] for document in _documents(socket, 1 if name == "other" else 2)]
            assert seen == ([open_to_all] if name == "other" else [restricted, open_to_all]), name
        time.sleep(0.5)
        assert sockets["other"].drain() == [] and stranger.drain() == []
    finally:
        for socket in (*sockets.values(), stranger):
            socket.close()


def test_connections_are_refused_as_the_authorizer_decides(live: Live) -> None:
    other_issuer = LocalIdentityProvider(live.identity.issuer)
    other_issuer.set_audience(str(live.identity.audience))
    assert refusal_status(live.ws_url) == 401  # no token: API Gateway refuses without the authorizer
    assert refusal_status(f"{live.ws_url}?token=") == 401
    assert refusal_status(f"{live.ws_url}?token={other_issuer.issue('ann', 'acme')}") == 401  # Unauthorized
    # A valid token without a usable tenant: the authorizer's Deny.
    token = jwt_with_claims(live, **{"custom:tenant_id": "not a tenant"})
    assert refusal_status(f"{live.ws_url}?token={token}") == 403
    assert refusal_status(live.url("ann", "acme")) is None  # the same path with a good token opens
    plain = requests.get(live.url("ann", "acme").replace("ws://", "http://"), timeout=10)
    assert plain.status_code == 426  # not an upgrade


def jwt_with_claims(live: Live, **claims: Any) -> str:
    """A token of the local issuer with claims it would not put in one (signed with its key)."""
    base = live.identity.verifier().verify(live.identity.issue("ann", "acme"))
    key = live.identity._key
    return jwt.encode({**base, **claims}, key, algorithm="RS256", headers={"kid": live.identity.key_id})


def test_the_management_api_posts_gets_and_deletes_as_api_gateways(live: Live) -> None:
    tenant = f"mgmt-{uuid.uuid4().hex[:6]}"
    management = boto3.client("apigatewaymanagementapi", endpoint_url=live.http_url)
    with live_socket(live.url("ann", tenant)) as socket:
        [connection_id] = live.connections.for_tenant(tenant)
        management.post_to_connection(ConnectionId=connection_id, Data=b'{"hello": "world"}')
        assert socket.next() == {"hello": "world"}
        described = management.get_connection(ConnectionId=connection_id)
        assert described["ConnectedAt"] and described["LastActiveAt"] and described["Identity"]["SourceIp"]
        management.delete_connection(ConnectionId=connection_id)
        assert socket.closed.wait(10)
        for call in (
            lambda: management.post_to_connection(ConnectionId=connection_id, Data=b"{}"),
            lambda: management.get_connection(ConnectionId=connection_id),
        ):
            with pytest.raises(ClientError) as gone:
                call()
            assert gone.value.response["Error"]["Code"] == "GoneException"
            assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 410
    # $disconnect forgot it in the connections table.
    deadline = time.monotonic() + 10
    while live.connections.for_tenant(tenant) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live.connections.for_tenant(tenant) == []


def test_a_message_no_route_takes_is_answered_forbidden(live: Live) -> None:
    with live_socket(live.url("ann", "acme")) as socket:
        socket.client.send(json.dumps({"action": "subscribe"}))
        answer = socket.next()
        assert answer["message"] == "Forbidden" and answer["connectionId"] and answer["requestId"]


def test_a_gone_connection_costs_the_others_nothing_and_is_forgotten(live: Live) -> None:
    tenant = f"gone-{uuid.uuid4().hex[:6]}"
    with live_socket(live.url("ann", tenant)) as staying:
        # A connection the table holds but the gateway no longer has (its $disconnect never came).
        now = int(time.time())
        live.connections.put(Connection("gone-one", tenant, "s", connected_at=now, expires_at=now + 60))
        assert len(live.connections.for_tenant(tenant)) == 2
        document_id = _awaiting_upload(live, tenant)
        assert _documents(staying, 1)[0]["document_id"] == document_id
        deadline = time.monotonic() + 10
        while "gone-one" in live.connections.for_tenant(tenant) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert live.connections.for_tenant(tenant) != [] and "gone-one" not in live.connections.for_tenant(tenant)
        assert live.server.live.stats()["gone"] >= 1


def test_a_mapping_without_a_stream_has_no_live_channel(live: Live) -> None:
    mapping = StreamMapping("M", "arn:aws:dynamodb:us-east-1:123456789012:table/none/stream/x", "f")
    poller = StreamPoller(
        mapping, streams=boto3.client("dynamodbstreams"), sqs=boto3.client("sqs"), invoke=lambda *_: (200, "", False),
        listening=lambda: True,
    )  # fmt: skip
    with pytest.raises(LiveStatusUnavailable):
        poller.start()


def test_stopping_closes_every_connection(live: Live) -> None:
    """Last in this module: the gateway takes no connection after it."""
    socket = LiveSocket(live.url("ann", "acme"))
    assert socket.connected
    deadline = time.monotonic() + 10
    while not socket.closed.wait(0.2) and time.monotonic() < deadline:
        live.server.live.close_all()  # again: the gateway may register the socket just after its handshake
    assert socket.closed.is_set()
    assert refusal_status(live.url("ann", "acme")) == 503
