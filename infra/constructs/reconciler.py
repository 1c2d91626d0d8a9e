"""The reconciler (rag_ingest.operations.reconciler): a scheduled function that compares the
documents table, the uploaded objects' versions and the chunk index, repairs what is safe, and
publishes ``ReconcilerDrift`` (dimension ``Kind``), with an alarm on any drift.

Its grants are what its code calls, no more: the table's reads and conditional updates
(infra/permissions.py), the uploads' version listing (``s3:ListBucketVersions`` on ``raw/``), the
checkpoints it re-indexes from (``s3:GetObject`` on ``artifacts/``), the index's count, find and
bulk requests (the domain's access policy too), and StartExecution for a replay.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from rag_ingest.core.s3_keys import ARTIFACTS_PREFIX, RAW_PREFIX

from infra.config import RagIngestConfig
from infra.constructs.function import METRICS_NAMESPACE, FunctionFactory
from infra.constructs.search import Search
from infra.constructs.storage import Storage
from infra.nag import acknowledge, arn_ref

RECONCILER_DRIFT = "ReconcilerDrift"  # dimension Kind (rag_ingest.operations.reconciler.DriftKind)


def drift_query() -> str:
    """Every Kind's drift, whatever other dimensions a series has (Metrics Insights sums them)."""
    return f"SELECT SUM({RECONCILER_DRIFT}) FROM {METRICS_NAMESPACE}"


class Reconciler(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        storage: Storage,
        search: Search,
        state_machine: sfn.StateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        settings = config.reconciler
        self.function: lambda_.Function = factory.create(
            self,
            "ReconcilerFunction",
            code_dir="reconciler",
            handler="app.handler",
            service="rag-ingest-reconciler",
            settings=config.functions.reconciler,
            environment={
                "BUCKET_NAME": storage.bucket.bucket_name,
                "RAW_PREFIX": RAW_PREFIX,
                "ARTIFACTS_PREFIX": ARTIFACTS_PREFIX,
                "OPENSEARCH_ENDPOINT": search.endpoint_url,
                "OPENSEARCH_INDEX": search.index_name,
                "EMBEDDING_DIMENSION": str(config.embedding.dimension),
                "STATE_MACHINE_ARN": state_machine.state_machine_arn,
                # The reaper's deadlines: documents past them are reported (the reaper acts on them).
                "STUCK_AFTER_SECONDS": str(config.reaper.stuck_after_minutes * 60),
                "UPLOAD_URL_EXPIRY_SECONDS": str(config.upload.url_expiry_seconds),
                "UPLOAD_GRACE_SECONDS": str(config.reaper.upload_grace_minutes * 60),
                "OBJECT_GRACE_SECONDS": str(settings.object_grace_minutes * 60),
                "REPAIR": "true" if settings.repair else "false",
            },
            description="rag-ingest reconciler: documents table, uploads and index compared; safe repairs",
        )
        role = self.function.role
        assert role is not None
        storage.grant_documents(role, "Reconciler")
        search.grant_index_access(role, "Reconciler")
        # A READY document whose index count drifted and whose checkpoints are gone is replayed.
        state_machine.grant_start_execution(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucketVersions"],
                resources=[storage.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{RAW_PREFIX}*"]}},
            )
        )
        # The chunks artifact and the embedding batches a re-index reads.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[storage.bucket.arn_for_objects(f"{ARTIFACTS_PREFIX}*")]
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "Resource-scoped: the stage checkpoints under artifacts/ of the one bucket.",
            f"Resource::{arn_ref(storage.bucket)}/{ARTIFACTS_PREFIX}*",
        )
        self.schedule = events.Rule(
            self,
            "ReconcilerSchedule",
            description="Runs the rag-ingest reconciler (documents table, uploads, index)",
            schedule=events.Schedule.rate(Duration.hours(settings.schedule_hours)),
            # A failed run is the next run's work: no retries of a stale tick.
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        # Any drift at all: something outlived its record, or a record lost what it points at.
        # One period = the schedule's, so a run's datapoint is evaluated once.
        self.alarm = cloudwatch.Alarm(
            self,
            "ReconcilerDriftAlarm",
            metric=cloudwatch.MathExpression(
                expression=drift_query(), period=Duration.hours(settings.schedule_hours), label="Reconciler drift"
            ),
            alarm_description=(
                "The reconciler found the documents table, the uploaded files and the index disagreeing "
                "(orphan or stale chunks, chunk counts, files or records missing, stuck documents)"
            ),
            threshold=0,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        CfnOutput(self, "ReconcilerFunctionName", value=self.function.function_name).override_logical_id(
            "ReconcilerFunctionName"
        )

    def alarm_to(self, topic: sns.ITopic) -> None:
        """The stack's alarm topic (Monitoring) is made after this construct."""
        action = cw_actions.SnsAction(topic)
        self.alarm.add_alarm_action(action)
        self.alarm.add_ok_action(action)
