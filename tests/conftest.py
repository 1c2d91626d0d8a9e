"""Fixtures for the suites that run the whole local pipeline (e2e, reliability): the local stack
(moto server, Lambda runner, SQS poller, API adapter) and OpenSearch. Session-scoped and lazy:
unit, infra and integration tests never start them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.embeddings.base import Embedder, create_embedder
from rag_ingest.wiring import vector_store_for

from local.client import LocalStackClient
from local.runtime.harness import LocalStackProcess


@pytest.fixture(scope="session")
def stack_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStackProcess]:
    """The local stack from the synthesized template (make test synthesizes first), on free ports,
    so a stack left running by `make demo` is not disturbed."""
    process = LocalStackProcess(tmp_path_factory.mktemp("local-stack"))
    try:
        process.start(timeout=300)
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def local_stack(stack_process: LocalStackProcess) -> dict[str, Any]:
    return stack_process.outputs


@pytest.fixture(scope="session")
def client(local_stack: dict[str, Any]) -> LocalStackClient:
    # A tenant of its own per run: OpenSearch keeps data between runs, moto does not.
    return LocalStackClient(api_url=local_stack["ApiUrl"].rstrip("/"), tenant_id=f"e2e-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="session")
def aws_clients(local_stack: dict[str, Any]) -> dict[str, Any]:
    options = {
        "endpoint_url": local_stack["MotoEndpoint"],
        "region_name": local_stack.get("Region", "us-east-1"),
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    return {name: boto3.client(name, **options) for name in ("sqs", "s3", "stepfunctions", "dynamodb", "events")}  # type: ignore[call-overload]


@pytest.fixture(scope="session")
def vector_store(local_stack: dict[str, Any]) -> VectorStore:
    endpoint = os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")
    return vector_store_for(endpoint, local_stack.get("OpenSearchIndex", "rag-chunks"), 384)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return create_embedder("local", "sentence-transformers/all-MiniLM-L6-v2", 384)
