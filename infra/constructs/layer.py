"""The shared Lambda layer: the domain package and its dependencies, built by tools/build_layer.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from aws_cdk import CfnResource
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import LambdaArchitecture
from infra.paths import LAYER_DIR, MCP_LAYER_DIR, relative

# Metadata key naming each asset's source on disk: the local stack runs functions from it.
SOURCE_METADATA_KEY = "rag-ingest:source"
LAMBDA_ARCHITECTURES: dict[LambdaArchitecture, lambda_.Architecture] = {
    "x86_64": lambda_.Architecture.X86_64,
    "arm64": lambda_.Architecture.ARM_64,
}


class LayerNotBuiltError(RuntimeError):
    """``.build/layer`` is missing: synthesizing without it would package an empty layer."""


class LayerArchitectureError(RuntimeError):
    """``.build/layer`` holds wheels for another architecture than the functions are configured for."""


def built_layer_architecture() -> str:
    """The architecture ``.build/layer`` was built for (its stamp; builds before the option were x86_64)."""
    try:
        stamp = json.loads((LAYER_DIR.parent / "layer.stamp.json").read_text())
    except (OSError, ValueError):
        return "x86_64"
    return str(stamp.get("architecture", "x86_64")) if isinstance(stamp, dict) else "x86_64"


class SharedLayer(Construct):
    def __init__(self, scope: Construct, construct_id: str, architecture: LambdaArchitecture = "x86_64") -> None:
        super().__init__(scope, construct_id)
        if not (LAYER_DIR / "python" / "rag_ingest" / "__init__.py").is_file():
            raise LayerNotBuiltError(
                f"the Lambda layer is not built ({relative(LAYER_DIR)}/python is missing): "
                "run `make layer` (or `.venv/bin/python tools/build_layer.py`) before synth"
            )
        built = built_layer_architecture()
        if built != architecture:
            raise LayerArchitectureError(
                f"the Lambda layer in {relative(LAYER_DIR)} is built for {built}, the functions for {architecture} "
                f"(functions.architecture): run `.venv/bin/python tools/build_layer.py --architecture {architecture}`"
            )
        self.layer = built_layer(
            self, "SharedLayer", LAYER_DIR, architecture, "rag-ingest domain package and its third-party dependencies"
        )


class McpLayer(Construct):
    """The MCP function's own layer, beside the shared one: the MCP SDK and the client's tool
    definitions (tools/build_layer.py builds both, for the same architecture)."""

    def __init__(self, scope: Construct, construct_id: str, architecture: LambdaArchitecture = "x86_64") -> None:
        super().__init__(scope, construct_id)
        if not (MCP_LAYER_DIR / "python" / "mcp" / "__init__.py").is_file():
            raise LayerNotBuiltError(
                f"the MCP layer is not built ({relative(MCP_LAYER_DIR)}/python is missing): run `make layer`"
            )
        self.layer = built_layer(
            self, "McpLayer", MCP_LAYER_DIR, architecture, "rag-ingest MCP server: the MCP SDK and the client's tools"
        )


def built_layer(
    scope: Construct, construct_id: str, folder: Path, architecture: LambdaArchitecture, description: str
) -> lambda_.LayerVersion:
    """A layer of a folder tools/build_layer.py built, its source named for the local stack."""
    layer = lambda_.LayerVersion(
        scope,
        construct_id,
        code=lambda_.Code.from_asset(str(folder), exclude=["**/__pycache__", "*.pyc"]),
        compatible_runtimes=[lambda_.Runtime.PYTHON_3_13],
        # The wheels are manylinux builds for this architecture only.
        compatible_architectures=[LAMBDA_ARCHITECTURES[architecture]],
        description=description,
    )
    cast(CfnResource, layer.node.default_child).add_metadata(SOURCE_METADATA_KEY, relative(folder))
    return layer
