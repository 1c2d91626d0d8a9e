"""S3 ObjectCreated events -> SQS ingest queue (with DLQ) -> intake Lambda -> StartExecution."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from rag_ingest.core.s3_keys import ARTIFACTS_PREFIX, RAW_PREFIX

from infra.config import RagIngestConfig
from infra.constructs.function import FunctionFactory
from infra.constructs.search import Search
from infra.constructs.storage import Storage
from infra.nag import acknowledge, arn_ref

# AWS's guidance for SQS event sources: a visibility timeout of at least 6x the function timeout
# plus the batching window, so no message is redelivered while its batch is still being worked on.
VISIBILITY_TIMEOUT_FACTOR = 6


def visibility_timeout_seconds(config: RagIngestConfig) -> int:
    return (
        VISIBILITY_TIMEOUT_FACTOR * config.functions.intake.timeout_seconds + config.intake.max_batching_window_seconds
    )


# CDK's singleton handler behind Custom::S3BucketNotifications (id fixed by aws-cdk-lib).
NOTIFICATIONS_HANDLER_ID = "BucketNotificationsHandler050a0587b7544547bf325f094a3db834"


class Intake(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        storage: Storage,
        state_machine: sfn.IStateMachine,
        search: Search,
    ) -> None:
        super().__init__(scope, construct_id)
        intake = config.intake

        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        self.queue = sqs.Queue(
            self,
            "IngestQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(visibility_timeout_seconds(config)),
            retention_period=Duration.days(intake.queue_retention_days),
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=intake.max_receive_count, queue=self.dead_letter_queue
            ),
        )

        self.function: lambda_.Function = factory.create(
            self,
            "IntakeFunction",
            code_dir="intake",
            handler="app.handler",
            service="rag-ingest-intake",
            settings=config.functions.intake,
            environment={
                "IDEMPOTENCY_TABLE": storage.idempotency_table.table_name,
                "IDEMPOTENCY_TTL_SECONDS": str(intake.idempotency_ttl_seconds),
                "STATE_MACHINE_ARN": state_machine.state_machine_arn,
                # An S3 sidecar (<name>.metadata.json) arriving after its document is READY: its
                # metadata is written onto the chunks from the artifacts, as PATCH does.
                "BUCKET_NAME": storage.bucket.bucket_name,
                "ARTIFACTS_PREFIX": ARTIFACTS_PREFIX,
                "OPENSEARCH_ENDPOINT": search.endpoint_url,
                "OPENSEARCH_INDEX": search.index_name,
                "EMBEDDING_DIMENSION": str(config.embedding.dimension),
            },
            description="rag-ingest intake: S3 events from the ingest queue -> QUEUED -> StartExecution",
        )
        self.function.add_event_source(
            event_sources.SqsEventSource(
                self.queue,
                batch_size=intake.batch_size,
                max_batching_window=Duration.seconds(intake.max_batching_window_seconds),
                # A failed or poison record is retried alone (then DLQ'd) without redoing the batch.
                report_batch_item_failures=True,
                max_concurrency=intake.max_concurrency,
            )
        )
        assert self.function.role is not None
        storage.grant_documents(self.function.role, "Intake")
        storage.grant_idempotency(self.function.role, "Intake")
        state_machine.grant_start_execution(self.function)
        search.grant_index_access(self.function.role, "Intake")
        self.function.role.add_to_principal_policy(
            iam.PolicyStatement(
                # S3 sidecars (raw/**.metadata.json, current version) and, for a READY document, its
                # chunks artifact and Embed checkpoints (docs/api.md, "S3 sidecars").
                sid="ReadSidecarsAndArtifacts",
                actions=["s3:GetObject"],
                resources=[storage.bucket.arn_for_objects(f"{prefix}*") for prefix in (RAW_PREFIX, ARTIFACTS_PREFIX)],
            )
        )
        acknowledge(
            self.function.role,
            "AwsSolutions-IAM5",
            "Resource-scoped: reads objects under raw/ (sidecars) and artifacts/ of the one bucket.",
            f"Resource::{arn_ref(storage.bucket)}/{RAW_PREFIX}*",
            f"Resource::{arn_ref(storage.bucket)}/{ARTIFACTS_PREFIX}*",
        )

        storage.bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED, s3n.SqsDestination(self.queue), s3.NotificationKeyFilter(prefix=RAW_PREFIX)
        )
        self._acknowledge_notifications_handler()

        CfnOutput(self, "IngestQueueUrl", value=self.queue.queue_url).override_logical_id("IngestQueueUrl")
        CfnOutput(self, "DeadLetterQueueUrl", value=self.dead_letter_queue.queue_url).override_logical_id(
            "DeadLetterQueueUrl"
        )

    def _acknowledge_notifications_handler(self) -> None:
        handler = Stack.of(self).node.try_find_child(NOTIFICATIONS_HANDLER_ID)
        if handler is None:
            return
        acknowledge(
            handler,
            "AwsSolutions-IAM4",
            "CDK's own S3 notifications custom resource handler uses AWSLambdaBasicExecutionRole; "
            "it runs only during deployments.",
            "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        )
