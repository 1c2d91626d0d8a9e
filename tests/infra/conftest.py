"""Synthesizes the stack once per session (with cdk-nag) for every infra test: environment-agnostic,
as ``python app.py`` does, and bound to an account in several regions, as ``cdk deploy`` does."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# jsii prints a banner per kernel start on Node 20; silence it before aws_cdk loads.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import pytest
from aws_cdk import Environment
from aws_cdk.assertions import Template

from infra.cdk_app import cdk_json_context, create_app
from infra.config import CONTEXT_KEY, parse_config
from tests.infra.template_tools import SynthResult
from tools.build_layer import build_layer

# `cdk deploy` binds the stack to the credentials' account and region: the synth it runs resolves
# ARNs, bucket names and cdk-nag's finding ids that an agnostic synth leaves as tokens. Three
# commercial regions, one outside the US, one in Asia Pacific.
BOUND_ACCOUNT = "123456789012"
BOUND_REGIONS = ("us-east-1", "eu-west-1", "ap-northeast-1")
# make check synthesizes one of them (its fast loop); make test and CI all three.
SYNTH_REGIONS = tuple(
    region for region in os.environ.get("RAG_INGEST_TEST_BOUND_REGIONS", ",".join(BOUND_REGIONS)).split(",") if region
)
if not SYNTH_REGIONS or not set(SYNTH_REGIONS) <= set(BOUND_REGIONS):
    raise ValueError(f"RAG_INGEST_TEST_BOUND_REGIONS must name some of {BOUND_REGIONS}, got {SYNTH_REGIONS}")


def synthesize(outdir: Path, env: Environment | None = None, context: dict[str, Any] | None = None) -> SynthResult:
    """One synthesis with cdk-nag; a failing synth is reported in ``validation_error``, not raised.
    ``context`` overrides cdk.json's keys, as ``cdk deploy -c`` would."""
    app, stack, config = create_app(context=context, outdir=str(outdir), env=env or Environment())
    error: str | None = None
    try:
        app.synth()
    except RuntimeError as exc:  # cdk-nag findings fail the synth; the compliance tests report them
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
        region=env.region if env is not None else None,
    )


@contextmanager
def _exclusive(lock_file: Path) -> Iterator[None]:
    with lock_file.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _synthesized(outdir: Path, validation_error: str | None) -> SynthResult:
    """A synthesis another test process wrote to ``outdir``, read back as the one that wrote it saw it."""
    app_config = parse_config(cdk_json_context().get(CONTEXT_KEY))
    manifest = json.loads((outdir / "manifest.json").read_text())
    template_dict = json.loads((outdir / f"{app_config.stack_name}.template.json").read_text())
    report_file = outdir / "validation-report.json"
    return SynthResult(
        config=app_config,
        template=Template.from_json(template_dict),
        template_dict=template_dict,
        outdir=outdir,
        stack_name=app_config.stack_name,
        validation_error=validation_error,
        validation_report=json.loads(report_file.read_text()) if report_file.exists() else {},
        manifest=manifest,
    )


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    # Idempotent and a no-op when the inputs are unchanged; the stack refuses to synth without it.
    build_layer()
    # One agnostic synthesis per run, shared by pytest-xdist's workers (their base temps are siblings).
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "agnostic-synth"
    shared.mkdir(exist_ok=True)
    with _exclusive(shared / "lock"):
        done = shared / "validation.json"
        if done.exists():
            return _synthesized(shared / "cdk.out", json.loads(done.read_text())["error"])
        # Agnostic whatever the caller's shell holds (a CDK_DEFAULT_REGION exported by hand, say).
        result = synthesize(shared / "cdk.out", None)
        done.write_text(json.dumps({"error": result.validation_error}))
        return result


@pytest.fixture(scope="session", params=SYNTH_REGIONS)
def bound_synth(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    build_layer()
    region = str(request.param)
    return synthesize(tmp_path_factory.mktemp(f"cdk.out-{region}"), Environment(account=BOUND_ACCOUNT, region=region))
