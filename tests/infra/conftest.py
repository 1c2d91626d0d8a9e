"""Synthesizes the stack once per session (with cdk-nag) for every infra test."""

from __future__ import annotations

import json
import os

# jsii prints a banner per kernel start on Node 20; silence it before aws_cdk loads.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import pytest
from aws_cdk.assertions import Template

from infra.cdk_app import create_app
from tests.infra.template_tools import SynthResult
from tools.build_layer import build_layer


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    # Idempotent and a no-op when the inputs are unchanged; the stack refuses to synth without it.
    build_layer()
    outdir = tmp_path_factory.mktemp("cdk.out")
    app, stack, config = create_app(outdir=str(outdir))
    error: str | None = None
    try:
        app.synth()
    except RuntimeError as exc:  # cdk-nag findings fail the synth; test_infra_nag reports them
        error = str(exc)
    template_dict = json.loads((outdir / stack.template_file).read_text())
    report_file = outdir / "validation-report.json"
    # After a successful synth the assembly is cached, so from_stack costs nothing more.
    template = Template.from_json(template_dict) if error else Template.from_stack(stack)
    return SynthResult(
        config=config,
        template=template,
        template_dict=template_dict,
        outdir=outdir,
        stack_name=stack.stack_name,
        validation_error=error,
        validation_report=json.loads(report_file.read_text()) if report_file.exists() else {},
        manifest=json.loads((outdir / "manifest.json").read_text()),
    )
