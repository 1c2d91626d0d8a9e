"""Reliability suite fixtures. The shared local stack is the session's (tests/conftest.py), so
e2e and reliability run on ONE stack; every test has a tenant of its own and disarms its faults."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from tests.support.pipeline_probe import PipelineProbe, new_tenant


@pytest.fixture(scope="session")
def probe(local_stack: dict[str, Any]) -> PipelineProbe:
    return PipelineProbe(local_stack, os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))


@pytest.fixture
def tenant() -> str:
    return new_tenant()


@pytest.fixture
def tenant_client(probe: PipelineProbe, tenant: str) -> OfflineClient:
    return probe.client(tenant)


@pytest.fixture
def faults(stack_process: OfflineStackProcess, probe: PipelineProbe) -> Iterator[OfflineStackProcess]:
    """The shared stack, with no fault armed before the test nor left armed after it, and nothing
    in flight in the ingest queue when it starts: a message received earlier (e.g. the stack's
    s3:TestEvent) keeps the template's 180 s visibility timeout, and a fault that hits its batch
    would make the test wait for it."""
    stack_process.clear_faults()
    probe.wait_ingest_queue_drained()
    try:
        yield stack_process
    finally:
        stack_process.clear_faults()
