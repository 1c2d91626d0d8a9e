"""Documents bucket (raw uploads and stage artifacts), its access-log bucket, and the DynamoDB tables."""

from __future__ import annotations

import math
from typing import Any

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct
from rag_ingest.core.s3_keys import ARTIFACTS_PREFIX, RAW_PREFIX, SOURCES_PREFIX

from infra.config import RagIngestConfig
from infra.constructs.function import removal_policy
from infra.nag import acknowledge
from infra.permissions import DOCUMENTS_TABLE, EMBEDDING_CACHE_TABLE, IDEMPOTENCY_TABLE, TableAccess

STATUS_INDEX = "by_status"
TENANT_INDEX = "by_tenant"
CONTENT_INDEX = "by_content"


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: RagIngestConfig) -> None:
        super().__init__(scope, construct_id)
        policy = removal_policy(config)

        self.access_logs_bucket = s3.Bucket(
            self,
            "AccessLogsBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs", expiration=Duration.days(config.storage.access_logs_expiration_days)
                )
            ],
            removal_policy=policy,
        )

        # SSE-S3 rather than KMS: S3 event notifications to SQS then need no key grants.
        self.bucket = s3.Bucket(
            self,
            "DocumentsBucket",
            versioned=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="documents-bucket/",
            # Browsers upload straight to S3 with the presigned POST the API hands out, and the page's
            # PDF viewer reads an original through the presigned GET of /documents/{id}/download.
            cors=[
                s3.CorsRule(
                    allowed_methods=[s3.HttpMethods.POST, s3.HttpMethods.GET],
                    allowed_origins=list(config.allowed_origins),
                    allowed_headers=["*"],
                    exposed_headers=["ETag", "x-amz-version-id"],
                    max_age=3000,
                )
            ],
            lifecycle_rules=[
                # Stage outputs are rewritten on retries; old versions are never read again.
                s3.LifecycleRule(
                    id="expire-noncurrent-artifacts",
                    prefix=ARTIFACTS_PREFIX,
                    noncurrent_version_expiration=Duration.days(config.storage.artifacts_noncurrent_expiration_days),
                ),
                # A sync's cursor and staged files are read only while it runs (sources.timeoutHours).
                s3.LifecycleRule(
                    id="expire-sync-work-files",
                    prefix=SOURCES_PREFIX,
                    expiration=Duration.days(math.ceil(config.sources.timeout_hours / 24) + 7),
                    noncurrent_version_expiration=Duration.days(1),
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-multipart-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(
                        config.storage.abort_incomplete_multipart_upload_days
                    ),
                ),
            ],
            removal_policy=policy,
        )

        self.documents_table = dynamodb.Table(
            self,
            "DocumentsTable",
            partition_key=dynamodb.Attribute(name="document_id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            stream=dynamodb.StreamViewType.NEW_IMAGE,
            removal_policy=policy,
        )
        # The reaper and the operations tooling find documents by status, oldest update first.
        self.documents_table.add_global_secondary_index(
            index_name=STATUS_INDEX,
            partition_key=dynamodb.Attribute(name="status", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="updated_at", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        # GET /documents: a tenant's documents newest first, by a query on its partition (never a scan).
        self.documents_table.add_global_secondary_index(
            index_name=TENANT_INDEX,
            partition_key=dynamodb.Attribute(name="tenant_id", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="created_at", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )

        # Parse: the tenant's earlier upload of the same bytes (tenant#sha256), keys only (it re-reads).
        self.documents_table.add_global_secondary_index(
            index_name=CONTENT_INDEX,
            partition_key=dynamodb.Attribute(name="content_key", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )

        # Vectors by tenant + model + dimension + sha256 of the text embedded (docs/embedding-cache.md).
        self.embedding_cache_table = dynamodb.Table(
            self,
            "EmbeddingCacheTable",
            partition_key=dynamodb.Attribute(name="cache_key", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=policy,
        )
        acknowledge(
            self.embedding_cache_table,
            "AwsSolutions-DDB3",
            "The embedding cache holds only what the model can compute again: losing it costs embeddings, "
            "never data, so point-in-time recovery would pay to back up a cache.",
        )

        self.idempotency_table = dynamodb.Table(
            self,
            "IdempotencyTable",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            time_to_live_attribute="expiration",
            removal_policy=policy,
        )
        acknowledge(
            self.idempotency_table,
            "AwsSolutions-DDB3",
            "Idempotency records are short-lived (TTL) dedup markers; restoring them has no value, and "
            "losing them only lets a duplicate S3 event through to StartExecution, which dedups by name.",
        )

        CfnOutput(self, "BucketName", value=self.bucket.bucket_name).override_logical_id("BucketName")
        CfnOutput(self, "DocumentsTableName", value=self.documents_table.table_name).override_logical_id(
            "DocumentsTableName"
        )
        CfnOutput(self, "EmbeddingCacheTableName", value=self.embedding_cache_table.table_name).override_logical_id(
            "EmbeddingCacheTableName"
        )
        CfnOutput(self, "IdempotencyTableName", value=self.idempotency_table.table_name).override_logical_id(
            "IdempotencyTableName"
        )

    def grant_document_delete(self, role: iam.IRole) -> None:
        """Deleting a document: every version of its upload and of its artifacts (its chunks: the
        index access, granted apart)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:DeleteObject", "s3:DeleteObjectVersion"],
                resources=[self.bucket.arn_for_objects(f"{prefix}*") for prefix in (RAW_PREFIX, ARTIFACTS_PREFIX)],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucketVersions"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{RAW_PREFIX}*", f"{ARTIFACTS_PREFIX}*"]}},
            )
        )

    def grant_documents(self, role: iam.IRole, function: str) -> None:
        """The documents-table actions ``function``'s code calls (infra/permissions.py), no more."""
        grant_table(role, self.documents_table, DOCUMENTS_TABLE[function])

    def grant_idempotency(self, role: iam.IRole, function: str) -> None:
        grant_table(role, self.idempotency_table, IDEMPOTENCY_TABLE[function])

    def grant_embedding_cache(self, role: iam.IRole, function: str) -> None:
        grant_table(role, self.embedding_cache_table, EMBEDDING_CACHE_TABLE[function])


def grant_table(role: iam.IRole, table: dynamodb.ITable, access: TableAccess) -> None:
    if access.table:
        role.add_to_principal_policy(iam.PolicyStatement(actions=sorted(access.table), resources=[table.table_arn]))
    for index, actions in sorted(access.indexes.items()):
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=sorted(actions), resources=[f"{table.table_arn}/index/{index}"])
        )


def recoverable_table(
    scope: Construct, construct_id: str, config: RagIngestConfig, partition: str, sort: str, **options: Any
) -> dynamodb.Table:
    """An on-demand table of string keys, encrypted, with point-in-time recovery: what a table of
    records nobody can compute again (webhooks, sources) needs."""
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name=partition, type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name=sort, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        removal_policy=removal_policy(config),
        **options,
    )
