"""``AWS::StepFunctions::StateMachine`` in moto: the template's definition, retry waits scaled.

The one local deviation is :func:`scale_retry_intervals` by ``LOCAL_RETRY_SCALE``: moto's
interpreter really sleeps between attempts; the attempts themselves are never changed.
"""

from __future__ import annotations

import json
from typing import Any

from local.runtime.cloudformation.context import ProvisioningContext
from local.runtime.cloudformation.provisioned import ProvisioningError
from local.runtime.cloudformation.template import TemplateResource


def scale_retry_intervals(definition: dict[str, Any], scale: float) -> dict[str, Any]:
    """A copy of an ASL definition with every Retry's waits scaled (never its attempts).

    ``IntervalSeconds`` and ``MaxDelaySeconds`` must stay integers >= 1 in ASL, so the scaled
    value is rounded and floored at 1. MaxAttempts, BackoffRate, JitterStrategy and the
    retriers themselves are left exactly as synthesized.
    """
    # A JSON round trip, not deepcopy: shared sub-objects must not be scaled twice.
    scaled: dict[str, Any] = json.loads(json.dumps(definition))

    def scale_seconds(value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return max(1, round(value * scale))
        return value

    def visit_states(states: Any) -> None:
        if not isinstance(states, dict):
            return
        for state in states.values():
            if not isinstance(state, dict):
                continue
            for retrier in state.get("Retry", []) or []:
                for key in ("IntervalSeconds", "MaxDelaySeconds"):
                    if key in retrier:
                        retrier[key] = scale_seconds(retrier[key])
            for nested_key in ("ItemProcessor", "Iterator"):
                nested = state.get(nested_key)
                if isinstance(nested, dict):
                    visit_states(nested.get("States"))
            for branch in state.get("Branches", []) or []:
                if isinstance(branch, dict):
                    visit_states(branch.get("States"))

    visit_states(scaled.get("States"))
    return scaled


def create_state_machine(resource: TemplateResource, context: ProvisioningContext) -> None:
    props = context.properties(resource)
    if "DefinitionString" in props:
        definition = json.loads(props["DefinitionString"])
    elif "Definition" in props:
        definition = props["Definition"]
    else:
        raise ProvisioningError(f"state machine {resource.logical_id} has no DefinitionString")
    substitutions = props.get("DefinitionSubstitutions") or {}
    if substitutions:
        text = json.dumps(definition)
        for key, value in substitutions.items():
            text = text.replace("${" + key + "}", str(value))
        definition = json.loads(text)
    name = context.physical_name(resource, "StateMachineName", 80)
    request: dict[str, Any] = {
        "name": name,
        "definition": json.dumps(scale_retry_intervals(definition, context.settings.retry_scale)),
        "roleArn": props["RoleArn"],
    }
    if props.get("StateMachineType"):
        request["type"] = props["StateMachineType"]
    arn = context.client("stepfunctions").create_state_machine(**request)["stateMachineArn"]
    context.stack.state_machines[resource.logical_id] = arn
    context.created(resource, arn, {"Arn": arn, "Name": name})
