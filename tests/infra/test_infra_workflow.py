"""The state machine definition: stage order, Retry (order and jitter) and Catch -> MarkFailed."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from infra.cdk_app import create_app
from infra.config import CONTEXT_KEY
from tests.infra.template_tools import SynthResult, as_list

pytestmark = pytest.mark.infra

STAGES = ["Validate", "Parse", "Chunk", "Embed", "Index", "Finalize"]
# The bulk lane's copies of the stages whose work grows with the page count.
BULK_STAGES = ["ParseBulk", "ChunkBulk", "EmbedBulk", "IndexBulk"]
# The top-level states of each lane in order: Parse's first task, the Lane choice, the Map over the
# other page ranges (skipped by a document of one range), and on to the shared Finalize, which ends
# the execution.
STANDARD_LANE = ["Validate", "Parse", "Lane", "ParseRanges", "Chunk", "Embed", "Index", "Finalize"]
BULK_LANE = ["Validate", "Parse", "Lane", "ParseRangesBulk", "ChunkBulk", "EmbedBulk", "IndexBulk", "Finalize"]
TASK_AND_MAP_STATES = sorted({*STANDARD_LANE, *BULK_LANE} - {"Lane"})
TRANSIENT = [
    "TransientError",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]


@pytest.fixture(scope="module")
def definition(synth: SynthResult) -> dict[str, Any]:
    return synth.state_machine_definition()


def task_state(definition: dict[str, Any], stage: str) -> dict[str, Any]:
    """The Task of a stage: Embed's runs inside the Embed Map, once per embedding task; a
    ParseRanges iteration's is ParseRangeTask."""
    if stage in ("ParseRanges", "ParseRangesBulk", "Embed", "EmbedBulk"):
        processor = definition["States"][stage]["ItemProcessor"]
        return dict(processor["States"][processor["StartAt"]])
    return dict(definition["States"][stage])


def test_embed_fans_out_over_planned_tasks_with_bounded_concurrency(
    synth: SynthResult, definition: dict[str, Any]
) -> None:
    embed = definition["States"]["Embed"]
    assert embed["Type"] == "Map"
    assert embed["ItemsPath"] == "$.embed_tasks"
    assert embed["ItemSelector"] == {"job.$": "$", "task.$": "$$.Map.Item.Value"}
    assert embed["MaxConcurrency"] == synth.config.embedding.max_concurrency
    # The tasks' outputs are not kept: the job state stays small whatever the document's size.
    assert embed["ResultPath"] is None
    processor = embed["ItemProcessor"]
    assert list(processor["States"]) == ["EmbedTask"] and processor["States"]["EmbedTask"]["End"] is True


def test_stages_run_in_order_and_finalize_ends_the_execution(definition: dict[str, Any]) -> None:
    assert definition["StartAt"] == "Validate"
    states = definition["States"]
    for lane in (STANDARD_LANE, BULK_LANE):
        for current, following in itertools.pairwise(lane):
            if current != "Lane":
                assert states[current]["Next"] == following, (current, following)
    # No Succeed state after it: each state entered is a billed transition (docs/cost.md).
    assert states["Finalize"]["End"] is True and "Next" not in states["Finalize"]
    assert not [name for name, state in states.items() if state["Type"] in ("Succeed", "Pass")]


def test_the_lane_choice_sends_bulk_documents_to_the_bulk_copies_and_the_rest_to_the_standard_ones(
    synth: SynthResult, definition: dict[str, Any]
) -> None:
    lane = definition["States"]["Lane"]
    assert lane["Type"] == "Choice"
    more_ranges = {"Variable": "$.parse_tasks[0]", "IsPresent": True}
    in_bulk = {"Variable": "$.lane", "StringEquals": "bulk"}
    # A document of one page range goes straight to its lane's Chunk, not through an empty Map.
    assert lane["Choices"] == [
        {"And": [in_bulk, more_ranges], "Next": "ParseRangesBulk"},
        {**in_bulk, "Next": "ChunkBulk"},
        {**more_ranges, "Next": "ParseRanges"},
    ]
    assert lane["Default"] == "Chunk"
    lanes = synth.config.lanes
    assert definition["States"]["ParseRangesBulk"]["MaxConcurrency"] == lanes.bulk_parse_max_concurrency
    assert definition["States"]["EmbedBulk"]["MaxConcurrency"] == lanes.bulk_embed_max_concurrency
    assert definition["States"]["ParseRanges"]["MaxConcurrency"] == synth.config.parsing.max_concurrency
    for stage in ("ParseRanges", "Chunk", "Embed", "Index"):
        standard, bulk = task_state(definition, stage), task_state(definition, f"{stage}Bulk")
        function = "Parse" if stage == "ParseRanges" else stage
        assert standard["Resource"] == f"${{{synth.logical_id(f'Workflow/{function}Function')}.Arn}}"
        assert bulk["Resource"] == f"${{{synth.logical_id(f'Workflow/{function}BulkFunction')}.Arn}}"
        # The same retriers in both lanes.
        assert standard["Retry"] == bulk["Retry"]


def test_bulk_copies_are_their_stage_function_with_a_lane_tag(synth: SynthResult) -> None:
    for stage in ("Parse", "Chunk", "Embed", "Index"):
        standard = synth.resource(f"Workflow/{stage}Function")["Properties"]
        bulk = synth.resource(f"Workflow/{stage}BulkFunction")["Properties"]
        same = ("Handler", "MemorySize", "Timeout", "Runtime", "Architectures", "Environment", "Layers")
        assert {key: bulk.get(key) for key in same} == {key: standard.get(key) for key in same}, stage
        assert {"Key": "rag-ingest:lane", "Value": "bulk"} in bulk["Tags"]
        assert {"Key": "rag-ingest:lane", "Value": "standard"} in standard["Tags"]
        # No reservation by default: it would fail the deploy on an account whose limit is 10.
        assert "ReservedConcurrentExecutions" not in bulk and "ReservedConcurrentExecutions" not in standard
    env = synth.resource("Workflow/ParseFunction")["Properties"]["Environment"]["Variables"]
    assert env["BULK_ABOVE_PAGES"] == str(synth.config.lanes.bulk_above_pages) == "200"


@pytest.mark.parametrize("stage", [*STAGES, "MarkFailed"])
def test_each_task_invokes_its_own_function_directly(
    synth: SynthResult, definition: dict[str, Any], stage: str
) -> None:
    state = task_state(definition, stage)
    assert state["Type"] == "Task"
    # payload_response_only: the function ARN is the resource, its return value the new state.
    assert state["Resource"] == f"${{{synth.logical_id(f'Workflow/{stage}Function')}.Arn}}"
    assert state["ResultPath"] == "$"


@pytest.mark.parametrize("stage", TASK_AND_MAP_STATES)
def test_retriers_permanent_first_then_transient_with_full_jitter(
    synth: SynthResult, definition: dict[str, Any], stage: str
) -> None:
    retry = task_state(definition, stage)["Retry"]
    config = synth.config.workflow.retry
    assert retry[0] == {"ErrorEquals": ["PermanentError"], "MaxAttempts": 0}
    if stage in ("Embed", "EmbedBulk"):
        # Waiting for the shared embedding quota has its own retrier, never the transient budget.
        assert retry.pop(1) == {
            "ErrorEquals": ["EmbeddingCapacityWait"],
            "IntervalSeconds": 10,
            "BackoffRate": 1.5,
            "MaxAttempts": synth.config.embedding.capacity.wait_minutes,
            "MaxDelaySeconds": 60,
            "JitterStrategy": "FULL",
        }
    assert retry[1] == {
        "ErrorEquals": TRANSIENT,
        "IntervalSeconds": config.interval_seconds,
        "BackoffRate": config.backoff_rate,
        "MaxAttempts": config.max_attempts,
        "MaxDelaySeconds": config.max_delay_seconds,
        "JitterStrategy": "FULL",
    }
    assert retry[2] == {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 2, "MaxAttempts": 2, "JitterStrategy": "FULL"}
    assert len(retry) == 3


@pytest.mark.parametrize("stage", TASK_AND_MAP_STATES)
def test_every_stage_catches_into_mark_failed(definition: dict[str, Any], stage: str) -> None:
    assert definition["States"][stage]["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "MarkFailed"}
    ]


def test_mark_failed_retries_transient_errors_then_fails(definition: dict[str, Any]) -> None:
    mark_failed = definition["States"]["MarkFailed"]
    assert mark_failed["Next"] == "Failed"
    (retry,) = mark_failed["Retry"]
    assert retry["ErrorEquals"] == TRANSIENT
    assert retry["JitterStrategy"] == "FULL"
    assert "Catch" not in mark_failed
    assert definition["States"]["Failed"]["Type"] == "Fail"


def test_state_machine_settings(synth: SynthResult, definition: dict[str, Any]) -> None:
    props = synth.resource("Workflow/StateMachine")["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    logging = props["LoggingConfiguration"]
    assert logging["Level"] == "ALL"
    assert logging["IncludeExecutionData"] is False
    assert definition["TimeoutSeconds"] == synth.config.workflow.timeout_minutes * 60


def test_state_machine_role_invokes_only_the_stage_functions(synth: SynthResult) -> None:
    role_id = synth.resource("Workflow/StateMachine")["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in synth.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "lambda:InvokeFunction"
    ]
    targets = {
        resource["Fn::GetAtt"][0] if "Fn::GetAtt" in resource else resource["Fn::Join"][1][0]["Fn::GetAtt"][0]
        for s in statements
        for resource in s["Resource"]
    }
    names = [*STAGES, *BULK_STAGES, "MarkFailed"]
    assert targets == {synth.logical_id(f"Workflow/{name}Function") for name in names}


def test_bulk_copies_have_exactly_their_stage_functions_access(synth: SynthResult) -> None:
    for stage in ("Parse", "Chunk", "Embed", "Index"):
        standard = json.dumps(synth.role_statements(f"Workflow/{stage}Function"), sort_keys=True)
        bulk = json.dumps(synth.role_statements(f"Workflow/{stage}BulkFunction"), sort_keys=True)
        # Each writes to its own log group; every other statement is the same.
        own, twin = (synth.logical_id(f"Workflow/{name}FunctionLogGroup") for name in (f"{stage}Bulk", stage))
        assert own in bulk and twin not in bulk
        assert bulk.replace(own, twin) == standard, stage


def test_with_the_embedding_cache_off_embed_has_neither_the_table_nor_its_grant(
    synth: SynthResult, tmp_path: Path
) -> None:
    # On by default: the Embed functions of both lanes get the table and the grant.
    for name in ("Embed", "EmbedBulk"):
        variables = synth.resource(f"Workflow/{name}Function")["Properties"]["Environment"]["Variables"]
        assert "EMBEDDING_CACHE_TABLE" in variables
    app, stack, config = create_app(context={CONTEXT_KEY: {"embedding": {"cache": False}}}, outdir=str(tmp_path))
    assert config.embedding.cache is False
    app.synth()  # cdk-nag runs as a validation plugin: a finding fails the synth
    resources = json.loads((tmp_path / stack.template_file).read_text())["Resources"]
    cache_table = next(
        logical_id
        for logical_id, resource in resources.items()
        if resource.get("Metadata", {}).get("aws:cdk:path", "").endswith("/Storage/EmbeddingCacheTable/Resource")
    )
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::Lambda::Function":
            assert "EMBEDDING_CACHE_TABLE" not in resource["Properties"].get("Environment", {}).get("Variables", {})
        if resource["Type"] == "AWS::IAM::Policy":
            assert cache_table not in json.dumps(resource["Properties"]["PolicyDocument"]), logical_id


def test_embed_shares_one_quota_timeline_and_only_embed_may_book_it(synth: SynthResult, tmp_path: Path) -> None:
    capacity = synth.config.embedding.capacity
    table_arn = {"Fn::GetAtt": [synth.logical_id("Workflow/EmbeddingCapacityTable"), "Arn"]}
    for name in ("Embed", "EmbedBulk"):
        variables = synth.resource(f"Workflow/{name}Function")["Properties"]["Environment"]["Variables"]
        assert variables["EMBEDDING_CAPACITY_MODE"] == capacity.mode == "shared"
        assert variables["EMBEDDING_CAPACITY_TABLE"] == {"Ref": synth.logical_id("Workflow/EmbeddingCapacityTable")}
        assert variables["EMBEDDING_REQUESTS_PER_MINUTE"] == str(capacity.requests_per_minute)
        assert variables["EMBEDDING_TOKENS_PER_MINUTE"] == str(capacity.tokens_per_minute)
        statements = [
            s for s in synth.role_statements(f"Workflow/{name}Function") if table_arn in as_list(s["Resource"])
        ]
        assert [sorted(as_list(s["Action"])) for s in statements] == [["dynamodb:GetItem", "dynamodb:PutItem"]]
    table = synth.resource("Workflow/EmbeddingCapacityTable")["Properties"]
    assert table["BillingMode"] == "PAY_PER_REQUEST" and table["SSESpecification"] == {"SSEEnabled": True}

    app, stack, _ = create_app(
        context={CONTEXT_KEY: {"embedding": {"capacity": {"mode": "adaptive"}}}}, outdir=str(tmp_path)
    )
    app.synth()
    resources = json.loads((tmp_path / stack.template_file).read_text())["Resources"]
    assert not [r for r in resources.values() if r["Type"] == "AWS::DynamoDB::Table"
                and "EmbeddingCapacityTable" in r.get("Metadata", {}).get("aws:cdk:path", "")]  # fmt: skip
    embed = next(r for r in resources.values() if r.get("Metadata", {}).get("aws:cdk:path", "").endswith(
        "/Workflow/EmbedFunction/Resource"))  # fmt: skip
    variables = embed["Properties"]["Environment"]["Variables"]
    assert variables["EMBEDDING_CAPACITY_MODE"] == "adaptive" and "EMBEDDING_CAPACITY_TABLE" not in variables


def test_the_capacity_wait_must_end_before_the_workflow_times_out(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"waitMinutes must be below workflow\.timeoutMinutes"):
        create_app(
            context={CONTEXT_KEY: {"embedding": {"capacity": {"waitMinutes": 60}}, "workflow": {"timeoutMinutes": 60}}},
            outdir=str(tmp_path),
        )


def test_tenant_weights_reach_both_embed_functions_inside_lambdas_4_kb_of_environment(
    synth: SynthResult, tmp_path: Path
) -> None:
    """embedding.capacity.tenantWeights (validated) becomes EMBEDDING_CAPACITY_TENANT_WEIGHTS, which
    the Embed functions parse back; the most it may hold leaves their environment under Lambda's 4 KB
    (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html)."""
    from rag_ingest.core.config import MAX_TENANT_WEIGHT, MAX_TENANT_WEIGHTS, StagesEnv

    for name in ("Embed", "EmbedBulk"):  # the default: no weights, a 2 s horizon
        variables = synth.resource(f"Workflow/{name}Function")["Properties"]["Environment"]["Variables"]
        assert variables["EMBEDDING_CAPACITY_TENANT_WEIGHTS"] == "{}"
        assert variables["EMBEDDING_CAPACITY_BOOK_AHEAD_SECONDS"] == "2.0"
    weights = {f"{index:02d}".ljust(64, "t"): MAX_TENANT_WEIGHT - 0.25 for index in range(MAX_TENANT_WEIGHTS)}
    capacity = {"tenantWeights": weights, "bookAheadSeconds": 3}
    app, stack, _ = create_app(context={CONTEXT_KEY: {"embedding": {"capacity": capacity}}}, outdir=str(tmp_path))
    app.synth()
    resources = json.loads((tmp_path / stack.template_file).read_text())["Resources"]
    for name in ("EmbedFunction", "EmbedBulkFunction"):
        function = next(r for r in resources.values() if r.get("Metadata", {}).get("aws:cdk:path", "").endswith(
            f"/Workflow/{name}/Resource"))  # fmt: skip
        variables = function["Properties"]["Environment"]["Variables"]
        assert json.loads(variables["EMBEDDING_CAPACITY_TENANT_WEIGHTS"]) == weights
        assert variables["EMBEDDING_CAPACITY_BOOK_AHEAD_SECONDS"] == "3.0"
        # A token (a table's name, an ARN) resolves to at most 256 characters here.
        size = sum(len(key) + (len(value) if isinstance(value, str) else 256) for key, value in variables.items())
        assert size < 4096, size
        plain = {key: value if isinstance(value, str) else "resolved-token" for key, value in variables.items()}
        env = StagesEnv.from_env({**plain, "OPENSEARCH_ENDPOINT": "https://search.example"})
        assert env.embedding_capacity_tenant_weights == weights

    for bad, message in (
        ({"acme": 0}, "above 0"),
        ({"acme": 1001}, "at most 1000"),
        ({"a/b": 1}, "not a tenant id"),
        ({f"t{i}": 1 for i in range(MAX_TENANT_WEIGHTS + 1)}, "at most 12 tenants"),
    ):
        with pytest.raises(Exception, match=message):
            create_app(
                context={CONTEXT_KEY: {"embedding": {"capacity": {"tenantWeights": bad}}}}, outdir=str(tmp_path / "bad")
            )
