"""From a measurement (``bench.cost.measure``) and the configuration to the tables of docs/cost.md."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rag_ingest.embeddings.bedrock import DEFAULT_MAX_CONCURRENCY

from bench.cost import prices
from bench.cost.answers import render_answers
from bench.cost.batch import ASSUMED_JOB_HOURS, BATCH_DOCUMENT_PAGES, batch_table, looks
from bench.cost.figures import render_figures
from bench.cost.model import (
    OCR_LINES,
    Architecture,
    ChunkingChange,
    CostSettings,
    DocumentUsage,
    KnobStudy,
    RunUsage,
    cost_table,
    lambda_gb_seconds,
    ocr_page_price,
    rechunked,
    scaled_memory,
    with_scanned_share,
)
from infra.config import FunctionSettings, RagIngestConfig

# The offline embedder the measured run used (all-MiniLM-L6-v2): its vectors' dimension.
MEASURED_EMBEDDING_DIMENSION = 384
# Stage name in the status record's timings_ms -> the function that runs it.
STAGE_FUNCTIONS = {
    "VALIDATE": "Workflow/ValidateFunction",
    "PARSE": "Workflow/ParseFunction",
    "CHUNK": "Workflow/ChunkFunction",
    "EMBED": "Workflow/EmbedFunction",
    "INDEX": "Workflow/IndexFunction",
    "FINALIZE": "Workflow/FinalizeFunction",
}
# Titan V2 embeds one text per InvokeModel call; this is the latency assumed for one call (not
# measured here: this machine is offline). The Embed function keeps DEFAULT_MAX_CONCURRENCY in flight.
ASSUMED_BEDROCK_CALL_MS = 200.0
# A page without a text layer costs Parse its rasterising (measured) and the wait on the synchronous
# DetectDocumentText call (assumed: this machine is offline); how, in docs/cost.md (Scanned pages).
MEASURED_RASTERISE_MS_PER_PAGE = 184.0
ASSUMED_TEXTRACT_CALL_MS = 1500.0
OCR_MS_PER_PAGE = MEASURED_RASTERISE_MS_PER_PAGE + ASSUMED_TEXTRACT_CALL_MS
# The shares of scanned pages docs/cost.md shows (the knob "share of scanned pages").
SCANNED_SHARES = (0.0, 0.01, 0.1, 0.5, 1.0)
S3_WRITE_OPERATIONS = frozenset({"PUT", "POST", "LIST", "COPY"})
S3_READ_OPERATIONS = frozenset({"GET", "HEAD"})


def function_settings(config: RagIngestConfig) -> dict[str, FunctionSettings]:
    """Every function the local stack runs, by its construct path, with its configured settings."""
    stages = config.functions.stages
    return {
        "Api/ApiFunction": config.functions.api,
        "Intake/IntakeFunction": config.functions.intake,
        "Operations/RedriveFunction": config.functions.redrive,
        "Operations/ReaperFunction": config.functions.reaper,
        "Workflow/ValidateFunction": stages.validate_,
        "Workflow/ParseFunction": stages.parse,
        "Workflow/ChunkFunction": stages.chunk,
        "Workflow/EmbedFunction": stages.embed,
        "Workflow/IndexFunction": stages.index,
        "Workflow/FinalizeFunction": stages.finalize,
        "Workflow/MarkFailedFunction": stages.mark_failed,
        # DocumentReady -> the fan-out queue -> one invocation a document (it reads the tenant's
        # endpoints; with none, nothing is delivered).
        "Webhooks/WebhookFanOutFunction": config.functions.webhook_fan_out,
        "Webhooks/WebhookDeliveryFunction": config.functions.webhook_delivery,
    }


def settings_from_config(config: RagIngestConfig) -> CostSettings:
    return CostSettings(
        memory_mb={name: settings.memory_mb for name, settings in function_settings(config).items()},
        architecture=config.functions.architecture,
        embedding_dimension=config.embedding.dimension,
        pusher_memory_mb=config.live.pusher.memory_mb,
        textract_tables=config.parsing.textract_tables,
    )


def state_transitions(history_event_types: Mapping[str, int]) -> int:
    """Standard workflows bill each state entered, and each retry of a task as one more."""
    entered = sum(count for kind, count in history_event_types.items() if kind.endswith("StateEntered"))
    attempts = history_event_types.get("LambdaFunctionScheduled", 0) + history_event_types.get("TaskScheduled", 0)
    retries = max(0, attempts - history_event_types.get("TaskStateEntered", 0))
    return entered + retries


def usage_from_measurement(data: Mapping[str, Any]) -> RunUsage:
    """The measured run as the model's inputs.

    Stage functions are charged their stage's measured time (the status record's timings_ms); the
    functions without a stage timer (API, intake) their invocations' durations from the log.
    """
    documents = tuple(
        DocumentUsage(
            pages=int(doc["pages"]),
            chunks=int(doc["chunks"]),
            chunk_tokens=int(doc["chunk_tokens"]),
            state_transitions=state_transitions(doc["history_event_types"]),
            stored_bytes=int(doc["pdf_bytes"]) + sum(int(a["bytes"]) for a in doc["artifacts"]),
            embedding_bytes=sum(int(a["bytes"]) for a in doc["artifacts"] if "/embeddings/" in a["key"]),
            ocr_pages=int(doc.get("ocr_pages", 0)),  # absent from measurements made before OCR
        )
        for doc in data["documents"]
    )
    invocations: dict[str, list[float]] = {name: list(ms) for name, ms in data["invocation_ms"].items()}
    lambda_ms: dict[str, float] = {
        name: sum(ms) for name, ms in invocations.items() if name not in STAGE_FUNCTIONS.values()
    }
    for stage, function in STAGE_FUNCTIONS.items():
        lambda_ms[function] = float(sum(int(doc["timings_ms"].get(stage, 0)) for doc in data["documents"]))
    requests = data["requests"]
    s3 = requests.get("s3", {})
    dynamodb: Mapping[str, int] = requests.get("dynamodb", {})

    def dynamodb_count(operation: str, documents_table: bool) -> int:
        return sum(
            count
            for key, count in dynamodb.items()
            if key.split(":")[0] == operation
            and ("DocumentsTable" in key) == documents_table
            and "EmbeddingCacheTable" not in key
        )

    # Reads: a status item is under 4 KB, so one unit per strongly consistent read, half otherwise.
    # The embedding cache's BatchGetItems are priced per key from the chunk counts (model.py).
    read_units = sum(
        count * (1.0 if key.endswith("+consistent") else 0.5)
        for key, count in dynamodb.items()
        if key.split(":")[0] in ("GetItem", "Query")
    )
    cache_writes = sum(
        count for key, count in dynamodb.items() if key.split(":")[0] == "PutItem" and "EmbeddingCacheTable" in key
    )
    items = [int(doc["status_item_bytes"]) for doc in data["documents"]]
    # Packed cache entries: their largest payload per float (absent from runs that wrote the first format).
    entries = data.get("embedding_cache_entries") or {}
    payload_per_float = int(entries["max_payload_bytes"]) / int(entries["dimension"]) if entries.get("packed") else None
    return RunUsage(
        documents=documents,
        lambda_ms=lambda_ms,
        lambda_invocations={name: len(ms) for name, ms in invocations.items()},
        s3_write_requests=sum(count for op, count in s3.items() if op in S3_WRITE_OPERATIONS),
        s3_read_requests=sum(count for op, count in s3.items() if op in S3_READ_OPERATIONS),
        dynamodb_puts=dynamodb_count("PutItem", True),
        dynamodb_updates=dynamodb_count("UpdateItem", True),
        dynamodb_other_writes=dynamodb_count("PutItem", False)
        + dynamodb_count("UpdateItem", False)
        + dynamodb_count("DeleteItem", False),
        dynamodb_read_units=read_units,
        status_item_bytes=round(sum(items) / len(items)) if items else 0,
        log_bytes=int(data.get("log_bytes", 0)),
        embedding_dimension=MEASURED_EMBEDDING_DIMENSION,
        embedding_cache_writes=cache_writes,
        # Embed looks every chunk up once before it embeds (a run before the cache looked nothing up).
        embedding_cache_lookups=sum(d.chunks for d in documents) if cache_writes else 0,
        embedding_cache_payload_bytes_per_float=payload_per_float,
    )


def with_bedrock_embed(usage: RunUsage, call_ms: float = ASSUMED_BEDROCK_CALL_MS) -> RunUsage:
    """The run with Embed's measured time (a CPU model inside the function) replaced by the time
    spent waiting on Titan V2: one call per chunk, DEFAULT_MAX_CONCURRENCY in flight."""
    chunks = sum(d.chunks for d in usage.documents)
    embed_ms = math.ceil(chunks / DEFAULT_MAX_CONCURRENCY) * call_ms
    return replace(usage, lambda_ms={**usage.lambda_ms, STAGE_FUNCTIONS["EMBED"]: embed_ms})


def knob_study(usage: RunUsage, config: RagIngestConfig) -> KnobStudy:
    """How each configuration knob moves the cost per 1,000 pages (everything else as measured)."""
    settings = settings_from_config(config)
    study = KnobStudy(cost_table(usage, settings))
    arm: Architecture = "x86_64" if settings.architecture == "arm64" else "arm64"
    study.add(
        "functions.architecture",
        f"{settings.architecture} -> {arm}",
        cost_table(usage, replace(settings, architecture=arm)),
    )
    for factor in (0.5, 2.0):
        memory = scaled_memory(settings.memory_mb, factor)
        study.add(
            "every function's memoryMb",
            f"x {factor:g} (same durations)",
            cost_table(usage, replace(settings, memory_mb=memory)),
        )
    embed = STAGE_FUNCTIONS["EMBED"]
    memory = {**settings.memory_mb, embed: 256}
    study.add(
        "functions.stages.embed.memoryMb",
        f"{settings.memory_mb[embed]} -> 256 (waiting on Bedrock needs no CPU)",
        cost_table(usage, replace(settings, memory_mb=memory)),
    )
    measured_tokens, measured_overlap = config.chunking.chunk_tokens, config.chunking.chunk_overlap_tokens
    for tokens, overlap in (
        (measured_tokens, 0),
        (2 * measured_tokens, measured_overlap),
        (measured_tokens // 2, measured_overlap // 2),
    ):
        change = ChunkingChange(measured_tokens, measured_overlap, tokens, overlap)
        study.add(
            "chunking.chunkTokens / chunkOverlapTokens",
            f"{measured_tokens}/{measured_overlap} -> {tokens}/{overlap}",
            cost_table(rechunked(usage, change, config.embedding.batch_size, config.embedding.batch_size), settings),
        )
    same = ChunkingChange(measured_tokens, measured_overlap, measured_tokens, measured_overlap)
    for batch in (4, 64):
        study.add(
            "embedding.batchSize",
            f"{config.embedding.batch_size} -> {batch} (one S3 checkpoint per batch)",
            cost_table(rechunked(usage, same, batch, config.embedding.batch_size), settings),
        )
    for dimension in (256, 512):
        if dimension != settings.embedding_dimension:
            study.add(
                "embedding.dimension",
                f"{settings.embedding_dimension} -> {dimension} "
                "(S3 checkpoints, cache entries; Bedrock bills input tokens only)",
                cost_table(usage, replace(settings, embedding_dimension=dimension)),
            )
    if config.embedding.cache and usage.embedding_cache_writes:
        study.add(
            "embedding.cache",
            "true -> false (no lookup, no entry: a corpus ingested once; re-uploads then embed everything)",
            cost_table(replace(usage, embedding_cache_writes=0, embedding_cache_lookups=0), settings),
        )
    for share in SCANNED_SHARES[1:]:
        study.add(
            "share of scanned pages (OCR by Textract; not a config option)",
            f"{usage.ocr_pages / max(1, usage.pages):.0%} -> {share:.0%}",
            cost_table(with_scanned_share(usage, share, STAGE_FUNCTIONS["PARSE"], OCR_MS_PER_PAGE), settings),
        )
    # Express bills the execution's duration: about the sum of its stages (here, per document).
    seconds = sum(usage.lambda_ms[f] for f in STAGE_FUNCTIONS.values()) / 1000 / max(1, len(usage.documents))
    study.add(
        "Step Functions workflow type (not a config option)",
        f"STANDARD -> EXPRESS (64 MB, {seconds:.0f} s per document)",
        cost_table(usage, replace(settings, workflow_type="EXPRESS", express_seconds_per_document=seconds)),
    )
    return study


def vector_store_monthly(config: RagIngestConfig) -> list[tuple[str, float, str]]:
    """(option, USD per month, how) for the managed domain at cdk.json's size and Serverless's floor."""
    search = config.opensearch
    rows: list[tuple[str, float, str]] = []
    instance = prices.OPENSEARCH_INSTANCE_HOUR.get(search.instance_type)
    if instance is not None:
        compute = instance.usd * prices.HOURS_PER_MONTH * search.instance_count
        storage = prices.OPENSEARCH_GP3_GB_MONTH.usd * search.volume_size_gb * search.instance_count
        rows.append(
            (
                f"managed domain, {search.instance_count} x {search.instance_type}, {search.volume_size_gb} GB gp3",
                compute + storage,
                f"{search.instance_count} x ${instance.usd}/h x {prices.HOURS_PER_MONTH} h + "
                f"{search.volume_size_gb} GB x ${prices.OPENSEARCH_GP3_GB_MONTH.usd}",
            )
        )
    for name, ocus in prices.SERVERLESS_MINIMUM_OCUS.items():
        monthly = ocus * prices.OPENSEARCH_SERVERLESS_OCU_HOUR.usd * prices.HOURS_PER_MONTH
        rows.append(
            (
                f"OpenSearch Serverless vector collection, minimum, {name}",
                monthly,
                f"{ocus:g} OCU x ${prices.OPENSEARCH_SERVERLESS_OCU_HOUR.usd}/h x {prices.HOURS_PER_MONTH} h"
                " (+ storage)",
            )
        )
    return rows


def _money(usd: float) -> str:
    if usd == 0:
        return "$0"
    if usd >= 0.01:
        return f"${usd:.4f}"
    return f"${usd:.5f}" if usd >= 0.0001 else f"${usd:.7f}"


def render_batch(usage: RunUsage, settings: CostSettings, config: RagIngestConfig, pages: int) -> list[str]:
    """The batch path's table (docs/cost.md, "The batch inference path")."""
    batch = config.embedding.batch_inference
    turns = looks(ASSUMED_JOB_HOURS, batch.poll_seconds, batch.max_poll_seconds)
    knobs = {
        "pages": pages,
        "range_pages": config.parsing.range_pages,
        "turns": turns,
        "dimension": settings.embedding_dimension,
        "noncurrent_days": config.storage.artifacts_noncurrent_expiration_days,
    }
    table = batch_table(usage, settings, **knobs)
    out = [
        f"The batch inference path (embedding.batchInference; modelled from the run above): one bulk document of "
        f"{pages:,} pages, its tokens at the batch price, a job taking {ASSUMED_JOB_HOURS:g} h (assumed: Bedrock's "
        f"window; {turns} turns of the wait loop at pollSeconds {batch.poll_seconds} doubling to "
        f"{batch.max_poll_seconds}), the job's vectors not written to the embedding cache (writeCache "
        f"{str(batch.write_cache).lower()}):",
        "",
        "| item | per document | per 1,000 pages | what |",
        "|---|---|---|---|",
    ]
    for line in table.lines:
        out.append(
            f"| {line.item} | {_money(line.usd)} | {_money(table.per_thousand_pages(line.usd))} | {line.detail} |"
        )
    out.append(
        f"| **total** | {_money(table.total_usd)} | **{_money(table.total_per_thousand_pages)}** | goal: < $0.02 |"
    )
    return out


def render(data: Mapping[str, Any], config: RagIngestConfig, call_ms: float = ASSUMED_BEDROCK_CALL_MS) -> str:
    """The markdown docs/cost.md shows: cost per 1,000 pages, knobs, the vector store, prices."""
    usage = usage_from_measurement(data)
    settings = settings_from_config(config)
    measured = cost_table(usage, settings)
    bedrock = with_bedrock_embed(usage, call_ms)
    modelled = cost_table(bedrock, settings)
    documents = len(usage.documents)
    out: list[str] = []
    out.append(
        f"Measured {data['measured_at']}: {documents} documents, {usage.pages} pages, "
        f"{sum(d.chunks for d in usage.documents)} chunks through the local stack in {data['wall_seconds']} s "
        f"(1-minute load average {_load(data.get('load_average_before'))} before, "
        f"{_load(data.get('load_average_after'))} after, "
        f"on {_cores()} cores). Prices: {prices.REGION}, recorded {prices.PRICES_RECORDED}."
    )
    not_ready = [f"{doc['file']} ({doc['status']})" for doc in data["documents"] if doc["status"] != "READY"]
    if not_ready:
        out.append(f"Not READY at the end of the run (their work so far is counted): {', '.join(not_ready)}.")
    out.append("")
    out.append(
        "| item | per document, Embed on Bedrock | per 1,000 pages, Embed as measured here "
        "| per 1,000 pages, Embed on Bedrock | what |"
    )
    out.append("|---|---|---|---|---|")
    for line in modelled.lines:
        as_measured = measured.line(line.item)
        out.append(
            f"| {line.item} | {_money(line.usd / documents)} | {_money(measured.per_thousand_pages(as_measured.usd))} "
            f"| {_money(modelled.per_thousand_pages(line.usd))} | {line.detail} |"
        )
    out.append(
        f"| **total** | {_money(modelled.total_usd / documents)} | **{_money(measured.total_per_thousand_pages)}** "
        f"| **{_money(modelled.total_per_thousand_pages)}** | goal: < $0.02 |"
    )
    out.append("")
    other: Architecture = "arm64" if settings.architecture == "x86_64" else "x86_64"
    arm = cost_table(bedrock, replace(settings, architecture=other))
    saved = modelled.line("Lambda duration").usd - arm.line("Lambda duration").usd
    out.append(
        f"Same run with functions.architecture = {other}: {_money(arm.total_per_thousand_pages)} per 1,000 pages "
        f"(Embed on Bedrock): Lambda duration {_money(abs(modelled.per_thousand_pages(saved)))} per 1,000 pages "
        f"{'less' if saved > 0 else 'more'}."
    )
    out.append("")
    out.extend(render_batch(usage, settings, config, BATCH_DOCUMENT_PAGES))
    out.append("")
    out.extend(render_ocr_share(bedrock, settings))
    out.append("")
    out.append("Lambda duration by function (the stage functions: their stage timers; API and intake: invocations):")
    out.append("")
    out.append("| function | memory MB | seconds, as measured | seconds, Embed on Bedrock | per 1,000 pages |")
    out.append("|---|---|---|---|---|")
    price = prices.LAMBDA_GB_SECOND[settings.architecture].usd
    for function, ms in sorted(bedrock.lambda_ms.items(), key=lambda item: -item[1] * settings.memory_mb[item[0]]):
        memory = settings.memory_mb[function]
        usd = lambda_gb_seconds(ms, memory) * price
        out.append(
            f"| {function} | {memory} | {usage.lambda_ms[function] / 1000:.1f} | {ms / 1000:.1f} "
            f"| {_money(modelled.per_thousand_pages(usd))} |"
        )
    out.append("")
    out.append("Per document (the fixed part, Step Functions, weighs on small documents):")
    out.append("")
    out.append("| document | pages | chunks | Titan tokens | state transitions | Step Functions per 1,000 pages |")
    out.append("|---|---|---|---|---|---|")
    for doc, used in zip(data["documents"], usage.documents, strict=True):
        per_thousand = used.state_transitions * prices.SFN_STANDARD_TRANSITION.usd * 1000 / max(1, used.pages)
        out.append(
            f"| {doc['file']} | {used.pages} | {used.chunks} | {used.chunk_tokens} | {used.state_transitions} "
            f"| {_money(per_thousand)} |"
        )
    out.append("")
    out.append("How each knob moves the total per 1,000 pages (Embed on Bedrock; one knob at a time):")
    out.append("")
    study = knob_study(bedrock, config)
    out.append(f"| knob | change | per 1,000 pages | vs {_money(study.base.total_per_thousand_pages)} |")
    out.append("|---|---|---|---|")
    for knob in study.knobs:
        out.append(f"| {knob.name} | {knob.change} | {_money(knob.per_thousand_pages)} | {knob.delta_percent:+.1f} % |")
    out.append("")
    out.append("The vector store, per month (apart from the per-page cost):")
    out.append("")
    out.append("| option | USD per month | how |")
    out.append("|---|---|---|")
    for option, monthly, how in vector_store_monthly(config):
        out.append(f"| {option} | ${monthly:.2f} | {how} |")
    out.append("")
    out.extend(render_answers(config))
    out.append("")
    out.extend(render_figures(config))
    return "\n".join(out)


def render_ocr_share(usage: RunUsage, settings: CostSettings) -> list[str]:
    """The OCR lines per 1,000 pages as the share of scanned pages grows (Embed on Bedrock), in both
    modes of parsing.textractTables: DetectDocumentText, or AnalyzeDocument with TABLES."""
    parse = STAGE_FUNCTIONS["PARSE"]
    memory = settings.memory_mb[parse]
    detect, tables = ocr_page_price(False), ocr_page_price(True)
    configured = "on" if settings.textract_tables else "off"
    out = [
        f"Scanned pages (OCR by Textract): the same run as if a share of every document's pages had no text "
        f"layer. Each such page adds {detect.usd * 1000:.2f} USD per 1,000 pages of Textract `DetectDocumentText` "
        f"(`parsing.textractTables` off), or {tables.usd * 1000:.2f} USD of `AnalyzeDocument` with TABLES (on; "
        f"cdk.json has it {configured}), and {OCR_MS_PER_PAGE / 1000:.2f} s of Parse at {memory} MB "
        f"({MEASURED_RASTERISE_MS_PER_PAGE:.0f} ms rasterising, measured; {ASSUMED_TEXTRACT_CALL_MS:.0f} ms "
        "waiting on Textract, assumed, the same for both calls):",
        "",
        "| share of scanned pages | Textract per 1,000 pages: text only / TABLES | Parse Lambda per 1,000 pages "
        "| total per 1,000 pages: text only / TABLES |",
        "|---|---|---|---|",
    ]
    price = prices.LAMBDA_GB_SECOND[settings.architecture].usd
    for share in SCANNED_SHARES:
        scanned = with_scanned_share(usage, share, parse, OCR_MS_PER_PAGE)
        text_only = cost_table(scanned, replace(settings, textract_tables=False))
        with_tables = cost_table(scanned, replace(settings, textract_tables=True))
        parse_usd = lambda_gb_seconds(scanned.lambda_ms[parse], memory) * price
        out.append(
            f"| {share:.0%} "
            f"| {_money(text_only.per_thousand_pages(text_only.line(OCR_LINES[False]).usd))} / "
            f"{_money(with_tables.per_thousand_pages(with_tables.line(OCR_LINES[True]).usd))} "
            f"| {_money(text_only.per_thousand_pages(parse_usd))} "
            f"| {_money(text_only.total_per_thousand_pages)} / {_money(with_tables.total_per_thousand_pages)} |"
        )
    return out


def render_prices() -> str:
    lines = ["| price | USD | unit | source |", "|---|---|---|---|"]
    for name, price in prices.all_prices().items():
        lines.append(f"| {name} | {price.usd:.10g} | {price.unit} | {price.source} |")
    return "\n".join(lines)


def _load(value: Any) -> str:
    return f"{value[0]:.1f}" if isinstance(value, list | tuple) and value else "?"


def _cores() -> int:
    import os

    return os.cpu_count() or 1
