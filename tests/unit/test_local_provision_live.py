"""The local provisioner tells the WebSocket API and DynamoDB-stream mappings apart (skipped, with reasons)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from local.runtime.cloudformation.provision import Provisioner
from local.runtime.cloudformation.skipped import DYNAMODB_STREAM_MAPPING_REASON, SKIP_REASONS, WEBSOCKET_SKIP_REASON
from local.runtime.cloudformation.template import CloudFormationTemplate
from local.runtime.settings import RuntimeSettings

pytestmark = pytest.mark.unit

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/docs/stream/2026-12-01T00:00:00.000"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:ingest"


def _provisioner(resources: dict[str, Any]) -> Provisioner:
    template = CloudFormationTemplate(body={"Resources": resources}, path=Path("/tmp/cdk.out/S.template.json"))
    return Provisioner(template, RuntimeSettings.from_env({}))


RESOURCES: dict[str, Any] = {
    "Http": {"Type": "AWS::ApiGatewayV2::Api", "Properties": {"ProtocolType": "HTTP"}},
    "HttpRoute": {"Type": "AWS::ApiGatewayV2::Route", "Properties": {"ApiId": {"Ref": "Http"}, "RouteKey": "GET /x"}},
    "HttpJwt": {"Type": "AWS::ApiGatewayV2::Authorizer", "Properties": {"ApiId": {"Ref": "Http"}}},
    "Ws": {"Type": "AWS::ApiGatewayV2::Api", "Properties": {"ProtocolType": "WEBSOCKET"}},
    "WsConnect": {"Type": "AWS::ApiGatewayV2::Route", "Properties": {"ApiId": {"Ref": "Ws"}, "RouteKey": "$connect"}},
    "WsAuthorizer": {"Type": "AWS::ApiGatewayV2::Authorizer", "Properties": {"ApiId": {"Ref": "Ws"}}},
    "WsStage": {"Type": "AWS::ApiGatewayV2::Stage", "Properties": {"ApiId": {"Ref": "Ws"}}},
    "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
    "StreamByAtt": {
        "Type": "AWS::Lambda::EventSourceMapping",
        "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Table", "StreamArn"]}},
    },
    "StreamByDottedAtt": {
        "Type": "AWS::Lambda::EventSourceMapping",
        "Properties": {"EventSourceArn": {"Fn::GetAtt": "Table.StreamArn"}},
    },
    "StreamLiteral": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"EventSourceArn": STREAM_ARN}},
    "Queue": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"EventSourceArn": QUEUE_ARN}},
    "Deployment": {"Type": "Custom::CDKBucketDeployment", "Properties": {}},
    "Headers": {"Type": "AWS::CloudFront::ResponseHeadersPolicy", "Properties": {}},
    "Oac": {"Type": "AWS::CloudFront::OriginAccessControl", "Properties": {}},
}


@pytest.mark.parametrize(
    ("logical_id", "reason"),
    [
        ("Ws", WEBSOCKET_SKIP_REASON),
        ("WsConnect", WEBSOCKET_SKIP_REASON),
        ("WsAuthorizer", WEBSOCKET_SKIP_REASON),
        ("WsStage", WEBSOCKET_SKIP_REASON),
        ("Http", SKIP_REASONS["AWS::ApiGatewayV2::Api"]),
        ("HttpRoute", SKIP_REASONS["AWS::ApiGatewayV2::Route"]),
        ("HttpJwt", SKIP_REASONS["AWS::ApiGatewayV2::Authorizer"]),
        ("StreamByAtt", DYNAMODB_STREAM_MAPPING_REASON),
        ("StreamByDottedAtt", DYNAMODB_STREAM_MAPPING_REASON),
        ("StreamLiteral", DYNAMODB_STREAM_MAPPING_REASON),
        ("Queue", SKIP_REASONS["AWS::Lambda::EventSourceMapping"]),
        ("Deployment", SKIP_REASONS["Custom::CDKBucketDeployment"]),
        ("Headers", SKIP_REASONS["AWS::CloudFront::ResponseHeadersPolicy"]),
        ("Oac", SKIP_REASONS["AWS::CloudFront::OriginAccessControl"]),
    ],
)
def test_skip_reasons(logical_id: str, reason: str) -> None:
    provisioner = _provisioner(RESOURCES)
    assert provisioner._skip_reason(provisioner.template.resources[logical_id], set()) == reason


def test_only_sqs_mappings_are_read_for_the_poller() -> None:
    provisioner = _provisioner(RESOURCES)
    stream_mappings = {
        r.logical_id
        for r in provisioner.template.resources.values()
        if r.type == "AWS::Lambda::EventSourceMapping" and provisioner._is_stream_mapping(r)
    }
    assert stream_mappings == {"StreamByAtt", "StreamByDottedAtt", "StreamLiteral"}
