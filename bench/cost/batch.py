"""The batch inference path's cost (``embedding.batchInference``), modelled from the measured on-demand run.

One bulk document of ``pages`` pages, priced as the measured run scaled to that many pages, with what
the batch path changes: Bedrock's tokens at the batch price; the EmbedBatch function's turns of the
wait loop instead of the Embed Map; no embedding-cache writes (``writeCache`` off); the bulk lane's
state transitions; the job's files in S3 until their noncurrent versions expire; a job of
``job_hours`` polled every ``pollSeconds`` doubling to ``maxPollSeconds``.

Pure arithmetic over ``bench.cost.model`` and ``bench.cost.prices``; imports nothing else of the project.
Each line, its figures and why: docs/cost.md (The batch inference path).
"""

from __future__ import annotations

import math
from dataclasses import replace

from bench.cost.model import CostSettings, CostTable, DocumentUsage, RunUsage, cost_table
from bench.cost.prices import GIB, S3_STORAGE_GB_MONTH

BATCH_FUNCTION = "Workflow/EmbedBatchBulkFunction"
# How long a job takes in AWS: not measurable offline; Bedrock gives batch jobs a 24-hour window
# (docs.aws.amazon.com/bedrock/latest/userguide/capacity-limits-cost-optimization.html), the worst case.
ASSUMED_JOB_HOURS = 24.0
# The bulk document the table prices (make bench-big's size).
BATCH_DOCUMENT_PAGES = 2000
EMBED_FUNCTION = "Workflow/EmbedFunction"
PARSE_FUNCTION = "Workflow/ParseFunction"
# The functions whose work grows with the pages (the rest run once a document).
PAGE_SCALED = frozenset({PARSE_FUNCTION, "Workflow/ChunkFunction", "Workflow/IndexFunction"})
# Status writes of one Parse Map range (start_stage, record_parsed_range, record_stage).
STATUS_WRITES_PER_RANGE = 3
# One turn of the wait loop in the EmbedBatch function (GetModelInvocationJob, a status update):
# assumed, not measured (docs/cost.md, The batch inference path).
ASSUMED_LOOK_MS = 150.0
# Submitting and collecting per chunk at 384 floats, measured through the local stack (docs/cost.md);
# scaled to the configured dimension by the vector's size, as reading and writing the JSON dominates.
MEASURED_BATCH_MS_PER_CHUNK = 5.1
# The output's JSON per float (the vector as text, ~20 bytes a float) and the input's per chunk.
OUTPUT_BYTES_PER_FLOAT = 20
INPUT_BYTES_PER_TOKEN = 6


def looks(job_hours: float, poll_seconds: int, max_poll_seconds: int) -> int:
    """Turns of the wait loop until a job of ``job_hours`` is seen done: the submit, then one look
    after each wait (``poll_seconds`` doubling up to ``max_poll_seconds``)."""
    waited, turns, wait = 0.0, 1, poll_seconds
    while waited < job_hours * 3600:
        waited += wait
        turns += 1
        wait = min(max_poll_seconds, wait * 2)
    return turns


def bulk_transitions(pages: int, range_pages: int, turns: int) -> int:
    """State transitions of one bulk-lane document with batch inference (the loop: a task and a
    Choice per turn, a Wait between turns)."""
    ranges = math.ceil(pages / range_pages)
    fixed = 7  # Validate, Parse, Lane, ParseRangesBulk, ChunkBulk, IndexBulk, Finalize
    return fixed + (ranges - 1) + 2 * turns + (turns - 1)


def batch_usage(
    usage: RunUsage,
    *,
    pages: int,
    range_pages: int,
    turns: int,
    dimension: int,
    noncurrent_days: int,
    status_item_bytes: int | None = None,
) -> RunUsage:
    """One bulk document of ``pages`` pages through the batch path (module doc)."""
    factor = pages / usage.pages
    chunks = round(sum(d.chunks for d in usage.documents) * factor)
    tokens = round(sum(d.chunk_tokens for d in usage.documents) * factor)
    stored = round(sum(d.stored_bytes for d in usage.documents) * factor)
    embedding = round(sum(d.embedding_bytes for d in usage.documents) * factor)
    # The job's files, kept as noncurrent versions for the artifacts' expiry: as a share of a month,
    # in the measured dimension's units (stored_bytes rescales the embedding part only).
    job_files = chunks * (OUTPUT_BYTES_PER_FLOAT * dimension) + tokens * INPUT_BYTES_PER_TOKEN
    job_files_month = round(job_files * noncurrent_days / 30)
    document = DocumentUsage(
        pages=pages,
        chunks=chunks,
        chunk_tokens=tokens,
        state_transitions=bulk_transitions(pages, range_pages, turns),
        stored_bytes=stored + job_files_month,
        embedding_bytes=embedding,
        ocr_pages=usage.ocr_pages * factor,
    )
    # What grows with pages (Parse's ranges, chunking, Index, checkpoints, logs) scales with them; what a
    # document costs once (Validate, Finalize, the API and intake, status writes) is the run's mean, once.
    documents = len(usage.documents)
    ranges = math.ceil(pages / range_pages)
    lambda_ms = {
        name: ms * factor if name in PAGE_SCALED else ms / documents
        for name, ms in usage.lambda_ms.items()
        if name != EMBED_FUNCTION
    }
    lambda_ms[BATCH_FUNCTION] = turns * ASSUMED_LOOK_MS + chunks * MEASURED_BATCH_MS_PER_CHUNK * dimension / 384
    invocations = {
        name: max(1, round(count / documents))
        for name, count in usage.lambda_invocations.items()
        if name != EMBED_FUNCTION
    }
    invocations[PARSE_FUNCTION] = ranges
    invocations[BATCH_FUNCTION] = turns
    return replace(
        usage,
        documents=(document,),
        lambda_ms=lambda_ms,
        lambda_invocations=invocations,
        s3_write_requests=round(usage.s3_write_requests * factor) + 2,  # the input PUT, the output LIST
        s3_read_requests=round(usage.s3_read_requests * factor) + 1,  # the output GET
        dynamodb_puts=max(1, round(usage.dynamodb_puts / documents)),
        # Per stage as measured, three more per extra page range, one per turn of the wait loop.
        dynamodb_updates=round(usage.dynamodb_updates / documents) + STATUS_WRITES_PER_RANGE * (ranges - 1) + turns,
        dynamodb_other_writes=round(usage.dynamodb_other_writes / documents),
        dynamodb_read_units=usage.dynamodb_read_units / documents,
        status_item_bytes=status_item_bytes or usage.status_item_bytes,
        log_bytes=round(usage.log_bytes * factor),
        embedding_cache_writes=0,
        embedding_cache_lookups=chunks,
    )


def batch_table(usage: RunUsage, settings: CostSettings, **knobs: int) -> CostTable:
    memory = {**settings.memory_mb, BATCH_FUNCTION: settings.memory_mb[EMBED_FUNCTION]}
    return cost_table(batch_usage(usage, **knobs), replace(settings, memory_mb=memory, bedrock_batch=True))


def job_file_storage_usd(chunks: int, tokens: int, dimension: int, noncurrent_days: int) -> float:
    """What the job's files cost while kept as noncurrent versions (for the tests and the table's note)."""
    size = chunks * OUTPUT_BYTES_PER_FLOAT * dimension + tokens * INPUT_BYTES_PER_TOKEN
    return size / GIB * S3_STORAGE_GB_MONTH.usd * noncurrent_days / 30
