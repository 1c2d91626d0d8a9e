"""The local embedding server as the local stack runs it (its own process, the real MiniLM), called
through the real boto3 bedrock-runtime client and BedrockTitanEmbedder, as the Embed function does."""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from rag_ingest.embeddings.base import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.embeddings.bedrock import BedrockTitanEmbedder
from rag_ingest.embeddings.factory import create_embedder

from local.embedding_server.process import EmbeddingServerProcess

pytestmark = pytest.mark.integration

TEXTS = [
    "Amazon Bedrock embeds one text per InvokeModel call.",
    "The local embedding server batches requests that arrive together.",
    "OpenSearch stores the vectors in a k-NN index.",
    "A chunk of a PDF page, cleaned and split at sentence boundaries.",
] * 4


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddingServerProcess]:
    process = EmbeddingServerProcess()
    process.start()
    yield process
    process.stop()
    assert process.port is None


def bedrock_client(endpoint: str) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=16),
    )


def test_bedrock_embedder_through_the_server_matches_the_in_process_model(server: EmbeddingServerProcess) -> None:
    embedder = create_embedder("bedrock", LOCAL_MODEL_ID, MINILM_DIMENSION, bedrock_client(server.url))
    assert isinstance(embedder, BedrockTitanEmbedder)
    assert embedder.max_input_tokens == 510

    served = embedder.embed(TEXTS)
    in_process = create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION).embed(TEXTS)

    for served_vector, local_vector in zip(served, in_process, strict=True):
        assert len(served_vector) == MINILM_DIMENSION
        assert math.isclose(sum(value * value for value in served_vector), 1.0, rel_tol=1e-4)
        cosine = sum(a * b for a, b in zip(served_vector, local_vector, strict=True))
        assert cosine > 0.9999  # the same model; batch composition changes only float rounding

    with urllib.request.urlopen(server.url + "/_local/stats", timeout=5) as response:
        stats = json.loads(response.read())
    assert stats["model_id"] == LOCAL_MODEL_ID
    assert stats["requests"] == stats["batcher"]["texts"] == len(TEXTS)
    assert 1 <= stats["batcher"]["batches"] <= len(TEXTS)


def test_each_server_takes_its_own_free_port(server: EmbeddingServerProcess) -> None:
    other = EmbeddingServerProcess()
    other.start()
    try:
        assert other.port != server.port
        vector = BedrockTitanEmbedder(bedrock_client(other.url), model_id=LOCAL_MODEL_ID, dimension=384).embed(["x"])
        assert len(vector[0]) == MINILM_DIMENSION
    finally:
        other.stop()
