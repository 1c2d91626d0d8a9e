"""The local live channel's pure parts: what it reads from the template, and the stream poller's
batching, filtering, partial-failure retries and on-failure record, on fake clients."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver
from local.runtime.http.stream_poller import StreamPoller, _lambda_record
from local.runtime.http.websocket_api import StreamMapping, WebSocketApiDefinition, localized_environment
from local.runtime.http.websocket_gateway import _allows, _route_key

pytestmark = pytest.mark.unit

REGION, ACCOUNT = "us-east-1", "123456789012"
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/docs/stream/2026-12-01T00:00:00.000"


def _uri(function: str) -> dict[str, Any]:
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function}"
    return {
        "Fn::Join": ["", ["arn:aws:apigateway:", REGION, ":lambda:path/2015-03-31/functions/", arn, "/invocations"]]
    }


TEMPLATE = {
    "Resources": {
        "Ws": {
            "Type": "AWS::ApiGatewayV2::Api",
            "Properties": {"ProtocolType": "WEBSOCKET", "RouteSelectionExpression": "$request.body.action"},
        },
        "Http": {"Type": "AWS::ApiGatewayV2::Api", "Properties": {"ProtocolType": "HTTP"}},
        "Authorizer": {
            "Type": "AWS::ApiGatewayV2::Authorizer",
            "Properties": {
                "ApiId": {"Ref": "Ws"},
                "AuthorizerType": "REQUEST",
                "AuthorizerUri": _uri("authorizer-fn"),
                "IdentitySource": ["route.request.querystring.token"],
            },
        },
        "ConnectIntegration": {
            "Type": "AWS::ApiGatewayV2::Integration",
            "Properties": {"ApiId": {"Ref": "Ws"}, "IntegrationType": "AWS_PROXY", "IntegrationUri": _uri("conn-fn")},
        },
        "Connect": {
            "Type": "AWS::ApiGatewayV2::Route",
            "Properties": {
                "ApiId": {"Ref": "Ws"},
                "RouteKey": "$connect",
                "AuthorizationType": "CUSTOM",
                "AuthorizerId": {"Ref": "Authorizer"},
                "Target": {"Fn::Join": ["", ["integrations/", {"Ref": "ConnectIntegration"}]]},
            },
        },
        "Disconnect": {
            "Type": "AWS::ApiGatewayV2::Route",
            "Properties": {
                "ApiId": {"Ref": "Ws"},
                "RouteKey": "$disconnect",
                "Target": {"Fn::Join": ["", ["integrations/", {"Ref": "ConnectIntegration"}]]},
            },
        },
        "HttpRoute": {
            "Type": "AWS::ApiGatewayV2::Route",
            "Properties": {"ApiId": {"Ref": "Http"}, "RouteKey": "GET /x"},
        },
        "Stage": {"Type": "AWS::ApiGatewayV2::Stage", "Properties": {"ApiId": {"Ref": "Ws"}, "StageName": "live"}},
        "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
        "Dlq": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Pusher": {"Type": "AWS::Lambda::Function", "Properties": {}},
        "StreamMapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "EventSourceArn": {"Fn::GetAtt": ["Table", "StreamArn"]},
                "FunctionName": {"Ref": "Pusher"},
                "BatchSize": 2,
                "MaximumRetryAttempts": 1,
                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                "FilterCriteria": {"Filters": [{"Pattern": '{"eventName":["INSERT","MODIFY"]}'}]},
                "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": ["Dlq", "Arn"]}}},
            },
        },
        "QueueMapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": "arn:aws:sqs:us-east-1:123456789012:q", "FunctionName": "other"},
        },
    }
}


def _resolved() -> tuple[CloudFormationTemplate, IntrinsicResolver]:
    template = CloudFormationTemplate(TEMPLATE)
    resolver = IntrinsicResolver(template, region=REGION, account_id=ACCOUNT, stack_name="Test")
    for logical_id in ("Ws", "Http", "Authorizer", "ConnectIntegration", "Stage"):
        resolver.set_resource(logical_id, logical_id)  # as the provisioner does for skipped resources
    resolver.set_resource("Table", "docs", {"StreamArn": STREAM_ARN})
    resolver.set_resource("Dlq", "dlq-url", {"Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:pusher-dlq"})
    resolver.set_resource("Pusher", "pusher-fn")
    return template, resolver


def test_the_websocket_api_and_its_routes_come_from_the_template() -> None:
    definition = WebSocketApiDefinition.from_template(*_resolved())
    assert definition is not None
    assert (definition.api_id, definition.stage, definition.route_selection_expression) == (
        "Ws",
        "live",
        "$request.body.action",
    )
    assert set(definition.routes) == {"$connect", "$disconnect"}  # not the HTTP API's
    connect = definition.routes["$connect"]
    assert connect.function_name == "conn-fn" and connect.authorizer is not None
    assert connect.authorizer.function_name == "authorizer-fn"
    assert connect.authorizer.has_identity({"token": "t"}, {})
    assert not connect.authorizer.has_identity({"token": ""}, {}) and not connect.authorizer.has_identity({}, {})
    assert definition.routes["$disconnect"].authorizer is None
    assert definition.callback_url(REGION) == "https://Ws.execute-api.us-east-1.amazonaws.com/live"
    http_only = CloudFormationTemplate({"Resources": {"Http": TEMPLATE["Resources"]["Http"]}})
    assert (
        WebSocketApiDefinition.from_template(
            http_only, IntrinsicResolver(http_only, region=REGION, account_id=ACCOUNT, stack_name="T")
        )
        is None
    )


def test_the_stream_mapping_comes_from_the_template_and_filters_records() -> None:
    [mapping] = StreamMapping.from_template(*_resolved())
    assert (mapping.logical_id, mapping.stream_arn, mapping.function_name) == ("StreamMapping", STREAM_ARN, "pusher-fn")
    assert (mapping.batch_size, mapping.maximum_retry_attempts, mapping.report_batch_item_failures) == (2, 1, True)
    assert mapping.on_failure_arn == f"arn:aws:sqs:{REGION}:{ACCOUNT}:pusher-dlq"
    assert mapping.accepts({"eventName": "INSERT"}) and mapping.accepts({"eventName": "MODIFY"})
    assert not mapping.accepts({"eventName": "REMOVE"}) and not mapping.accepts({})
    nested = StreamMapping("M", STREAM_ARN, "f", filter_patterns=({"dynamodb": {"Keys": {"id": [{"S": "a"}]}}},))
    assert nested.accepts({"dynamodb": {"Keys": {"id": {"S": "a"}}}})
    assert not nested.accepts({"dynamodb": {"Keys": {"id": {"S": "b"}}}})


def test_the_live_functions_environment_points_at_the_local_stand_ins() -> None:
    definition = WebSocketApiDefinition.from_template(*_resolved())
    environment = {
        "TOKEN_ISSUER": "https://cognito-idp.us-east-1.amazonaws.com/ApiUserPool5AB2526B",
        "WEBSOCKET_CALLBACK_URL": "https://Ws.execute-api.us-east-1.amazonaws.com/live",
        "OTHER_API": "https://Http.execute-api.us-east-1.amazonaws.com/live",
        "TABLE": "docs",
    }
    local = localized_environment(
        environment, issuer="http://127.0.0.1:8080/_local/oidc", websocket=definition, region=REGION,
        live_url="http://127.0.0.1:8080/_local/live",
    )  # fmt: skip
    assert local == {
        "TOKEN_ISSUER": "http://127.0.0.1:8080/_local/oidc",
        "WEBSOCKET_CALLBACK_URL": "http://127.0.0.1:8080/_local/live",
        "OTHER_API": environment["OTHER_API"],
        "TABLE": "docs",
    }


def test_given_the_api_url_an_http_api_url_becomes_the_local_one_path_kept() -> None:
    definition = WebSocketApiDefinition.from_template(*_resolved())
    environment = {
        "MCP_RESOURCE_URL": "https://Http.execute-api.us-east-1.amazonaws.com/mcp",
        "WEBSOCKET_CALLBACK_URL": "https://Ws.execute-api.us-east-1.amazonaws.com/live",
    }
    local = localized_environment(
        environment, issuer="http://127.0.0.1:8080/_local/oidc", websocket=definition, region=REGION,
        live_url="http://127.0.0.1:8080/_local/live", api_url="http://127.0.0.1:8080",
    )  # fmt: skip
    assert local == {
        "MCP_RESOURCE_URL": "http://127.0.0.1:8080/mcp",
        "WEBSOCKET_CALLBACK_URL": "http://127.0.0.1:8080/_local/live",
    }


def test_the_authorizers_policy_decides_as_api_gateway() -> None:
    arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:Ws/live/$connect"

    def policy(*statements: tuple[str, str]) -> dict[str, Any]:
        return {"Statement": [{"Action": "execute-api:Invoke", "Effect": e, "Resource": r} for e, r in statements]}

    assert _allows(policy(("Allow", arn)), arn)
    assert _allows(policy(("Allow", f"arn:aws:execute-api:{REGION}:{ACCOUNT}:Ws/*")), arn)
    assert not _allows(policy(("Deny", arn)), arn)
    assert not _allows(policy(("Allow", arn), ("Deny", "*")), arn)
    assert not _allows(policy(("Allow", f"arn:aws:execute-api:{REGION}:{ACCOUNT}:Other/live/$connect")), arn)
    assert not _allows(None, arn) and not _allows({"Statement": []}, arn)


def test_messages_are_routed_by_the_selection_expression() -> None:
    definition = WebSocketApiDefinition("Ws", "live")
    assert _route_key(definition, '{"action": "subscribe"}') == "subscribe"
    assert _route_key(definition, '{"action": "$connect"}') == "$default"
    assert _route_key(definition, "not json") == "$default"
    assert _route_key(definition, b"\x00") == "$default"
    assert _route_key(WebSocketApiDefinition("Ws", "live", "$default"), '{"action": "x"}') == "$default"


# -- the stream poller ----------------------------------------------------------------------------


def _record(sequence: int, event: str = "MODIFY") -> dict[str, Any]:
    created = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)
    record = {
        "eventID": f"e{sequence}",
        "eventName": event,
        "dynamodb": {"SequenceNumber": str(sequence), "ApproximateCreationDateTime": created, "Keys": {}},
    }
    return _lambda_record(record, STREAM_ARN)


class _Sqs:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def get_queue_url(self, QueueName: str) -> dict[str, str]:
        return {"QueueUrl": f"http://sqs/{QueueName}"}

    def send_message(self, QueueUrl: str, MessageBody: str) -> None:
        self.sent.append({"url": QueueUrl, **json.loads(MessageBody)})


def _poller(answers: list[tuple[str, bool]], calls: list[list[str]], retries: int = 1) -> tuple[StreamPoller, _Sqs]:
    [mapping] = StreamMapping.from_template(*_resolved())
    mapping = StreamMapping(**{**mapping.__dict__, "maximum_retry_attempts": retries})
    sqs = _Sqs()

    def invoke(function_name: str, payload: bytes) -> tuple[int, str, bool]:
        event = json.loads(payload)
        assert function_name == "pusher-fn"
        assert all(r["eventSourceARN"] == STREAM_ARN for r in event["Records"])
        calls.append([r["dynamodb"]["SequenceNumber"] for r in event["Records"]])
        answer, errored = answers.pop(0) if answers else ('{"batchItemFailures": []}', False)
        return 200, answer, errored

    poller = StreamPoller(mapping, streams=None, sqs=sqs, invoke=invoke, listening=lambda: True, retry_pause_seconds=0)
    return poller, sqs


def test_a_partial_failure_is_retried_from_its_first_failed_record() -> None:
    calls: list[list[str]] = []
    failing = json.dumps({"batchItemFailures": [{"itemIdentifier": "3"}, {"itemIdentifier": "2"}]})
    poller, sqs = _poller([(failing, False)], calls)
    poller._deliver([_record(1), _record(2), _record(3)])
    assert calls == [["1", "2", "3"], ["2", "3"]]
    assert sqs.sent == [] and poller.stats()["failed_invocations"] == 1


@pytest.mark.parametrize(
    "answer",
    [('{"errorType": "X"}', True), ('{"batchItemFailures": [{"itemIdentifier": "zzz"}]}', False), ('"ok"', False)],
)
def test_a_failed_batch_is_retried_whole_then_recorded_on_the_failure_queue(answer: tuple[str, bool]) -> None:
    calls: list[list[str]] = []
    poller, sqs = _poller([answer, answer], calls, retries=1)
    poller._deliver([_record(1), _record(2)])
    assert calls == [["1", "2"], ["1", "2"]]  # the first attempt and its one retry
    [sent] = sqs.sent
    assert sent["url"] == "http://sqs/pusher-dlq"
    assert sent["requestContext"]["condition"] == "RetryAttemptsExhausted"
    info = sent["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == ("1", "2", 2)
    assert info["streamArn"] == STREAM_ARN and isinstance(info["approximateArrivalOfFirstRecord"], float)
