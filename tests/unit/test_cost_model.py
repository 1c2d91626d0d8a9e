"""The cost model's arithmetic on known inputs, its readers of a measured run, and its price sources."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from datetime import date

import pytest

from bench.cost import prices
from bench.cost.measure import (
    PROBE_USER_AGENT,
    classify_request,
    count_requests,
    embedding_cache_entries,
    invocation_durations,
    log_bytes,
    recorded_entries,
)
from bench.cost.model import (
    ChunkingChange,
    CostSettings,
    DocumentUsage,
    RunUsage,
    cost_table,
    dynamodb_write_units,
    express_billed_gb_seconds,
    lambda_gb_seconds,
    rechunked,
    stored_bytes,
    with_scanned_share,
)
from bench.cost.report import (
    OCR_MS_PER_PAGE,
    STAGE_FUNCTIONS,
    knob_study,
    settings_from_config,
    state_transitions,
    usage_from_measurement,
    with_bedrock_embed,
)
from infra.config import parse_config

pytestmark = pytest.mark.unit

DOCUMENT = DocumentUsage(
    pages=10, chunks=10, chunk_tokens=10_000, state_transitions=8, stored_bytes=prices.GIB, embedding_bytes=0
)
USAGE = RunUsage(
    documents=(DOCUMENT,),
    lambda_ms={"Workflow/ParseFunction": 2000.0},
    lambda_invocations={"Workflow/ParseFunction": 3},
    s3_write_requests=10,
    s3_read_requests=20,
    dynamodb_puts=1,
    dynamodb_updates=10,
    dynamodb_other_writes=2,
    dynamodb_read_units=2.0,
    status_item_bytes=800,
    log_bytes=prices.GIB // 2,
    embedding_dimension=384,
)
SETTINGS = CostSettings(memory_mb={"Workflow/ParseFunction": 1024}, pusher_memory_mb=256)


def test_ocr_pages_are_billed_per_page_by_textract() -> None:
    assert cost_table(USAGE, SETTINGS).line("Textract DetectDocumentText (OCR)").usd == 0.0
    scanned = replace(USAGE, documents=(replace(DOCUMENT, ocr_pages=4),))
    line = cost_table(scanned, SETTINGS).line("Textract DetectDocumentText (OCR)")
    assert line.usd == pytest.approx(4 * 1.50 / 1000)
    assert "4 pages OCR'd (40% of pages)" in line.detail


def test_textract_tables_bill_ocr_pages_at_analyze_document_tables_price() -> None:
    # cdk.json parsing.textractTables: the same pages, AnalyzeDocument TABLES's price (10x DetectDocumentText).
    scanned = replace(USAGE, documents=(replace(DOCUMENT, ocr_pages=4),))
    tables = replace(SETTINGS, textract_tables=True)
    line = cost_table(scanned, tables).line("Textract AnalyzeDocument TABLES (OCR)")
    assert line.usd == pytest.approx(4 * 15.00 / 1000)
    assert prices.TEXTRACT_ANALYZE_TABLES_PAGE.usd == pytest.approx(10 * prices.TEXTRACT_DETECT_TEXT_PAGE.usd)
    assert cost_table(scanned, tables).total_usd - cost_table(scanned, SETTINGS).total_usd == pytest.approx(
        4 * (15.00 - 1.50) / 1000
    )
    with pytest.raises(StopIteration):  # one Textract line, the configured call's
        cost_table(scanned, tables).line("Textract DetectDocumentText (OCR)")


def test_a_share_of_scanned_pages_scales_textract_and_parse_time() -> None:
    parse = "Workflow/ParseFunction"
    half = with_scanned_share(USAGE, 0.5, parse, ms_per_ocr_page=2000.0)
    assert half.ocr_pages == 5
    assert half.lambda_ms[parse] == 2000.0 + 5 * 2000.0
    assert half.documents[0].chunk_tokens == DOCUMENT.chunk_tokens  # OCR'd text is taken as the text layer's
    table, base = cost_table(half, SETTINGS), cost_table(USAGE, SETTINGS)
    assert table.line("Textract DetectDocumentText (OCR)").usd == pytest.approx(5 * 0.0015)
    # 10 s more of Parse at 1,024 MB: 10 GB-s.
    extra_lambda = table.line("Lambda duration").usd - base.line("Lambda duration").usd
    assert extra_lambda == pytest.approx(10 * 0.0000166667)
    assert table.total_usd - base.total_usd == pytest.approx(5 * 0.0015 + extra_lambda)
    # Twice the share, twice the OCR cost; pages OCR'd in the measured run are not counted twice.
    full = with_scanned_share(half, 1.0, parse, ms_per_ocr_page=2000.0)
    assert full.ocr_pages == 10 and full.lambda_ms[parse] == 2000.0 + 10 * 2000.0
    assert with_scanned_share(half, 0.0, parse, ms_per_ocr_page=2000.0).lambda_ms[parse] == 2000.0
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        with_scanned_share(USAGE, 1.5, parse, ms_per_ocr_page=2000.0)


def test_the_knob_study_shows_the_share_of_scanned_pages() -> None:
    config = parse_config(None)
    memory = {name: 1024 for name in (*STAGE_FUNCTIONS.values(), "Api/ApiFunction")}
    usage = replace(USAGE, lambda_ms={name: 1000.0 for name in memory})
    study = knob_study(usage, config)
    shares = [knob for knob in study.knobs if knob.name.startswith("share of scanned pages")]
    assert [knob.change for knob in shares] == ["0% -> 1%", "0% -> 10%", "0% -> 50%", "0% -> 100%"]
    deltas = [knob.per_thousand_pages - study.base.total_per_thousand_pages for knob in shares]
    assert deltas == sorted(deltas) and deltas[0] > 0
    parse_memory_gb = settings_from_config(config).memory_mb[STAGE_FUNCTIONS["PARSE"]] / 1024
    gb_second = prices.LAMBDA_GB_SECOND[config.functions.architecture].usd
    per_page = 1.50 / 1000 + OCR_MS_PER_PAGE / 1000 * parse_memory_gb * gb_second
    assert deltas[-1] == pytest.approx(1000 * per_page, rel=1e-6)  # every page OCR'd: 1,000 OCR pages


def test_lambda_gb_seconds_are_duration_times_memory() -> None:
    assert lambda_gb_seconds(1000, 1024) == 1.0
    assert lambda_gb_seconds(500, 2048) == 1.0
    assert lambda_gb_seconds(250, 128) == pytest.approx(0.03125)


def test_each_line_of_a_known_run() -> None:
    table = cost_table(USAGE, SETTINGS)
    usd = {line.item: line.usd for line in table.lines}
    assert usd["Lambda duration"] == pytest.approx(2 * 0.0000166667)
    assert usd["Lambda requests"] == pytest.approx(3 * 0.2e-6)
    assert usd["Step Functions (Standard)"] == pytest.approx(8 * 0.000025)
    assert usd["Bedrock Titan v2 input tokens"] == pytest.approx(10_000 * 0.00002 / 1000)
    assert usd["S3 requests"] == pytest.approx(10 * 0.005 / 1000 + 20 * 0.0004 / 1000)
    assert usd["S3 storage"] == pytest.approx(0.023)
    # A put writes the table and both GSIs (3), an update also deletes from by_status (4); 800 B = 1 unit.
    assert usd["DynamoDB on-demand"] == pytest.approx((3 + 10 * 4 + 2) * 0.625e-6 + 2 * 0.125e-6)
    assert usd["SQS"] == pytest.approx(3 * 0.4e-6)
    assert usd["CloudWatch Logs (incl. EMF metrics)"] == pytest.approx(0.25)
    assert usd["EventBridge"] == pytest.approx(1e-6)
    assert usd["X-Ray traces (upper bound)"] == pytest.approx(3 * 5e-6)
    assert usd["Live status push (estimate)"] == pytest.approx(11 * (0.2e-6 + 1e-6) + 11 * 0.1 * 0.25 * 0.0000166667)
    assert table.pages == 10
    assert table.total_usd == pytest.approx(sum(usd.values()))
    assert table.total_per_thousand_pages == pytest.approx(table.total_usd * 100)


def test_arm64_cuts_only_the_gb_second_price() -> None:
    x86 = cost_table(USAGE, SETTINGS)
    arm = cost_table(USAGE, replace(SETTINGS, architecture="arm64"))
    ratio = arm.line("Lambda duration").usd / x86.line("Lambda duration").usd
    assert ratio == pytest.approx(0.0000133334 / 0.0000166667)
    assert ratio == pytest.approx(0.8, abs=0.001)
    assert arm.line("Lambda requests").usd == x86.line("Lambda requests").usd


def test_dynamodb_units_round_each_kilobyte_up() -> None:
    assert dynamodb_write_units(100, 3) == 3
    assert dynamodb_write_units(1024, 1) == 1
    assert dynamodb_write_units(1025, 4) == 8


def test_express_bills_64_mb_and_100_ms_steps() -> None:
    assert express_billed_gb_seconds(100, 0.25) == pytest.approx(128 / 1024 * 0.3)
    assert express_billed_gb_seconds(64, 0.01) == pytest.approx(64 / 1024 * 0.1)
    table = cost_table(USAGE, replace(SETTINGS, workflow_type="EXPRESS", express_seconds_per_document=2.0))
    assert table.line("Step Functions (Express)").usd == pytest.approx(1e-6 + 64 / 1024 * 2.0 * 0.00001667)


def test_transitions_are_states_entered_plus_retries() -> None:
    history = {
        "ExecutionStarted": 1,
        "TaskStateEntered": 6,
        "MapStateEntered": 1,
        "SucceedStateEntered": 1,
        "LambdaFunctionScheduled": 8,  # two tasks were retried once
        "TaskStateExited": 6,
    }
    assert state_transitions(history) == 8 + 2


def test_rechunking_scales_tokens_by_the_overlap_share_and_batches_by_the_batch_size() -> None:
    no_overlap = ChunkingChange(measured_tokens=300, measured_overlap=60, tokens=300, overlap=0)
    assert no_overlap.token_factor() == pytest.approx(0.8)  # 300/240 of the text was billed, now 1
    assert no_overlap.chunk_factor() == pytest.approx(0.8)
    same = ChunkingChange(300, 60, 300, 60)
    doubled_batches = rechunked(USAGE, same, embed_batch_size=5, measured_batch_size=10)
    assert doubled_batches.documents == USAGE.documents
    # 10 chunks: 1 batch of 10 -> 2 of 5: one more PUT in Embed, one more HEAD and GET in Index.
    assert doubled_batches.s3_write_requests == USAGE.s3_write_requests + 1
    assert doubled_batches.s3_read_requests == USAGE.s3_read_requests + 2


def test_stored_embeddings_scale_with_the_dimension() -> None:
    usage = replace(USAGE, documents=(replace(DOCUMENT, stored_bytes=1000, embedding_bytes=384),))
    assert stored_bytes(usage, 384) == 1000
    assert stored_bytes(usage, 1024) == 1000 - 384 + 1024


def test_bedrock_embed_time_is_one_call_per_chunk_four_in_flight() -> None:
    usage = with_bedrock_embed(USAGE, call_ms=200.0)
    assert usage.lambda_ms[STAGE_FUNCTIONS["EMBED"]] == 3 * 200.0  # ceil(10 / 4) rounds of calls
    assert usage.lambda_ms["Workflow/ParseFunction"] == 2000.0


def test_settings_follow_the_configuration() -> None:
    config = parse_config({"functions": {"architecture": "arm64", "stages": {"parse": {"memoryMb": 3008}}}})
    settings = settings_from_config(config)
    assert settings.architecture == "arm64"
    assert settings.memory_mb["Workflow/ParseFunction"] == 3008
    assert settings.memory_mb["Workflow/EmbedFunction"] == config.functions.stages.embed.memory_mb
    assert settings.embedding_dimension == config.embedding.dimension


def test_a_measurement_becomes_the_model_inputs() -> None:
    measurement = {
        "documents": [
            {
                "file": "a.pdf",
                "pdf_bytes": 100,
                "pages": 4,
                "ocr_pages": 1,
                "chunks": 6,
                "chunk_tokens": 1200,
                "timings_ms": {"PARSE": 300, "EMBED": 900},
                "status_item_bytes": 700,
                "artifacts": [
                    {"key": "artifacts/a/v/pages.json", "bytes": 50},
                    {"key": "artifacts/a/v/embeddings/000000.json", "bytes": 384},
                ],
                "history_event_types": {"TaskStateEntered": 6, "MapStateEntered": 1, "SucceedStateEntered": 1},
            }
        ],
        "invocation_ms": {"Api/ApiFunction": [10.0, 20.0], "Workflow/ParseFunction": [5000.0]},
        "requests": {
            "s3": {"PUT": 3, "POST": 1, "GET": 4, "HEAD": 2, "DELETE": 1},
            "dynamodb": {
                "PutItem:StorageDocumentsTableF859B0E6": 1,
                "UpdateItem:StorageDocumentsTableF859B0E6": 9,
                "PutItem:StorageIdempotencyTable5D6E4193": 1,
                "GetItem:StorageDocumentsTableF859B0E6+consistent": 2,
                "GetItem:StorageIdempotencyTable5D6E4193": 2,
            },
        },
        "log_bytes": 2048,
    }
    usage = usage_from_measurement(measurement)
    (document,) = usage.documents
    assert (document.pages, document.chunks, document.chunk_tokens, document.state_transitions) == (4, 6, 1200, 8)
    assert (document.stored_bytes, document.embedding_bytes) == (534, 384)
    assert document.ocr_pages == 1
    # Stage functions are charged their stage timer, the others their invocations.
    assert usage.lambda_ms["Workflow/ParseFunction"] == 300.0
    assert usage.lambda_ms["Workflow/EmbedFunction"] == 900.0
    assert usage.lambda_ms["Api/ApiFunction"] == 30.0
    assert usage.lambda_invocations == {"Api/ApiFunction": 2, "Workflow/ParseFunction": 1}
    assert (usage.s3_write_requests, usage.s3_read_requests) == (4, 6)
    assert (usage.dynamodb_puts, usage.dynamodb_updates, usage.dynamodb_other_writes) == (1, 9, 1)
    assert usage.dynamodb_read_units == 2 * 1.0 + 2 * 0.5
    assert usage.status_item_bytes == 700
    assert usage.log_bytes == 2048


def _recorded(headers: dict[str, str], method: str = "POST", url: str = "/", body: object = "") -> dict[str, object]:
    raw = json.dumps(body).encode() if isinstance(body, dict) else str(body).encode()
    return {
        "headers": headers,
        "method": method,
        "url": url,
        "body": base64.b64encode(raw).decode(),
        "body_encoded": True,
    }


def _auth(service: str) -> dict[str, str]:
    return {"Authorization": f"AWS4-HMAC-SHA256 Credential=AKID/20261201/us-east-1/{service}/aws4_request, ..."}


def test_recorded_requests_are_classified_by_service_and_operation() -> None:
    dynamodb = {**_auth("dynamodb"), "X-Amz-Target": "DynamoDB_20120810.UpdateItem"}
    table = "RagIngest-StorageDocumentsTableF859B0E6-ABC"
    assert classify_request(_recorded(dynamodb, body={"TableName": table})) == (
        "dynamodb",
        "UpdateItem:StorageDocumentsTableF859B0E6",
    )
    consistent = {**_auth("dynamodb"), "X-Amz-Target": "DynamoDB_20120810.GetItem"}
    assert classify_request(_recorded(consistent, body={"TableName": table, "ConsistentRead": True})) == (
        "dynamodb",
        "GetItem:StorageDocumentsTableF859B0E6+consistent",
    )
    sqs = {**_auth("sqs"), "X-Amz-Target": "AmazonSQS.DeleteMessageBatch"}
    assert classify_request(_recorded(sqs)) == ("sqs", "DeleteMessageBatch")
    assert classify_request(_recorded(_auth("s3"), "PUT", "/bucket/artifacts/a/v/chunks.json")) == ("s3", "PUT")
    assert classify_request(_recorded(_auth("s3"), "GET", "/bucket?list-type=2&prefix=a")) == ("s3", "LIST")
    assert classify_request(_recorded({}, "POST", "/bucket")) == ("s3", "POST")  # a presigned POST upload
    invoke = _recorded(_auth("lambda"), "POST", "/2015-03-31/functions/f/invocations")
    assert classify_request(invoke) == ("lambda", "Invoke")
    probe = {**_auth("s3"), "User-Agent": f"Boto3/1.40 {PROBE_USER_AGENT}"}
    assert classify_request(_recorded(probe, "GET", "/bucket/key")) is None


def test_a_recording_is_counted_per_service_and_operation() -> None:
    lines = [
        json.dumps(_recorded(_auth("s3"), "PUT", "/b/k")),
        json.dumps(_recorded(_auth("s3"), "PUT", "/b/k2")),
        "",
        json.dumps(_recorded(_auth("s3"), "HEAD", "/b/k")),
    ]
    assert count_requests("\n".join(lines)) == {"s3": {"HEAD": 1, "PUT": 2}}


def test_requests_written_onto_one_line_by_two_threads_are_all_counted() -> None:
    put = json.dumps(_recorded(_auth("s3"), "PUT", "/b/k"))
    head = json.dumps(_recorded(_auth("s3"), "HEAD", "/b/k"))
    entries, unread = recorded_entries(f"{put}{head}\n{head}")
    assert [entry["method"] for entry in entries] == ["PUT", "HEAD", "HEAD"]
    assert unread == 0
    torn = put[: len(put) // 2]
    entries, unread = recorded_entries(f"{torn}{head}\n")
    assert [entry["method"] for entry in entries] == ["HEAD"]
    assert unread == len(torn)


STACK_LOG = """\
2026-12-01 13:34:28,813 INFO    local.lambda.Workflow/ParseFunction: {"level":"INFO","message":"stage finished"}
2026-12-01 13:34:29,006 INFO    local.lambda.Workflow/ParseFunction: END RequestId: f5 Duration: 48980.8 ms Status: ok
2026-12-01 13:34:29,314 INFO    local.runtime.lambda: stopped 1 idle worker(s)
2026-12-01 13:34:30,006 INFO    local.lambda.Api/ApiFunction: END RequestId: a1 Duration: 12.5 ms Status: ok
"""


def test_invocation_durations_and_log_bytes_come_from_the_stack_log() -> None:
    assert invocation_durations(STACK_LOG) == {"Workflow/ParseFunction": [48980.8], "Api/ApiFunction": [12.5]}
    function_lines = [line.split(": ", 1)[1] for line in STACK_LOG.splitlines() if "local.lambda." in line]
    assert log_bytes(STACK_LOG) == sum(len(line) + 1 for line in function_lines)


def test_every_price_names_its_aws_pricing_page_and_the_date_it_was_recorded() -> None:
    every = prices.all_prices()
    assert {"LAMBDA_GB_SECOND[x86_64]", "LAMBDA_GB_SECOND[arm64]", "SFN_STANDARD_TRANSITION"} <= set(every)
    assert {"TITAN_V2_INPUT_TOKEN", "S3_WRITE_REQUEST", "DYNAMODB_WRITE_UNIT", "OPENSEARCH_SERVERLESS_OCU_HOUR"} <= set(
        every
    )
    for name, price in every.items():
        assert price.usd > 0, name
        assert re.search(r"^(AWS|Amazon) .*Pricing.* \(aws\.amazon\.com/[a-z0-9/-]+\)", price.source), (
            name,
            price.source,
        )
        assert price.unit, name
    assert date.fromisoformat(prices.PRICES_RECORDED) <= date.today()
    assert prices.REGION == "us-east-1"


def test_embedding_cache_entries_are_priced_at_their_size_for_the_configured_dimension() -> None:
    from bench.cost.model import embedding_cache_entry_bytes, embedding_cache_units

    assert embedding_cache_entry_bytes(1024) == 4096 + 220  # float32 vector + key, checksum, names
    cached = replace(USAGE, embedding_cache_writes=100, embedding_cache_lookups=100)
    writes, reads = embedding_cache_units(cached, 1024)
    assert writes == 100 * 5  # 4.2 KB: five 1 KB write units each
    assert reads == 100 * 0.5 * 2  # eventually consistent, two 4 KB units each
    assert embedding_cache_units(cached, 256)[0] == 100 * 2  # 1,244 bytes
    base = cost_table(USAGE, SETTINGS).line("DynamoDB on-demand")
    line = cost_table(cached, SETTINGS).line("DynamoDB on-demand")
    dimension = SETTINGS.embedding_dimension
    extra_writes, extra_reads = embedding_cache_units(cached, dimension)
    assert line.usd == pytest.approx(base.usd + extra_writes * 0.625e-6 + extra_reads * 0.125e-6)
    assert f"({extra_writes} of them embedding-cache entries)" in line.detail


def test_packed_cache_entries_are_priced_at_their_measured_payload_scaled_to_the_dimension() -> None:
    from bench.cost.model import embedding_cache_entry_bytes, embedding_cache_units

    # 3.45 bytes a float (the sign-and-exponent bytes deflated) + key, "v", format, kind, digest.
    assert embedding_cache_entry_bytes(1024, 3.45) == 3533 + 155
    cached = replace(USAGE, embedding_cache_writes=100, embedding_cache_lookups=100)
    assert embedding_cache_units(cached, 1024, 3.45) == (100 * 4, 100 * 0.5)  # under 4 KB
    assert embedding_cache_units(cached, 1024, 4.0) == (100 * 5, 100 * 0.5 * 2)  # nothing deflated
    packed = replace(cached, embedding_cache_payload_bytes_per_float=3.45)
    assert "(400 of them embedding-cache entries)" in cost_table(packed, SETTINGS).line("DynamoDB on-demand").detail


def test_the_cache_entries_written_are_sized_from_the_recording() -> None:
    from rag_ingest.core.job import CacheKey
    from rag_ingest.ingest.embedding_cache import encode_entry

    put = {**_auth("dynamodb"), "X-Amz-Target": "DynamoDB_20120810.PutItem"}
    table = "RagIngest-StorageEmbeddingCacheTableBF78E7DE-ABC"
    key = CacheKey.of("acme", "model", 64, "a passage")
    entry = encode_entry(key, [(-1) ** i * (i + 1) / 64 for i in range(64)])
    item = {"cache_key": {"S": key.id}, "v": {"B": base64.b64encode(entry["v"]).decode()}}
    recording = json.dumps(_recorded(put, body={"TableName": table, "Item": item}))
    found = embedding_cache_entries(recording, 64)
    assert found["count"] == 1 and found["packed"] is True
    assert found["max_item_bytes"] == len("cache_key") + len(key.id) + len("v") + len(entry["v"])  # raw bytes
    assert found["max_payload_bytes"] == len(entry["v"]) - 10
    assert embedding_cache_entries("", 64) == {}


def test_the_cache_knob_removes_the_cache_entries_and_lookups_from_the_bill() -> None:
    from bench.cost.report import STAGE_FUNCTIONS, knob_study

    config = parse_config({})
    measured = replace(USAGE, lambda_ms=dict.fromkeys(STAGE_FUNCTIONS.values(), 1000.0))
    cached = replace(measured, embedding_cache_writes=100, embedding_cache_lookups=100)
    study = knob_study(cached, config)
    [knob] = [knob for knob in study.knobs if knob.name == "embedding.cache"]
    without_cache = knob_study(measured, config)
    assert knob.per_thousand_pages == pytest.approx(without_cache.base.total_per_thousand_pages)
    assert knob.per_thousand_pages < study.base.total_per_thousand_pages
    assert not [knob for knob in without_cache.knobs if knob.name == "embedding.cache"]


def test_the_kept_runs_are_priced_in_the_cache_format_they_wrote() -> None:
    from pathlib import Path

    runs = Path(__file__).resolve().parents[2] / "bench" / "cost"
    before = usage_from_measurement(json.loads((runs / "measured-2026-12-01.json").read_text()))
    after = usage_from_measurement(json.loads((runs / "measured-2026-12-04.json").read_text()))
    assert before.embedding_cache_payload_bytes_per_float is None  # unpacked entries: 4 bytes a float
    assert after.embedding_cache_payload_bytes_per_float == pytest.approx(1354 / 384)
    assert before.embedding_cache_writes == after.embedding_cache_writes == 682
