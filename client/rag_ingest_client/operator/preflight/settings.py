"""What the checks read of the app's configuration: cdk.json's ``rag-ingest`` context through the
checkout's own ``infra/config.py`` (validated as ``cdk deploy`` validates it, with its defaults), the
bootstrap qualifier, and the bootstrap version a synthesized ``cdk.out`` asks for.

May import: ``infra.config`` (the checkout beside cdk.json: docs/cli.md, "Packaging").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infra.config import CONTEXT_KEY, ConfigError, RagIngestConfig, parse_config, stack_domain_base
from rag_ingest_client.cli.errors import CliError

# aws-cdk-lib's DefaultStackSynthesizer: the qualifier context key and its default.
BOOTSTRAP_QUALIFIER_CONTEXT = "@aws-cdk/core:bootstrapQualifier"
DEFAULT_QUALIFIER = "hnb659fds"
# The synthesizer's minimum for deploying and publishing assets (docs/deploy.md, "Preflight").
DEFAULT_REQUIRED_BOOTSTRAP_VERSION = 6


@dataclass(frozen=True)
class PreflightSettings:
    """The configuration the checks use, as ``infra.config.RagIngestConfig`` reads it."""

    stack_name: str
    qualifier: str
    model_id: str
    embed_max_concurrency: int
    bulk_embed_max_concurrency: int
    chunk_tokens: int
    parse_max_concurrency: int
    bulk_parse_max_concurrency: int
    max_ocr_pages: int
    # parsing.textractTables: scanned pages go to AnalyzeDocument (TABLES), whose TPS quota is its own.
    textract_tables: bool
    domain_prefix: str | None
    # "create": the stack sets the API Gateway account's CloudWatch role; "existing": the account must have one.
    api_gateway_account_role: str
    cdk_out: Path
    # POST /search's optional rerank stage (search.rerank): its model, and whether it is on by default.
    rerank_model_id: str
    rerank_default: bool
    answer_rerank_default: bool
    # embedding.capacity: with "shared", the limiter books at most these per minute (None: not limited).
    capacity_mode: str
    capacity_requests_per_minute: int | None
    capacity_tokens_per_minute: int | None

    @classmethod
    def of(
        cls, config: RagIngestConfig, *, qualifier: str = DEFAULT_QUALIFIER, cdk_out: Path = Path("cdk.out")
    ) -> PreflightSettings:
        capacity = config.embedding.capacity
        return cls(
            stack_name=config.stack_name,
            qualifier=qualifier,
            model_id=config.embedding.model_id,
            embed_max_concurrency=config.embedding.max_concurrency,
            bulk_embed_max_concurrency=config.lanes.bulk_embed_max_concurrency,
            chunk_tokens=config.chunking.chunk_tokens,
            parse_max_concurrency=config.parsing.max_concurrency,
            bulk_parse_max_concurrency=config.lanes.bulk_parse_max_concurrency,
            max_ocr_pages=config.limits.max_ocr_pages,
            textract_tables=config.parsing.textract_tables,
            domain_prefix=config.auth.domain_prefix,
            api_gateway_account_role=config.api_gateway_account_role,
            cdk_out=cdk_out,
            rerank_model_id=config.search.rerank.model_id,
            rerank_default=config.search.rerank.default,
            answer_rerank_default=config.search.answer.rerank,
            capacity_mode=config.embedding.capacity.mode,
            capacity_requests_per_minute=capacity.requests_per_minute,
            capacity_tokens_per_minute=capacity.tokens_per_minute,
        )


def settings_from_context(context: dict[str, Any], *, base: Path = Path(".")) -> PreflightSettings:
    """The settings from cdk.json's ``context`` object (a ``-c rag-ingest='{…}'`` JSON string too)."""
    try:
        config = parse_config(context.get(CONTEXT_KEY))
    except ConfigError as exc:
        raise CliError("cdk.json: " + "; ".join(line.strip(" -") for line in str(exc).splitlines())) from None
    qualifier = context.get(BOOTSTRAP_QUALIFIER_CONTEXT) or DEFAULT_QUALIFIER
    if not isinstance(qualifier, str):
        raise CliError(f"cdk.json: {BOOTSTRAP_QUALIFIER_CONTEXT} must be a string, got {qualifier!r}")
    return PreflightSettings.of(config, qualifier=qualifier, cdk_out=base / "cdk.out")


def read_settings(path: Path, *, stack_name: str | None = None) -> PreflightSettings:
    """cdk.json's settings; ``stack_name`` (``--stack``) overrides ``stackName``."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise CliError(f"{path} not found: run from the repository root or pass --cdk-json PATH") from None
    except ValueError as exc:
        raise CliError(f"{path} is not valid JSON: {exc}") from None
    context = document.get("context", {}) if isinstance(document, dict) else None
    if not isinstance(context, dict):
        raise CliError(f"{path}: 'context' must be an object")
    settings = settings_from_context(context, base=path.parent)
    if stack_name:
        settings = replace(settings, stack_name=stack_name)
    return settings


def user_pool_domain_prefix(settings: PreflightSettings, account: str) -> str:
    """The Cognito domain prefix the stack asks for: ``auth.domainPrefix``, or the stack's base (as
    ``infra.config.user_pool_domain_base`` derives it) then ``-<account id>``."""
    return settings.domain_prefix or f"{stack_domain_base(settings.stack_name)}-{account}"


def required_bootstrap_version(cdk_out: Path) -> tuple[int, str]:
    """The bootstrap version a deploy needs, and where the number comes from: the highest
    ``requiresBootstrapStackVersion`` of a synthesized ``cdk.out/manifest.json`` (stacks and asset
    manifests; the lookup role's is left out: this app does no lookups), else aws-cdk-lib's minimum."""
    manifest = cdk_out / "manifest.json"
    try:
        artifacts = json.loads(manifest.read_text()).get("artifacts", {})
    except (OSError, ValueError, AttributeError):
        artifacts = {}
    versions = [
        int(artifact["properties"]["requiresBootstrapStackVersion"])
        for artifact in artifacts.values()
        if isinstance(artifact, dict)
        and isinstance(artifact.get("properties"), dict)
        and isinstance(artifact["properties"].get("requiresBootstrapStackVersion"), int)
    ]
    if versions:
        return max(versions), str(manifest)
    return DEFAULT_REQUIRED_BOOTSTRAP_VERSION, "aws-cdk-lib's DefaultStackSynthesizer minimum"
