"""Least privilege: what each role may do, and on what."""

from __future__ import annotations

from fnmatch import fnmatch
from typing import Any

import pytest

from infra.permissions import OPENSEARCH_ACCESS
from tests.infra.template_tools import SynthResult, as_list, render_token

pytestmark = pytest.mark.infra

# Actions AWS offers no resource-level permissions for (so "*" is the only possible resource).
STAR_ONLY_ACTIONS = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    # The pusher's DynamoDB-stream event source (the stream reads themselves are on the stream ARN).
    "dynamodb:ListStreams",
    # Parse's OCR of image bytes (rag_ingest.adapters.textract): no resource-level permissions exist.
    "textract:DetectDocumentText",
    # ... and AnalyzeDocument with TABLES when parsing.textractTables is on (tests/infra/test_infra_textract_tables.py).
    "textract:AnalyzeDocument",
    # POST /search's rerank stage: Rerank names no resource; the model is scoped by InvokeModel
    # (https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-prereq.html).
    "bedrock:Rerank",
}
FUNCTIONS = [
    "Api/ApiFunction",
    "Intake/IntakeFunction",
    "Operations/RedriveFunction",
    "Operations/ReaperFunction",
    *(f"Workflow/{n}Function" for n in ["Validate", "Parse", "Chunk", "Embed", "Index", "Finalize", "MarkFailed"]),
    "Sources/SourceSyncFunction",
]


def _resources(statement: dict[str, Any]) -> list[str]:
    return [render_token(r) for r in as_list(statement["Resource"])]


def _allows(statements: list[dict[str, Any]], action: str) -> list[str]:
    return [
        resource
        for s in statements
        if s["Effect"] == "Allow" and action in as_list(s["Action"])
        for resource in _resources(s)
    ]


def test_no_wildcard_resource_except_where_aws_requires_it(synth: SynthResult) -> None:
    offenders = []
    for logical_id, policy in synth.of_type("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if "*" in as_list(statement["Resource"]):
                extra = set(as_list(statement["Action"])) - STAR_ONLY_ACTIONS
                # CDK's BucketDeployment handler grants itself CloudFront invalidations on "*" (acknowledged);
                # CDK's S3-notifications handler is scoped to the bucket now: no exception for it.
                if extra and not logical_id.startswith("CustomCDKBucketDeployment"):
                    offenders.append((logical_id, sorted(extra)))
    assert offenders == []


def test_no_wildcard_actions(synth: SynthResult) -> None:
    for logical_id, policy in synth.of_type("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in as_list(statement["Action"]):
                assert not action.endswith(":*") and action != "*", (logical_id, action)


@pytest.mark.parametrize("path", FUNCTIONS)
def test_function_roles_carry_no_managed_policies(synth: SynthResult, path: str) -> None:
    role_id = synth.resource(path)["Properties"]["Role"]["Fn::GetAtt"][0]
    assert "ManagedPolicyArns" not in synth.resources[role_id]["Properties"]


@pytest.mark.parametrize("path", FUNCTIONS)
def test_functions_write_only_their_own_log_group(synth: SynthResult, path: str) -> None:
    log_group_id = synth.resource(path)["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    assert _allows(synth.role_statements(path), "logs:PutLogEvents") == [f"${{{log_group_id}.Arn}}"]


def test_api_may_only_put_uploads_under_raw(synth: SynthResult) -> None:
    statements = synth.role_statements("Api/ApiFunction")
    bucket = synth.logical_id("Storage/DocumentsBucket")
    s3_actions = {a for s in statements for a in as_list(s["Action"]) if a.startswith("s3:")}
    # Deleting and listing versions is DELETE /documents/{id} (test_infra_operations.py); reading
    # objects is GET /documents/{id}/download (test_api_infra.py).
    assert s3_actions == {
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:DeleteObjectVersion",
        "s3:ListBucketVersions",
        "s3:GetObject",
        "s3:GetObjectVersion",
    }
    assert _allows(statements, "s3:PutObject") == [f"${{{bucket}.Arn}}/raw/*"]
    # GET /documents/{id}/download presigns a GET of the original upload; PATCH /documents/{id} reads
    # the chunks artifact and the Embed checkpoints back (never a version of them: GetObjectVersion on raw/ only).
    assert sorted(_allows(statements, "s3:GetObject")) == [f"${{{bucket}.Arn}}/artifacts/*", f"${{{bucket}.Arn}}/raw/*"]
    assert _allows(statements, "s3:GetObjectVersion") == [f"${{{bucket}.Arn}}/raw/*"]


def test_stages_read_raw_only_where_needed(synth: SynthResult) -> None:
    raw = f"${{{synth.logical_id('Storage/DocumentsBucket')}.Arn}}/raw/*"
    readers = {
        path
        for path in FUNCTIONS
        if path.startswith("Workflow/") and raw in _allows(synth.role_statements(path), "s3:GetObject")
    }
    assert readers == {"Workflow/ValidateFunction", "Workflow/ParseFunction"}


def test_bedrock_only_for_embed_and_search_and_only_the_models(synth: SynthResult) -> None:
    def arn(model: str) -> str:
        return f"arn:${{AWS::Partition}}:bedrock:${{AWS::Region}}::foundation-model/{model}"

    embedding, reranker = arn(synth.config.embedding.model_id), arn(synth.config.search.rerank.model_id)
    answer = arn(synth.config.search.answer.model_id)
    expected = {
        "Workflow/EmbedFunction": [embedding],  # chunks
        # POST /search: the query and its rerank stage; POST /answer: the Converse model
        "Api/ApiFunction": [embedding, reranker, answer],
    }
    for path in FUNCTIONS:
        allowed = _allows(synth.role_statements(path), "bedrock:InvokeModel")
        assert sorted(allowed) == sorted(expected.get(path, [])), path
        assert _allows(synth.role_statements(path), "bedrock:Rerank") == (["*"] if path == "Api/ApiFunction" else [])
    stream = "bedrock:InvokeModelWithResponseStream"
    assert not any(
        a.startswith("bedrock:") and a not in ("bedrock:InvokeModel", "bedrock:Rerank", stream)
        for p in synth.of_type("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        for a in as_list(s["Action"])
    )
    # ConverseStream (the live channel's answers): the answer model only, in that function's role only.
    streaming = [
        (logical_id, resource)
        for logical_id, p in synth.of_type("AWS::IAM::Policy").items()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if stream in as_list(s["Action"])
        for resource in _resources(s)
    ]
    assert [resource for _, resource in streaming] == [answer], streaming
    assert all(logical_id.startswith("LiveAnswers") for logical_id, _ in streaming), streaming


def _expected_index_grants(synth: SynthResult, function: str) -> dict[str, set[str]]:
    index = f"{synth.domain_arn_prefix}/{synth.config.opensearch.index}"
    return {
        action: {f"{index}/{path}" if path else index for path in paths}
        for action, paths in OPENSEARCH_ACCESS.get(function, {}).items()
    }


def _es_grants(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for statement in statements:
        for action in as_list(statement["Action"]):
            if action.startswith("es:"):
                found.setdefault(action, set()).update(_resources(statement))
    return found


@pytest.mark.parametrize("path", FUNCTIONS)
def test_opensearch_access_is_the_declared_index_paths_on_both_sides(synth: SynthResult, path: str) -> None:
    function = path.split("/")[1].removesuffix("Function")
    expected = _expected_index_grants(synth, function)
    assert _es_grants(synth.role_statements(path)) == expected, path
    # Within an account the domain's resource policy alone grants access: it must be as narrow.
    role_id = synth.resource(path)["Properties"]["Role"]["Fn::GetAtt"][0]
    policy = synth.resource("Search/Domain")["Properties"]["AccessPolicies"]["Statement"]
    in_policy = [s for s in policy if s["Principal"]["AWS"] == {"Fn::GetAtt": [role_id, "Arn"]}]
    assert _es_grants(in_policy) == expected, path


def test_no_role_reaches_the_domain_root_or_other_indexes(synth: SynthResult) -> None:
    index = f"{synth.domain_arn_prefix}/{synth.config.opensearch.index}"
    policy = synth.resource("Search/Domain")["Properties"]["AccessPolicies"]["Statement"]
    statements = [s for path in FUNCTIONS for s in synth.role_statements(path)] + policy
    for resources in _es_grants(statements).values():
        for resource in resources:
            assert resource == index or resource.startswith(f"{index}/"), resource
            assert "*" not in resource, resource
    # Every role's grant names the index in the path, so a bulk body must not name another index.
    options = synth.resource("Search/Domain")["Properties"]["AdvancedOptions"]
    assert options["rest.action.multi.allow_explicit_index"] == "false"


def test_redrive_moves_messages_from_dlq_to_queue_only(synth: SynthResult) -> None:
    statements = synth.role_statements("Operations/RedriveFunction")
    dlq = f"${{{synth.logical_id('Intake/DeadLetterQueue')}.Arn}}"
    queue = f"${{{synth.logical_id('Intake/IngestQueue')}.Arn}}"
    assert _allows(statements, "sqs:ReceiveMessage") == [dlq]
    assert _allows(statements, "sqs:DeleteMessage") == [dlq]
    assert _allows(statements, "sqs:SendMessage") == [queue]


def test_table_access_is_scoped_to_the_tables(synth: SynthResult) -> None:
    table = f"${{{synth.logical_id('Storage/DocumentsTable')}.Arn}}"
    idempotency = f"${{{synth.logical_id('Storage/IdempotencyTable')}.Arn}}"
    webhooks = f"${{{synth.logical_id('Webhooks/WebhooksTable')}.Arn}}"
    sources = f"${{{synth.logical_id('Sources/SourcesTable')}.Arn}}"
    usage = f"${{{synth.logical_id('TenantUsage/TenantUsageTable')}.Arn}}"
    for path in FUNCTIONS:
        allowed = {table, f"{table}/index/*"} | ({idempotency} if path == "Intake/IntakeFunction" else set())
        allowed |= {webhooks} if path == "Api/ApiFunction" else set()  # rotate-secret
        # PATCH /sources/{id}, a sync's claim and release, and its item states.
        allowed |= {sources} if path in ("Api/ApiFunction", "Sources/SourceSyncFunction") else set()
        # Per-tenant limits: the API's rate cell and counters, intake's stored bytes, Parse's pages.
        allowed |= {usage} if path in ("Api/ApiFunction", "Intake/IntakeFunction", "Workflow/ParseFunction") else set()
        resources = set(_allows(synth.role_statements(path), "dynamodb:UpdateItem"))
        assert table in resources, path
        assert resources <= allowed, path


def test_document_events_only_from_finalize_mark_failed_reaper_and_api_to_the_default_bus(synth: SynthResult) -> None:
    bus = "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"
    # The reaper announces the documents it marks FAILED (STUCK), as MarkFailed does; the API's
    # DELETE /documents/{id} announces DocumentDeleted.
    publishers = {
        "Workflow/FinalizeFunction",
        "Workflow/MarkFailedFunction",
        "Operations/ReaperFunction",
        "Api/ApiFunction",
        # A source item that is gone is deleted as DELETE /documents/{id} does: DocumentDeleted.
        "Sources/SourceSyncFunction",
    }
    for path in FUNCTIONS:
        allowed = _allows(synth.role_statements(path), "events:PutEvents")
        assert allowed == ([bus] if path in publishers else []), path


def test_api_may_search_the_chunk_index_and_not_write_it(synth: SynthResult) -> None:
    # POST /search sends POST <index>/_search (opensearch-py).
    search_path = f"{synth.domain_arn_prefix}/{synth.config.opensearch.index}/_search"
    statements = synth.role_statements("Api/ApiFunction")
    assert any(fnmatch(search_path, pattern) for pattern in _allows(statements, "es:ESHttpPost"))
    for action in ("es:ESHttpPut", "es:ESHttpDelete", "es:ESHttpGet", "es:ESHttpPatch"):
        assert _allows(statements, action) == [], action


def test_only_parse_may_call_textract_and_only_detect_document_text(synth: SynthResult) -> None:
    callers = {
        path: sorted({action for s in synth.role_statements(path) for action in as_list(s["Action"])})
        for path in FUNCTIONS
    }
    textract = {path: [a for a in actions if a.startswith("textract:")] for path, actions in callers.items()}
    assert {path: actions for path, actions in textract.items() if actions} == {
        "Workflow/ParseFunction": ["textract:DetectDocumentText"]
    }


def test_an_inference_profile_as_answer_model_grants_the_profile_and_its_model_in_its_regions() -> None:
    from aws_cdk import App, Environment, Stack

    from infra.constructs.search import answer_model_arns

    stack = Stack(App(), "Arns", env=Environment(account="123456789012", region="eu-west-1"))
    [model] = answer_model_arns(stack, "amazon.nova-lite-v1:0")
    assert model.endswith(":bedrock:eu-west-1::foundation-model/amazon.nova-lite-v1:0")
    profile, routed = answer_model_arns(stack, "eu.amazon.nova-lite-v1:0")
    assert profile.endswith(":bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-lite-v1:0")
    assert routed.endswith(":bedrock:*::foundation-model/amazon.nova-lite-v1:0")
