"""The template's ``AWS::CloudWatch::Alarm``s as the local evaluator holds them, and what it sends.

:func:`read_alarm` gives an alarm's rule and metric, or why it cannot be observed locally;
:class:`LocalAlarm` is one alarm with its current state; :func:`notification` is CloudWatch's SNS
message for a state change. Pure: no moto, no clock of its own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from local.runtime.alarms.metrics import AlarmMetric, alarm_metric
from local.runtime.alarms.rules import (
    ALARM,
    INSUFFICIENT_DATA,
    OK,
    AlarmRule,
    UnobservableAlarm,
    Verdict,
    iso_now,
    iso_timestamp,
)

# CloudWatch's SQS count metrics and the GetQueueAttributes attribute each one is.
SQS_COUNT_ATTRIBUTES = {
    "ApproximateNumberOfMessagesVisible": "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible": "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed": "ApproximateNumberOfMessagesDelayed",
}
SQS_AGE_METRIC = "ApproximateAgeOfOldestMessage"
LAMBDA_METRICS = frozenset({"Invocations", "Errors", "Throttles", "Duration"})
# Step Functions execution metrics: executions that ended in this status, counted at their stop time.
STATES_METRICS = {
    "ExecutionsSucceeded": "SUCCEEDED",
    "ExecutionsFailed": "FAILED",
    "ExecutionsAborted": "ABORTED",
    "ExecutionsTimedOut": "TIMED_OUT",
}
REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
}
# Why the metrics of other AWS namespaces do not exist locally.
UNEMITTED_NAMESPACES = {
    "AWS/States": "moto's Step Functions emits no metrics; only the executions' end states are derived",
    "AWS/ES": "the local OpenSearch replaces the domain and emits no CloudWatch metrics",
    "AWS/ApiGateway": "the local API adapter emits no API Gateway metrics",
    "AWS/DynamoDB": "moto's DynamoDB emits no metrics",
    "AWS/Events": "schedules and rules are not run locally",
    "AWS/SNS": "moto's SNS emits no metrics",
    "AWS/S3": "moto's S3 emits no metrics",
}


@dataclass
class LocalAlarm:
    logical_id: str
    name: str
    arn: str
    description: str
    properties: dict[str, Any]
    rule: AlarmRule | None
    metric: AlarmMetric | None
    unobservable: str | None
    state: str = INSUFFICIENT_DATA
    state_reason: str = "Unchecked: Initial alarm creation"
    transitions: int = 0
    created_at: float = field(default_factory=time.time)

    def actions_for(self, state: str) -> list[str]:
        key = {ALARM: "AlarmActions", OK: "OKActions", INSUFFICIENT_DATA: "InsufficientDataActions"}[state]
        return [str(action) for action in self.properties.get(key) or []]

    def describe(self) -> dict[str, Any]:
        return {
            "logical_id": self.logical_id,
            "name": self.name,
            "state": self.state,
            "reason": self.state_reason,
            "transitions": self.transitions,
            "evaluated": self.unobservable is None,
            **({"not_observable": self.unobservable} if self.unobservable else {}),
        }


def notification(
    alarm: LocalAlarm,
    old_state: str,
    verdict: Verdict,
    region: str,
    account_id: str,
    *,
    changed_at: float | None = None,
) -> dict[str, Any]:
    """CloudWatch's SNS message for a state change (the ``Message`` of the SNS notification)."""
    properties = alarm.properties
    trigger: dict[str, Any] = dict(alarm.metric.trigger) if alarm.metric else {}
    if alarm.rule is not None:
        trigger.update(
            {
                "EvaluationPeriods": alarm.rule.evaluation_periods,
                "DatapointsToAlarm": alarm.rule.datapoints_to_alarm,
                "ComparisonOperator": alarm.rule.comparison,
                "Threshold": float(alarm.rule.threshold),
                "TreatMissingData": alarm.rule.treat_missing_data,
                "EvaluateLowSampleCountPercentile": str(properties.get("EvaluateLowSampleCountPercentile", "")),
            }
        )
    return {
        "AlarmName": alarm.name,
        "AlarmDescription": alarm.description or None,
        "AWSAccountId": account_id,
        "AlarmConfigurationUpdatedTimestamp": iso_timestamp(alarm.created_at),
        "NewStateValue": verdict.state,
        "NewStateReason": verdict.reason,
        "StateChangeTime": iso_now() if changed_at is None else iso_timestamp(changed_at),
        "Region": REGION_NAMES.get(region, region),
        "AlarmArn": alarm.arn,
        "OldStateValue": old_state,
        "OKActions": alarm.actions_for(OK),
        "AlarmActions": alarm.actions_for(ALARM),
        "InsufficientDataActions": alarm.actions_for(INSUFFICIENT_DATA),
        "Trigger": trigger,
    }


def notification_subject(alarm_name: str, state: str, region: str) -> str:
    # SNS subjects are at most 100 characters; CloudWatch truncates the alarm name.
    suffix = f'" in {REGION_NAMES.get(region, region)}'
    prefix = f'{state}: "'
    return prefix + alarm_name[: 100 - len(prefix) - len(suffix)] + suffix


def alarm_rule(properties: Mapping[str, Any]) -> AlarmRule:
    evaluation_periods = int(properties.get("EvaluationPeriods", 1))
    return AlarmRule(
        comparison=str(properties.get("ComparisonOperator")),
        threshold=float(properties.get("Threshold", 0)),
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=int(properties.get("DatapointsToAlarm", evaluation_periods)),
        treat_missing_data=str(properties.get("TreatMissingData", "missing")),
    )


def read_alarm(
    properties: Mapping[str, Any],
    *,
    queues: set[str] | None = None,
    functions: set[str] | None = None,
    state_machines: set[str] | None = None,
) -> tuple[AlarmRule | None, AlarmMetric | None, str | None]:
    """An alarm's rule and metric, and why it cannot be evaluated locally (None when it can).

    ``queues``/``functions``/``state_machines``: the local queue names, function names and state
    machine ARNs its dimensions must name; None skips that check (for the unresolved template,
    where every queue, function and state machine is local).
    """
    try:
        rule = alarm_rule(properties)
        metric = alarm_metric(properties)
    except UnobservableAlarm as exc:
        return None, None, str(exc)
    except (KeyError, TypeError, ValueError) as exc:  # CloudFormation would have refused it
        return None, None, f"malformed alarm properties: {type(exc).__name__}: {exc}"
    for namespace, name, dimensions in metric.watched():
        if namespace == "AWS/SQS":
            queue = (dimensions or {}).get("QueueName")
            if name not in SQS_COUNT_ATTRIBUTES and name != SQS_AGE_METRIC:
                return rule, metric, f"AWS/SQS {name} is not sampled locally"
            if queues is not None and queue not in queues:
                return rule, metric, f"AWS/SQS {name}: queue {queue} is not a local queue"
        elif namespace == "AWS/Lambda":
            function = (dimensions or {}).get("FunctionName")
            if name not in LAMBDA_METRICS:
                return rule, metric, f"AWS/Lambda {name} is not measured by the local Lambda runner"
            if set(dimensions or {}) != {"FunctionName"} or (functions is not None and function not in functions):
                return rule, metric, f"AWS/Lambda {name}: {dict(dimensions or {})} is not a function run locally"
        elif namespace == "AWS/States" and name in STATES_METRICS:
            arn = (dimensions or {}).get("StateMachineArn")
            if set(dimensions or {}) != {"StateMachineArn"} or (
                state_machines is not None and arn not in state_machines
            ):
                return rule, metric, f"AWS/States {name}: {dict(dimensions or {})} is not a local state machine"
        elif namespace.startswith("AWS/"):
            why = UNEMITTED_NAMESPACES.get(namespace, "the service does not run locally")
            return rule, metric, f"{namespace} {name}: {why}"
    return rule, metric, None
