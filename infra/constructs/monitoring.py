"""Alarms on the pipeline's failure signals, an encrypted SNS topic for them, and a dashboard."""

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

from infra.config import RagIngestConfig
from infra.constructs.function import removal_policy

_CLOUDWATCH = iam.ServicePrincipal("cloudwatch.amazonaws.com")


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        intake_function: lambda_.IFunction,
        state_machine: sfn.IStateMachine,
        stage_functions: dict[str, lambda_.Function],
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(config)
        action = cw_actions.SnsAction(self.topic)
        minute = Duration.minutes(1)

        self.alarms: dict[str, cloudwatch.Alarm] = {
            # Anything in the DLQ is a document that was never ingested: someone has to look.
            "DeadLetterQueueAlarm": dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=minute, statistic="Maximum"
            ).create_alarm(
                self,
                "DeadLetterQueueAlarm",
                alarm_description="Messages in the ingest dead-letter queue (redrive with the Redrive function)",
                threshold=0,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            # Intake not keeping up, or failing and retrying, shows as old messages.
            "QueueAgeAlarm": queue.metric_approximate_age_of_oldest_message(
                period=minute, statistic="Maximum"
            ).create_alarm(
                self,
                "QueueAgeAlarm",
                alarm_description="Oldest ingest queue message is older than the configured threshold",
                threshold=config.monitoring.queue_age_threshold_seconds,
                evaluation_periods=3,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "ExecutionsFailedAlarm": state_machine.metric_failed(period=minute, statistic="Sum").create_alarm(
                self,
                "ExecutionsFailedAlarm",
                alarm_description="Workflow executions failed (documents marked FAILED)",
                threshold=0,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "ExecutionsTimedOutAlarm": state_machine.metric_timed_out(period=minute, statistic="Sum").create_alarm(
                self,
                "ExecutionsTimedOutAlarm",
                alarm_description="Workflow executions timed out",
                threshold=0,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "IntakeErrorsAlarm": intake_function.metric_errors(period=minute, statistic="Sum").create_alarm(
                self,
                "IntakeErrorsAlarm",
                alarm_description="The intake function raised (whole batches failed, not single records)",
                threshold=0,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
        }
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

        self._dashboard(queue, dead_letter_queue, intake_function, state_machine, stage_functions)
        CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn).override_logical_id("AlarmTopicArn")

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
        intake_function: lambda_.IFunction,
        state_machine: sfn.IStateMachine,
        stage_functions: dict[str, lambda_.Function],
    ) -> None:
        five = Duration.minutes(5)
        dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Ingest queue",
                left=[
                    queue.metric_approximate_number_of_messages_visible(period=five),
                    dead_letter_queue.metric_approximate_number_of_messages_visible(period=five, label="DLQ visible"),
                ],
                right=[queue.metric_approximate_age_of_oldest_message(period=five)],
            ),
            cloudwatch.GraphWidget(
                title="Workflow executions",
                left=[
                    state_machine.metric_started(period=five),
                    state_machine.metric_succeeded(period=five),
                    state_machine.metric_failed(period=five),
                    state_machine.metric_timed_out(period=five),
                ],
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values())),
        )
        functions = {"Intake": intake_function, **stage_functions}
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[fn.metric_errors(period=five, label=name) for name, fn in functions.items()],
            ),
            cloudwatch.GraphWidget(
                title="Function duration p90",
                left=[fn.metric_duration(period=five, statistic="p90", label=name) for name, fn in functions.items()],
            ),
            cloudwatch.GraphWidget(
                title="Function throttles",
                left=[fn.metric_throttles(period=five, label=name) for name, fn in functions.items()],
            ),
        )
