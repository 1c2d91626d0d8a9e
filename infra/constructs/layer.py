"""The shared Lambda layer: the domain package and its dependencies, built by tools/build_layer.py."""

from __future__ import annotations

from typing import cast

from aws_cdk import CfnResource
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.paths import LAYER_DIR, relative

# Metadata key naming each asset's source on disk: the local stack runs functions from it.
SOURCE_METADATA_KEY = "rag-ingest:source"


class LayerNotBuiltError(RuntimeError):
    """``.build/layer`` is missing: synthesizing without it would package an empty layer."""


class SharedLayer(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        if not (LAYER_DIR / "python" / "rag_ingest" / "__init__.py").is_file():
            raise LayerNotBuiltError(
                f"the Lambda layer is not built ({relative(LAYER_DIR)}/python is missing): "
                "run `make layer` (or `.venv/bin/python tools/build_layer.py`) before synth"
            )
        self.layer = lambda_.LayerVersion(
            self,
            "SharedLayer",
            code=lambda_.Code.from_asset(str(LAYER_DIR)),
            compatible_runtimes=[lambda_.Runtime.PYTHON_3_13],
            # The wheels are manylinux x86_64 builds.
            compatible_architectures=[lambda_.Architecture.X86_64],
            description="rag-ingest domain package and its third-party dependencies",
        )
        cast(CfnResource, self.layer.node.default_child).add_metadata(SOURCE_METADATA_KEY, relative(LAYER_DIR))
