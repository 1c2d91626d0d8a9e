"""CloudWatch alarm evaluation and alarm actions, for the local stack.

Stands in for what CloudWatch does with the template's ``AWS::CloudWatch::Alarm``s in AWS: it
collects the metrics the alarms watch, evaluates each alarm every period (statistic, period,
evaluation periods, datapoints to alarm, comparison, threshold, TreatMissingData), records each
state change in moto's CloudWatch (``set_alarm_state``; moto stores alarms but never evaluates
them) and publishes it to the alarm's actions (SNS topics, which moto delivers to their SQS
subscribers) as CloudWatch's notification JSON. The evaluation of one alarm is
:mod:`local.runtime.alarms.rules`; the metrics and what an alarm watches, :mod:`local.runtime.alarms.metrics`.

What it can observe locally:

- ``AWS/SQS`` ``ApproximateNumberOfMessagesVisible`` / ``...NotVisible`` / ``...Delayed``
  (the counts GetQueueAttributes answers) and ``ApproximateAgeOfOldestMessage``: SQS has no API
  that reads a message without receiving it (a receive would change the very receive counts and
  visibility the pipeline depends on), so the age is read from moto's in-process SQS backend: the
  oldest ``sent_timestamp`` of the queue's not-deleted messages (``verify_sqs_age_seam`` checks it);
- ``AWS/Lambda`` ``Invocations``, ``Errors``, ``Throttles``, ``Duration`` from the Lambda runner
  (``LambdaRunner.invocation_observers``); the runner queues an invocation instead of throttling
  it, so ``Throttles`` counts only invocations answered ``TooManyRequestsException`` (a fault);
- ``AWS/States`` execution end states (``ExecutionsTimedOut``, ...) from moto's executions;
- every custom metric the functions emit as CloudWatch EMF (``{"_aws": ...}`` lines of their
  output, as captured by the runner).

The queue counts and the executions are read from moto's backends in this process (its server
runs here), as GetQueueAttributes and ListExecutions read them, not through boto3 and moto's HTTP
server: each tick (0.75 s by default) used to make one request per watched queue and per watched
state machine and status, each holding this process's GIL for a few ms, and the local HTTP API
answers from this process too (docs/benchmarks.md).

Alarms on anything else (OpenSearch domain, API Gateway, DynamoDB, Lambda iterator age, ...) stay
``INSUFFICIENT_DATA``; they are listed at startup and in ``status``, with the reason.

Periods are scaled by ``LOCAL_ALARM_PERIOD_SCALE`` (default 0.05: a 60 s period lasts 3 s), so
tests see transitions in seconds; thresholds (ages in seconds included) are never scaled.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local.runtime.alarms.metrics import AlarmMetric, MetricStore, alarm_metric, parse_emf
from local.runtime.alarms.rules import (
    ALARM,
    INSUFFICIENT_DATA,
    OK,
    AlarmRule,
    Datapoint,
    UnobservableAlarm,
    Verdict,
    evaluate,
    iso_now,
    iso_timestamp,
)
from local.runtime.aws import moto_client
from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver, generated_physical_name
from local.runtime.lambda_.runner import InvocationResult
from local.runtime.settings import RuntimeSettings

LOG = logging.getLogger("local.runtime.alarms.evaluator")

# An invocation answered with one of these was throttled: no Invocations, no Errors, one Throttles.
THROTTLE_ERROR_TYPES = frozenset({"TooManyRequestsException", "Lambda.TooManyRequestsException"})
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
# Beyond the evaluation periods, how many older periods CloudWatch may look back through for
# real datapoints when recent ones are missing (its "evaluation range"; AWS does not publish the
# exact number, which depends on the period).
LOOKBACK_PERIODS = 2
MIN_SCALED_PERIOD_SECONDS = 0.5
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
# Template types the evaluator creates in moto (the provisioner skips them).
HANDLED_TYPES = frozenset({"AWS::CloudWatch::Alarm", "AWS::SNS::Topic", "AWS::SNS::Subscription"})


# -- the template's alarms -------------------------------------------------------------------------------


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


def notification(alarm: LocalAlarm, old_state: str, verdict: Verdict, region: str, account_id: str) -> dict[str, Any]:
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
        "StateChangeTime": iso_now(),
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


def scaled_period(period: float, scale: float) -> float:
    return max(MIN_SCALED_PERIOD_SECONDS, period * scale)


def evaluation_range(
    metric: AlarmMetric, rule: AlarmRule, store: MetricStore, scale: float, now: float
) -> list[Datapoint]:
    """The datapoints of the last complete periods (oldest first), periods aligned on the epoch."""
    period = scaled_period(metric.period, scale)
    last = math.floor(now / period) - 1
    points = []
    for index in range(last - rule.evaluation_periods - LOOKBACK_PERIODS + 1, last + 1):
        start = index * period
        points.append(Datapoint(start, metric.value(store, start, start + period)))
    return points


# -- the moto side and the evaluation loop ------------------------------------------------------------------


def verify_sqs_age_seam() -> None:
    """Fail loudly if moto's SQS backend no longer keeps messages with a ``sent_timestamp``."""
    from moto.sqs.models import Message, Queue, sqs_backends  # noqa: F401

    if (
        "_messages" not in Queue.__init__.__code__.co_names
        or "sent_timestamp" not in Message.__init__.__code__.co_names
    ):
        raise RuntimeError("moto.sqs.models.Queue._messages / Message.sent_timestamp moved: queue age unobservable")


def _moto_queue(account_id: str, region: str, queue_name: str) -> Any:
    """moto's SQS queue of that name in this process's backend, or None."""
    from moto.sqs.models import sqs_backends

    return sqs_backends[account_id][region].queues.get(queue_name)


def queue_message_counts(account_id: str, region: str, queue_name: str) -> dict[str, int] | None:
    """GetQueueAttributes' three message counts of moto's queue in this process (by their
    attribute names); None for an unknown queue."""
    queue = _moto_queue(account_id, region, queue_name)
    if queue is None:
        return None
    with queue._messages_lock:
        return {
            "ApproximateNumberOfMessages": queue.approximate_number_of_messages,
            "ApproximateNumberOfMessagesNotVisible": queue.approximate_number_of_messages_not_visible,
            "ApproximateNumberOfMessagesDelayed": queue.approximate_number_of_messages_delayed,
        }


def ended_executions(
    account_id: str, region: str, state_machine_arn: str, status: str
) -> list[tuple[str, float | None]]:
    """(execution ARN, stop time in epoch seconds or None) of the state machine's executions in
    ``status``, from the Step Functions backend moto's ListExecutions reads in this process."""
    from moto.stepfunctions.responses import get_backend

    backend = get_backend(account_id, region)
    found: list[tuple[str, float | None]] = []
    next_token: str | None = None
    while True:
        executions, next_token = backend.list_executions(
            state_machine_arn, status_filter=status, max_results=1000, next_token=next_token
        )
        for execution in executions:
            stopped = getattr(execution, "stop_date", None)
            if isinstance(stopped, datetime.datetime) and stopped.tzinfo is None:
                stopped = stopped.replace(tzinfo=datetime.UTC)  # moto's utcnow() is naive UTC
            found.append(
                (str(execution.execution_arn), stopped.timestamp() if isinstance(stopped, datetime.datetime) else None)
            )
        if not next_token:
            return found


def oldest_message_age_seconds(account_id: str, region: str, queue_name: str, now: float) -> float | None:
    """ApproximateAgeOfOldestMessage without receiving: moto's in-process queue, every message not
    deleted (in flight too, as in SQS); 0 for an empty queue, None for an unknown one."""
    queue = _moto_queue(account_id, region, queue_name)
    if queue is None:
        return None
    with queue._messages_lock:
        # moto types sent_timestamp as None until the message is sent (then epoch milliseconds).
        stamps = [float(getattr(message, "sent_timestamp", None) or 0) for message in queue._messages]
    stamps = [stamp for stamp in stamps if stamp > 0]
    return max(0.0, now - min(stamps) / 1000) if stamps else 0.0


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


class AlarmEvaluator:
    """Evaluates the template's alarms in a thread of the ``serve`` process (which hosts moto)."""

    def __init__(
        self,
        template: CloudFormationTemplate,
        resolver: IntrinsicResolver,
        settings: RuntimeSettings,
        *,
        queues: Mapping[str, str],
        functions: Iterable[str],
        state_machines: Iterable[str] = (),
        state_file: Path | None = None,
    ) -> None:
        """``queues``: local queue name → URL; ``functions``: local function names;
        ``state_machines``: local state machine ARNs."""
        self.settings = settings
        # Where alarm states are kept across restarts (None: not kept).
        self.state_file = state_file
        self.scale = settings.alarm_period_scale
        self._queues = dict(queues)
        self._functions = set(functions)
        self._state_machines = set(state_machines)
        # Executions already counted, per (state machine, status).
        self._counted_executions: dict[tuple[str, str], set[str]] = {}
        self._resolver = resolver
        self._template = template
        self.alarms: list[LocalAlarm] = []
        self.topics: dict[str, str] = {}  # logical id -> ARN
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._clients: dict[str, Any] = {}
        self._client_lock = threading.Lock()
        self._age_observable = True
        for resource in template.resources.values():
            if resource.type == "AWS::CloudWatch::Alarm":
                self.alarms.append(self._local_alarm(resource.logical_id, resource.properties))
        longest = max(
            (
                scaled_period(alarm.metric.period, self.scale) * (alarm.rule.evaluation_periods + LOOKBACK_PERIODS + 2)
                for alarm in self.alarms
                if alarm.metric and alarm.rule
            ),
            default=60.0,
        )
        self.store = MetricStore(retention_seconds=longest)
        evaluated = [alarm for alarm in self.alarms if alarm.metric is not None]
        shortest = min((scaled_period(a.metric.period, self.scale) for a in evaluated if a.metric), default=1.0)
        self.tick_seconds = min(2.0, max(0.2, shortest / 4))

    # -- setup --------------------------------------------------------------------------------------

    def _local_alarm(self, logical_id: str, raw: Mapping[str, Any]) -> LocalAlarm:
        properties = dict(self._resolver.resolve(dict(raw)) or {})
        name = str(properties.get("AlarmName") or generated_physical_name(
            self.settings.stack_name, logical_id, max_length=255))  # fmt: skip
        arn = f"arn:aws:cloudwatch:{self.settings.region}:{self.settings.account_id}:alarm:{name}"
        rule, metric, unobservable = read_alarm(
            properties, queues=set(self._queues), functions=self._functions, state_machines=self._state_machines
        )
        return LocalAlarm(
            logical_id=logical_id,
            name=name,
            arn=arn,
            description=str(properties.get("AlarmDescription", "")),
            properties=properties,
            rule=rule,
            metric=metric if unobservable is None else None,
            unobservable=unobservable,
        )

    def _client(self, service: str) -> Any:
        with self._client_lock:
            if service not in self._clients:
                self._clients[service] = moto_client(self.settings, service)
            return self._clients[service]

    def provision(self) -> None:
        """The alarm topics and their SQS subscriptions, and the alarms, in moto."""
        sns = self._client("sns")
        for resource in self._template.resources.values():
            if resource.type != "AWS::SNS::Topic":
                continue
            # The provisioner resolves Refs to a topic as arn:...:<LogicalId>: create it under that name.
            arn = str(self._resolver.resolve({"Ref": resource.logical_id}))
            created = sns.create_topic(Name=arn.rsplit(":", 1)[-1])["TopicArn"]
            if created != arn:
                raise RuntimeError(f"topic {resource.logical_id}: moto made {created}, the template refers to {arn}")
            self.topics[resource.logical_id] = arn
        for resource in self._template.resources.values():
            if resource.type != "AWS::SNS::Subscription":
                continue
            properties = self._resolver.resolve(dict(resource.properties)) or {}
            if properties.get("Protocol") == "sqs":
                sns.subscribe(TopicArn=properties["TopicArn"], Protocol="sqs", Endpoint=properties["Endpoint"])
            else:
                LOG.info(
                    "subscription %s (%s) is not delivered locally", resource.logical_id, properties.get("Protocol")
                )
        cloudwatch = self._client("cloudwatch")
        for alarm in self.alarms:
            request: dict[str, Any] = {
                key: alarm.properties[key]
                for key in (
                    "AlarmDescription", "ActionsEnabled", "OKActions", "AlarmActions", "InsufficientDataActions",
                    "MetricName", "Namespace", "Statistic", "ExtendedStatistic", "Dimensions", "Period", "Unit",
                    "EvaluationPeriods", "DatapointsToAlarm", "Threshold", "ComparisonOperator", "TreatMissingData",
                    "EvaluateLowSampleCountPercentile", "Metrics", "ThresholdMetricId",
                )
                if key in alarm.properties
            }  # fmt: skip
            cloudwatch.put_metric_alarm(AlarmName=alarm.name, **request)
        evaluated = [alarm.logical_id for alarm in self.alarms if alarm.unobservable is None]
        LOG.info(
            "alarms: %d evaluated locally (periods x%s, every %.1f s): %s",
            len(evaluated),
            self.scale,
            self.tick_seconds,
            ", ".join(evaluated) or "none",
        )
        for alarm in self.alarms:
            if alarm.unobservable is not None:
                LOG.info("alarm %s stays INSUFFICIENT_DATA locally: %s", alarm.logical_id, alarm.unobservable)
        self._restore_states(cloudwatch)

    # -- states kept across restarts (docs/local-stack.md) -------------------------------------------

    def _restore_states(self, cloudwatch: Any) -> None:
        """An alarm keeps its state across a restart, as CloudWatch's does; its samples start over."""
        path = self.state_file
        if path is None or not path.exists():
            return
        try:
            kept = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            LOG.warning("alarm states in %s not read (%s): every alarm starts INSUFFICIENT_DATA", path, exc)
            return
        for alarm in self.alarms:
            saved = kept.get(alarm.logical_id)
            if not isinstance(saved, dict) or saved.get("state") not in (ALARM, OK, INSUFFICIENT_DATA):
                continue
            alarm.state = str(saved["state"])
            alarm.state_reason = str(saved.get("reason", ""))
            alarm.transitions = int(saved.get("transitions", 0))
            cloudwatch.set_alarm_state(
                AlarmName=alarm.name, StateValue=alarm.state, StateReason=alarm.state_reason[:1023] or "restored"
            )
        LOG.info("alarm states restored from %s", path)

    def _save_states(self) -> None:
        path = self.state_file
        if path is None:
            return
        states = {
            alarm.logical_id: {"state": alarm.state, "reason": alarm.state_reason, "transitions": alarm.transitions}
            for alarm in self.alarms
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(states, indent=1, sort_keys=True))
        temporary.replace(path)

    # -- metrics in --------------------------------------------------------------------------------

    def record_invocation(self, function_name: str, result: InvocationResult, duration_ms: float) -> None:
        """A finished invocation: Lambda's metrics, and the EMF metrics in its output."""
        try:
            self._record_invocation(function_name, result, duration_ms)
        except Exception:  # metrics must never fail an invocation
            LOG.warning("could not record the metrics of an invocation of %s", function_name, exc_info=True)

    def _record_invocation(self, function_name: str, result: InvocationResult, duration_ms: float) -> None:
        now = time.time()
        dimensions = {"FunctionName": function_name}
        error_type = ""
        if result.errored:
            try:
                error_type = str(json.loads(result.output).get("errorType", ""))
            except (ValueError, AttributeError):
                error_type = ""
        if error_type in THROTTLE_ERROR_TYPES:
            self.store.put("AWS/Lambda", "Throttles", dimensions, 1, now)
        else:
            self.store.put("AWS/Lambda", "Invocations", dimensions, 1, now)
            self.store.put("AWS/Lambda", "Errors", dimensions, 1 if result.errored else 0, now)
            self.store.put("AWS/Lambda", "Duration", dimensions, duration_ms, now)
            self.store.put("AWS/Lambda", "Throttles", dimensions, 0, now)
        for line in result.logs.splitlines():
            for namespace, name, metric_dimensions, values, timestamp in parse_emf(line, now):
                for value in values:
                    self.store.put(namespace, name, metric_dimensions, value, timestamp)

    def sample_executions(self) -> None:
        """AWS/States execution metrics from moto's executions: each one that ended in a watched
        status counts 1 at its stop time (moto's interpreter enforces the definition's TimeoutSeconds)."""
        watched: set[tuple[str, str]] = set()
        for alarm in self.alarms:
            for namespace, name, dimensions in alarm.metric.watched() if alarm.metric else []:
                if namespace == "AWS/States" and name in STATES_METRICS and dimensions:
                    watched.add((dimensions["StateMachineArn"], name))
        for arn, name in watched:
            counted = self._counted_executions.setdefault((arn, name), set())
            for execution_arn, stopped_at in ended_executions(
                self.settings.account_id, self.settings.region, arn, STATES_METRICS[name]
            ):
                if execution_arn in counted:
                    continue
                counted.add(execution_arn)
                self.store.put("AWS/States", name, {"StateMachineArn": arn}, 1, stopped_at or time.time())

    def sample_queues(self, now: float) -> None:
        watched: dict[str, set[str]] = {}
        for alarm in self.alarms:
            if alarm.metric is None:
                continue
            for namespace, name, dimensions in alarm.metric.watched():
                if namespace == "AWS/SQS" and dimensions and dimensions.get("QueueName") in self._queues:
                    watched.setdefault(dimensions["QueueName"], set()).add(name)
        account, region = self.settings.account_id, self.settings.region
        for queue_name, names in watched.items():
            dimensions = {"QueueName": queue_name}
            counts = [name for name in names if name in SQS_COUNT_ATTRIBUTES]
            values = queue_message_counts(account, region, queue_name) if counts else None
            if values is not None:
                for name in counts:
                    self.store.put("AWS/SQS", name, dimensions, float(values[SQS_COUNT_ATTRIBUTES[name]]), now)
            if SQS_AGE_METRIC in names and self._age_observable:
                age = oldest_message_age_seconds(account, region, queue_name, now)
                if age is not None:
                    self.store.put("AWS/SQS", SQS_AGE_METRIC, dimensions, age, now)

    # -- evaluation --------------------------------------------------------------------------------

    def evaluate_all(self, now: float) -> list[tuple[LocalAlarm, str, Verdict]]:
        """Evaluate every observable alarm; apply and publish each state change."""
        changes = []
        for alarm in self.alarms:
            if alarm.metric is None or alarm.rule is None:
                continue
            points = evaluation_range(alarm.metric, alarm.rule, self.store, self.scale, now)
            verdict = evaluate(alarm.rule, points, alarm.state)
            if verdict.state == alarm.state:
                continue
            old = alarm.state
            try:
                self._apply(alarm, old, verdict)
            except Exception:  # not recorded: the next evaluation makes the transition again
                LOG.warning("alarm %s: %s -> %s not applied", alarm.logical_id, old, verdict.state, exc_info=True)
                continue
            alarm.state, alarm.state_reason = verdict.state, verdict.reason
            alarm.transitions += 1
            changes.append((alarm, old, verdict))
        if changes:
            self._save_states()
        return changes

    def _apply(self, alarm: LocalAlarm, old_state: str, verdict: Verdict) -> None:
        LOG.info("alarm %s: %s -> %s (%s)", alarm.logical_id, old_state, verdict.state, verdict.reason)
        self._client("cloudwatch").set_alarm_state(
            AlarmName=alarm.name,
            StateValue=verdict.state,
            StateReason=verdict.reason[:1023],
            StateReasonData=json.dumps(verdict.reason_data),
        )
        if not alarm.properties.get("ActionsEnabled", True):
            return
        message = json.dumps(notification(alarm, old_state, verdict, self.settings.region, self.settings.account_id))
        for action in alarm.actions_for(verdict.state):
            if not action.startswith("arn:aws:sns:"):
                LOG.info("alarm %s: action %s is not run locally", alarm.logical_id, action)
                continue
            self._client("sns").publish(
                TopicArn=action,
                Subject=notification_subject(alarm.name, verdict.state, self.settings.region),
                Message=message,
            )

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        try:
            verify_sqs_age_seam()
        except (ImportError, RuntimeError) as exc:
            self._age_observable = False
            LOG.warning("%s", exc)
        self._thread = threading.Thread(target=self._loop, name="alarm-evaluator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            try:
                self.sample_queues(now)
                self.sample_executions()
                self.evaluate_all(now)
            except Exception:  # one failed round must not end evaluation; the next retries
                LOG.warning("alarm evaluation failed", exc_info=True)
            self._stop.wait(self.tick_seconds)

    def status(self) -> list[dict[str, Any]]:
        return [alarm.describe() for alarm in self.alarms]
