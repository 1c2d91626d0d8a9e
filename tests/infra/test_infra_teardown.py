"""Deploy, destroy, deploy again: nothing that outlives the stack may block the next deploy by its name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.cdk_app import create_app
from infra.config import CONTEXT_KEY, parse_config
from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra


def _depends_on_the_deployment(value: Any, resources: dict[str, Any]) -> bool:
    """True if ``value`` resolves to something new on every creation of the stack: it refers to the
    stack id (a UUID per creation) or to another resource's generated name or attribute."""
    if isinstance(value, dict):
        if value.get("Ref") == "AWS::StackId":
            return True
        if "Ref" in value and value["Ref"] in resources:
            return True
        if "Fn::GetAtt" in value:
            return True
        return any(_depends_on_the_deployment(v, resources) for v in value.values())
    if isinstance(value, list):
        return any(_depends_on_the_deployment(v, resources) for v in value)
    return False


def _fixed_names_of_retained(template: dict[str, Any], allowed: set[str]) -> list[str]:
    """Every retained resource's top-level ``*Name`` property that is the same on every deploy
    (a literal, or built from literals and the stack name), unless the config spelled it (``allowed``)."""
    resources = template["Resources"]
    offenders = []
    for logical_id, resource in resources.items():
        if resource.get("DeletionPolicy") != "Retain" and resource.get("UpdateReplacePolicy") != "Retain":
            continue
        for key, value in resource.get("Properties", {}).items():
            if not key.endswith("Name") or _depends_on_the_deployment(value, resources):
                continue
            if isinstance(value, str) and value in allowed:
                continue
            offenders.append(f"{logical_id} ({resource['Type']}).{key} = {value!r}")
    return offenders


def test_the_default_stack_retains_its_data(synth: SynthResult) -> None:
    # Guards the next test: with nothing retained it would prove nothing.
    retained = {r["Type"] for r in synth.resources.values() if r.get("DeletionPolicy") == "Retain"}
    assert {"AWS::OpenSearchService::Domain", "AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::Logs::LogGroup"} <= (
        retained
    )


def test_no_retained_resource_has_a_hard_coded_name(synth: SynthResult) -> None:
    assert _fixed_names_of_retained(synth.template_dict, allowed=set()) == []


def test_the_names_that_must_exist_are_unique_per_stack_creation(synth: SynthResult) -> None:
    # The domain's name is spelled in its own access policy, and the state machine's log group must
    # sit under /aws/vendedlogs/: both are named, from the stack id.
    domain = synth.resource("Search/Domain")
    log_group = synth.resource("Workflow/StateMachineLogs")
    for value in (domain["Properties"]["DomainName"], log_group["Properties"]["LogGroupName"]):
        assert _depends_on_the_deployment(value, synth.resources), value
    assert log_group["Properties"]["LogGroupName"]["Fn::Join"][1][0] == "/aws/vendedlogs/states/RagIngest-workflow-"
    # OpenSearch: 3-28 characters, a lowercase letter first; the suffix is 8 hex characters.
    prefix = domain["Properties"]["DomainName"]["Fn::Join"][1][0]
    assert prefix == synth.config.search_domain_prefix == "ragingest-"
    assert len(prefix) + 8 <= 28 and prefix[0].isalpha()


def test_a_name_from_the_config_is_kept_as_given(synth: SynthResult, tmp_path: Path) -> None:
    # `synth` first: it builds the Lambda layer a synthesis needs.
    context = {CONTEXT_KEY: {"stackName": "RagNamed", "opensearch": {"domainName": "my-vectors"}}}
    _app, stack, _config = create_app(context=context, outdir=str(tmp_path))
    template = Template.from_stack(stack).to_json()
    (domain,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::OpenSearchService::Domain"]
    assert domain["Properties"]["DomainName"] == "my-vectors"
    # The operator chose it (and owns the consequence); nothing else is fixed.
    assert _fixed_names_of_retained(template, allowed={"my-vectors"}) == []
    [fixed] = _fixed_names_of_retained(template, allowed=set())
    assert "my-vectors" in fixed


def test_a_long_stack_name_still_gives_a_valid_domain_name() -> None:
    prefix = parse_config({"stackName": "A-Very-Long-Stack-Name-For-Testing"}).search_domain_prefix
    assert prefix == "a-very-long-stack-n-"
    assert len(prefix) + 8 <= 28
