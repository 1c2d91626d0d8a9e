"""Live status (AWS side) against moto: the synthesized template provisions locally, and the
connections handler and the pusher work on moto's DynamoDB, with records read from moto's real
DynamoDB stream of the documents table. API Gateway's management API (PostToConnection) is the
only stubbed service: nothing here emulates it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import ModuleType
from typing import Any

import boto3
import jwt
import pytest
from botocore.stub import Stubber
from cryptography.hazmat.primitives.asymmetric import rsa
from rag_ingest.adapters.jwks import CachedJwks
from rag_ingest.adapters.live_connections import DynamoConnectionStore, ManagementApiPoster
from rag_ingest.live.updates import update_for

from local.runtime.cloudformation.provision import Provisioner
from local.runtime.cloudformation.provisioned import ProvisionedStack
from local.runtime.cloudformation.skipped import DYNAMODB_STREAM_MAPPING_REASON, WEBSOCKET_SKIP_REASON
from local.runtime.cloudformation.template import CloudFormationTemplate
from local.runtime.settings import LIVE_PATH, RuntimeSettings
from tests.support.aws import REGION, FakeLambdaContext, import_handler, moto_server

pytestmark = pytest.mark.integration

CALLBACK_URL = "https://abc123.execute-api.us-east-1.amazonaws.com/live"


@pytest.fixture(scope="module")
def provisioned() -> Iterator[tuple[ProvisionedStack, RuntimeSettings]]:
    """The project's synthesized template (make synth) provisioned into a fresh moto server."""
    with moto_server() as endpoint:
        settings = RuntimeSettings.from_env({"LOCAL_MOTO_PORT": endpoint.rsplit(":", 1)[1], "LOCAL_API_PORT": "18080"})
        assert settings.template_path.is_file(), f"{settings.template_path} is missing: run `make synth` first"
        stack = Provisioner(CloudFormationTemplate.load(settings.template_path), settings).provision()
        yield stack, settings


def _resource_by_path(stack: ProvisionedStack, settings: RuntimeSettings, suffix: str) -> str:
    template = CloudFormationTemplate.load(settings.template_path)
    (logical_id,) = [
        r.logical_id for r in template.resources.values() if (r.cdk_path or "").endswith(f"/{suffix}/Resource")
    ]
    return str(stack.physical_ids[logical_id])


def _skipped_ids(stack: ProvisionedStack, reason: str) -> list[str]:
    return [logical_id for kind, ids in stack.skipped.items() if reason in kind for logical_id in ids]


def test_template_with_live_status_and_hosting_provisions_locally(
    provisioned: tuple[ProvisionedStack, RuntimeSettings],
) -> None:
    stack, settings = provisioned
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    documents = dynamodb.describe_table(TableName=_resource_by_path(stack, settings, "Storage/DocumentsTable"))["Table"]
    # The local stream poller reads this stream for the pusher.
    assert documents["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    assert documents["LatestStreamArn"]
    connections_name = _resource_by_path(stack, settings, "Live/ConnectionsTable")
    connections = dynamodb.describe_table(TableName=connections_name)["Table"]
    assert connections["KeySchema"] == [{"AttributeName": "connection_id", "KeyType": "HASH"}]
    assert [i["IndexName"] for i in connections["GlobalSecondaryIndexes"]] == ["by_tenant"]
    ttl = dynamodb.describe_time_to_live(TableName=connections_name)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}

    # Skipped explicitly, each with its reason.
    websocket = {kind.split(" ")[0]: len(ids) for kind, ids in stack.skipped.items() if WEBSOCKET_SKIP_REASON in kind}
    assert websocket == {
        "AWS::ApiGatewayV2::Api": 1,
        # $connect, $disconnect and answer (the live channel's streamed answers).
        "AWS::ApiGatewayV2::Route": 3,
        "AWS::ApiGatewayV2::Integration": 3,
        "AWS::ApiGatewayV2::Authorizer": 1,
        "AWS::ApiGatewayV2::Stage": 1,
    }
    assert len(_skipped_ids(stack, DYNAMODB_STREAM_MAPPING_REASON)) == 1
    kinds = " ".join(stack.skipped)
    for resource_type in (
        "AWS::CloudFront::Distribution",
        "AWS::CloudFront::OriginAccessControl",
        "AWS::CloudFront::ResponseHeadersPolicy",
        "Custom::CDKBucketDeployment",
    ):
        assert resource_type in kinds
    # The HTTP API's routes only; SQS mappings only.
    assert stack.api_routes and not any(route.route_key.startswith("$") for route in stack.api_routes)
    assert all(":sqs:" in mapping.queue_arn for mapping in stack.event_source_mappings)
    assert stack.outputs["WebSocketUrl"] == settings.api_url.replace("http://", "ws://") + LIVE_PATH
    assert stack.outputs["WebUrl"] == settings.api_url
    # The live functions exist as in AWS (the local stream poller and WebSocket API invoke them).
    pusher = next(f for f in stack.functions if f.logical_id.startswith("LivePusherFunction"))
    assert pusher.environment["CONNECTIONS_TABLE"] == connections_name
    assert pusher.environment["WEBSOCKET_CALLBACK_URL"].endswith("/live")


def _stream_records(stream_arn: str, iterator: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """New records of the (single-shard) stream, in Lambda's event shape, and the next iterator."""
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    if iterator is None:
        (shard,) = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
    page = streams.get_records(ShardIterator=iterator)
    records = [{**record, "eventSourceARN": stream_arn} for record in page["Records"]]
    return records, page["NextShardIterator"]


def _document_item(tenant: str, status: str, **fields: Any) -> dict[str, Any]:
    return {
        "document_id": f"doc-{tenant}",
        "tenant_id": tenant,
        "status": status,
        "filename": "report.pdf",
        "attempts": {},
        "created_at": "2026-12-01T05:00:00.000+00:00",
        "updated_at": "2026-12-01T05:00:01.000+00:00",
        **fields,
    }


def _stubbed_management_api(app: ModuleType) -> tuple[Stubber, list[dict[str, Any]]]:
    client = boto3.client("apigatewaymanagementapi", endpoint_url=CALLBACK_URL, region_name=REGION)
    posted: list[dict[str, Any]] = []
    client.meta.events.register(
        "before-parameter-build.apigatewaymanagementapi.PostToConnection",
        lambda params, **_: posted.append(dict(params)),
    )
    app.pusher.poster = ManagementApiPoster(CALLBACK_URL, management_client=client)
    app.pusher.sleep = lambda _seconds: None
    return Stubber(client), posted


def test_pusher_posts_stream_records_to_the_tenants_connections(
    provisioned: tuple[ProvisionedStack, RuntimeSettings],
) -> None:
    stack, settings = provisioned
    documents_table = _resource_by_path(stack, settings, "Storage/DocumentsTable")
    connections_table = _resource_by_path(stack, settings, "Live/ConnectionsTable")
    store = DynamoConnectionStore(connections_table)
    connections = import_handler("live_connections", {"CONNECTIONS_TABLE": connections_table})
    for connection_id, tenant in (("conn-a1", "acme"), ("conn-a2", "acme"), ("conn-g1", "globex")):
        event = {"requestContext": {"routeKey": "$connect", "connectionId": connection_id,
                                    "authorizer": {"tenant_id": tenant, "sub": "u", "principalId": "u"}}}  # fmt: skip
        assert connections.handler(event, FakeLambdaContext()) == {"statusCode": 200}
    assert sorted(store.for_tenant("acme")) == ["conn-a1", "conn-a2"]

    table = boto3.resource("dynamodb", region_name=REGION).Table(documents_table)
    stream_arn = boto3.client("dynamodb", region_name=REGION).describe_table(TableName=documents_table)["Table"][
        "LatestStreamArn"
    ]
    table.put_item(Item=_document_item("acme", "QUEUED"))
    table.put_item(Item=_document_item("acme", "PROCESSING", stage="EMBED", embedded_parts={"0:8"}, embed_total=20))
    records, next_iterator = _stream_records(stream_arn)
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY"]

    app = import_handler(
        "live_pusher", {"CONNECTIONS_TABLE": connections_table, "WEBSOCKET_CALLBACK_URL": CALLBACK_URL}
    )
    stubber, posted = _stubbed_management_api(app)
    # First record: one of acme's two connections is gone (410), the other receives it; second record:
    # only the live one is left.
    stubber.add_client_error("post_to_connection", service_error_code="GoneException", http_status_code=410)
    stubber.add_response("post_to_connection", {})
    stubber.add_response("post_to_connection", {})
    with stubber:
        result = app.handler({"Records": records}, FakeLambdaContext())
    stubber.assert_no_pending_responses()
    assert result == {"batchItemFailures": []}

    gone = posted[0]["ConnectionId"]
    alive = ({"conn-a1", "conn-a2"} - {gone}).pop()
    assert [p["ConnectionId"] for p in posted] == [gone, alive, alive]
    assert store.for_tenant("acme") == [alive]  # the gone one was deleted
    assert store.for_tenant("globex") == ["conn-g1"]  # another tenant's connection heard nothing
    messages = [json.loads(p["Data"]) for p in posted[1:]]
    assert [m["document"]["status"] for m in messages] == ["QUEUED", "PROCESSING"]
    assert messages[1] == update_for(_document_item("acme", "PROCESSING", stage="EMBED",
                                                    embedded_parts={"0:8"}, embed_total=20)).message  # fmt: skip
    assert messages[1]["document"]["progress"] == {"done": 8, "total": 20}

    # A post that is throttled, then fails with a 5xx, fails its record: reported for the stream to retry.
    table.put_item(Item=_document_item("acme", "READY", chunk_count=20))
    records, _ = _stream_records(stream_arn, next_iterator)
    assert [r["eventName"] for r in records] == ["MODIFY"]
    stubber.add_client_error("post_to_connection", service_error_code="LimitExceededException", http_status_code=429)
    stubber.add_client_error("post_to_connection", service_error_code="InternalServerError", http_status_code=500)
    with stubber:
        result = app.handler({"Records": records}, FakeLambdaContext())
    stubber.assert_no_pending_responses()
    assert result == {"batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]}
    assert store.for_tenant("acme") == [alive]  # a failing connection is not a gone one

    # $disconnect forgets the connection.
    disconnect = {"requestContext": {"routeKey": "$disconnect", "connectionId": alive}}
    assert connections.handler(disconnect, FakeLambdaContext()) == {"statusCode": 200}
    assert store.for_tenant("acme") == []


def test_pusher_announces_a_restricted_document_only_to_who_may_read_it(
    provisioned: tuple[ProvisionedStack, RuntimeSettings],
) -> None:
    """Per-document access on the AWS path: $connect keeps the authorizer's subject and groups in the
    connections table; the pusher reads them back (BatchGetItem after the keys-only tenant index)
    and posts a restricted document's change to its readers only."""
    stack, settings = provisioned
    documents_table = _resource_by_path(stack, settings, "Storage/DocumentsTable")
    connections_table = _resource_by_path(stack, settings, "Live/ConnectionsTable")
    store = DynamoConnectionStore(connections_table)
    connections = import_handler("live_connections", {"CONNECTIONS_TABLE": connections_table})
    holders = {
        "acl-uploader": ("u-up", "[]"),
        "acl-listed": ("u-listed", "[]"),
        "acl-member": ("u-member", '["legal"]'),
        "acl-admin": ("u-admin", '["tenant-admins"]'),
        "acl-other": ("u-other", '["sales"]'),
    }
    for connection_id, (subject, groups) in holders.items():
        context = {"tenant_id": "initech", "sub": subject, "groups": groups, "principalId": subject}
        event = {"requestContext": {"routeKey": "$connect", "connectionId": connection_id, "authorizer": context}}
        assert connections.handler(event, FakeLambdaContext()) == {"statusCode": 200}
    held = {c.connection_id: (c.subject, c.groups) for c in store.connections_for_tenant("initech")}
    assert held["acl-member"] == ("u-member", ("legal",)) and set(held) == set(holders)

    table = boto3.resource("dynamodb", region_name=REGION).Table(documents_table)
    stream_arn = boto3.client("dynamodb", region_name=REGION).describe_table(TableName=documents_table)["Table"][
        "LatestStreamArn"
    ]
    _, iterator = _stream_records(stream_arn)  # past the other tests' records
    access = {"users": ["u-listed"], "groups": ["legal"]}
    table.put_item(Item=_document_item("initech", "READY", uploaded_by="u-up", access=access))
    records, _ = _stream_records(stream_arn, iterator)
    assert len(records) == 1

    app = import_handler(
        "live_pusher", {"CONNECTIONS_TABLE": connections_table, "WEBSOCKET_CALLBACK_URL": CALLBACK_URL}
    )
    stubber, posted = _stubbed_management_api(app)
    for _ in range(4):
        stubber.add_response("post_to_connection", {})
    with stubber:
        result = app.handler({"Records": records}, FakeLambdaContext())
    stubber.assert_no_pending_responses()
    assert result == {"batchItemFailures": []}
    assert sorted(p["ConnectionId"] for p in posted) == ["acl-admin", "acl-listed", "acl-member", "acl-uploader"]


def test_connect_records_expire_after_two_hours_and_need_a_tenant(
    provisioned: tuple[ProvisionedStack, RuntimeSettings],
) -> None:
    stack, settings = provisioned
    connections_table = _resource_by_path(stack, settings, "Live/ConnectionsTable")
    connections = import_handler("live_connections", {"CONNECTIONS_TABLE": connections_table})
    before = int(time.time())
    event = {"requestContext": {"routeKey": "$connect", "connectionId": "conn-t", "authorizer": {"tenant_id": "t1"}}}
    assert connections.handler(event, FakeLambdaContext()) == {"statusCode": 200}
    item = (
        boto3.resource("dynamodb", region_name=REGION)
        .Table(connections_table)
        .get_item(Key={"connection_id": "conn-t"})["Item"]
    )
    assert item["tenant_id"] == "t1"
    assert before + 7200 <= int(item["expires_at"]) <= int(time.time()) + 7200
    unauthorized = {"requestContext": {"routeKey": "$connect", "connectionId": "conn-x", "authorizer": {}}}
    assert connections.handler(unauthorized, FakeLambdaContext()) == {"statusCode": 403}


def test_jwks_is_fetched_over_http_and_cached() -> None:
    served: list[str] = []
    public = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    keys = {"keys": [{**jwt.algorithms.RSAAlgorithm.to_jwk(public, as_dict=True), "kid": "k1", "use": "sig"}]}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.append(self.path)
            body = json.dumps(keys).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/pool/.well-known/jwks.json"
        jwks = CachedJwks(url, allow_http=True)
        assert [key.key_id for key in jwks().keys] == ["k1"]
        assert [key.key_id for key in jwks().keys] == ["k1"]
        assert served == ["/pool/.well-known/jwks.json"]
    finally:
        server.shutdown()
        server.server_close()
