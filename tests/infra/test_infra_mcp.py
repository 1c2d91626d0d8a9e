"""The MCP server over streamable HTTP in the template (infra/constructs/mcp.py): its function and
layer, its routes on the HTTP API (no JWT authorizer: the function checks the token), the
environment its cold start validates, a read-only role, and the ``McpUrl`` output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rag_ingest.core.config import AnswerEnv, McpEnv, SearchEnv

from infra.constructs.api import ROUTED_METHODS
from infra.constructs.mcp import MCP_PATH, METADATA_PATHS
from infra.paths import MCP_LAYER_DIR
from tests.infra.template_tools import SynthResult, as_list
from tools.build_layer import MCP_CLIENT_MODULES, SITE_DIR, layer_size_bytes

pytestmark = pytest.mark.infra
FUNCTION = "Mcp/McpFunction"
POWERTOOLS_ENV = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "LOG_LEVEL"}
# What a read-only role must never hold.
WRITES = ("s3:PutObject", "s3:DeleteObject", "dynamodb:PutItem", "dynamodb:UpdateItem", "states:", "events:")


def _api_endpoint(synth: SynthResult) -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id("Api/HttpApi"), "ApiEndpoint"]}


def test_the_function_runs_the_mcp_code_with_both_layers(synth: SynthResult) -> None:
    function = synth.resource(FUNCTION)
    props = function["Properties"]
    assert (props["Handler"], function["Metadata"]["rag-ingest:source"]) == ("app.handler", "functions/mcp_http")
    layers = [synth.logical_id("Layer/SharedLayer"), synth.logical_id("Mcp/Layer/McpLayer")]
    assert props["Layers"] == [{"Ref": layer} for layer in layers]
    assert props["Timeout"] == synth.config.functions.mcp.timeout_seconds <= 29
    assert synth.resource("Mcp/Layer/McpLayer")["Metadata"]["rag-ingest:source"] == ".build/mcp-layer"


def test_the_environment_is_what_the_cold_start_validates(synth: SynthResult) -> None:
    env = synth.resource(FUNCTION)["Properties"]["Environment"]["Variables"]
    assert (
        set(env) - POWERTOOLS_ENV <= McpEnv.variable_names() | SearchEnv.variable_names() | AnswerEnv.variable_names()
    )
    assert AnswerEnv.variable_names() <= set(env)
    required = {name.upper() for name, field in McpEnv.model_fields.items() if field.is_required()}
    assert required <= set(env) and "EMBEDDING_MODEL_ID" in env
    provider = {"Fn::GetAtt": [synth.logical_id("Api/UserPool"), "ProviderURL"]}
    assert env["TOKEN_ISSUER"] == {"Fn::Join": ["", ["https://", provider]]}
    assert env["TOKEN_AUDIENCE"] == {"Ref": synth.logical_id("Api/UserPool/WebClient")}
    assert env["MCP_RESOURCE_URL"] == {"Fn::Join": ["", [_api_endpoint(synth), MCP_PATH]]}
    assert env["TENANT_ADMIN_GROUP"] == synth.config.auth.tenant_admin_group


def test_its_routes_skip_the_jwt_authorizer_and_reach_only_it(synth: SynthResult) -> None:
    integrations = {
        logical_id: resource["Properties"]["IntegrationUri"]
        for logical_id, resource in synth.of_type("AWS::ApiGatewayV2::Integration").items()
    }
    function_arn = {"Fn::GetAtt": [synth.logical_id(FUNCTION), "Arn"]}
    routes = {r["Properties"]["RouteKey"]: r["Properties"] for r in synth.of_type("AWS::ApiGatewayV2::Route").values()}
    ours = {f"{method} {path}" for path in (MCP_PATH, *METADATA_PATHS) for method in ROUTED_METHODS}
    assert ours <= set(routes)
    for key, route in routes.items():
        target = integrations[route["Target"]["Fn::Join"][1][1]["Ref"]]
        if key in ours:
            assert route.get("AuthorizationType", "NONE") == "NONE" and target == function_arn, key
        else:
            assert target != function_arn, key  # no other route reaches the MCP function


def test_the_role_reads_and_never_writes(synth: SynthResult) -> None:
    actions = {action for statement in synth.role_statements(FUNCTION) for action in as_list(statement["Action"])}
    assert {"dynamodb:GetItem", "dynamodb:Query", "s3:GetObject", "es:ESHttpPost", "bedrock:InvokeModel"} <= actions
    assert not [action for action in actions if action.startswith(WRITES)], actions
    s3 = [s for s in synth.role_statements(FUNCTION) if "s3:GetObject" in as_list(s["Action"])]
    assert "artifacts/*" in json.dumps(s3) and "raw/" not in json.dumps(s3)


def test_the_output_is_the_endpoint(synth: SynthResult) -> None:
    output = synth.template_dict["Outputs"]["McpUrl"]
    assert output["Value"] == {"Fn::Join": ["", [_api_endpoint(synth), MCP_PATH]]}


def test_the_mcp_layer_holds_the_sdk_and_the_tools_but_nothing_the_shared_layer_has(synth: SynthResult) -> None:
    site = MCP_LAYER_DIR / "python"
    client = {path.name for path in (site / "rag_ingest_client").iterdir() if path.suffix == ".py"}
    assert client == set(MCP_CLIENT_MODULES)
    assert (site / "mcp" / "__init__.py").is_file() and (site / "httpx" / "__init__.py").is_file()
    shared = {info.name.split("-")[0].lower() for info in SITE_DIR.glob("*.dist-info")}
    own = {info.name.split("-")[0].lower() for info in site.glob("*.dist-info")}
    assert "pydantic" in shared and not own & shared, own & shared
    # Lambda's limit: 250 MB unzipped for the function and its layers together.
    assert layer_size_bytes() + layer_size_bytes(MCP_LAYER_DIR) < 200_000_000
