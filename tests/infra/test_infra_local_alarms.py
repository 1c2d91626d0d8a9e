"""The local stack's alarm evaluator against the synthesized template: every alarm it cannot
evaluate is exactly the list in docs/local-stack.md, and the ones the issue names are evaluated."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from local.runtime.alarms.template_alarms import read_alarm
from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra
DOC = Path(__file__).resolve().parents[2] / "docs" / "local-stack.md"


def construct_path(resource: dict[str, object], stack_name: str) -> str:
    path = str(resource["Metadata"]["aws:cdk:path"])  # type: ignore[index]
    return path.removeprefix(f"{stack_name}/").removesuffix("/Resource")


def documented_unobservable() -> dict[str, str]:
    text = DOC.read_text()
    block = text.split("<!-- alarms-not-observable:begin -->", 1)[1].split("<!-- alarms-not-observable:end -->", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \| (.+?) \|$", block, flags=re.MULTILINE)
    return {path: why for path, _metric, why in rows}


def test_the_docs_list_exactly_the_alarms_not_evaluated_locally(synth: SynthResult) -> None:
    not_evaluated = {}
    for resource in synth.of_type("AWS::CloudWatch::Alarm").values():
        _rule, _metric, why = read_alarm(resource["Properties"])
        if why is not None:
            not_evaluated[construct_path(resource, synth.stack_name)] = why
    documented = documented_unobservable()
    assert set(documented) == set(not_evaluated), "update docs/local-stack.md, Alarms of the template not observable"
    for path, why in not_evaluated.items():
        # The documented reason is the evaluator's own (an explanation may follow in parentheses).
        assert documented[path].split(" (")[0] in why, path


def test_the_queue_function_and_emf_alarms_are_evaluated(synth: SynthResult) -> None:
    evaluated = {
        construct_path(resource, synth.stack_name)
        for resource in synth.of_type("AWS::CloudWatch::Alarm").values()
        if read_alarm(resource["Properties"])[2] is None
    }
    assert {
        "Monitoring/DeadLetterQueueAlarm",
        "Monitoring/DeadLetterQueueAgeAlarm",
        "Monitoring/QueueAgeAlarm",
        "Monitoring/ExecutionsTimedOutAlarm",  # moto's executions
        "Monitoring/SystemFailuresAlarm",  # Metrics Insights over the EMF metrics
        "Monitoring/IntakeErrorsAlarm",
        "Monitoring/ParseErrorRateAlarm",  # metric math
        "Monitoring/ParseThrottlesAlarm",
        "Reconciler/ReconcilerDriftAlarm",  # Metrics Insights over the reconciler's EMF
    } <= evaluated
