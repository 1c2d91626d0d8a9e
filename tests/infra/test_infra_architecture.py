"""The functions' architecture option: validated, on every function and the layer, nag-clean on arm64,
and the layer build fetching wheels for the same architecture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from infra.cdk_app import create_app
from infra.config import CONTEXT_KEY, ConfigError, FunctionSettings, parse_config
from infra.constructs import layer as layer_module
from infra.constructs.function import FunctionFactory
from infra.constructs.layer import LayerArchitectureError, SharedLayer
from tests.infra.template_tools import SynthResult
from tools.build_layer import configured_architecture, deps_hash, pip_platform_args

pytestmark = pytest.mark.infra

ARM64 = {CONTEXT_KEY: {"functions": {"architecture": "arm64"}}}


def test_architecture_defaults_to_x86_64_and_accepts_arm64() -> None:
    assert parse_config({}).functions.architecture == "x86_64"
    assert parse_config(ARM64[CONTEXT_KEY]).functions.architecture == "arm64"


def test_an_unknown_architecture_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"functions\.architecture"):
        parse_config({"functions": {"architecture": "aarch64"}})


def test_the_factory_builds_functions_for_the_configured_architecture() -> None:
    stack = Stack(App(), "ArchitectureCheck")
    layer = lambda_.LayerVersion.from_layer_version_arn(
        stack, "Layer", "arn:aws:lambda:us-east-1:123456789012:layer:shared:1"
    )
    factory = FunctionFactory(config=parse_config(ARM64[CONTEXT_KEY]), layer=layer, documents_table_name="documents")
    factory.create(
        stack,
        "Probe",
        code_dir="intake",
        handler="app.handler",
        service="rag-ingest-probe",
        settings=FunctionSettings(),
        environment={},
        description="architecture probe",
    )
    Template.from_stack(stack).has_resource_properties("AWS::Lambda::Function", {"Architectures": ["arm64"]})


def test_synth_refuses_a_layer_built_for_another_architecture(synth: SynthResult) -> None:
    # The session's layer is built for cdk.json's architecture (x86_64).
    assert layer_module.built_layer_architecture() == synth.config.functions.architecture == "x86_64"
    with pytest.raises(LayerArchitectureError, match=r"tools/build_layer\.py --architecture arm64"):
        SharedLayer(Stack(App(), "LayerCheck"), "Layer", "arm64")


def test_arm64_stack_puts_every_function_and_the_layer_on_arm64_and_passes_cdk_nag(
    synth: SynthResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if `tools/build_layer.py --architecture arm64` had run (the same files, another stamp).
    monkeypatch.setattr(layer_module, "built_layer_architecture", lambda: "arm64")
    app, stack, config = create_app(context=ARM64, outdir=str(tmp_path))
    assert config.functions.architecture == "arm64"
    app.synth()  # cdk-nag is a validation plugin: a finding fails the synth
    resources = json.loads((tmp_path / stack.template_file).read_text())["Resources"]
    ours = {
        logical_id: resource
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function" and "rag-ingest:source" in resource.get("Metadata", {})
    }
    assert len(ours) == len(
        [
            r
            for r in synth.resources.values()
            if "rag-ingest:source" in r.get("Metadata", {}) and r["Type"] == "AWS::Lambda::Function"
        ]
    )
    assert {tuple(r["Properties"]["Architectures"]) for r in ours.values()} == {("arm64",)}
    layers = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::LayerVersion" and r.get("Metadata", {}).get("rag-ingest:source") == ".build/layer"
    ]
    assert [layer["Properties"]["CompatibleArchitectures"] for layer in layers] == [["arm64"]]


def test_the_layer_build_fetches_wheels_for_the_architecture(tmp_path: Path) -> None:
    assert pip_platform_args("x86_64")[:2] == ("--platform", "manylinux2014_x86_64")
    assert pip_platform_args("arm64")[:2] == ("--platform", "manylinux2014_aarch64")
    assert deps_hash("x86_64") != deps_hash("arm64")  # switching rebuilds the dependencies
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": ARM64}))
    assert configured_architecture(cdk_json) == "arm64"
    cdk_json.write_text(json.dumps({"context": {CONTEXT_KEY: {}}}))
    assert configured_architecture(cdk_json) == "x86_64"
    assert (
        configured_architecture()
        == parse_config(json.loads(Path("cdk.json").read_text())["context"][CONTEXT_KEY]).functions.architecture
    )
