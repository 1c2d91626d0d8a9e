"""Which embedding-server lane a local function's Bedrock client is pointed at (its endpoint path)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rag_ingest.core.job import LANE_TAG, Lane

from local.runtime.cloudformation.provisioned import ApiRoute, FunctionDefinition, ProvisionedStack
from local.runtime.lambda_.pool import BEDROCK_ENDPOINT_VARIABLE, worker_environment
from local.runtime.settings import EMBEDDING_IN_PROCESS, RuntimeSettings

pytestmark = pytest.mark.unit

SERVER = "http://127.0.0.1:41000"
FUNCTION = FunctionDefinition(
    logical_id="EmbedFunction",
    name="rag_fn_EmbedFunction_app",
    arn="arn:aws:lambda:us-east-1:123456789012:function:rag_fn_EmbedFunction_app",
    handler="app.handler",
    runtime="python3.13",
    code_dir=Path("/tmp/asset"),
    timeout_seconds=60,
    memory_mb=1024,
    environment={"EMBEDDING_MODEL_ID": "amazon.titan-embed-text-v2:0"},
)


def _settings(**changes: Any) -> RuntimeSettings:
    return replace(RuntimeSettings.from_env({}), **({"embedding_endpoint": SERVER} | changes))


def test_stage_functions_call_the_server_at_its_root_and_the_bulk_lane_under_lanes_bulk() -> None:
    assert worker_environment(FUNCTION, _settings())[BEDROCK_ENDPOINT_VARIABLE] == SERVER
    bulk = replace(FUNCTION, tags={LANE_TAG: Lane.BULK.value})
    assert worker_environment(bulk, _settings())[BEDROCK_ENDPOINT_VARIABLE] == f"{SERVER}/lanes/bulk"


def test_functions_behind_the_http_api_embed_their_queries_in_the_query_lane() -> None:
    environment = worker_environment(FUNCTION, _settings(), serves_api=True)
    assert environment[BEDROCK_ENDPOINT_VARIABLE] == f"{SERVER}/lanes/query"


def test_in_process_embedding_sets_no_endpoint_whatever_the_lane() -> None:
    settings = _settings(embedding_mode=EMBEDDING_IN_PROCESS, embedding_endpoint=None)
    assert BEDROCK_ENDPOINT_VARIABLE not in worker_environment(FUNCTION, settings, serves_api=True)


def test_the_api_functions_are_those_behind_a_route() -> None:
    routes = [
        ApiRoute("POST /search", "POST", "/search", "rag_fn_Api_app", requires_jwt=True),
        ApiRoute("GET /documents", "GET", "/documents", "rag_fn_Api_app", requires_jwt=True),
        ApiRoute("$default", "ANY", None, "rag_fn_Site_app", requires_jwt=False),
    ]
    stack = ProvisionedStack(stack_name="S", functions=[FUNCTION], api_routes=routes)
    assert stack.api_function_names == {"rag_fn_Api_app", "rag_fn_Site_app"}
