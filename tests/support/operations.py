"""Resources for the operations tests (redrive, replay, reaper, delete) on moto's server."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from rag_ingest.core.s3_keys import upload_key

PASS_ROLE = "arn:aws:iam::123456789012:role/sfn"
# moto does not run executions (unless configured to): they stay RUNNING until stopped (ABORTED).
DEFINITION = {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}


def create_tenant_usage_table(name: str) -> None:
    """The tenants' usage table as the stack defines it (infra/constructs/tenant_usage.py)."""
    boto3.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "tenant_id", "KeyType": "HASH"},
            {"AttributeName": "item", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "tenant_id", "AttributeType": "S"},
            {"AttributeName": "item", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def create_documents_table(name: str) -> None:
    """The documents table as the stack defines it (infra/constructs/storage.py), GSIs included."""
    boto3.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "document_id", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "document_id", "AttributeType": "S"},
            {"AttributeName": "status", "AttributeType": "S"},
            {"AttributeName": "updated_at", "AttributeType": "S"},
            {"AttributeName": "tenant_id", "AttributeType": "S"},
            {"AttributeName": "created_at", "AttributeType": "S"},
            {"AttributeName": "content_key", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_status",
                "KeySchema": [
                    {"AttributeName": "status", "KeyType": "HASH"},
                    {"AttributeName": "updated_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "by_tenant",
                "KeySchema": [
                    {"AttributeName": "tenant_id", "KeyType": "HASH"},
                    {"AttributeName": "created_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "by_content",
                "KeySchema": [{"AttributeName": "content_key", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def create_embedding_cache_table(name: str) -> None:
    """The embedding cache table as the stack defines it (infra/constructs/storage.py)."""
    boto3.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "cache_key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "cache_key", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def create_sources_table(name: str) -> None:
    """The sources table as the stack defines it (infra/constructs/sources.py): ``pk`` + ``sk``."""
    boto3.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def create_state_machine() -> str:
    return str(
        boto3.client("stepfunctions").create_state_machine(
            name=f"sm-{uuid.uuid4().hex[:6]}", definition=json.dumps(DEFINITION), roleArn=PASS_ROLE
        )["stateMachineArn"]
    )


def iso_ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


@dataclass
class RecordWriter:
    """Writes status records directly, in the shape DocumentsTable leaves them."""

    table_name: str

    def put(self, document_id: str, status: str, *, age_seconds: float = 0, **fields: Any) -> dict[str, Any]:
        item: dict[str, Any] = {
            "document_id": document_id,
            "tenant_id": "acme",
            "status": status,
            "bucket": "docs",
            "key": upload_key("acme", document_id, "a.pdf"),
            "version": "v1",
            "filename": "a.pdf",
            "attempts": {},
            "timings_ms": {},
            "created_at": iso_ago(age_seconds + 60),
            "updated_at": iso_ago(age_seconds),
            **fields,
        }
        boto3.resource("dynamodb").Table(self.table_name).put_item(Item=item)
        return item

    def get(self, document_id: str) -> dict[str, Any]:
        table = boto3.resource("dynamodb").Table(self.table_name)
        return dict(table.get_item(Key={"document_id": document_id}, ConsistentRead=True)["Item"])
