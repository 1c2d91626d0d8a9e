"""The function contract the handlers code against: handler, code, runtime, layer, environment."""

from __future__ import annotations

import pytest

from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra

COMMON_ENV = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "LOG_LEVEL", "DOCUMENTS_TABLE"}
STAGE_ENV = {
    "BUCKET_NAME",
    "ARTIFACTS_PREFIX",
    "OPENSEARCH_ENDPOINT",
    "OPENSEARCH_INDEX",
    "EMBEDDING_PROVIDER",
    "EMBEDDING_MODEL_ID",
    "EMBEDDING_DIMENSION",
    "MAX_FILE_BYTES",
    "MAX_PAGES",
    "CHUNK_TOKENS",
    "CHUNK_OVERLAP_TOKENS",
    "EMBED_BATCH_SIZE",
    "EMBED_TASK_CHUNKS",
    "EVENT_BUS_NAME",
    *("OPENSEARCH_SPACE_TYPE", "OPENSEARCH_HNSW_M", "OPENSEARCH_EF_CONSTRUCTION", "OPENSEARCH_EF_SEARCH"),
}
STAGE_HANDLERS = {
    "Validate": "app.validate",
    "Parse": "app.parse",
    "Chunk": "app.chunk",
    "Embed": "app.embed",
    "Index": "app.index",
    "Finalize": "app.finalize",
    "MarkFailed": "app.mark_failed",
}
# construct path -> (code dir, handler, env vars beyond the common ones)
CONTRACT: dict[str, tuple[str, str, set[str]]] = {
    "Api/ApiFunction": (
        "functions/api",
        "app.handler",
        {
            "BUCKET_NAME",
            "RAW_PREFIX",
            "MAX_UPLOAD_BYTES",
            "UPLOAD_URL_EXPIRY_SECONDS",
            # POST /documents/{id}/retry
            "STATE_MACHINE_ARN",
            # DELETE /documents/{id}
            "ARTIFACTS_PREFIX",
            "OPENSEARCH_ENDPOINT",
            "OPENSEARCH_INDEX",
            "EMBEDDING_DIMENSION",
            # POST /search: the query embedder and the k-NN parameters
            "EMBEDDING_PROVIDER",
            "EMBEDDING_MODEL_ID",
            *("OPENSEARCH_SPACE_TYPE", "OPENSEARCH_HNSW_M", "OPENSEARCH_EF_CONSTRUCTION", "OPENSEARCH_EF_SEARCH"),
        },
    ),
    "Intake/IntakeFunction": (
        "functions/intake",
        "app.handler",
        {"IDEMPOTENCY_TABLE", "STATE_MACHINE_ARN", "IDEMPOTENCY_TTL_SECONDS"},
    ),
    "Operations/RedriveFunction": ("functions/redrive", "app.handler", {"DLQ_URL", "QUEUE_URL", "STATE_MACHINE_ARN"}),
    "Operations/ReaperFunction": (
        "functions/reaper",
        "app.handler",
        {
            "STATE_MACHINE_ARN",
            "STUCK_AFTER_SECONDS",
            "MAX_REDRIVES",
            "MAX_DOCUMENTS",
            "EVENT_BUS_NAME",
            "UPLOAD_URL_EXPIRY_SECONDS",
            "UPLOAD_GRACE_SECONDS",
        },
    ),
    **{
        f"Workflow/{name}Function": ("functions/stages", handler, STAGE_ENV) for name, handler in STAGE_HANDLERS.items()
    },
}


@pytest.mark.parametrize("path", sorted(CONTRACT))
def test_function_contract(synth: SynthResult, path: str) -> None:
    code_dir, handler, extra_env = CONTRACT[path]
    function = synth.resource(path)
    props = function["Properties"]
    assert props["Handler"] == handler
    assert function["Metadata"]["rag-ingest:source"] == code_dir
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["x86_64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["Layers"] == [{"Ref": synth.logical_id("Layer/SharedLayer")}]
    env = props["Environment"]["Variables"]
    assert set(env) == COMMON_ENV | extra_env
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "RagIngest"
    assert env["POWERTOOLS_SERVICE_NAME"].startswith("rag-ingest-")
    assert env["DOCUMENTS_TABLE"] == {"Ref": synth.logical_id("Storage/DocumentsTable")}


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
    }
    for path in ("Api/ApiFunction", "Workflow/IndexFunction", "Workflow/FinalizeFunction"):
        env = synth.resource(path)["Properties"]["Environment"]["Variables"]
        assert {name: env[name] for name in expected} == expected, path


def test_search_embeds_queries_with_the_indexing_model(synth: SynthResult) -> None:
    api = synth.resource("Api/ApiFunction")["Properties"]["Environment"]["Variables"]
    embed = synth.resource("Workflow/EmbedFunction")["Properties"]["Environment"]["Variables"]
    names = ("EMBEDDING_PROVIDER", "EMBEDDING_MODEL_ID", "EMBEDDING_DIMENSION", "OPENSEARCH_INDEX")
    assert {name: api[name] for name in names} == {name: embed[name] for name in names}
