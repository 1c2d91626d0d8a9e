"""The function contract the handlers code against: handler, code, runtime, layer, environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk.assertions import Template
from rag_ingest.core.config import (
    AnswerEnv,
    ApiEnv,
    EnvModel,
    IntakeEnv,
    ReaperEnv,
    RedriveEnv,
    SearchEnv,
    SourcesApiEnv,
    SourceSyncEnv,
    StagesEnv,
    WebhookDeliveryEnv,
    WebhookFanOutEnv,
    WebhooksApiEnv,
)

from infra.cdk_app import create_app
from infra.config import CONTEXT_KEY
from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra

# Powertools reads these; every other variable is a field of the function's environment model(s).
POWERTOOLS_ENV = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "LOG_LEVEL"}
STAGE_HANDLERS = {
    "Validate": "app.validate",
    "Parse": "app.parse",
    "Chunk": "app.chunk",
    "Embed": "app.embed",
    "Index": "app.index",
    "Finalize": "app.finalize",
    "MarkFailed": "app.mark_failed",
}
# construct path -> (code dir, handler, the environment models its handler validates at cold start)
CONTRACT: dict[str, tuple[str, str, tuple[type[EnvModel], ...]]] = {
    "Api/ApiFunction": ("functions/api", "app.handler", (ApiEnv, SearchEnv, AnswerEnv, WebhooksApiEnv, SourcesApiEnv)),
    "Sources/SourceSyncFunction": ("functions/source_sync", "app.handler", (SourceSyncEnv,)),
    "Webhooks/WebhookFanOutFunction": ("functions/webhook_fanout", "app.handler", (WebhookFanOutEnv,)),
    "Webhooks/WebhookDeliveryFunction": ("functions/webhook_delivery", "app.handler", (WebhookDeliveryEnv,)),
    "Intake/IntakeFunction": ("functions/intake", "app.handler", (IntakeEnv,)),
    "Operations/RedriveFunction": ("functions/redrive", "app.handler", (RedriveEnv,)),
    "Operations/ReaperFunction": ("functions/reaper", "app.handler", (ReaperEnv,)),
    **{
        f"Workflow/{name}Function": ("functions/stages", handler, (StagesEnv,))
        for name, handler in STAGE_HANDLERS.items()
    },
}


def variables_read_by(models: tuple[type[EnvModel], ...]) -> set[str]:
    return set().union(*(model.variable_names() for model in models))


@pytest.mark.parametrize("path", sorted(CONTRACT))
def test_function_contract(synth: SynthResult, path: str) -> None:
    code_dir, handler, models = CONTRACT[path]
    function = synth.resource(path)
    props = function["Properties"]
    assert props["Handler"] == handler
    assert function["Metadata"]["rag-ingest:source"] == code_dir
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["x86_64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["Layers"] == [{"Ref": synth.logical_id("Layer/SharedLayer")}]
    env = props["Environment"]["Variables"]
    assert set(env) == POWERTOOLS_ENV | variables_read_by(models)
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "RagIngest"
    assert env["POWERTOOLS_SERVICE_NAME"].startswith("rag-ingest-")
    if "DOCUMENTS_TABLE" in variables_read_by(models):
        assert env["DOCUMENTS_TABLE"] == {"Ref": synth.logical_id("Storage/DocumentsTable")}
    else:  # the webhook functions: no access to the documents table, and not told its name
        assert path.startswith("Webhooks/"), path


def test_functions_have_distinct_service_names(synth: SynthResult) -> None:
    names = [
        synth.resource(path)["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] for path in CONTRACT
    ]
    assert len(set(names)) == len(names)


def test_seven_stages_share_one_code_asset(synth: SynthResult) -> None:
    keys = {synth.resource(f"Workflow/{name}Function")["Properties"]["Code"]["S3Key"] for name in STAGE_HANDLERS}
    assert len(keys) == 1


def test_stage_environment_values(synth: SynthResult) -> None:
    config = synth.config
    env = synth.resource("Workflow/EmbedFunction")["Properties"]["Environment"]["Variables"]
    assert env["ARTIFACTS_PREFIX"] == "artifacts/"
    assert env["EMBEDDING_PROVIDER"] == "bedrock"
    assert env["EMBEDDING_MODEL_ID"] == config.embedding.model_id
    assert env["EMBEDDING_DIMENSION"] == str(config.embedding.dimension)
    assert env["OPENSEARCH_INDEX"] == config.opensearch.index
    assert env["OPENSEARCH_ENDPOINT"] == {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [synth.logical_id("Search/Domain"), "DomainEndpoint"]}]]
    }
    assert env["CHUNK_TOKENS"] == str(config.chunking.chunk_tokens)
    assert env["MAX_PAGES"] == str(config.limits.max_pages)


def test_api_environment_values(synth: SynthResult) -> None:
    env = synth.resource("Api/ApiFunction")["Properties"]["Environment"]["Variables"]
    assert env["RAW_PREFIX"] == "raw/"
    assert env["MAX_UPLOAD_BYTES"] == str(synth.config.upload.max_upload_bytes)
    assert env["UPLOAD_URL_EXPIRY_SECONDS"] == str(synth.config.upload.url_expiry_seconds)


def test_timeouts_and_memory_come_from_config(synth: SynthResult) -> None:
    functions = synth.config.functions
    parse = synth.resource("Workflow/ParseFunction")["Properties"]
    assert (parse["Timeout"], parse["MemorySize"]) == (
        functions.stages.parse.timeout_seconds,
        functions.stages.parse.memory_mb,
    )
    api = synth.resource("Api/ApiFunction")["Properties"]
    assert api["Timeout"] == functions.api.timeout_seconds <= 29


def test_every_function_logs_to_its_own_group_with_retention(synth: SynthResult) -> None:
    for path in CONTRACT:
        log_group_ref = synth.resource(path)["Properties"]["LoggingConfig"]["LogGroup"]
        log_group = synth.resources[log_group_ref["Ref"]]
        assert log_group["Properties"]["RetentionInDays"] == synth.config.log_retention_days


def test_layer_is_the_built_layer_for_python_3_13_x86(synth: SynthResult) -> None:
    layer = synth.resource("Layer/SharedLayer")
    assert layer["Metadata"]["rag-ingest:source"] == ".build/layer"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["x86_64"]


def test_index_parameters_reach_every_function_that_creates_or_queries_the_index(synth: SynthResult) -> None:
    opensearch = synth.config.opensearch
    expected = {
        "OPENSEARCH_SPACE_TYPE": opensearch.space_type,
        "OPENSEARCH_HNSW_M": str(opensearch.hnsw_m),
        "OPENSEARCH_EF_CONSTRUCTION": str(opensearch.ef_construction),
        "OPENSEARCH_EF_SEARCH": str(opensearch.ef_search),
        "OPENSEARCH_CONCURRENT_SEGMENT_SEARCH": "auto",
        "OPENSEARCH_MERGE_SEGMENTS_PER_TIER": "4",
        "OPENSEARCH_MERGE_FLOOR_SEGMENT_MB": "256",
        "OPENSEARCH_VECTOR_ENCODING": opensearch.vector_encoding,
        # One node by default: no replica (it could never be assigned; the cluster would stay yellow).
        "OPENSEARCH_REPLICAS": "0",
    }
    assert opensearch.instance_count == 1
    for path in ("Api/ApiFunction", "Workflow/IndexFunction", "Workflow/FinalizeFunction"):
        env = synth.resource(path)["Properties"]["Environment"]["Variables"]
        assert {name: env[name] for name in expected} == expected, path


def test_the_rerank_settings_reach_the_api_function(synth: SynthResult) -> None:
    rerank = synth.config.search.rerank
    api = synth.resource("Api/ApiFunction")["Properties"]["Environment"]["Variables"]
    assert {name: api[name] for name in api if name.startswith("SEARCH_RERANK_")} == {
        "SEARCH_RERANK_DEFAULT": "false",
        "SEARCH_RERANK_MODEL_ID": rerank.model_id,
        "SEARCH_RERANK_CANDIDATES": str(rerank.candidates),
    }
    assert (rerank.default, rerank.model_id, rerank.candidates) == (False, "amazon.rerank-v1:0", 50)


def test_search_embeds_queries_with_the_indexing_model(synth: SynthResult) -> None:
    api = synth.resource("Api/ApiFunction")["Properties"]["Environment"]["Variables"]
    embed = synth.resource("Workflow/EmbedFunction")["Properties"]["Environment"]["Variables"]
    names = ("EMBEDDING_PROVIDER", "EMBEDDING_MODEL_ID", "EMBEDDING_DIMENSION", "OPENSEARCH_INDEX")
    assert {name: api[name] for name in names} == {name: embed[name] for name in names}


@pytest.mark.parametrize("path", sorted(CONTRACT))
def test_functions_log_json_at_the_configured_levels(synth: SynthResult, path: str) -> None:
    # The text format leaves the Python runtime's root logger at WARNING: every INFO line is lost.
    application = {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARN", "ERROR": "ERROR"}[synth.config.log_level]
    logging = synth.resource(path)["Properties"]["LoggingConfig"]
    assert logging["LogFormat"] == "JSON"
    assert logging["ApplicationLogLevel"] == application
    assert logging["SystemLogLevel"] == synth.config.system_log_level


def test_log_levels_follow_the_config(synth: SynthResult, tmp_path: Path) -> None:
    # `synth` first: it builds the Lambda layer a synthesis needs.
    context = {CONTEXT_KEY: {"logLevel": "WARNING", "systemLogLevel": "WARN"}}
    _app, stack, _config = create_app(context=context, outdir=str(tmp_path))
    functions = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
    configs = {
        (props["LoggingConfig"]["LogFormat"], props["LoggingConfig"]["ApplicationLogLevel"],
         props["LoggingConfig"]["SystemLogLevel"])
        for resource in functions.values()
        if "rag-ingest:source" in resource.get("Metadata", {})  # ours, not CDK's custom-resource handlers
        for props in [resource["Properties"]]
    }  # fmt: skip
    assert configs == {("JSON", "WARN", "WARN")}
