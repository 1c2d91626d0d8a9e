"""Builds the CDK app: context from cdk.json, validated config, the stack and cdk-nag.

``app.py`` at the repository root calls :func:`create_app`; tests call it too, with their own
output directory and context overrides.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import CONTEXT_KEY, RagIngestConfig, parse_config
from infra.paths import ROOT
from infra.stack import RagIngestStack

CDK_JSON = ROOT / "cdk.json"


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The ``context`` of cdk.json: feature flags and the ``rag-ingest`` config."""
    context = json.loads(path.read_text()).get("context", {})
    if not isinstance(context, dict):
        raise ValueError(f"{path}: 'context' must be an object")
    return context


def cli_environment() -> Environment:
    """The environment the CDK CLI resolved: ``cdk deploy``, ``diff`` and ``destroy`` always set
    ``CDK_DEFAULT_ACCOUNT``/``CDK_DEFAULT_REGION`` from the credentials, so the stack is
    environment-bound there; ``python app.py`` alone leaves both unset (environment-agnostic)."""
    return Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION"))


def create_app(
    context: dict[str, Any] | None = None, outdir: str | None = None, env: Environment | None = None
) -> tuple[App, RagIngestStack, RagIngestConfig]:
    """The app with the stack and AwsSolutions checks; ``context`` overrides cdk.json's keys, ``env``
    the CLI's environment (tests synthesize bound to several regions as ``cdk deploy`` would).

    The CDK CLI passes cdk.json's context itself; ``python app.py`` alone does not, so cdk.json is
    read here as the base layer (the CLI's context, including ``-c``, still takes precedence).
    """
    # The CLI turns on path and asset metadata; `python app.py` alone must too, since the local
    # stack finds resources by their aws:cdk:path.
    merged = {
        "aws:cdk:enable-path-metadata": True,
        "aws:cdk:enable-asset-metadata": True,
        **cdk_json_context(),
        **(context or {}),
    }
    app = App(context=merged, outdir=outdir)
    config = parse_config(app.node.try_get_context(CONTEXT_KEY))
    stack = RagIngestStack(
        app,
        config.stack_name,
        config=config,
        env=env if env is not None else cli_environment(),
    )
    # cdk-nag fails synth on any finding not acknowledged next to its resource (infra/nag.py); the
    # acknowledgments are written to the template's Metadata too, as an audit trail.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=True))
    return app, stack, config
