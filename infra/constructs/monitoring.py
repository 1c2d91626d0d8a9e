"""Alarms on the pipeline's failure signals, an encrypted SNS topic for them, and a dashboard.

What pages: the queues (anything in the DLQ, its oldest message ageing towards its retention, the
ingest queue's oldest message too old), the documents (failures with a *system* error code, not
every failed execution: a bad upload is the user's problem; executions timed out; documents the
reaper restarted or failed), and every function's errors and throttles (a sustained error rate for
the stages, whose errors on bad files are control flow). The custom metrics are the functions' EMF
(namespace ``RagIngest``); Powertools' ``service`` dimension is why the alarms are Metrics Insights
queries and the dashboard SEARCH expressions. What to do about each: docs/operations.md, "Alarms:
what they mean, what to do".
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from rag_ingest.core import errors

from infra.config import RagIngestConfig
from infra.constructs.function import METRICS_NAMESPACE, removal_policy
from infra.constructs.workflow import MARK_FAILED

_CLOUDWATCH = iam.ServicePrincipal("cloudwatch.amazonaws.com")

# The failures of the system rather than of the file: the domain's list, as the metric dimension values.
SYSTEM_ERROR_CODES = tuple(code.value for code in errors.SYSTEM_ERROR_CODES)
# Metric names the functions emit (rag_ingest.core.telemetry, functions/reaper).
DOCUMENTS_FAILED = "DocumentsFailed"  # dimensions ErrorCode, Cause (system | input: errors.failure_cause)
DOCUMENTS_READY = "DocumentsReady"
DOCUMENTS_REAPED = "DocumentsReaped"  # dimension Action: Redriven | MarkedFailed
STAGE_STARTED = "StageStarted"  # dimension Stage
STAGE_DURATION = "StageDuration"  # dimension Stage, milliseconds


def system_failures_query() -> str:
    # Metrics Insights' WHERE has = and != only (docs/deploy.md, "What only a real account can show"):
    # each failure is labelled with its Cause, so one equality selects the system codes.
    return f"SELECT SUM({DOCUMENTS_FAILED}) FROM {METRICS_NAMESPACE} WHERE Cause = 'system'"


def _search(metric_name: str, statistic: str, period: Duration) -> str:
    # Schema-free: matches the metric whatever dimensions Powertools added next to ours.
    return (
        f'SEARCH(\'Namespace="{METRICS_NAMESPACE}" MetricName="{metric_name}"\', '
        f"'{statistic}', {int(period.to_seconds())})"
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        state_machine: sfn.IStateMachine,
        functions: dict[str, lambda_.IFunction],
        stage_functions: dict[str, lambda_.Function],
    ) -> None:
        """``functions``: every function of the stack by short name (``Api``, ``Validate``, ...);
        ``stage_functions``: the workflow's, whose errors are partly control flow."""
        super().__init__(scope, construct_id)
        self._config = config
        self.topic = self._topic(config)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        monitoring = config.monitoring
        minute = Duration.minutes(1)

        # -- queues ------------------------------------------------------------------------
        # Anything in the DLQ is a document that was never ingested: someone has to look.
        self._alarm(
            "DeadLetterQueueAlarm",
            dead_letter_queue.metric_approximate_number_of_messages_visible(period=minute, statistic="Maximum"),
            "Messages in the ingest dead-letter queue: inspect, then redrive with the Redrive function",
            threshold=0,
        )
        self._alarm(
            "DeadLetterQueueAgeAlarm",
            dead_letter_queue.metric_approximate_age_of_oldest_message(period=Duration.minutes(5), statistic="Maximum"),
            "A dead letter has waited longer than the configured threshold; the DLQ drops messages after 14 days",
            threshold=monitoring.dead_letter_age_threshold_seconds,
        )
        # Intake not keeping up, or failing and retrying, shows as old messages.
        self._alarm(
            "QueueAgeAlarm",
            queue.metric_approximate_age_of_oldest_message(period=minute, statistic="Maximum"),
            "Oldest ingest queue message is older than the configured threshold",
            threshold=monitoring.queue_age_threshold_seconds,
            evaluation_periods=3,
        )

        # -- documents and executions ------------------------------------------------------
        self._alarm(
            "SystemFailuresAlarm",
            cloudwatch.MathExpression(
                expression=system_failures_query(), period=Duration.minutes(5), label="Documents failed (system)"
            ),
            "Documents FAILED with a system error code (INTERNAL_ERROR, TRANSIENT_RETRIES_EXHAUSTED, TIMEOUT, "
            "STUCK); user-caused codes (ENCRYPTED_PDF, ...) do not page",
            threshold=0,
        )
        self._alarm(
            "ExecutionsTimedOutAlarm",
            state_machine.metric_timed_out(period=minute, statistic="Sum"),
            "Workflow executions timed out (their documents stay PROCESSING until the reaper acts)",
            threshold=0,
        )
        reaper_period = Duration.minutes(config.reaper.schedule_minutes)
        self._alarm(
            "DocumentsReapedAlarm",
            cloudwatch.MathExpression(
                expression=f"SELECT SUM({DOCUMENTS_REAPED}) FROM {METRICS_NAMESPACE}",
                period=reaper_period,
                label="Documents reaped",
            ),
            "The reaper found stuck documents and re-drove or failed them: executions end without closing records",
            threshold=0,
        )

        # -- functions -----------------------------------------------------------------------
        control_flow = {name for name in stage_functions if name != MARK_FAILED.name}
        for name, function in functions.items():
            if name in control_flow:
                self._alarm(
                    f"{name}ErrorRateAlarm",
                    self._error_rate(function),
                    f"The {name} function fails on more than {monitoring.stage_error_rate_percent}% of at least "
                    f"{monitoring.stage_error_min_invocations} invocations for 15 minutes (bad files alone rarely do)",
                    threshold=monitoring.stage_error_rate_percent,
                    evaluation_periods=3,
                )
            else:
                self._alarm(
                    f"{name}ErrorsAlarm",
                    function.metric_errors(period=minute, statistic="Sum"),
                    f"The {name} function raised",
                    threshold=0,
                )
            self._alarm(
                f"{name}ThrottlesAlarm",
                function.metric_throttles(period=Duration.minutes(5), statistic="Sum"),
                f"The {name} function was throttled (account or reserved concurrency exhausted)",
                threshold=0,
            )

        self._dashboard(queue, dead_letter_queue, state_machine, functions)
        CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn).override_logical_id("AlarmTopicArn")

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        description: str,
        *,
        threshold: float,
        evaluation_periods: int = 1,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            alarm_description=description,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            # No data is the healthy case for every signal here (no dead letters, no failures).
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        action = cw_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        self.alarms[construct_id] = alarm
        return alarm

    def _error_rate(self, function: lambda_.IFunction) -> cloudwatch.MathExpression:
        monitoring = self._config.monitoring
        five = Duration.minutes(5)
        return cloudwatch.MathExpression(
            expression=(f"IF(invocations >= {monitoring.stage_error_min_invocations}, 100 * errors / invocations, 0)"),
            using_metrics={
                "errors": function.metric_errors(period=five, statistic="Sum"),
                "invocations": function.metric_invocations(period=five, statistic="Sum"),
            },
            period=five,
            label="Error rate (%)",
        )

    def _topic(self, config: RagIngestConfig) -> sns.Topic:
        # A customer-managed key: the AWS-managed SNS key's policy cannot admit CloudWatch alarms.
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="rag-ingest alarm topic encryption",
            enable_key_rotation=True,
            removal_policy=removal_policy(config),
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[_CLOUDWATCH],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        topic = sns.Topic(self, "AlarmTopic", display_name="rag-ingest alarms", master_key=key, enforce_ssl=True)
        # A topic policy replaces SNS's default one, so CloudWatch needs to be let in explicitly.
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[_CLOUDWATCH],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        if config.monitoring.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(config.monitoring.alarm_email))
        return topic

    def _dashboard(
        self,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        state_machine: sfn.IStateMachine,
        functions: dict[str, lambda_.IFunction],
    ) -> None:
        five = Duration.minutes(5)

        def search(metric_name: str, statistic: str, label: str) -> cloudwatch.MathExpression:
            return cloudwatch.MathExpression(
                expression=_search(metric_name, statistic, five), label=label, period=five, using_metrics={}
            )

        dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        CfnOutput(self, "DashboardName", value=dashboard.dashboard_name).override_logical_id("DashboardName")
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Ingest queue",
                left=[
                    queue.metric_approximate_number_of_messages_visible(period=five, label="Visible"),
                    queue.metric_approximate_number_of_messages_not_visible(period=five, label="In flight"),
                ],
                right=[queue.metric_approximate_age_of_oldest_message(period=five, label="Oldest (s)")],
            ),
            cloudwatch.GraphWidget(
                title="Dead-letter queue",
                left=[dead_letter_queue.metric_approximate_number_of_messages_visible(period=five, label="Visible")],
                right=[dead_letter_queue.metric_approximate_age_of_oldest_message(period=five, label="Oldest (s)")],
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=12, height=8),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Documents by stage (stages started)",
                left=[search(STAGE_STARTED, "Sum", "${PROP('Dim.Stage')}")],
                stacked=True,
            ),
            cloudwatch.GraphWidget(
                title="Stage duration p50 / p95 (ms)",
                left=[
                    search(STAGE_DURATION, "p50", "${PROP('Dim.Stage')} p50"),
                    search(STAGE_DURATION, "p95", "${PROP('Dim.Stage')} p95"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Failures by error code",
                left=[search(DOCUMENTS_FAILED, "Sum", "${PROP('Dim.ErrorCode')}")],
                stacked=True,
            ),
            cloudwatch.GraphWidget(
                title="Documents ready / reaped",
                left=[search(DOCUMENTS_READY, "Sum", "Ready")],
                right=[search(DOCUMENTS_REAPED, "Sum", "Reaped: ${PROP('Dim.Action')}")],
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Workflow executions",
                left=[
                    state_machine.metric_started(period=five),
                    state_machine.metric_succeeded(period=five),
                    state_machine.metric_failed(period=five),
                    state_machine.metric_timed_out(period=five),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[fn.metric_errors(period=five, label=name) for name, fn in functions.items()],
            ),
            cloudwatch.GraphWidget(
                title="Function throttles",
                left=[fn.metric_throttles(period=five, label=name) for name, fn in functions.items()],
            ),
            cloudwatch.GraphWidget(
                title="Function duration p90",
                left=[fn.metric_duration(period=five, statistic="p90", label=name) for name, fn in functions.items()],
            ),
        )
