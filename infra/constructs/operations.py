"""Operator tooling: the Redrive function moves dead-lettered S3 events back to the ingest queue."""

from __future__ import annotations

from aws_cdk import CfnOutput
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.function import FunctionFactory
from infra.constructs.storage import Storage
from infra.nag import acknowledge, arn_ref


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
    ) -> None:
        super().__init__(scope, construct_id)
        # Invoked by an operator (aws lambda invoke), not by an event: SQS StartMessageMoveTask would
        # move messages but not reset the documents' state.
        self.redrive_function: lambda_.Function = factory.create(
            self,
            "RedriveFunction",
            code_dir="redrive",
            handler="app.handler",
            service="rag-ingest-redrive",
            settings=config.functions.redrive,
            environment={"DLQ_URL": dead_letter_queue.queue_url, "QUEUE_URL": queue.queue_url},
            description="rag-ingest redrive: DLQ -> ingest queue, resetting each document's state",
        )
        role = self.redrive_function.role
        assert role is not None
        # Receive, delete, release (ChangeMessageVisibility) what a filter skips, read the depth.
        dead_letter_queue.grant_consume_messages(role)
        queue.grant_send_messages(role)
        storage.documents_table.grant_read_data(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:UpdateItem"], resources=[storage.documents_table.table_arn])
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "Resource-scoped: the indexes of the one documents table (reads by status).",
            f"Resource::{arn_ref(storage.documents_table)}/index/*",
        )
        CfnOutput(self, "RedriveFunctionName", value=self.redrive_function.function_name).override_logical_id(
            "RedriveFunctionName"
        )
