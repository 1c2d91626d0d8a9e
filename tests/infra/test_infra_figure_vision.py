"""figures.vision: a Bedrock vision model describes PDF figures, by choice (off by default).

Off: the stages are told it is off and no role may call the vision model. On: every stage is told
the model, its prompt and its cap (one environment for all stages),
and only the Parse functions may call Converse (bedrock:InvokeModel) on that one model; the stack
still passes cdk-nag. The switch and its bounds are validated.
"""

from __future__ import annotations

import json

import pytest

from infra.config import CONTEXT_KEY, ConfigError, parse_config
from tests.infra.conftest import synthesize
from tests.infra.template_tools import SynthResult, as_list, problem_annotations

pytestmark = pytest.mark.infra

PARSE_FUNCTIONS = ("Workflow/ParseFunction", "Workflow/ParseBulkFunction")
VISION_MODEL = "amazon.nova-pro-v1:0"  # not the answer model: its grant is the vision switch's alone


def _grants_on(synth: SynthResult, model: str) -> dict[str, list[str]]:
    """Per Lambda function whose role may invoke ``model``: the Bedrock actions on it."""
    grants: dict[str, list[str]] = {}
    for logical_id, function in synth.of_type("AWS::Lambda::Function").items():
        path = function.get("Metadata", {}).get("aws:cdk:path", logical_id)
        role = function["Properties"].get("Role", {})
        if not isinstance(role, dict) or "Fn::GetAtt" not in role:
            continue
        actions = sorted(
            action
            for policy in synth.of_type("AWS::IAM::Policy").values()
            if {"Ref": role["Fn::GetAtt"][0]} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if model in json.dumps(statement["Resource"])
            for action in as_list(statement["Action"])
        )
        if actions:
            grants[path.removeprefix(f"{synth.stack_name}/").removesuffix("/Resource")] = actions
    return grants


@pytest.fixture(scope="module")
def vision_on(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    context = {CONTEXT_KEY: {"figures": {"vision": {"enabled": True, "modelId": VISION_MODEL, "maxFigures": 5}}}}
    return synthesize(tmp_path_factory.mktemp("cdk.out-figure-vision"), context=context)


def test_off_by_default_no_stage_is_told_a_vision_model(synth: SynthResult) -> None:
    assert synth.config.figures.vision.enabled is False
    for path in PARSE_FUNCTIONS:
        variables = synth.resource(path)["Properties"]["Environment"]["Variables"]
        assert variables["MAX_FIGURES_READ"] == "100"
        assert variables["FIGURE_VISION_ENABLED"] == "false"
    assert _grants_on(synth, VISION_MODEL) == {}


def test_on_only_parse_may_converse_with_the_one_vision_model(vision_on: SynthResult) -> None:
    for path in PARSE_FUNCTIONS:
        variables = vision_on.resource(path)["Properties"]["Environment"]["Variables"]
        assert variables["FIGURE_VISION_ENABLED"] == "true"
        assert variables["FIGURE_VISION_MODEL_ID"] == VISION_MODEL
        assert variables["FIGURE_VISION_MAX_FIGURES"] == "5"
        assert variables["FIGURE_VISION_PROMPT"].startswith("Describe this figure")
    assert _grants_on(vision_on, VISION_MODEL) == {path: ["bedrock:InvokeModel"] for path in PARSE_FUNCTIONS}
    assert vision_on.validation_error is None, vision_on.validation_error
    assert problem_annotations(vision_on.manifest) == []


@pytest.mark.parametrize(
    "figures",
    [
        {"vision": {"enabled": "sometimes"}},
        {"vision": {"modelId": "not a model"}},
        {"vision": {"enabled": True, "maxFigures": 200}},  # over maxRead (100): figures described are read
        {"maxRead": -1},
    ],
)
def test_the_switch_and_its_bounds_are_validated(figures: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="figures"):
        parse_config({"figures": figures})
