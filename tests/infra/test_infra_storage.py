"""Documents bucket, access-log bucket and the DynamoDB tables."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

from tests.infra.template_tools import SynthResult, as_list

pytestmark = pytest.mark.infra

BLOCK_ALL = {
    "BlockPublicAcls": True,
    "BlockPublicPolicy": True,
    "IgnorePublicAcls": True,
    "RestrictPublicBuckets": True,
}


def _bucket_policy_statements(synth: SynthResult, bucket_id: str) -> list[dict[str, Any]]:
    for policy in synth.of_type("AWS::S3::BucketPolicy").values():
        if policy["Properties"]["Bucket"] == {"Ref": bucket_id}:
            return list(policy["Properties"]["PolicyDocument"]["Statement"])
    raise AssertionError(f"no bucket policy for {bucket_id}")


def _denies_insecure_transport(statements: list[dict[str, Any]]) -> bool:
    return any(
        s["Effect"] == "Deny"
        and s["Action"] == "s3:*"
        and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
        for s in statements
    )


@pytest.mark.parametrize("path", ["Storage/DocumentsBucket", "Storage/AccessLogsBucket"])
def test_buckets_are_private_encrypted_and_ssl_only(synth: SynthResult, path: str) -> None:
    bucket_id = synth.logical_id(path)
    props = synth.resources[bucket_id]["Properties"]
    assert props["PublicAccessBlockConfiguration"] == BLOCK_ALL
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    # SSE-S3: S3 -> SQS notifications then need no KMS grants.
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert _denies_insecure_transport(_bucket_policy_statements(synth, bucket_id))


def test_documents_bucket_is_versioned_logged_and_allows_browser_posts_and_gets(synth: SynthResult) -> None:
    props = synth.resource("Storage/DocumentsBucket")["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {
        "Ref": synth.logical_id("Storage/AccessLogsBucket")
    }
    cors, page_cors = props["CorsConfiguration"]["CorsRules"]
    # POST: the presigned upload; GET: the page's PDF viewer reading a presigned download.
    assert cors["AllowedMethods"] == ["POST", "GET"]
    assert cors["AllowedOrigins"] == list(synth.config.allowed_origins)
    # The page served by CloudFront uploads from its own origin (infra/stack.py).
    assert page_cors["AllowedMethods"] == ["POST", "GET"]
    assert page_cors["AllowedOrigins"] == [
        {"Fn::Join": ["", ["https://", {"Fn::GetAtt": [synth.logical_id("Web/Distribution"), "DomainName"]}]]}
    ]


def test_documents_bucket_lifecycle(synth: SynthResult) -> None:
    rules = {
        r["Id"]: r for r in synth.resource("Storage/DocumentsBucket")["Properties"]["LifecycleConfiguration"]["Rules"]
    }
    artifacts = rules["expire-noncurrent-artifacts"]
    assert artifacts["Prefix"] == "artifacts/"
    assert artifacts["NoncurrentVersionExpiration"]["NoncurrentDays"] == (
        synth.config.storage.artifacts_noncurrent_expiration_days
    )
    assert rules["abort-incomplete-multipart-uploads"]["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 1
    # Sync work files outlive the longest sync (24 h by default) by a week, then go.
    work_files = rules["expire-sync-work-files"]
    assert (work_files["Prefix"], work_files["ExpirationInDays"]) == ("sources/", 8)
    assert work_files["NoncurrentVersionExpiration"]["NoncurrentDays"] == 1


def test_raw_uploads_notify_the_ingest_queue(synth: SynthResult) -> None:
    (notification,) = synth.of_type("Custom::S3BucketNotifications").values()
    props = notification["Properties"]
    assert props["BucketName"] == {"Ref": synth.logical_id("Storage/DocumentsBucket")}
    (queue_config,) = props["NotificationConfiguration"]["QueueConfigurations"]
    assert queue_config["Events"] == ["s3:ObjectCreated:*"]
    assert queue_config["Filter"] == {"Key": {"FilterRules": [{"Name": "prefix", "Value": "raw/"}]}}
    assert queue_config["QueueArn"] == {"Fn::GetAtt": [synth.logical_id("Intake/IngestQueue"), "Arn"]}


def test_queue_policy_lets_only_this_bucket_send(synth: SynthResult) -> None:
    queue_id = synth.logical_id("Intake/IngestQueue")
    (policy,) = [
        p for p in synth.of_type("AWS::SQS::QueuePolicy").values() if {"Ref": queue_id} in p["Properties"]["Queues"]
    ]
    (allow,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "s3.amazonaws.com"}
    assert allow["Condition"]["ArnLike"]["aws:SourceArn"] == {
        "Fn::GetAtt": [synth.logical_id("Storage/DocumentsBucket"), "Arn"]
    }


def test_documents_table(synth: SynthResult) -> None:
    props = synth.resource("Storage/DocumentsTable")["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "document_id", "KeyType": "HASH"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    (index,) = [i for i in props["GlobalSecondaryIndexes"] if i["IndexName"] == "by_status"]
    assert index["KeySchema"] == [
        {"AttributeName": "status", "KeyType": "HASH"},
        {"AttributeName": "updated_at", "KeyType": "RANGE"},
    ]


def test_idempotency_table(synth: SynthResult) -> None:
    props = synth.resource("Storage/IdempotencyTable")["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}


def test_stateful_resources_follow_the_removal_policy(synth: SynthResult) -> None:
    expected = "Retain" if synth.config.removal_policy == "retain" else "Delete"
    for path in ("Storage/DocumentsBucket", "Storage/DocumentsTable", "Storage/IdempotencyTable"):
        assert synth.resource(path)["DeletionPolicy"] == expected, path


def test_every_bucket_denies_plain_http(synth: SynthResult) -> None:
    for bucket_id in synth.of_type("AWS::S3::Bucket"):
        statements = _bucket_policy_statements(synth, bucket_id)
        assert _denies_insecure_transport(statements), bucket_id
        for statement in statements:
            assert "*" not in as_list(statement.get("Principal", {}).get("AWS", [])) or statement["Effect"] == "Deny"


def test_template_matcher_agrees(synth: SynthResult) -> None:
    # The same facts through aws_cdk.assertions, as a guard on the hand-written helpers above.
    synth.template.has_resource_properties(
        "AWS::S3::Bucket",
        {"VersioningConfiguration": {"Status": "Enabled"}, "PublicAccessBlockConfiguration": BLOCK_ALL},
    )
    synth.template.has_resource_properties(
        "AWS::DynamoDB::Table", {"TimeToLiveSpecification": Match.object_like({"AttributeName": "expiration"})}
    )
