"""CloudWatch's alarm evaluation and alarm actions for the template's alarms, in the ``serve`` process.

In: the template's alarms (:mod:`.template_alarms`), metrics from the Lambda runner's invocations
(Lambda's own and their EMF lines) and from moto's backends (:mod:`.moto_backends`). Each tick,
every observable alarm is evaluated (:mod:`.rules`) on the last complete periods, scaled by
``LOCAL_ALARM_PERIOD_SCALE``; a state change is set in moto's CloudWatch and published to the
alarm's SNS actions. Time is an injected :class:`AlarmClock`: :meth:`AlarmEvaluator.advance` steps
it (ticks run at once), so tests never wait for a period. Queue ages stay on the source clock.
What is observable and why: docs/local-stack.md, "Alarms: evaluated locally, proven to fire".
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from local.runtime.alarms.clock import AlarmClock
from local.runtime.alarms.metrics import AlarmMetric, MetricStore, parse_emf
from local.runtime.alarms.moto_backends import (
    ended_executions,
    oldest_message_age_seconds,
    queue_message_counts,
    verify_sqs_age_seam,
)
from local.runtime.alarms.rules import ALARM, INSUFFICIENT_DATA, OK, AlarmRule, Datapoint, Verdict, evaluate
from local.runtime.alarms.template_alarms import (
    SQS_AGE_METRIC,
    SQS_COUNT_ATTRIBUTES,
    STATES_METRICS,
    LocalAlarm,
    notification,
    notification_subject,
    read_alarm,
)
from local.runtime.aws import moto_client
from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver, generated_physical_name
from local.runtime.lambda_.runner import InvocationResult
from local.runtime.settings import RuntimeSettings

LOG = logging.getLogger("local.runtime.alarms.evaluator")

# An invocation answered with one of these was throttled: no Invocations, no Errors, one Throttles.
THROTTLE_ERROR_TYPES = frozenset({"TooManyRequestsException", "Lambda.TooManyRequestsException"})
# Beyond the evaluation periods, how many older periods CloudWatch may look back through for real
# datapoints when recent ones are missing (its "evaluation range"; AWS does not publish the number).
LOOKBACK_PERIODS = 2
MIN_SCALED_PERIOD_SECONDS = 0.5
# Template types the evaluator creates in moto (the provisioner skips them).
HANDLED_TYPES = frozenset({"AWS::CloudWatch::Alarm", "AWS::SNS::Topic", "AWS::SNS::Subscription"})


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
        clock: AlarmClock | None = None,
    ) -> None:
        """``queues``: local queue name → URL; ``functions``: local function names;
        ``state_machines``: local state machine ARNs; ``clock``: the wall clock unless given."""
        self.settings = settings
        self.clock = clock or AlarmClock()
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
        # One round (sample, then evaluate) at a time: the loop's ticks and advance()'s steps.
        self._round_lock = threading.Lock()
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
        self.store = MetricStore(retention_seconds=longest, clock=self.clock.now)
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
        now = self.clock.now()
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
        received_at = self.clock.source_now()  # EMF timestamps are the functions' clock
        for line in result.logs.splitlines():
            for namespace, name, metric_dimensions, values, timestamp in parse_emf(line, received_at):
                for value in values:
                    self.store.put(namespace, name, metric_dimensions, value, self.clock.from_source(timestamp))

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
                at = self.clock.from_source(stopped_at) if stopped_at else self.clock.now()
                self.store.put("AWS/States", name, {"StateMachineArn": arn}, 1, at)

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
                # A message's age is SQS's own: advancing the alarm clock does not age messages.
                age = oldest_message_age_seconds(account, region, queue_name, self.clock.source_now())
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
            verdict = evaluate(alarm.rule, points, alarm.state, evaluated_at=now)
            if verdict.state == alarm.state:
                continue
            old = alarm.state
            try:
                self._apply(alarm, old, verdict, now)
            except Exception:  # not recorded: the next evaluation makes the transition again
                LOG.warning("alarm %s: %s -> %s not applied", alarm.logical_id, old, verdict.state, exc_info=True)
                continue
            alarm.state, alarm.state_reason = verdict.state, verdict.reason
            alarm.transitions += 1
            changes.append((alarm, old, verdict))
        if changes:
            self._save_states()
        return changes

    def _apply(self, alarm: LocalAlarm, old_state: str, verdict: Verdict, now: float) -> None:
        LOG.info("alarm %s: %s -> %s (%s)", alarm.logical_id, old_state, verdict.state, verdict.reason)
        self._client("cloudwatch").set_alarm_state(
            AlarmName=alarm.name,
            StateValue=verdict.state,
            StateReason=verdict.reason[:1023],
            StateReasonData=json.dumps(verdict.reason_data),
        )
        if not alarm.properties.get("ActionsEnabled", True):
            return
        message = json.dumps(
            notification(alarm, old_state, verdict, self.settings.region, self.settings.account_id, changed_at=now)
        )
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

    def tick(self) -> list[tuple[LocalAlarm, str, Verdict]]:
        """One round at the clock's now: sample what moto holds, evaluate every alarm."""
        with self._round_lock:
            return self._round()

    def advance(self, seconds: float) -> list[tuple[LocalAlarm, str, Verdict]]:
        """Move the clock on by ``seconds``, one tick at a time, with a round after each step: what
        the loop would have done had that time passed with nothing else happening. The changes made."""
        if seconds < 0:
            raise ValueError(f"the alarm clock only moves forward, not by {seconds} s")
        changes: list[tuple[LocalAlarm, str, Verdict]] = []
        with self._round_lock:
            remaining = seconds
            while remaining > 0:
                step = min(self.tick_seconds, remaining)
                self.clock.advance(step)
                remaining -= step
                changes.extend(self._round())
        return changes

    def _round(self) -> list[tuple[LocalAlarm, str, Verdict]]:
        now = self.clock.now()
        self.sample_queues(now)
        self.sample_executions()
        return self.evaluate_all(now)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # one failed round must not end evaluation; the next retries
                LOG.warning("alarm evaluation failed", exc_info=True)
            self._stop.wait(self.tick_seconds)

    def status(self) -> list[dict[str, Any]]:
        return [alarm.describe() for alarm in self.alarms]
