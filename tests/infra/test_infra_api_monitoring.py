"""HTTP API (routes, JWT, logs, throttling), Cognito, alarms, the alarm topic and stack outputs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.template_tools import SynthResult, as_list, render_token

pytestmark = pytest.mark.infra

# Served routes and the 405-only methods are asserted against the OpenAPI document in test_api_routes.py.
PUBLIC_ROUTES = {"GET /openapi.json"}
OUTPUTS = {
    "BucketName",
    "IngestQueueUrl",
    "DeadLetterQueueUrl",
    "DocumentsTableName",
    "IdempotencyTableName",
    "StateMachineArn",
    "ApiUrl",
    "UserPoolId",
    "AlarmTopicArn",
    "OpenSearchEndpoint",
}


def _http_api(synth: SynthResult, resource_type: str) -> dict[str, dict[str, Any]]:
    """Resources of the HTTP API only (the live-status WebSocket API has its own, under Live/)."""
    prefix = f"{synth.stack_name}/Api/"
    return {
        logical_id: resource
        for logical_id, resource in synth.of_type(resource_type).items()
        if resource.get("Metadata", {}).get("aws:cdk:path", "").startswith(prefix)
    }


def test_routes_all_require_the_cognito_jwt(synth: SynthResult) -> None:
    (authorizer_id,) = _http_api(synth, "AWS::ApiGatewayV2::Authorizer")
    authorizer = synth.resources[authorizer_id]["Properties"]
    assert authorizer["AuthorizerType"] == "JWT"
    assert authorizer["JwtConfiguration"]["Audience"] == [{"Ref": synth.logical_id("Api/UserPool/WebClient")}]
    assert render_token(authorizer["JwtConfiguration"]["Issuer"]).endswith(f"/${{{synth.logical_id('Api/UserPool')}}}")
    routes = _http_api(synth, "AWS::ApiGatewayV2::Route").values()
    for route in routes:
        if route["Properties"]["RouteKey"] in PUBLIC_ROUTES:
            assert route["Properties"]["AuthorizationType"] == "NONE"
            continue
        assert route["Properties"]["AuthorizationType"] == "JWT"
        assert route["Properties"]["AuthorizerId"] == {"Ref": authorizer_id}


def test_routes_go_to_the_api_function(synth: SynthResult) -> None:
    # Two integrations of the one function: the served routes, and the methods it answers 405.
    integrations = _http_api(synth, "AWS::ApiGatewayV2::Integration").values()
    assert len(integrations) == 2
    for integration in integrations:
        uri = {"Fn::GetAtt": [synth.logical_id("Api/ApiFunction"), "Arn"]}
        assert integration["Properties"]["IntegrationUri"] == uri
        assert integration["Properties"]["PayloadFormatVersion"] == "2.0"


def test_stage_has_access_logs_and_throttling(synth: SynthResult) -> None:
    (stage,) = _http_api(synth, "AWS::ApiGatewayV2::Stage").values()
    props = stage["Properties"]
    assert props["StageName"] == "$default"
    assert props["AutoDeploy"] is True
    assert "DestinationArn" in props["AccessLogSettings"]
    assert "$context.requestId" in props["AccessLogSettings"]["Format"]
    assert props["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": synth.config.api.throttling_burst_limit,
        "ThrottlingRateLimit": synth.config.api.throttling_rate_limit,
    }


def test_user_pool_carries_an_immutable_tenant(synth: SynthResult) -> None:
    props = synth.resource("Api/UserPool")["Properties"]
    (tenant,) = [a for a in props["Schema"] if a["Name"] == "tenant_id"]
    assert tenant["Mutable"] is False
    assert props["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert props["Policies"]["PasswordPolicy"]["MinimumLength"] >= 12


ALARMS = {
    "Monitoring/DeadLetterQueueAlarm": ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Intake/DeadLetterQueue"),
    "Monitoring/QueueAgeAlarm": ("AWS/SQS", "ApproximateAgeOfOldestMessage", "Intake/IngestQueue"),
    "Monitoring/ExecutionsTimedOutAlarm": ("AWS/States", "ExecutionsTimedOut", "Workflow/StateMachine"),
    "Monitoring/IntakeErrorsAlarm": ("AWS/Lambda", "Errors", "Intake/IntakeFunction"),
}


@pytest.mark.parametrize("path", sorted(ALARMS))
def test_alarm_watches_its_metric_and_notifies_the_topic(synth: SynthResult, path: str) -> None:
    namespace, metric, target = ALARMS[path]
    props = synth.resource(path)["Properties"]
    assert (props["Namespace"], props["MetricName"]) == (namespace, metric)
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    expected_threshold = synth.config.monitoring.queue_age_threshold_seconds if "QueueAge" in path else 0
    assert props["Threshold"] == expected_threshold
    topic = {"Ref": synth.logical_id("Monitoring/AlarmTopic")}
    assert props["AlarmActions"] == [topic]
    target_id = synth.logical_id(target)
    dimension_values = [render_token(d["Value"]) for d in props["Dimensions"]]
    assert any(target_id in value for value in dimension_values), dimension_values


def test_alarm_topic_is_encrypted_ssl_only_and_open_to_cloudwatch(synth: SynthResult) -> None:
    topic_id = synth.logical_id("Monitoring/AlarmTopic")
    key_id = synth.logical_id("Monitoring/AlarmTopicKey")
    assert synth.resources[topic_id]["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert synth.resources[key_id]["Properties"]["EnableKeyRotation"] is True
    (policy,) = synth.of_type("AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
        for s in statements
    )
    assert any(s["Effect"] == "Allow" and s["Principal"] == {"Service": "cloudwatch.amazonaws.com"} for s in statements)
    key_statements = synth.resources[key_id]["Properties"]["KeyPolicy"]["Statement"]
    assert any(
        s["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and "kms:Decrypt" in as_list(s["Action"])
        for s in key_statements
    )


def test_dashboard_exists(synth: SynthResult) -> None:
    assert len(synth.of_type("AWS::CloudWatch::Dashboard")) == 1


def test_stack_outputs(synth: SynthResult) -> None:
    assert set(synth.template_dict["Outputs"]) >= OUTPUTS


def test_opensearch_domain_is_locked_down(synth: SynthResult) -> None:
    props = synth.resource("Search/Domain")["Properties"]
    assert props["EngineVersion"] == "OpenSearch_2.19"
    assert props["EncryptionAtRestOptions"] == {"Enabled": True}
    assert props["NodeToNodeEncryptionOptions"] == {"Enabled": True}
    assert props["DomainEndpointOptions"] == {"EnforceHTTPS": True, "TLSSecurityPolicy": "Policy-Min-TLS-1-2-2019-07"}
    assert "AdvancedSecurityOptions" not in props
    assert set(props["LogPublishingOptions"]) == {"SEARCH_SLOW_LOGS", "INDEX_SLOW_LOGS", "ES_APPLICATION_LOGS"}
