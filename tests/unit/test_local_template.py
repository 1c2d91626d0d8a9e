"""The local runtime's CloudFormation intrinsic resolver, dependency order and retry scaling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from local.runtime.cloudformation.stepfunctions import scale_retry_intervals
from local.runtime.cloudformation.template import (
    CloudFormationTemplate,
    IntrinsicResolver,
    TemplateError,
    UnresolvedReferenceError,
    UnsupportedIntrinsicError,
    dependency_order,
    generated_physical_name,
    references,
)

pytestmark = pytest.mark.unit


def _template(resources: dict[str, Any] | None = None, **sections: Any) -> CloudFormationTemplate:
    body = {
        "Resources": resources
        or {
            "Queue": {"Type": "AWS::SQS::Queue"},
            "Table": {"Type": "AWS::DynamoDB::Table"},
        },
        **sections,
    }
    return CloudFormationTemplate(body=body, path=Path("/tmp/cdk.out/Stack.template.json"))


@pytest.fixture
def resolver() -> IntrinsicResolver:
    template = _template(
        Parameters={"Stage": {"Type": "String", "Default": "dev"}, "NoDefault": {"Type": "String"}},
        Mappings={"Sizes": {"dev": {"Memory": 512}}},
        Conditions={
            "IsDev": {"Fn::Equals": [{"Ref": "Stage"}, "dev"]},
            "IsProd": {"Fn::Not": [{"Condition": "IsDev"}]},
            "Both": {"Fn::And": [{"Condition": "IsDev"}, {"Fn::Or": [{"Condition": "IsProd"}, True]}]},
        },
    )
    resolver = IntrinsicResolver(template, region="eu-west-1", account_id="123456789012", stack_name="RagIngest")
    resolver.set_resource(
        "Queue",
        "http://127.0.0.1:5000/123456789012/q",
        {"Arn": "arn:aws:sqs:eu-west-1:123456789012:q", "QueueName": "q"},
    )
    resolver.set_resource("Table", "docs", {"Arn": "arn:aws:dynamodb:eu-west-1:123456789012:table/docs"})
    return resolver


def test_ref_resolves_resources_parameters_and_pseudo_parameters(resolver: IntrinsicResolver) -> None:
    assert resolver.resolve({"Ref": "Table"}) == "docs"
    assert resolver.resolve({"Ref": "Stage"}) == "dev"
    assert resolver.resolve(
        [{"Ref": f"AWS::{name}"} for name in ("Region", "AccountId", "Partition", "URLSuffix", "StackName")]
    ) == ["eu-west-1", "123456789012", "aws", "amazonaws.com", "RagIngest"]


def test_get_att_in_both_forms(resolver: IntrinsicResolver) -> None:
    assert resolver.resolve({"Fn::GetAtt": ["Queue", "Arn"]}) == "arn:aws:sqs:eu-west-1:123456789012:q"
    assert resolver.resolve({"Fn::GetAtt": "Queue.QueueName"}) == "q"


def test_join_select_split_nest(resolver: IntrinsicResolver) -> None:
    value = {
        "Fn::Join": [
            "/",
            [
                {"Fn::Select": [5, {"Fn::Split": [":", {"Fn::GetAtt": ["Table", "Arn"]}]}]},
                {"Ref": "AWS::Region"},
                "x",
            ],
        ]
    }
    assert resolver.resolve(value) == "table/docs/eu-west-1/x"


def test_sub_string_and_list_forms(resolver: IntrinsicResolver) -> None:
    text = "arn:${AWS::Partition}:s3:::${Table}/${Queue.QueueName}/${!Literal}"
    assert resolver.resolve({"Fn::Sub": text}) == "arn:aws:s3:::docs/q/${Literal}"
    assert resolver.resolve({"Fn::Sub": ["${Name}-${AWS::Region}", {"Name": {"Ref": "Table"}}]}) == "docs-eu-west-1"


def test_find_in_map_and_conditions(resolver: IntrinsicResolver) -> None:
    assert resolver.resolve({"Fn::FindInMap": ["Sizes", {"Ref": "Stage"}, "Memory"]}) == 512
    assert resolver.resolve({"Fn::If": ["IsDev", "small", "large"]}) == "small"
    assert resolver.resolve({"Fn::If": ["IsProd", "large", "small"]}) == "small"
    assert resolver.condition("Both") is True


def test_no_value_removes_the_property_or_list_element(resolver: IntrinsicResolver) -> None:
    value = {
        "Keep": 1,
        "Drop": {"Fn::If": ["IsDev", {"Ref": "AWS::NoValue"}, 2]},
        "List": ["a", {"Ref": "AWS::NoValue"}, "b"],
    }
    assert resolver.resolve(value) == {"Keep": 1, "List": ["a", "b"]}


def test_plain_values_and_nested_structures_pass_through(resolver: IntrinsicResolver) -> None:
    value = {"Variables": {"TABLE": {"Ref": "Table"}, "SIZE": 3, "ON": True}, "List": [{"Ref": "Stage"}]}
    assert resolver.resolve(value) == {"Variables": {"TABLE": "docs", "SIZE": 3, "ON": True}, "List": ["dev"]}


@pytest.mark.parametrize(
    "value",
    [
        {"Fn::ImportValue": "SharedVpc"},
        {"Fn::GetAZs": ""},
        {"Fn::Bogus": ["x"]},
    ],
)
def test_unknown_intrinsic_is_a_clear_error(resolver: IntrinsicResolver, value: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedIntrinsicError, match=next(iter(value))):
        resolver.resolve({"Nested": [value]})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"Ref": "Missing"}, "no such resource"),
        ({"Ref": "NoDefault"}, "no Default"),
        ({"Fn::GetAtt": ["Queue", "Nope"]}, "attribute unknown locally"),
        ({"Fn::GetAtt": ["Missing", "Arn"]}, "no such resource"),
        ({"Fn::Sub": "${Missing}"}, "no such resource"),
    ],
)
def test_unresolvable_reference_is_an_error(resolver: IntrinsicResolver, value: Any, message: str) -> None:
    with pytest.raises(UnresolvedReferenceError, match=message):
        resolver.resolve(value)


def test_reference_to_a_resource_not_yet_provisioned_is_an_error() -> None:
    resolver = IntrinsicResolver(_template(), region="us-east-1", account_id="1", stack_name="S")
    with pytest.raises(UnresolvedReferenceError, match="not provisioned"):
        resolver.resolve({"Fn::GetAtt": ["Queue", "Arn"]})


def test_malformed_intrinsic_arguments_are_errors(resolver: IntrinsicResolver) -> None:
    with pytest.raises(TemplateError):
        resolver.resolve({"Fn::Join": ["-"]})
    with pytest.raises(TemplateError):
        resolver.resolve({"Fn::Select": [7, ["a"]]})
    with pytest.raises(TemplateError):
        resolver.resolve({"Fn::Join": ["", [{"Fn::GetAtt": ["Queue", "Arn"]}, ["nested", "list"]]]})


def test_references_finds_ref_getatt_sub_and_ignores_pseudo_parameters() -> None:
    value = {
        "A": {"Ref": "Queue"},
        "B": {"Fn::GetAtt": "Table.Arn"},
        "C": {"Fn::Sub": ["${Role.Arn}-${Local}-${AWS::Region}-${!Skip}", {"Local": {"Ref": "Bucket"}}]},
        "D": {"Ref": "AWS::AccountId"},
    }
    assert references(value) == {"Queue", "Table", "Role", "Bucket"}


def test_dependency_order_puts_referenced_resources_first_and_detects_cycles() -> None:
    template = _template(
        {
            "Function": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}},
            "Queue": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["Dlq", "Arn"]}}},
            },
            "Dlq": {"Type": "AWS::SQS::Queue"},
            "Role": {"Type": "AWS::IAM::Role"},
            "Mapping": {"Type": "Custom::X", "DependsOn": ["Queue"], "Properties": {"F": {"Ref": "Function"}}},
        }
    )
    order = dependency_order(template, ["Function", "Queue", "Dlq", "Role", "Mapping"])
    assert order.index("Role") < order.index("Function")
    assert order.index("Dlq") < order.index("Queue") < order.index("Mapping")
    assert order.index("Function") < order.index("Mapping")
    cyclic = _template(
        {
            "A": {"Type": "AWS::SQS::Queue", "Properties": {"X": {"Ref": "B"}}},
            "B": {"Type": "AWS::SQS::Queue", "Properties": {"X": {"Ref": "A"}}},
        }
    )
    with pytest.raises(TemplateError, match="circular"):
        dependency_order(cyclic, ["A", "B"])


def test_asset_dir_is_relative_to_the_template_directory() -> None:
    template = _template(
        {
            "Fn": {"Type": "AWS::Lambda::Function", "Metadata": {"aws:asset:path": "asset.abc"}},
            "Abs": {"Type": "AWS::Lambda::Function", "Metadata": {"aws:asset:path": "/src/functions/api"}},
            "None": {"Type": "AWS::Lambda::Function"},
        }
    )
    assert template.asset_dir(template.resources["Fn"]) == Path("/tmp/cdk.out/asset.abc")
    assert template.asset_dir(template.resources["Abs"]) == Path("/src/functions/api")
    assert template.asset_dir(template.resources["None"]) is None


def test_template_without_resources_or_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="no Resources"):
        CloudFormationTemplate(body={"Resources": {}})
    with pytest.raises(TemplateError, match="Synthesize it first"):
        CloudFormationTemplate.load(tmp_path / "missing.template.json")


def test_generated_names_are_deterministic_and_within_limits() -> None:
    name = generated_physical_name("RagIngest", "StorageDocumentsBucket1234ABCD", max_length=63, lowercase=True)
    assert name == generated_physical_name("RagIngest", "StorageDocumentsBucket1234ABCD", max_length=63, lowercase=True)
    assert name == name.lower() and len(name) <= 63 and name.startswith("ragingest-storagedocumentsbucket")
    long_name = generated_physical_name("RagIngest", "W" * 200, max_length=64)
    assert len(long_name) <= 64
    assert generated_physical_name("RagIngest", "A", max_length=64) != generated_physical_name(
        "RagIngest", "B", max_length=64
    )


def test_retry_scaling_scales_waits_never_attempts() -> None:
    retry = {
        "ErrorEquals": ["TransientError"],
        "IntervalSeconds": 20,
        "MaxAttempts": 5,
        "BackoffRate": 2.0,
        "MaxDelaySeconds": 300,
        "JitterStrategy": "FULL",
    }
    definition = {
        "StartAt": "Embed",
        "States": {
            "Validate": {"Type": "Task", "Retry": [dict(retry, IntervalSeconds=2), {"ErrorEquals": ["States.ALL"]}]},
            "Embed": {
                "Type": "Map",
                "ItemProcessor": {"States": {"EmbedBatch": {"Type": "Task", "Retry": [retry]}}},
                "Retry": [retry],
            },
            "Both": {"Type": "Parallel", "Branches": [{"States": {"B": {"Type": "Task", "Retry": [retry]}}}]},
            "Legacy": {"Type": "Map", "Iterator": {"States": {"L": {"Type": "Task", "Retry": [retry]}}}},
        },
    }
    scaled = scale_retry_intervals(definition, 0.1)
    expected = dict(retry, IntervalSeconds=2, MaxDelaySeconds=30)
    assert scaled["States"]["Embed"]["Retry"] == [expected]
    assert scaled["States"]["Embed"]["ItemProcessor"]["States"]["EmbedBatch"]["Retry"] == [expected]
    assert scaled["States"]["Both"]["Branches"][0]["States"]["B"]["Retry"] == [expected]
    assert scaled["States"]["Legacy"]["Iterator"]["States"]["L"]["Retry"] == [expected]
    # ASL needs integers >= 1: 2 s x 0.1 is floored at 1 s; a retrier without IntervalSeconds is untouched.
    assert scaled["States"]["Validate"]["Retry"] == [
        dict(retry, IntervalSeconds=1, MaxDelaySeconds=30),
        {"ErrorEquals": ["States.ALL"]},
    ]
    assert definition["States"]["Embed"]["Retry"] == [retry]  # the input is not modified
