"""The page's hosting (private bucket, CloudFront with OAC, security headers, config.json) and live
status (WebSocket API with a token authorizer, connections table, documents-stream pusher)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from infra.cdk_app import cdk_json_context, create_app
from infra.config import ConfigError, parse_config
from tests.infra.template_tools import Resource, SynthResult, as_list, render_token

pytestmark = pytest.mark.infra

CERTIFICATE_ARN = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab"


def _props(synth: SynthResult, path: str) -> dict[str, Any]:
    return dict(synth.resource(path)["Properties"])


def _one(synth: SynthResult, resource_type: str) -> tuple[str, Resource]:
    (item,) = synth.of_type(resource_type).items()
    return item


def _statements_on(synth: SynthResult, bucket_path: str) -> list[dict[str, Any]]:
    bucket_id = synth.logical_id(bucket_path)
    return [
        statement
        for policy in synth.of_type("AWS::S3::BucketPolicy").values()
        if policy["Properties"]["Bucket"] == {"Ref": bucket_id}
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


# -- hosting bucket ---------------------------------------------------------------------------


def test_hosting_bucket_is_private_encrypted_versioned_and_logged(synth: SynthResult) -> None:
    props = _props(synth, "Web/Bucket")
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {
        "Ref": synth.logical_id("Storage/AccessLogsBucket")
    }
    assert "WebsiteConfiguration" not in props  # served by CloudFront only, never as an S3 website


def test_hosting_bucket_policy_is_tls_only_and_admits_only_this_distribution(synth: SynthResult) -> None:
    statements = _statements_on(synth, "Web/Bucket")
    denies = [s for s in statements if s["Effect"] == "Deny"]
    assert any(
        s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and s["Principal"] == {"AWS": "*"} for s in denies
    )
    allows = [s for s in statements if s["Effect"] == "Allow"]
    # OAC: the CloudFront service principal, for this distribution only, read only. No public or OAI grant.
    assert len(allows) == 1
    (allow,) = allows
    assert allow["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    assert allow["Action"] == "s3:GetObject"
    source_arn = render_token(allow["Condition"]["StringEquals"]["AWS:SourceArn"])
    assert source_arn.endswith(f":distribution/${{{synth.logical_id('Web/Distribution')}}}")
    assert render_token(allow["Resource"]) == f"${{{synth.logical_id('Web/Bucket')}.Arn}}/*"


def test_cloudfront_logs_bucket_is_private_and_tls_only(synth: SynthResult) -> None:
    props = _props(synth, "Web/CloudFrontLogsBucket")
    assert all(props["PublicAccessBlockConfiguration"].values())
    # CloudFront standard logging writes with the log-delivery ACL, so ACLs stay enabled here only.
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerPreferred"}]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in _statements_on(synth, "Web/CloudFrontLogsBucket")
    )


# -- distribution ------------------------------------------------------------------------------


def test_distribution_uses_origin_access_control_not_identity(synth: SynthResult) -> None:
    config = _props(synth, "Web/Distribution")["DistributionConfig"]
    (origin,) = config["Origins"]
    assert origin["DomainName"] == {"Fn::GetAtt": [synth.logical_id("Web/Bucket"), "RegionalDomainName"]}
    assert origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    oac_id, oac = _one(synth, "AWS::CloudFront::OriginAccessControl")
    assert origin["OriginAccessControlId"] == {"Fn::GetAtt": [oac_id, "Id"]}
    assert oac["Properties"]["OriginAccessControlConfig"] | {"Name": None, "Description": None} == {
        "Name": None,
        "Description": None,
        "OriginAccessControlOriginType": "s3",
        "SigningBehavior": "always",
        "SigningProtocol": "sigv4",
    }
    assert synth.of_type("AWS::CloudFront::CloudFrontOriginAccessIdentity") == {}


def test_distribution_is_https_only_spa_and_logged(synth: SynthResult) -> None:
    config = _props(synth, "Web/Distribution")["DistributionConfig"]
    behavior = config["DefaultCacheBehavior"]
    assert behavior["ViewerProtocolPolicy"] == "redirect-to-https"
    assert behavior["AllowedMethods"] == ["GET", "HEAD"]
    assert behavior["ResponseHeadersPolicyId"] == {"Ref": synth.logical_id("Web/SecurityHeaders")}
    assert "CacheBehaviors" not in config  # no other path escapes the headers or the redirect
    assert config["DefaultRootObject"] == "index.html"
    assert {(e["ErrorCode"], e["ResponseCode"], e["ResponsePagePath"]) for e in config["CustomErrorResponses"]} == {
        (403, 200, "/index.html"),
        (404, 200, "/index.html"),
    }
    assert config["Logging"]["Bucket"] == {
        "Fn::GetAtt": [synth.logical_id("Web/CloudFrontLogsBucket"), "RegionalDomainName"]
    }
    # Without a custom domain: the default certificate, no aliases (CFR4 acknowledged for that case).
    assert "Aliases" not in config and "ViewerCertificate" not in config


def _headers(synth: SynthResult, path: str = "Web/SecurityHeaders") -> dict[str, Any]:
    return dict(_props(synth, path)["ResponseHeadersPolicyConfig"])


def _csp(synth: SynthResult) -> dict[str, list[str]]:
    text = render_token(_headers(synth)["SecurityHeadersConfig"]["ContentSecurityPolicy"]["ContentSecurityPolicy"])
    directives: dict[str, list[str]] = {}
    for directive in text.split(";"):
        name, *values = directive.split()
        directives[name] = values
    return directives


def test_security_headers(synth: SynthResult) -> None:
    security = _headers(synth)["SecurityHeadersConfig"]
    hsts = security["StrictTransportSecurity"]
    assert hsts["AccessControlMaxAgeSec"] >= 31_536_000 and hsts["IncludeSubdomains"] and hsts["Override"]
    assert security["ContentTypeOptions"] == {"Override": True}
    assert security["FrameOptions"] == {"FrameOption": "DENY", "Override": True}
    assert security["ReferrerPolicy"] == {"ReferrerPolicy": "strict-origin-when-cross-origin", "Override": True}
    assert security["ContentSecurityPolicy"]["Override"] is True


def test_content_security_policy_allows_only_the_page_and_its_backends(synth: SynthResult) -> None:
    csp = _csp(synth)
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == ["'self'"]
    assert csp["frame-ancestors"] == ["'none'"] and csp["object-src"] == ["'none'"]
    assert not any("unsafe" in value for values in csp.values() for value in values)
    connect = csp["connect-src"]
    websocket = synth.logical_id("Live/WebSocketApi")
    cognito = synth.logical_id("Api/UserPool/Domain")
    assert connect[0] == "'self'"
    assert f"wss://${{{websocket}}}.execute-api.${{AWS::Region}}.${{AWS::URLSuffix}}" in connect
    assert f"https://${{{cognito}}}.auth.${{AWS::Region}}.amazoncognito.com" in connect
    # The API and the documents bucket name the distribution in their CORS origins, so the CSP names
    # them by regional wildcard (a reference back would be a cycle); never any host of any region.
    assert "https://*.execute-api.${AWS::Region}.${AWS::URLSuffix}" in connect
    assert all(value.startswith(("'self'", "https://", "wss://")) for value in connect)
    assert not any(value in ("*", "https:", "wss:", "https://*") for value in connect)


def _page_config(synth: SynthResult) -> dict[str, Any]:
    """config.json as deployed: the asset's JSON with the deploy-time markers put back as tokens."""
    _, deployment = _one(synth, "Custom::CDKBucketDeployment")
    props = deployment["Properties"]
    (index,) = [i for i, markers in enumerate(props["SourceMarkers"]) if markers]
    asset_dir = synth.outdir / f"asset.{Path(props['SourceObjectKeys'][index]).stem}"
    text = (asset_dir / "config.json").read_text()
    for marker, value in props["SourceMarkers"][index].items():
        text = text.replace(marker, render_token(value))  # the value carries its JSON quotes
    return dict(json.loads(text))


def test_page_is_deployed_with_the_generated_config(synth: SynthResult) -> None:
    _, deployment = _one(synth, "Custom::CDKBucketDeployment")
    props = deployment["Properties"]
    assert props["DestinationBucketName"] == {"Ref": synth.logical_id("Web/Bucket")}
    assert props["DistributionId"] == {"Ref": synth.logical_id("Web/Distribution")}
    assert props["DistributionPaths"] == ["/*"] and props["Prune"] is True
    assert props["SystemMetadata"] == {"cache-control": "no-cache"}
    assert len(props["SourceObjectKeys"]) == 2  # web/ and config.json
    distribution = f"https://${{{synth.logical_id('Web/Distribution')}.DomainName}}"
    assert _page_config(synth) == {
        "apiUrl": f"${{{synth.logical_id('Api/HttpApi')}.ApiEndpoint}}",
        "maxUploadBytes": synth.config.upload.max_upload_bytes,
        "live": {
            "kind": "websocket",
            "url": f"wss://${{{synth.logical_id('Live/WebSocketApi')}}}.execute-api.${{AWS::Region}}."
            "${AWS::URLSuffix}/live",
        },
        "auth": {
            "kind": "cognito",
            "domain": f"https://${{{synth.logical_id('Api/UserPool/Domain')}}}.auth.${{AWS::Region}}.amazoncognito.com",
            "clientId": f"${{{synth.logical_id('Api/UserPool/WebClient')}}}",
            "redirectUri": f"{distribution}/",
            "logoutUri": f"{distribution}/",
            "scopes": ["openid", "email", "profile"],
        },
    }


def test_page_origin_is_a_callback_of_the_client_and_an_origin_of_the_api_and_bucket(synth: SynthResult) -> None:
    page = f"https://${{{synth.logical_id('Web/Distribution')}.DomainName}}"
    client = _props(synth, "Api/UserPool/WebClient")
    assert f"{page}/" in [render_token(url) for url in client["CallbackURLs"]]
    assert f"{page}/" in [render_token(url) for url in client["LogoutURLs"]]
    assert client["AllowedOAuthFlows"] == ["code"]  # no implicit flow
    assert client["AllowedOAuthFlowsUserPoolClient"] is True
    cors = _props(synth, "Api/HttpApi")["CorsConfiguration"]
    assert page in [render_token(origin) for origin in cors["AllowOrigins"]]
    bucket_origins = [
        render_token(origin)
        for rule in _props(synth, "Storage/DocumentsBucket")["CorsConfiguration"]["CorsRules"]
        for origin in rule["AllowedOrigins"]
    ]
    assert page in bucket_origins


def test_outputs(synth: SynthResult) -> None:
    outputs = synth.template_dict["Outputs"]
    assert render_token(outputs["WebUrl"]["Value"]) == f"https://${{{synth.logical_id('Web/Distribution')}.DomainName}}"
    assert render_token(outputs["WebSocketUrl"]["Value"]).endswith(".${AWS::URLSuffix}/live")


# -- live status --------------------------------------------------------------------------------


def test_websocket_connect_route_has_the_token_authorizer(synth: SynthResult) -> None:
    api = synth.resource("Live/WebSocketApi")
    assert api["Properties"]["ProtocolType"] == "WEBSOCKET"
    api_ref = {"Ref": synth.logical_id("Live/WebSocketApi")}
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in synth.of_type("AWS::ApiGatewayV2::Route").values()
        if r["Properties"]["ApiId"] == api_ref
    }
    # Answers stream on the route "answer" (infra/constructs/live_answers.py), on admitted connections.
    assert set(routes) == {"$connect", "$disconnect", "answer"}
    assert "AuthorizerId" not in routes["answer"] and "AuthorizerId" not in routes["$disconnect"]
    (authorizer_id,) = [
        k for k, r in synth.of_type("AWS::ApiGatewayV2::Authorizer").items() if r["Properties"]["ApiId"] == api_ref
    ]
    authorizer = synth.resources[authorizer_id]["Properties"]
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert authorizer["IdentitySource"] == ["route.request.querystring.token"]
    assert synth.logical_id("Live/AuthorizerFunction") in render_token(authorizer["AuthorizerUri"])
    assert routes["$connect"]["AuthorizationType"] == "CUSTOM"
    assert routes["$connect"]["AuthorizerId"] == {"Ref": authorizer_id}
    # API Gateway allows an authorizer on $connect only (APIG4 acknowledged on $disconnect).
    assert routes["$disconnect"].get("AuthorizationType", "NONE") == "NONE"
    behind = {
        "$connect": synth.logical_id("Live/ConnectionsFunction"),
        "$disconnect": synth.logical_id("Live/ConnectionsFunction"),
        "answer": synth.logical_id("LiveAnswers/AnswersFunction"),
    }
    for key, route in routes.items():
        integration = synth.resources[route["Target"]["Fn::Join"][1][1]["Ref"]]["Properties"]
        assert behind[key] in render_token(integration["IntegrationUri"]), key


def test_authorizer_verifies_the_user_pools_id_tokens(synth: SynthResult) -> None:
    env = _props(synth, "Live/AuthorizerFunction")["Environment"]["Variables"]
    assert render_token(env["TOKEN_ISSUER"]) == f"https://${{{synth.logical_id('Api/UserPool')}.ProviderURL}}"
    assert env["TOKEN_AUDIENCE"] == {"Ref": synth.logical_id("Api/UserPool/WebClient")}


def test_websocket_stage_has_access_logs_and_throttling(synth: SynthResult) -> None:
    stage = _props(synth, "Live/Stage")
    assert stage["StageName"] == "live" and stage["AutoDeploy"] is True
    assert stage["AccessLogSettings"]["DestinationArn"] == {"Fn::GetAtt": [synth.logical_id("Live/AccessLogs"), "Arn"]}
    assert "$context.connectionId" in stage["AccessLogSettings"]["Format"]
    # The ID token is in the connect URL's query string: it must never reach the logs.
    assert "querystring" not in stage["AccessLogSettings"]["Format"].lower()
    assert stage["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": synth.config.live.throttling_burst_limit,
        "ThrottlingRateLimit": synth.config.live.throttling_rate_limit,
    }


def test_connections_table(synth: SynthResult) -> None:
    props = _props(synth, "Live/ConnectionsTable")
    assert props["KeySchema"] == [{"AttributeName": "connection_id", "KeyType": "HASH"}]
    (index,) = props["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "by_tenant"
    assert index["KeySchema"] == [{"AttributeName": "tenant_id", "KeyType": "HASH"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"


def test_documents_table_streams_new_images(synth: SynthResult) -> None:
    assert _props(synth, "Storage/DocumentsTable")["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}


def test_pusher_consumes_the_documents_stream_with_partial_failures_bisect_and_dlq(synth: SynthResult) -> None:
    pusher = {"Ref": synth.logical_id("Live/PusherFunction")}
    (mapping,) = [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == pusher
    ]
    live = synth.config.live
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [synth.logical_id("Storage/DocumentsTable"), "StreamArn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == live.stream_retry_attempts
    assert mapping["BatchSize"] == live.stream_batch_size
    assert mapping["StartingPosition"] == "LATEST"
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [synth.logical_id("Live/PusherDeadLetterQueue"), "Arn"]
    }
    assert json.loads(mapping["FilterCriteria"]["Filters"][0]["Pattern"]) == {"eventName": ["INSERT", "MODIFY"]}
    env = _props(synth, "Live/PusherFunction")["Environment"]["Variables"]
    assert render_token(env["WEBSOCKET_CALLBACK_URL"]).startswith(
        f"https://${{{synth.logical_id('Live/WebSocketApi')}}}"
    )
    assert render_token(env["WEBSOCKET_CALLBACK_URL"]).endswith("/live")
    dlq = _props(synth, "Live/PusherDeadLetterQueue")
    assert dlq["SqsManagedSseEnabled"] is True and dlq["MessageRetentionPeriod"] == 14 * 86400


def _grants(synth: SynthResult, function_path: str) -> dict[str, set[str]]:
    """action -> rendered resources, over the role's statements (logs and X-Ray left out)."""
    grants: dict[str, set[str]] = {}
    for statement in synth.role_statements(function_path):
        assert statement["Effect"] == "Allow"
        for action in as_list(statement["Action"]):
            if action.startswith(("logs:", "xray:")):
                continue
            grants.setdefault(action, set()).update(render_token(r) for r in as_list(statement["Resource"]))
    return grants


def test_least_privilege_of_the_live_functions(synth: SynthResult) -> None:
    connections = f"${{{synth.logical_id('Live/ConnectionsTable')}.Arn}}"
    documents_stream = f"${{{synth.logical_id('Storage/DocumentsTable')}.StreamArn}}"
    dlq = f"${{{synth.logical_id('Live/PusherDeadLetterQueue')}.Arn}}"
    api = synth.logical_id("Live/WebSocketApi")
    assert _grants(synth, "Live/AuthorizerFunction") == {}
    assert _grants(synth, "Live/ConnectionsFunction") == {
        "dynamodb:PutItem": {connections},
        "dynamodb:DeleteItem": {connections},
    }
    assert _grants(synth, "Live/PusherFunction") == {
        "dynamodb:Query": {f"{connections}/index/by_tenant"},
        "dynamodb:DeleteItem": {connections},
        # Who holds each connection (subject, groups): a change goes only to who may read the document.
        "dynamodb:BatchGetItem": {connections},
        "dynamodb:DescribeStream": {documents_stream},
        "dynamodb:GetRecords": {documents_stream},
        "dynamodb:GetShardIterator": {documents_stream},
        "dynamodb:ListStreams": {"*"},  # no resource-level permission exists for it
        "execute-api:ManageConnections": {
            f"arn:${{AWS::Partition}}:execute-api:${{AWS::Region}}:${{AWS::AccountId}}:${{{api}}}/live/POST/@connections/*"
        },
        "sqs:SendMessage": {dlq},
        "sqs:GetQueueAttributes": {dlq},
        "sqs:GetQueueUrl": {dlq},
    }


def test_pusher_alarms_go_to_the_alarm_topic(synth: SynthResult) -> None:
    topic = {"Ref": synth.logical_id("Monitoring/AlarmTopic")}
    alarms = {
        path: synth.resource(f"Live/{path}")["Properties"]
        for path in ("PusherErrorsAlarm", "PusherIteratorAgeAlarm", "PusherDeadLetterAlarm")
    }
    for props in alarms.values():
        assert props["AlarmActions"] == [topic] and props["OKActions"] == [topic]
        assert props["TreatMissingData"] == "notBreaching"
    iterator = alarms["PusherIteratorAgeAlarm"]
    assert (iterator["Namespace"], iterator["MetricName"], iterator["Statistic"]) == (
        "AWS/Lambda",
        "IteratorAge",
        "Maximum",
    )
    assert iterator["Threshold"] == synth.config.live.iterator_age_threshold_seconds * 1000
    assert alarms["PusherErrorsAlarm"]["MetricName"] == "Errors"
    assert alarms["PusherDeadLetterAlarm"]["Dimensions"][0]["Value"] == {
        "Fn::GetAtt": [synth.logical_id("Live/PusherDeadLetterQueue"), "QueueName"]
    }


# -- configuration and the custom-domain variant -----------------------------------------------


@pytest.mark.parametrize(
    "hosting",
    [
        {"domainName": "docs.example.com"},
        {"certificateArn": CERTIFICATE_ARN},
        {"domainName": "docs.example.com", "certificateArn": CERTIFICATE_ARN.replace("us-east-1", "eu-west-1")},
        {"domainName": "Not A Domain", "certificateArn": CERTIFICATE_ARN},
    ],
)
def test_hosting_config_refuses_half_or_wrong_custom_domains(hosting: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="hosting"):
        parse_config({"hosting": hosting})


@pytest.fixture(scope="module")
def custom_domain(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    context = copy.deepcopy(cdk_json_context()["rag-ingest"])
    context["hosting"] = {**context["hosting"], "domainName": "docs.example.com", "certificateArn": CERTIFICATE_ARN}
    outdir = tmp_path_factory.mktemp("cdk.out.custom-domain")
    app, stack, config = create_app(context={"rag-ingest": context}, outdir=str(outdir))
    app.synth()  # cdk-nag findings would raise
    template = json.loads((outdir / stack.template_file).read_text())
    from aws_cdk.assertions import Template

    return SynthResult(
        config=config,
        template=Template.from_json(template),
        template_dict=template,
        outdir=outdir,
        stack_name=stack.stack_name,
    )


def test_custom_domain_gets_its_certificate_tls12_and_an_exact_csp(custom_domain: SynthResult) -> None:
    config = _props(custom_domain, "Web/Distribution")["DistributionConfig"]
    assert config["Aliases"] == ["docs.example.com"]
    assert config["ViewerCertificate"] == {
        "AcmCertificateArn": CERTIFICATE_ARN,
        "MinimumProtocolVersion": "TLSv1.2_2021",
        "SslSupportMethod": "sni-only",
    }
    # The page's origin is a literal, so nothing refers back to the distribution: the CSP names the
    # API and the documents bucket exactly.
    connect = _csp(custom_domain)["connect-src"]
    assert f"${{{custom_domain.logical_id('Api/HttpApi')}.ApiEndpoint}}" in connect
    bucket = custom_domain.logical_id("Storage/DocumentsBucket")
    assert f"https://${{{bucket}}}.s3.${{AWS::URLSuffix}}" in connect
    assert not any("*" in value for value in connect)
    assert custom_domain.template_dict["Outputs"]["WebUrl"]["Value"] == "https://docs.example.com"
    client = _props(custom_domain, "Api/UserPool/WebClient")
    assert "https://docs.example.com/" in client["CallbackURLs"]


@pytest.mark.slow
def test_custom_domain_template_passes_cfn_lint_without_reference_cycles(custom_domain: SynthResult) -> None:
    matches = lint_file(custom_domain.template_file, config=ManualArgs(regions=["us-east-1"], ignore_checks=["W3005"]))
    assert [f"{m.rule.id} {m.message}" for m in matches] == []


def test_csp_fits_cloudfronts_limit(synth: SynthResult, custom_domain: SynthResult) -> None:
    for result in (synth, custom_domain):
        rendered = render_token(
            _headers(result)["SecurityHeadersConfig"]["ContentSecurityPolicy"]["ContentSecurityPolicy"]
        )
        # CloudFront caps the CSP value at 1783 characters; tokens resolve to ids shorter than their ${...}.
        assert len(re.sub(r"\$\{[^}]+\}", "x" * 30, rendered)) <= 1783
