"""Operator tooling: the Redrive function (DLQ → ingest queue, replay of FAILED documents) and the
scheduled Reaper (documents stuck in QUEUED/PROCESSING)."""

from __future__ import annotations

from aws_cdk import ArnFormat, CfnOutput, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.function import FunctionFactory
from infra.constructs.storage import Storage
from infra.constructs.workflow import EVENT_BUS_NAME
from infra.nag import acknowledge, arn_ref, pseudo_spelling


class Operations(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        storage: Storage,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        state_machine: sfn.StateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        # Invoked by an operator (aws lambda invoke), not by an event: SQS StartMessageMoveTask would
        # move messages but cannot filter them, and cannot replay documents whose message is gone.
        self.redrive_function: lambda_.Function = factory.create(
            self,
            "RedriveFunction",
            code_dir="redrive",
            handler="app.handler",
            service="rag-ingest-redrive",
            settings=config.functions.redrive,
            environment={
                "DLQ_URL": dead_letter_queue.queue_url,
                "QUEUE_URL": queue.queue_url,
                "STATE_MACHINE_ARN": state_machine.state_machine_arn,
            },
            description="rag-ingest redrive: DLQ -> ingest queue (filtered), and replay of FAILED documents",
        )
        redrive_role = self._role(self.redrive_function)
        # Receive, delete, release (ChangeMessageVisibility) what a filter skips, read the depth.
        dead_letter_queue.grant_consume_messages(redrive_role)
        queue.grant_send_messages(redrive_role)
        storage.grant_documents(redrive_role, "Redrive")
        state_machine.grant_start_execution(redrive_role)

        reaper = config.reaper
        self.reaper_function: lambda_.Function = factory.create(
            self,
            "ReaperFunction",
            code_dir="reaper",
            handler="app.handler",
            service="rag-ingest-reaper",
            settings=config.functions.reaper,
            environment={
                "STATE_MACHINE_ARN": state_machine.state_machine_arn,
                "STUCK_AFTER_SECONDS": str(reaper.stuck_after_minutes * 60),
                "MAX_REDRIVES": str(reaper.max_redrives),
                "MAX_DOCUMENTS": str(reaper.max_documents_per_run),
                "UPLOAD_URL_EXPIRY_SECONDS": str(config.upload.url_expiry_seconds),
                "UPLOAD_GRACE_SECONDS": str(reaper.upload_grace_minutes * 60),
                "EVENT_BUS_NAME": EVENT_BUS_NAME,
            },
            description="rag-ingest reaper: stuck documents re-driven or FAILED (STUCK); stale uploads EXPIRED",
        )
        reaper_role = self._role(self.reaper_function)
        storage.grant_documents(reaper_role, "Reaper")
        state_machine.grant_start_execution(reaper_role)
        # What became of a document's execution (any execution of this state machine, nothing else).
        reaper_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["states:DescribeExecution"],
                resources=[
                    Stack.of(self).format_arn(
                        service="states",
                        resource="execution",
                        resource_name=f"{state_machine.state_machine_name}:*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            )
        )
        # DocumentFailed events for the documents it marks FAILED (STUCK), like MarkFailed's.
        reaper_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["events:PutEvents"],
                resources=[
                    Stack.of(self).format_arn(service="events", resource="event-bus", resource_name=EVENT_BUS_NAME)
                ],
            )
        )
        self.reaper_schedule = events.Rule(
            self,
            "ReaperSchedule",
            description="Runs the rag-ingest stuck-document reaper",
            schedule=events.Schedule.rate(Duration.minutes(reaper.schedule_minutes)),
            # A failed run is simply the next run's work: no retries of a stale schedule tick.
            targets=[targets.LambdaFunction(self.reaper_function, retry_attempts=0)],
        )

        pseudo = pseudo_spelling(self)
        acknowledge(
            self,
            "AwsSolutions-IAM5",
            "Resource-scoped: the executions of the one ingestion state machine (execution ARNs are named per "
            "document, so they cannot be listed in advance).",
            f"Resource::arn:{pseudo.partition}:states:{pseudo.region}:{pseudo.account}:execution:"
            f"{arn_ref(state_machine, 'Name')}:*",
        )
        for name, function in (("Redrive", self.redrive_function), ("Reaper", self.reaper_function)):
            CfnOutput(self, f"{name}FunctionName", value=function.function_name).override_logical_id(
                f"{name}FunctionName"
            )

    @staticmethod
    def _role(function: lambda_.Function) -> iam.IRole:
        assert function.role is not None
        return function.role
