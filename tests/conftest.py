"""Fixtures for the suites that run the whole local pipeline (e2e, reliability): the local stack
(moto server, Lambda runner, SQS poller, API adapter) and OpenSearch. Session-scoped and lazy:
unit, infra and integration tests never start them."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.core.limits import LimitsTable
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.wiring import vector_store_for

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess, template_with_environment
from local.runtime.settings import REPO_ROOT, stack_name_from_cdk_json
from tests.support.tokens import TokenForge, new_key, write_key

# The session stack's page ranges and bulk-lane threshold (50 and 200 pages in cdk.json), small enough
# that a generated 14-page PDF takes the bulk lane over three ranges in seconds. The samples the
# suites upload have at most 5 pages: one range in the standard lane, as with the defaults.
SESSION_RANGE_PAGES = 6
SESSION_BULK_ABOVE_PAGES = 6
#: The tenant of tests/e2e/test_limits_on_stack.py: one document, one request a second, a burst of 5.
LIMITED_TENANT = "e2e-limits"


def session_tenant_limits() -> str:
    """cdk.json's tenant limits, but a request rate no test's own pace reaches (the suite's speed is no
    tenant's), and a tiny override for the limits test's tenant: the session stack's TENANT_LIMITS."""
    from infra.config import CONTEXT_KEY, parse_config  # only where a stack starts

    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"][CONTEXT_KEY]
    limits = parse_config(context).tenant_limits()
    defaults = {**limits.defaults.model_dump(), "requests_per_second": 1000, "burst_requests": 2000}
    override = {"documents": 1, "requests_per_second": 1, "burst_requests": 5}
    table = LimitsTable.model_validate({"defaults": defaults, "overrides": {LIMITED_TENANT: override}})
    return table.model_dump_json(exclude_none=True)


@pytest.fixture(scope="session")
def signing_key() -> rsa.RSAPrivateKey:
    """The session stack's identity-provider key: tests sign tokens it would never issue."""
    return new_key()


@pytest.fixture(scope="session")
def stack_process(
    tmp_path_factory: pytest.TempPathFactory, signing_key: rsa.RSAPrivateKey
) -> Iterator[OfflineStackProcess]:
    """The local stack from the synthesized template (make test synthesizes first), on free ports,
    so a stack left running by `make demo` is not disturbed."""
    state_dir = tmp_path_factory.mktemp("local-stack")
    key_file = write_key(signing_key, tmp_path_factory.mktemp("oidc") / "signing-key.pem")
    source = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    template = state_dir / "template.json"
    variables = {
        "PARSE_RANGE_PAGES": str(SESSION_RANGE_PAGES),
        "BULK_ABOVE_PAGES": str(SESSION_BULK_ABOVE_PAGES),
        # A failed webhook delivery is retried after about a second, not 15-30 s (tests/e2e/test_webhooks.py).
        "WEBHOOK_RETRY_BASE_SECONDS": "1",
        "TENANT_LIMITS": session_tenant_limits(),
    }
    template.write_text(json.dumps(template_with_environment(source, variables)))
    process = OfflineStackProcess(
        state_dir,
        template=template,
        env={"LOCAL_OIDC_SIGNING_KEY": str(key_file)},
    )
    try:
        process.start(timeout=300)
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def local_stack(stack_process: OfflineStackProcess) -> dict[str, Any]:
    return stack_process.outputs


@pytest.fixture(scope="session")
def client(local_stack: dict[str, Any]) -> OfflineClient:
    # A tenant of its own per run: OpenSearch keeps data between runs, moto does not. The client
    # signs in with the stack's identity provider and sends the ID token.
    return OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=f"e2e-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="session")
def token_forge(local_stack: dict[str, Any], signing_key: rsa.RSAPrivateKey) -> TokenForge:
    return TokenForge(api_url=local_stack["ApiUrl"].rstrip("/"), key=signing_key)


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
    return vector_store_for(endpoint, local_stack.get("OpenSearchIndex", "rag-chunks"), MINILM_DIMENSION)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION)
