"""The local runtime on a small hand-written template (not the project's handlers).

One ``python -m local.runtime serve`` process on free ports runs: moto's server, the Lambda
runner (worker processes), the SQS poller and the API adapter. The template mimics what CDK
synthesizes: intrinsics, an asset path into the template's directory, a custom resource for the
bucket notifications, an event source mapping and a state machine with Retry/Catch.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import boto3
import jwt
import pytest
from botocore.config import Config
from cryptography.hazmat.primitives.asymmetric import rsa
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION

from local.runtime.harness import OfflineStackProcess
from local.runtime.lambda_.moto_seam import MOTO_VERSION, verify_moto_seam
from local.runtime.lambda_.sqs_poller import failed_message_ids, lambda_sqs_event
from local.runtime.moto_server import verify_s3_event_seam
from tests.support.live import refusal_status
from tests.support.tokens import TokenForge, bad_tokens, new_key, write_key

pytestmark = pytest.mark.integration

HANDLERS = """
import json, os, sys, time
import boto3
from rag_ingest.core.errors import ErrorCode, PermanentError, TransientError

def _bump(name):
    path = os.path.join(os.environ["COUNTER_DIR"], name)
    count = int(open(path).read()) + 1 if os.path.exists(path) else 1
    open(path, "w").write(str(count))
    return count

def echo(event, context):
    print("echo handler ran")
    _bump(f"echo-{event.get('marker', 'none')}")
    return {
        "event": event,
        "module": __name__,
        "function_name": context.function_name,
        "memory": context.memory_limit_in_mb,
        "remaining_ms": context.get_remaining_time_in_millis(),
        "env": {k: os.environ.get(k) for k in (
            "TABLE_NAME", "QUEUE_URL", "GREETING", "OPENSEARCH_ENDPOINT", "EMBEDDING_PROVIDER",
            "EMBEDDING_MODEL_ID", "EMBEDDING_DIMENSION", "POWERTOOLS_TRACE_DISABLED", "POWERTOOLS_DEV",
            "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME",
            "AWS_ENDPOINT_URL_BEDROCK", "AWS_LAMBDA_FUNCTION_TIMEOUT")},
        "pid": os.getpid(),
    }

def flaky(event, context):
    attempt = _bump(f"flaky-{event['key']}")
    if event.get("permanent"):
        raise PermanentError(ErrorCode.CORRUPT_PDF, "broken on purpose")
    if attempt <= event.get("fail_times", 0):
        raise TransientError(f"attempt {attempt} throttled")
    return {"key": event["key"], "attempts": attempt}

def sleepy(event, context):
    time.sleep(event.get("seconds", 0))
    return {"slept": event.get("seconds", 0), "pid": os.getpid()}

def batch(event, context):
    table = boto3.resource("dynamodb").Table(os.environ["TABLE_NAME"])
    failures = []
    for record in event["Records"]:
        receive_count = record["attributes"]["ApproximateReceiveCount"]
        table.put_item(Item={"pk": record["body"], "sk": f"receive-{receive_count}",
                             "batch": len(event["Records"]), "source": record["eventSource"]})
        if record["body"].startswith("poison"):
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}

def api(event, context):
    return {"statusCode": 201, "headers": {"content-type": "application/json", "x-handler": "api"},
            "body": json.dumps(event)}
"""


def _function(
    logical_id: str, handler: str, *, timeout: int = 10, env: dict[str, Any] | None = None, path: str | None = None
) -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Code": {
                "S3Bucket": {"Fn::Sub": "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}"},
                "S3Key": "x.zip",
            },
            "Handler": handler,
            "Runtime": "python3.13",
            "Timeout": timeout,
            "MemorySize": 256,
            "Role": {"Fn::GetAtt": ["FunctionRole", "Arn"]},
            "Environment": {"Variables": {"COUNTER_DIR": "__COUNTERS__", **(env or {})}},
            "Layers": [{"Ref": "CommonLayer"}],
        },
        "DependsOn": ["FunctionRole"],
        "Metadata": {"aws:cdk:path": path or f"Test/{logical_id}/Resource", "aws:asset:path": "asset.handlers"},
    }


def build_template(directory: Path) -> Path:
    """A CDK-like template plus its code asset in ``directory``."""
    asset = directory / "asset.handlers"
    asset.mkdir(parents=True)
    (asset / "app.py").write_text(HANDLERS)
    counters = directory / "counters"
    counters.mkdir()
    retry = [{"ErrorEquals": ["TransientError"], "IntervalSeconds": 10, "MaxAttempts": 3, "BackoffRate": 1.5}]
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Failed"}]
    definition_parts: list[Any] = [
        '{"StartAt":"Flaky","States":{"Flaky":{"Type":"Task","Resource":"arn:',
        {"Ref": "AWS::Partition"},
        ':states:::lambda:invoke","Parameters":{"FunctionName":"',
        {"Fn::GetAtt": ["FlakyFunction", "Arn"]},
        '","Payload.$":"$"},"OutputPath":"$.Payload","Retry":'
        + json.dumps(retry)
        + ',"Catch":'
        + json.dumps(catch)
        + ',"Next":"Done"},"Done":{"Type":"Succeed"},"Failed":{"Type":"Pass","End":true}}}',
    ]
    resources: dict[str, Any] = {
        "FunctionRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Statement": [
                        {
                            "Action": "sts:AssumeRole",
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                        }
                    ],
                    "Version": "2012-10-17",
                }
            },
        },
        "CommonLayer": {"Type": "AWS::Lambda::LayerVersion", "Properties": {"Content": {}}},
        "DeadLetterQueue": {"Type": "AWS::SQS::Queue", "Properties": {"MessageRetentionPeriod": 1209600}},
        "IngestQueue": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                # >= batching window + processing, as AWS requires (else successes are redelivered).
                "VisibilityTimeout": 3,
                "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]},
                    "maxReceiveCount": 2,
                },
            },
        },
        "UploadsQueue": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 30}},
        "Table": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                    {"AttributeName": "source", "AttributeType": "S"},
                ],
                "BillingMode": "PAY_PER_REQUEST",
                "GlobalSecondaryIndexes": [
                    {
                        "IndexName": "by-source",
                        "KeySchema": [{"AttributeName": "source", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                ],
                "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
            },
        },
        "Bucket": {
            "Type": "AWS::S3::Bucket",
            "Properties": {
                "VersioningConfiguration": {"Status": "Enabled"},
                "CorsConfiguration": {
                    "CorsRules": [{"AllowedMethods": ["POST"], "AllowedOrigins": ["*"], "MaxAge": 60}]
                },
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
                },
            },
        },
        "BucketNotifications": {
            "Type": "Custom::S3BucketNotifications",
            "Properties": {
                "ServiceToken": {"Fn::GetAtt": ["BucketNotificationsHandler", "Arn"]},
                "BucketName": {"Ref": "Bucket"},
                "NotificationConfiguration": {
                    "QueueConfigurations": [
                        {
                            "Events": ["s3:ObjectCreated:*"],
                            "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "raw/"}]}},
                            "QueueArn": {"Fn::GetAtt": ["UploadsQueue", "Arn"]},
                        }
                    ]
                },
                "Managed": True,
            },
        },
        "BucketNotificationsHandler": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": "index.handler",
                "Runtime": "python3.13",
                "Code": {"ZipFile": "x"},
                "Role": {"Fn::GetAtt": ["FunctionRole", "Arn"]},
                "Timeout": 300,
            },
        },
        "EchoFunction": _function(
            "EchoFunction",
            "app.echo",
            env={
                "TABLE_NAME": {"Ref": "Table"},
                "QUEUE_URL": {"Ref": "IngestQueue"},
                "GREETING": {
                    "Fn::Join": [
                        "-",
                        [{"Fn::Select": [1, {"Fn::Split": [":", {"Fn::GetAtt": ["Table", "Arn"]}]}]}, "hi"],
                    ]
                },
                "OPENSEARCH_ENDPOINT": "https://from-the-template.example",
                "OPENSEARCH_INDEX": "rag-chunks-of-this-template",
                "POWERTOOLS_DEV": "true",
            },
        ),
        "FlakyFunction": _function("FlakyFunction", "app.flaky"),
        "SleepyFunction": _function("SleepyFunction", "app.sleepy", timeout=2),
        "BatchFunction": _function("BatchFunction", "app.batch", env={"TABLE_NAME": {"Ref": "Table"}}),
        "ApiApiFunctionABCD1234": _function(
            "ApiApiFunctionABCD1234",
            "app.api",
            path="Test/Api/ApiFunction/Resource",
            env={"MAX_UPLOAD_BYTES": "1048576"},
        ),
        "BatchMapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "EventSourceArn": {"Fn::GetAtt": ["IngestQueue", "Arn"]},
                "FunctionName": {"Ref": "BatchFunction"},
                "BatchSize": 10,
                "MaximumBatchingWindowInSeconds": 1,
                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                "ScalingConfig": {"MaximumConcurrency": 2},
            },
        },
        "StateMachineRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {"AssumeRolePolicyDocument": {"Statement": [], "Version": "2012-10-17"}},
        },
        "StateMachine": {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "DefinitionString": {"Fn::Join": ["", definition_parts]},
                "RoleArn": {"Fn::GetAtt": ["StateMachineRole", "Arn"]},
            },
        },
        "HttpApi": {
            "Type": "AWS::ApiGatewayV2::Api",
            "Properties": {
                "Name": "api",
                "ProtocolType": "HTTP",
                "CorsConfiguration": {
                    "AllowOrigins": ["https://app.example.com"],
                    "AllowMethods": ["GET", "POST", "OPTIONS"],
                    "AllowHeaders": ["authorization", "content-type"],
                    "MaxAge": 600,
                },
            },
        },
        # As CDK's HttpUserPoolAuthorizer synthesizes it: the audience is the app client's Ref.
        "UserPool": {"Type": "AWS::Cognito::UserPool", "Properties": {}},
        "UserPoolWebClient": {
            "Type": "AWS::Cognito::UserPoolClient",
            "Properties": {"UserPoolId": {"Ref": "UserPool"}},
        },
        "HttpApiAuthorizer": {
            "Type": "AWS::ApiGatewayV2::Authorizer",
            "Properties": {
                "ApiId": {"Ref": "HttpApi"},
                "AuthorizerType": "JWT",
                "IdentitySource": ["$request.header.Authorization"],
                "JwtConfiguration": {
                    "Audience": [{"Ref": "UserPoolWebClient"}],
                    "Issuer": {
                        "Fn::Join": [
                            "",
                            ["https://cognito-idp.", {"Ref": "AWS::Region"}, ".amazonaws.com/", {"Ref": "UserPool"}],
                        ]
                    },
                },
                "Name": "auth",
            },
        },
        "HttpApiIntegration": {
            "Type": "AWS::ApiGatewayV2::Integration",
            "Properties": {
                "ApiId": {"Ref": "HttpApi"},
                "IntegrationType": "AWS_PROXY",
                "IntegrationUri": {"Fn::GetAtt": ["ApiApiFunctionABCD1234", "Arn"]},
                "PayloadFormatVersion": "2.0",
            },
        },
        "RouteGetItem": {
            "Type": "AWS::ApiGatewayV2::Route",
            "Properties": {
                "ApiId": {"Ref": "HttpApi"},
                "RouteKey": "GET /items/{itemId}",
                "AuthorizationType": "JWT",
                "AuthorizerId": {"Ref": "HttpApiAuthorizer"},
                "Target": {"Fn::Join": ["", ["integrations/", {"Ref": "HttpApiIntegration"}]]},
            },
        },
        "RoutePostItems": {
            "Type": "AWS::ApiGatewayV2::Route",
            "Properties": {
                "ApiId": {"Ref": "HttpApi"},
                "RouteKey": "POST /items",
                "AuthorizationType": "JWT",
                "AuthorizerId": {"Ref": "HttpApiAuthorizer"},
                "Target": {"Fn::Join": ["", ["integrations/", {"Ref": "HttpApiIntegration"}]]},
            },
        },
        "RouteHealth": {
            "Type": "AWS::ApiGatewayV2::Route",
            "Properties": {
                "ApiId": {"Ref": "HttpApi"},
                "RouteKey": "GET /health",
                "Target": {"Fn::Join": ["", ["integrations/", {"Ref": "HttpApiIntegration"}]]},
            },
        },
        "Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"MetricName": "x"}},
    }
    template = {
        "Resources": resources,
        "Outputs": {
            "IngestQueueUrl": {"Value": {"Ref": "IngestQueue"}},
            "DeadLetterQueueUrl": {"Value": {"Ref": "DeadLetterQueue"}},
            "UploadsQueueUrl": {"Value": {"Ref": "UploadsQueue"}},
            "BucketName": {"Value": {"Ref": "Bucket"}},
            "TableName": {"Value": {"Ref": "Table"}},
            "StateMachineArn": {"Value": {"Ref": "StateMachine"}},
            "HttpApiUrl": {
                "Value": {
                    "Fn::Join": [
                        "",
                        [
                            "https://",
                            {"Ref": "HttpApi"},
                            ".execute-api.",
                            {"Ref": "AWS::Region"},
                            ".",
                            {"Ref": "AWS::URLSuffix"},
                            "/",
                        ],
                    ]
                }
            },
        },
    }
    text = json.dumps(template).replace("__COUNTERS__", str(counters))
    path = directory / "Test.template.json"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("local-runtime")


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return new_key()


@pytest.fixture(scope="module")
def stack(workspace: Path, signing_key: rsa.RSAPrivateKey) -> Iterator[OfflineStackProcess]:
    directory = workspace
    template = build_template(directory / "cdk.out")
    process = OfflineStackProcess(
        directory / "state",
        template=template,
        env={
            "LOCAL_STACK_NAME": "Test",
            "LOCAL_RETRY_SCALE": "0.1",
            "OPENSEARCH_URL": "http://127.0.0.1:9299",
            "LOCAL_OIDC_SIGNING_KEY": str(write_key(signing_key, directory / "signing-key.pem")),
        },
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()
        print(process.log_tail(200))


@pytest.fixture(scope="module")
def clients(stack: OfflineStackProcess) -> dict[str, Any]:
    options: dict[str, Any] = {
        "endpoint_url": stack.moto_endpoint,
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        "config": Config(read_timeout=120, retries={"max_attempts": 1}),
    }
    return {name: boto3.client(name, **options) for name in ("lambda", "sqs", "s3", "stepfunctions", "dynamodb")}


def _invoke(clients: dict[str, Any], function: str, payload: Any) -> tuple[dict[str, Any], str | None, float]:
    started = time.monotonic()
    response = clients["lambda"].invoke(FunctionName=function, Payload=json.dumps(payload).encode())
    return json.loads(response["Payload"].read()), response.get("FunctionError"), time.monotonic() - started


def _wait_execution(sfn: Any, arn: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        description: dict[str, Any] = sfn.describe_execution(executionArn=arn)
        if description["status"] != "RUNNING":
            return description
        time.sleep(0.3)
    raise TimeoutError(arn)


def _history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    return list(sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"])


def test_moto_seam_is_where_the_runner_expects_it() -> None:
    import moto

    assert moto.__version__ == MOTO_VERSION, "moto is pinned: re-check the Lambda seam before upgrading"
    verify_moto_seam()  # raises MotoSeamError if _invoke_lambda moved or changed signature
    verify_s3_event_seam()  # the S3 event builder the versionId fix wraps


def test_outputs_and_provisioned_resources_follow_the_template(
    stack: OfflineStackProcess, clients: dict[str, Any]
) -> None:
    outputs = stack.outputs
    assert outputs["MotoEndpoint"] == stack.moto_endpoint
    assert outputs["ApiUrl"] == stack.api_url
    assert outputs["HttpApiUrl"] == stack.api_url + "/"  # the execute-api URL becomes the local adapter
    # The functions' chunk index, which the probes read (not the default one of another stack).
    assert outputs["OpenSearchIndex"] == "rag-chunks-of-this-template"
    sqs = clients["sqs"]
    attributes = sqs.get_queue_attributes(QueueUrl=outputs["IngestQueueUrl"], AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attributes["RedrivePolicy"])
    dlq_arn = sqs.get_queue_attributes(QueueUrl=outputs["DeadLetterQueueUrl"], AttributeNames=["QueueArn"])
    assert redrive == {"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"], "maxReceiveCount": 2}
    assert attributes["VisibilityTimeout"] == "3"
    table = clients["dynamodb"].describe_table(TableName=outputs["TableName"])["Table"]
    assert [index["IndexName"] for index in table["GlobalSecondaryIndexes"]] == ["by-source"]
    ttl = clients["dynamodb"].describe_time_to_live(TableName=outputs["TableName"])["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    s3 = clients["s3"]
    assert s3.get_bucket_versioning(Bucket=outputs["BucketName"])["Status"] == "Enabled"
    definition = json.loads(
        clients["stepfunctions"].describe_state_machine(stateMachineArn=outputs["StateMachineArn"])["definition"]
    )
    [retrier] = definition["States"]["Flaky"]["Retry"]
    assert retrier == {"ErrorEquals": ["TransientError"], "IntervalSeconds": 1, "MaxAttempts": 3, "BackoffRate": 1.5}
    status = stack.control("GET", "/_local/status")
    assert status is not None
    skipped = " ".join(status["skipped"])
    assert "AWS::Lambda::LayerVersion" in skipped and "AWS::CloudWatch::Alarm" not in skipped
    # Alarms are the alarm evaluator's (local/runtime/alarms/evaluator.py); this one has nothing to evaluate.
    [alarm] = status["alarms"]
    assert (alarm["logical_id"], alarm["state"], alarm["evaluated"]) == ("Alarm", "INSUFFICIENT_DATA", False)
    assert any("BucketNotificationsHandler" in ids for ids in status["skipped"].values())


def test_bucket_notification_from_the_custom_resource_reaches_the_queue(
    stack: OfflineStackProcess, clients: dict[str, Any]
) -> None:
    put = clients["s3"].put_object(Bucket=stack.outputs["BucketName"], Key="raw/t/doc one.pdf", Body=b"%PDF-1.7")
    clients["s3"].put_object(Bucket=stack.outputs["BucketName"], Key="other/ignored.txt", Body=b"x")
    objects: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not objects:
        messages = (
            clients["sqs"]
            .receive_message(QueueUrl=stack.outputs["UploadsQueueUrl"], MaxNumberOfMessages=10, WaitTimeSeconds=1)
            .get("Messages", [])
        )
        for message in messages:
            body = json.loads(message["Body"])
            objects += [record["s3"]["object"] for record in body.get("Records", [])]
    [created] = objects  # the prefix filter of the template applies
    # S3 URL-encodes keys in events (space as "+"); moto also encodes "/" as %2F: decode with unquote_plus.
    assert unquote_plus(created["key"]) == "raw/t/doc one.pdf"
    # moto 5.2.5 omits versionId and sequencer; the local runtime adds them as S3 does.
    assert created["versionId"] == put["VersionId"]
    assert created["sequencer"]


def test_handler_runs_with_the_template_environment_and_local_overrides(
    stack: OfflineStackProcess, clients: dict[str, Any]
) -> None:
    result, error, _ = _invoke(clients, stack.outputs["Functions"]["EchoFunction"], {"marker": "env"})
    assert error is None, result
    assert result["event"] == {"marker": "env"}
    assert result["module"] == "rag_fn_EchoFunction_app"
    assert result["memory"] == "256"
    assert 0 < result["remaining_ms"] <= 10_000
    env = result["env"]
    assert env["TABLE_NAME"] == stack.outputs["TableName"]
    assert env["QUEUE_URL"] == stack.outputs["IngestQueueUrl"]
    assert env["GREETING"] == "aws-hi"
    assert env["OPENSEARCH_ENDPOINT"] == "http://127.0.0.1:9299"
    # The functions embed through the Bedrock client, pointed at the stack's local embedding server.
    assert (env["EMBEDDING_PROVIDER"], env["EMBEDDING_DIMENSION"]) == ("bedrock", str(MINILM_DIMENSION))
    assert env["EMBEDDING_MODEL_ID"] == LOCAL_MODEL_ID
    assert env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] == stack.outputs["EmbeddingEndpoint"]
    # POST /search's Rerank (bedrock-agent-runtime) goes to the same server's /rerank route.
    assert env["AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME"] == stack.outputs["EmbeddingEndpoint"]
    # Batch inference's control plane (bedrock): the same server's job runner.
    assert env["AWS_ENDPOINT_URL_BEDROCK"] == stack.outputs["EmbeddingEndpoint"]
    assert stack.outputs["EmbeddingEndpoint"].startswith("http://127.0.0.1:")
    assert env["POWERTOOLS_TRACE_DISABLED"] == "true"
    assert env["POWERTOOLS_DEV"] is None
    assert env["AWS_ENDPOINT_URL"] == stack.moto_endpoint
    assert env["AWS_LAMBDA_FUNCTION_TIMEOUT"] == "10"
    again, _, _ = _invoke(clients, stack.outputs["Functions"]["EchoFunction"], {"marker": "env"})
    assert again["pid"] == result["pid"]  # warm worker reused
    assert "echo handler ran" in stack.log_tail(400)


def test_step_functions_retries_transient_errors_by_error_type(
    stack: OfflineStackProcess, clients: dict[str, Any]
) -> None:
    sfn = clients["stepfunctions"]
    key = uuid.uuid4().hex[:8]
    arn = sfn.start_execution(
        stateMachineArn=stack.outputs["StateMachineArn"],
        name=f"retry-{key}",
        input=json.dumps({"key": key, "fail_times": 2}),
    )["executionArn"]
    description = _wait_execution(sfn, arn)
    assert description["status"] == "SUCCEEDED"
    assert json.loads(description["output"]) == {"key": key, "attempts": 3}
    events = _history(sfn, arn)
    failed = [event["taskFailedEventDetails"] for event in events if event["type"] == "TaskFailed"]
    assert [failure["error"] for failure in failed] == ["TransientError", "TransientError"]
    assert json.loads(failed[0]["cause"])["errorMessage"] == "attempt 1 throttled"
    scheduled = [event["timestamp"] for event in events if event["type"] == "TaskScheduled"]
    assert len(scheduled) == 3
    # IntervalSeconds 10 x LOCAL_RETRY_SCALE 0.1 = 1 s, then x BackoffRate 1.5: the waits are real.
    assert (scheduled[1] - scheduled[0]).total_seconds() >= 0.9


def test_permanent_error_is_caught_not_retried(stack: OfflineStackProcess, clients: dict[str, Any]) -> None:
    sfn = clients["stepfunctions"]
    key = uuid.uuid4().hex[:8]
    arn = sfn.start_execution(
        stateMachineArn=stack.outputs["StateMachineArn"],
        name=f"catch-{key}",
        input=json.dumps({"key": key, "permanent": True}),
    )["executionArn"]
    description = _wait_execution(sfn, arn)
    assert description["status"] == "SUCCEEDED"
    output = json.loads(description["output"])
    assert output["error"]["Error"] == "PermanentError"
    cause = json.loads(output["error"]["Cause"])
    assert cause["errorMessage"] == "CORRUPT_PDF: broken on purpose"
    assert cause["stackTrace"]
    types = [event["type"] for event in _history(sfn, arn)]
    assert types.count("TaskFailed") == 1
    assert "PassStateEntered" in types


def test_timeout_kills_the_worker_and_returns_lambdas_error(
    stack: OfflineStackProcess, clients: dict[str, Any]
) -> None:
    function = stack.outputs["Functions"]["SleepyFunction"]
    warm, error, _ = _invoke(clients, function, {"seconds": 0})
    assert error is None
    result, error, elapsed = _invoke(clients, function, {"seconds": 30})
    assert error is not None
    assert result["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 2.00 seconds" in result["errorMessage"]
    assert 1.9 <= elapsed < 10
    after, error, _ = _invoke(clients, function, {"seconds": 0})
    assert error is None
    assert after["pid"] != warm["pid"]  # the timed-out environment was replaced


def test_poller_deletes_successes_and_the_poison_message_reaches_the_dlq(
    stack: OfflineStackProcess, clients: dict[str, Any]
) -> None:
    sqs, table = clients["sqs"], stack.outputs["TableName"]
    tag = uuid.uuid4().hex[:6]
    bodies = [f"ok-{tag}-1", f"ok-{tag}-2", f"poison-{tag}"]
    sqs.send_message_batch(
        QueueUrl=stack.outputs["IngestQueueUrl"],
        Entries=[{"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies)],
    )
    dead: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not dead:
        dead = sqs.receive_message(
            QueueUrl=stack.outputs["DeadLetterQueueUrl"],
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
    assert [message["Body"] for message in dead] == [f"poison-{tag}"]
    assert int(dead[0]["Attributes"]["ApproximateReceiveCount"]) >= 2  # maxReceiveCount

    def receives(body: str) -> list[dict[str, Any]]:
        items = clients["dynamodb"].query(
            TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": body}}
        )["Items"]
        return list(items)

    # The successes were processed once and deleted (never redelivered), in the poison's batch.
    for body in bodies[:2]:
        [item] = receives(body)
        assert item["sk"]["S"] == "receive-1"
        assert item["source"]["S"] == "aws:sqs"
    poison = receives(bodies[2])
    assert [item["sk"]["S"] for item in poison] == ["receive-1", "receive-2"]
    assert poison[0]["batch"]["N"] == "3"
    queue = sqs.get_queue_attributes(QueueUrl=stack.outputs["IngestQueueUrl"], AttributeNames=["All"])["Attributes"]
    assert queue["ApproximateNumberOfMessages"] == "0"
    assert queue["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_an_idle_poller_sends_no_receive_and_still_picks_up_a_message(
    stack: OfflineStackProcess, clients: dict[str, Any]
) -> None:
    sqs, queue_url = clients["sqs"], stack.outputs["IngestQueueUrl"]

    def poller() -> dict[str, Any]:
        status = stack.control("GET", "/_local/status")
        assert status is not None
        [found] = [p for p in status["pollers"] if p["queue_url"] == queue_url]
        return dict(found)

    def queue_empty() -> bool:
        attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
        return attributes["ApproximateNumberOfMessages"] == attributes["ApproximateNumberOfMessagesNotVisible"] == "0"

    deadline = time.monotonic() + 60
    while not queue_empty() and time.monotonic() < deadline:  # what earlier tests sent is done
        time.sleep(0.5)
    assert queue_empty()
    before = poller()
    time.sleep(2.0)  # ten polling intervals
    idle = poller()
    # An empty queue is looked at in moto's backend, never received from over HTTP.
    assert idle["receive_calls"] == before["receive_calls"]

    body = f"ok-{uuid.uuid4().hex[:6]}"
    sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    while poller()["deleted"] == idle["deleted"] and time.monotonic() < deadline + 30:
        time.sleep(0.2)
    after = poller()
    assert after["deleted"] == idle["deleted"] + 1
    assert after["receive_calls"] > idle["receive_calls"]
    assert queue_empty()


def test_fault_injection_raise_and_crash_after(stack: OfflineStackProcess, clients: dict[str, Any]) -> None:
    function = stack.outputs["Functions"]["EchoFunction"]
    stack.arm_fault("EchoFunction", "raise", error_type="TransientError", times=1)
    result, error, _ = _invoke(clients, function, {"marker": "fault"})
    assert error and result["errorType"] == "TransientError"
    result, error, _ = _invoke(clients, function, {"marker": "fault"})
    assert error is None

    stack.arm_fault("Test/EchoFunction", "crash_after")
    result, error, _ = _invoke(clients, function, {"marker": "crash"})
    assert error and result["errorType"] == "Runtime.ExitError"
    assert "signal: killed" in result["errorMessage"]
    stack.arm_fault(function, "timeout", after_seconds=1)
    result, error, elapsed = _invoke(clients, function, {"marker": "hang"})
    assert error and result["errorType"] == "Sandbox.Timedout"
    assert elapsed < 5
    faults = stack.faults()
    assert faults["faults"] == []
    assert faults["injected"][function] >= 3
    unknown = stack.control("POST", "/_local/faults", {"function": "NoSuchFunction"})
    assert unknown is not None and "unknown function" in unknown["message"]


def test_crash_after_ran_the_handler_before_dying(
    stack: OfflineStackProcess, clients: dict[str, Any], workspace: Path
) -> None:
    function = stack.outputs["Functions"]["EchoFunction"]
    marker = f"crash-{uuid.uuid4().hex[:6]}"
    stack.arm_fault("EchoFunction", "crash_after")
    result, error, _ = _invoke(clients, function, {"marker": marker})
    assert error and result["errorType"] == "Runtime.ExitError"
    # The side effects happened (the handler ran to completion), only the answer was lost.
    assert (workspace / "cdk.out" / "counters" / f"echo-{marker}").read_text() == "1"
    assert "fault injected: crash_after" in stack.log_tail(400)


def test_raise_after_and_delay_run_the_handler_then_fail_or_answer_late(
    stack: OfflineStackProcess, clients: dict[str, Any], workspace: Path
) -> None:
    function = stack.outputs["Functions"]["EchoFunction"]
    counters = workspace / "cdk.out" / "counters"
    marker = f"after-{uuid.uuid4().hex[:6]}"
    stack.arm_fault("EchoFunction", "raise_after", error_type="TransientError", error_message="lost answer")
    result, error, _ = _invoke(clients, function, {"marker": marker})
    assert error and result == {"errorType": "TransientError", "errorMessage": "lost answer"}
    assert (counters / f"echo-{marker}").read_text() == "1"  # the handler's side effects happened

    stack.arm_fault("EchoFunction", "delay", after_seconds=1.5)
    result, error, elapsed = _invoke(clients, function, {"marker": marker})
    assert error is None and result["event"] == {"marker": marker}
    assert elapsed >= 1.5
    assert (counters / f"echo-{marker}").read_text() == "2"

    # A delay past the function's timeout (2 s) is a timeout, as for any slow handler.
    stack.arm_fault("SleepyFunction", "delay", after_seconds=30)
    result, error, elapsed = _invoke(clients, stack.outputs["Functions"]["SleepyFunction"], {"seconds": 0})
    assert error and result["errorType"] == "Sandbox.Timedout"
    assert elapsed < 10


def test_faults_can_target_matching_events_and_hit_by_chance(
    stack: OfflineStackProcess, clients: dict[str, Any]
) -> None:
    function = stack.outputs["Functions"]["EchoFunction"]
    stack.arm_fault("EchoFunction", "raise", match="doc-target")
    _, error, _ = _invoke(clients, function, {"marker": "doc-other"})
    assert error is None, "a fault for another document must not hit"
    _, error, _ = _invoke(clients, function, {"marker": "doc-target"})
    assert error

    stack.arm_fault("EchoFunction", "raise", times=1000, probability=0.5, match="coin")
    outcomes = [_invoke(clients, function, {"marker": "coin"})[1] is not None for _ in range(24)]
    [armed] = stack.faults()["faults"]
    stack.clear_faults()
    assert 0 < sum(outcomes) < len(outcomes)
    assert armed["injected"] == sum(outcomes) and armed["remaining"] == 1000 - sum(outcomes)

    for bad in ({"probability": 0}, {"probability": 1.5}, {"mode": "delay"}, {"mode": "explode"}):
        answer = stack.control("POST", "/_local/faults", {"function": "EchoFunction", **bad})
        assert answer is not None and "mode" not in answer, bad
    assert stack.faults()["faults"] == []


def _http(
    method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def _token(stack: OfflineStackProcess, tenant: str = "acme", username: str = "ann") -> str:
    _, _, body = _http(
        "POST",
        f"{stack.api_url}/_local/oidc/token",
        json.dumps({"username": username, "tenant_id": tenant}).encode(),
        {"Content-Type": "application/json"},
    )
    return str(json.loads(body)["id_token"])


def test_api_adapter_turns_requests_into_http_api_v2_events(stack: OfflineStackProcess) -> None:
    token = _token(stack)
    bearer = {"Authorization": f"Bearer {token}"}
    status, headers, body = _http("GET", f"{stack.api_url}/items/a%20b?x=1&x=2&y=", headers=bearer)
    assert status == 201, body
    assert headers["x-handler"] == "api"
    event = json.loads(body)
    assert event["version"] == "2.0"
    assert event["routeKey"] == "GET /items/{itemId}"
    assert event["rawPath"] == "/items/a%20b"
    assert event["rawQueryString"] == "x=1&x=2&y="
    assert event["queryStringParameters"] == {"x": "1,2", "y": ""}
    assert event["pathParameters"] == {"itemId": "a b"}
    assert event["requestContext"]["http"]["method"] == "GET"
    assert event["requestContext"]["http"]["path"] == "/items/a%20b"
    assert event["headers"]["authorization"] == f"Bearer {token}"
    assert event["isBase64Encoded"] is False and "body" not in event

    # The authorizer's claims, as API Gateway passes them: every claim of the token, as strings.
    authorizer = event["requestContext"]["authorizer"]["jwt"]
    claims = jwt.decode(token, options={"verify_signature": False})
    assert authorizer["claims"] == {name: ("true" if value is True else str(value)) for name, value in claims.items()}
    assert authorizer["claims"]["custom:tenant_id"] == "acme"
    assert authorizer["claims"]["aud"] == "UserPoolWebClient"  # the template's audience, resolved locally
    assert authorizer["claims"]["iss"] == f"{stack.api_url}/_local/oidc"
    assert authorizer["scopes"] is None

    status, _, body = _http(
        "POST", f"{stack.api_url}/items", b'{"a": 1}', {"Content-Type": "application/json", **bearer}
    )
    event = json.loads(body)
    assert (status, event["routeKey"], event["body"]) == (201, "POST /items", '{"a": 1}')

    status, _, body = _http(
        "POST", f"{stack.api_url}/items", b"\x00\x01", {"Content-Type": "application/pdf", **bearer}
    )
    event = json.loads(body)
    assert event["isBase64Encoded"] is True and base64.b64decode(event["body"]) == b"\x00\x01"

    # A NONE route: no token needed, no authorizer context.
    status, _, body = _http("GET", f"{stack.api_url}/health")
    assert status == 201 and "authorizer" not in json.loads(body)["requestContext"]
    assert _http("GET", f"{stack.api_url}/nothing/here")[0] == 404
    assert _http("DELETE", f"{stack.api_url}/items/1", headers=bearer)[0] == 404
    assert _http("OPTIONS", f"{stack.api_url}/items")[0] == 204


def test_jwt_routes_refuse_what_the_jwt_authorizer_refuses(
    stack: OfflineStackProcess, signing_key: rsa.RSAPrivateKey
) -> None:
    forge = TokenForge(stack.api_url, signing_key)
    assert _http("GET", f"{stack.api_url}/items/1", headers={"Authorization": f"Bearer {forge.token()}"})[0] == 201
    refused = {
        "no token": {},
        "X-Tenant-Id": {"X-Tenant-Id": "acme"},
        "not bearer": {"Authorization": f"Basic {forge.token()}"},
        "empty bearer": {"Authorization": "Bearer "},
        **{kind: {"Authorization": f"Bearer {token}"} for kind, token in bad_tokens(forge).items()},
    }
    for kind, headers in refused.items():
        for method, path in (("GET", "/items/1"), ("POST", "/items")):
            status, response_headers, body = _http(method, f"{stack.api_url}{path}", b"{}", headers)
            assert (status, json.loads(body)) == (401, {"message": "Unauthorized"}), (kind, method)
            assert response_headers["WWW-Authenticate"].startswith("Bearer"), kind
    assert "(Signature has expired)" in stack.log_tail(400)  # the reason is logged, never answered


def test_identity_provider_endpoints(stack: OfflineStackProcess) -> None:
    issuer = f"{stack.api_url}/_local/oidc"
    _, _, body = _http("GET", f"{issuer}/.well-known/openid-configuration")
    configuration = json.loads(body)
    assert configuration["issuer"] == issuer and configuration["jwks_uri"] == f"{issuer}/jwks.json"
    _, _, body = _http("GET", configuration["jwks_uri"])
    [key] = json.loads(body)["keys"]
    token = _token(stack, "tenant_1-x", "bob@example.com")
    claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["RS256"], audience="UserPoolWebClient", issuer=issuer)
    assert claims["email"] == "bob@example.com" and claims["cognito:username"] == "bob@example.com"
    assert (
        claims["sub"]
        == jwt.decode(_token(stack, "tenant_1-x", "bob@example.com"), options={"verify_signature": False})["sub"]
    )
    status, _, body = _http("POST", f"{issuer}/token", json.dumps({"username": "ann", "tenant_id": "../x"}).encode())
    assert status == 400 and json.loads(body)["error"]["code"] == "INVALID_TENANT"
    assert _http("GET", f"{issuer}/token")[0] == 405


def test_cors_answers_with_the_templates_configuration(stack: OfflineStackProcess) -> None:
    def preflight(origin: str, method: str = "POST", headers: str = "authorization") -> tuple[int, dict[str, str]]:
        status, response_headers, _ = _http(
            "OPTIONS",
            f"{stack.api_url}/items",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": method,
                "Access-Control-Request-Headers": headers,
            },
        )
        return status, response_headers

    status, headers = preflight("https://app.example.com")
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert headers["Access-Control-Allow-Methods"] == "GET,POST,OPTIONS"
    assert headers["Access-Control-Allow-Headers"] == "authorization,content-type"
    assert headers["Access-Control-Max-Age"] == "600"
    # The local page's origin (this server) is allowed too; others, other methods and headers are not.
    assert preflight(stack.api_url)[1]["Access-Control-Allow-Origin"] == stack.api_url
    for origin, method, asked in (
        ("https://evil.example", "POST", "authorization"),
        ("https://app.example.com", "DELETE", "authorization"),
        ("https://app.example.com", "POST", "x-tenant-id"),
    ):
        status, headers = preflight(origin, method, asked)
        assert status == 204 and "Access-Control-Allow-Origin" not in headers, (origin, method, asked)

    bearer = {"Authorization": f"Bearer {_token(stack)}"}
    _, headers, _ = _http("GET", f"{stack.api_url}/items/1", headers={**bearer, "Origin": "https://app.example.com"})
    assert headers["Access-Control-Allow-Origin"] == "https://app.example.com" and headers["Vary"] == "Origin"
    _, headers, _ = _http("GET", f"{stack.api_url}/items/1", headers={**bearer, "Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in headers
    _, headers, _ = _http("GET", f"{stack.api_url}/items/1", headers=bearer)
    assert "Access-Control-Allow-Origin" not in headers


def test_page_config_and_no_live_channel_without_a_documents_stream(stack: OfflineStackProcess) -> None:
    status, headers, body = _http("GET", f"{stack.api_url}/config.json")
    assert status == 200 and headers["Cache-Control"] == "no-store"
    assert json.loads(body) == {
        "apiUrl": stack.api_url,
        "maxUploadBytes": 1048576,
        "live": None,
        "auth": {"kind": "local", "tokenUrl": f"{stack.api_url}/_local/oidc/token"},
    }
    # This template has no WebSocket API: there is no live channel, whatever the token.
    assert refusal_status(f"{stack.api_url.replace('http', 'ws')}/_local/live?token=x") == 503
    assert refusal_status(f"{stack.api_url.replace('http', 'ws')}/_local/live?token={_token(stack)}") == 503
    assert _http("GET", f"{stack.api_url}/_local/live?token=x")[0] == 503


@pytest.mark.parametrize(
    ("payload", "errored", "failed", "report"),
    [
        ('{"batchItemFailures": [{"itemIdentifier": "b"}]}', False, {"b"}, True),
        ('{"batchItemFailures": []}', False, set(), True),
        ('{"batchItemFailures": null}', False, set(), True),
        ("null", False, set(), True),
        ("", False, set(), True),
        ('{"errorType": "X"}', True, {"a", "b"}, True),
        ('{"batchItemFailures": [{"itemIdentifier": "zzz"}]}', False, {"a", "b"}, True),
        ('{"batchItemFailures": [{"itemIdentifier": ""}]}', False, {"a", "b"}, True),
        ('{"batchItemFailures": [{"id": "a"}]}', False, {"a", "b"}, True),
        ('"ok"', False, {"a", "b"}, True),
        ('{"batchItemFailures": [{"itemIdentifier": "b"}]}', False, set(), False),
        ("{}", True, {"a", "b"}, False),
    ],
)
def test_which_messages_of_a_batch_failed(payload: str, errored: bool, failed: set[str], report: bool) -> None:
    found, _ = failed_message_ids(payload, errored, ["a", "b"], report_batch_item_failures=report)
    assert found == failed


def test_sqs_event_has_lambdas_shape() -> None:
    message = {
        "MessageId": "m1",
        "ReceiptHandle": "r1",
        "Body": "hello",
        "MD5OfBody": "5d41402abc4b2a76b9719d911017c592",
        "Attributes": {"ApproximateReceiveCount": "2", "SentTimestamp": "1"},
        "MessageAttributes": {
            "kind": {"DataType": "String", "StringValue": "x"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00"},
        },
        "MD5OfMessageAttributes": "abc",
    }
    [record] = lambda_sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:q", "us-east-1")["Records"]
    assert record == {
        "messageId": "m1",
        "receiptHandle": "r1",
        "body": "hello",
        "attributes": {"ApproximateReceiveCount": "2", "SentTimestamp": "1"},
        "messageAttributes": {
            "kind": {"stringValue": "x", "stringListValues": [], "binaryListValues": [], "dataType": "String"},
            "blob": {"binaryValue": "AA==", "stringListValues": [], "binaryListValues": [], "dataType": "Binary"},
        },
        "md5OfBody": "5d41402abc4b2a76b9719d911017c592",
        "md5OfMessageAttributes": "abc",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
        "awsRegion": "us-east-1",
    }
