"""Signed webhooks (docs/webhooks.md): the endpoints table, and the path from the pipeline's document
events to one signed POST per endpoint.

    EventBridge rule (source rag-ingest: DocumentReady, DocumentFailed, DocumentDeleted)
      -> fan-out queue -> WebhookFanOut: the tenant's endpoints -> one message per endpoint
      -> delivery queue -> WebhookDelivery: SSRF check, signed POST; else backoff, then the DLQ

Why a function and not EventBridge API destinations (one secret per endpoint, a DNS re-check at
every delivery): docs/webhooks.md, "Why a function, not EventBridge API destinations".
"""

from __future__ import annotations

import math

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.function import FunctionFactory
from infra.constructs.intake import VISIBILITY_TIMEOUT_FACTOR
from infra.constructs.storage import grant_table, recoverable_table
from infra.permissions import WEBHOOKS_TABLE

#: The pipeline's events a webhook can be told of (rag_ingest.webhooks.model.DETAIL_TYPES).
DOCUMENT_EVENTS = ("DocumentReady", "DocumentFailed", "DocumentDeleted")
EVENT_SOURCE = "rag-ingest"
FAN_OUT_MAX_RECEIVE_COUNT = 5


def delivery_attempts(config: RagIngestConfig) -> int:
    """An upper bound of the attempts one message gets within retryHours (the shortest waits:
    equal jitter waits at least half the backoff)."""
    hooks = config.webhooks
    doubling = math.ceil(math.log2(max(1, hooks.retry_max_delay_seconds / hooks.retry_base_seconds))) + 1
    at_cap = math.ceil(hooks.retry_hours * 3600 / max(1, hooks.retry_max_delay_seconds // 2))
    return doubling + at_cap


def delivery_max_receive_count(config: RagIngestConfig) -> int:
    """The delivery queue's redrive: a safety net past the function's own deadline (a crashing
    function never reaches it), so twice the attempts the retry window can take, at most SQS's 1,000."""
    return min(1000, 2 * delivery_attempts(config))


def queue_retention_days(config: RagIngestConfig) -> int:
    """A message must outlive its retries: the retry window plus a day, at least 4 days."""
    return max(4, math.ceil(config.webhooks.retry_hours / 24) + 1)


class Webhooks(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        api_function: lambda_.Function,
        event_bus_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        hooks = config.webhooks
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        # Endpoints (and their secrets: docs/webhooks.md) by tenant and id, and delivery attempts in the
        # same partition (dlv#..., TTL): rag_ingest.adapters.webhooks_table.
        self.table = recoverable_table(
            self, "WebhooksTable", config, "tenant_id", "endpoint_id", time_to_live_attribute="expires_at"
        )

        retention = Duration.days(queue_retention_days(config))
        self.fan_out_dead_letter_queue = sqs.Queue(
            self,
            "FanOutDeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        self.fan_out_queue = sqs.Queue(
            self,
            "FanOutQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(
                VISIBILITY_TIMEOUT_FACTOR * config.functions.webhook_fan_out.timeout_seconds
            ),
            retention_period=retention,
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=FAN_OUT_MAX_RECEIVE_COUNT, queue=self.fan_out_dead_letter_queue
            ),
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeliveryDeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        self.delivery_queue = sqs.Queue(
            self,
            "DeliveryQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            # A failed attempt sets its own visibility (the backoff); this covers a crashed invocation.
            visibility_timeout=Duration.seconds(
                VISIBILITY_TIMEOUT_FACTOR * config.functions.webhook_delivery.timeout_seconds
            ),
            retention_period=retention,
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=delivery_max_receive_count(config), queue=self.dead_letter_queue
            ),
        )

        self.rule = events.Rule(
            self,
            "DocumentEventsRule",
            description="rag-ingest document events -> the webhook fan-out queue",
            event_bus=events.EventBus.from_event_bus_name(self, "Bus", event_bus_name),
            event_pattern=events.EventPattern(source=[EVENT_SOURCE], detail_type=list(DOCUMENT_EVENTS)),
            # EventBridge retries a failed send to the queue for up to a day, then drops it into the DLQ.
            targets=[targets.SqsQueue(self.fan_out_queue, dead_letter_queue=self.fan_out_dead_letter_queue)],
        )

        self.fan_out_function: lambda_.Function = factory.create(
            self,
            "WebhookFanOutFunction",
            code_dir="webhook_fanout",
            handler="app.handler",
            service="rag-ingest-webhook-fanout",
            settings=config.functions.webhook_fan_out,
            environment={
                "WEBHOOKS_TABLE": self.table.table_name,
                "WEBHOOK_DELIVERY_QUEUE_URL": self.delivery_queue.queue_url,
                "WEBHOOK_RETRY_HOURS": str(hooks.retry_hours),
            },
            description="rag-ingest webhooks: a document event -> one delivery message per subscribed endpoint",
            documents_table=False,
        )
        self.fan_out_function.add_event_source(
            event_sources.SqsEventSource(self.fan_out_queue, batch_size=10, report_batch_item_failures=True)
        )
        fan_out_role = _role(self.fan_out_function)
        grant_table(fan_out_role, self.table, WEBHOOKS_TABLE["WebhookFanOut"])
        self.delivery_queue.grant_send_messages(fan_out_role)

        self.delivery_function: lambda_.Function = factory.create(
            self,
            "WebhookDeliveryFunction",
            code_dir="webhook_delivery",
            handler="app.handler",
            service="rag-ingest-webhook-delivery",
            settings=config.functions.webhook_delivery,
            environment={
                "WEBHOOKS_TABLE": self.table.table_name,
                "WEBHOOK_DELIVERY_QUEUE_URL": self.delivery_queue.queue_url,
                "WEBHOOK_DEAD_LETTER_QUEUE_URL": self.dead_letter_queue.queue_url,
                "WEBHOOK_TIMEOUT_SECONDS": str(hooks.timeout_seconds),
                "WEBHOOK_RETRY_BASE_SECONDS": str(hooks.retry_base_seconds),
                "WEBHOOK_RETRY_MAX_DELAY_SECONDS": str(hooks.retry_max_delay_seconds),
                # Never loopback receivers in AWS (the local stack overrides this).
                "WEBHOOK_ALLOW_LOOPBACK_HTTP": "false",
            },
            description="rag-ingest webhooks: signed POST to one endpoint, retried with backoff, then dead-lettered",
            documents_table=False,
        )
        self.delivery_function.add_event_source(
            event_sources.SqsEventSource(
                self.delivery_queue,
                batch_size=hooks.delivery_batch_size,
                report_batch_item_failures=True,
                max_concurrency=hooks.delivery_max_concurrency,
            )
        )
        delivery_role = _role(self.delivery_function)
        grant_table(delivery_role, self.table, WEBHOOKS_TABLE["WebhookDelivery"])
        # Receive and delete, and ChangeMessageVisibility: a failed attempt's backoff.
        self.delivery_queue.grant_consume_messages(delivery_role)
        self.dead_letter_queue.grant_send_messages(delivery_role)

        # The API's routes: register, list, delete, rotate.
        api_function.add_environment("WEBHOOKS_TABLE", self.table.table_name)
        api_function.add_environment("WEBHOOK_MAX_ENDPOINTS", str(hooks.max_endpoints_per_tenant))
        api_function.add_environment("WEBHOOK_ALLOW_LOOPBACK_HTTP", "false")
        grant_table(_role(api_function), self.table, WEBHOOKS_TABLE["Api"])

        self._dead_letter_alarm(
            "WebhookDeadLetterAlarm",
            self.dead_letter_queue,
            f"A webhook delivery failed for {hooks.retry_hours} h (or was malformed) and was dead-lettered",
        )
        self._dead_letter_alarm(
            "WebhookFanOutDeadLetterAlarm",
            self.fan_out_dead_letter_queue,
            "A document event could not be fanned out to webhook endpoints",
        )

        for name, value in (
            ("WebhooksTableName", self.table.table_name),
            ("WebhookDeliveryQueueUrl", self.delivery_queue.queue_url),
            ("WebhookDeadLetterQueueUrl", self.dead_letter_queue.queue_url),
            ("WebhookFanOutDeadLetterQueueUrl", self.fan_out_dead_letter_queue.queue_url),
        ):
            CfnOutput(self, name, value=value).override_logical_id(name)

    def _dead_letter_alarm(self, construct_id: str, queue: sqs.Queue, description: str) -> None:
        self.alarms[construct_id] = cloudwatch.Alarm(
            self,
            construct_id,
            metric=queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(1), statistic="Max"),
            alarm_description=description,
            threshold=0,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def alarm_to(self, topic: sns.ITopic) -> None:
        """The stack's alarm topic (Monitoring) is made after this construct."""
        action = cw_actions.SnsAction(topic)
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

    @property
    def functions(self) -> dict[str, lambda_.Function]:
        return {"WebhookFanOut": self.fan_out_function, "WebhookDelivery": self.delivery_function}


def _role(function: lambda_.Function) -> iam.IRole:
    assert function.role is not None
    return function.role
