"""The local model server (local.embedding_server) in a process of its own, as the local stack runs
it, and boto3 clients of Bedrock's services pointed at it: for the integration tests of its routes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3

from local.embedding_server.process import EmbeddingServerProcess


@contextmanager
def running_model_server() -> Iterator[EmbeddingServerProcess]:
    process = EmbeddingServerProcess()
    process.start()
    try:
        yield process
    finally:
        process.stop()


def client_of(service: str, endpoint: str, region: str = "us-west-2") -> Any:
    """A boto3 client of ``service`` (bedrock-runtime, bedrock-agent-runtime) at ``endpoint``."""
    return boto3.client(
        service, endpoint_url=endpoint, region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
