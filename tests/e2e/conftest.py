"""The whole local pipeline: moto server, Lambda runner, SQS poller, API adapter and OpenSearch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.embeddings.base import Embedder, create_embedder
from rag_ingest.wiring import vector_store_for

from local.client import OUTPUTS, LocalStackClient

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def local_stack() -> Iterator[dict[str, Any]]:
    """Start the local stack from the synthesized template (make test synthesizes first)."""
    subprocess.run([sys.executable, "-m", "local.runtime", "up"], cwd=REPO, check=True, timeout=600)
    try:
        yield json.loads((REPO / OUTPUTS).read_text())
    finally:
        subprocess.run([sys.executable, "-m", "local.runtime", "down"], cwd=REPO, check=False, timeout=120)


@pytest.fixture(scope="session")
def client(local_stack: dict[str, Any]) -> LocalStackClient:
    return LocalStackClient(api_url=local_stack["ApiUrl"].rstrip("/"), tenant_id="e2e")


@pytest.fixture(scope="session")
def aws_clients(local_stack: dict[str, Any]) -> dict[str, Any]:
    options = {
        "endpoint_url": local_stack["MotoEndpoint"],
        "region_name": local_stack.get("Region", "us-east-1"),
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    return {name: boto3.client(name, **options) for name in ("sqs", "s3", "stepfunctions", "dynamodb")}  # type: ignore[call-overload]


@pytest.fixture(scope="session")
def vector_store(local_stack: dict[str, Any]) -> VectorStore:
    endpoint = os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")
    return vector_store_for(endpoint, local_stack.get("OpenSearchIndex", "rag-chunks"), 384)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return create_embedder("local", "sentence-transformers/all-MiniLM-L6-v2", 384)
