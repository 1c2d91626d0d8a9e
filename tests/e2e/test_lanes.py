"""Lanes on the local stack: a document above the bulk threshold runs through the bulk copies of
Parse (its page ranges too), Chunk, Embed and Index, whose workers run at a lower CPU priority; a
small one beside it stays in the standard lane. The session stack uses 6-page ranges and a 6-page
threshold (tests/conftest.py), so a 14-page PDF is a bulk document of three ranges."""

from __future__ import annotations

import json
import os
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.embeddings.base import Embedder
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import search_passages

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from local.runtime.settings import DEFAULT_BULK_LANE_NICE
from tests.conftest import SESSION_BULK_ABOVE_PAGES, SESSION_RANGE_PAGES

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
BULK_PAGES = 14
# A sentence only the last page has: found by search, it shows the last range was joined and indexed.
LAST_PAGE_FACT = "The keeper of the northern archive logs every barometer reading in violet ink."


def bulk_pdf(path: Path) -> Path:
    pdf = FPDF(format="A4")
    for page in range(1, BULK_PAGES + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=14)
        pdf.multi_cell(0, 8, f"Chapter {page}: harbour notes, part {page}")
        pdf.ln(2)
        pdf.set_font("Helvetica", size=10)
        body = (
            f"Page {page} describes the tides, the moorings and the lamp rooms of harbour number {page}. "
            f"Ships arriving at berth {page * 3} report their cargo to the harbour master before noon. "
        ) * 4
        pdf.multi_cell(0, 5, body + (LAST_PAGE_FACT if page == BULK_PAGES else ""))
    pdf.output(str(path))
    return path


def states_entered(aws_clients: dict[str, Any], execution_arn: str) -> Counter[str]:
    sfn = aws_clients["stepfunctions"]
    entered: Counter[str] = Counter()
    for page in sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
        entered.update(e["stateEnteredEventDetails"]["name"] for e in page["events"] if "stateEnteredEventDetails" in e)
    return entered


def execution_arn(aws_clients: dict[str, Any], local_stack: dict[str, Any], document_id: str) -> str:
    item = aws_clients["dynamodb"].get_item(
        TableName=local_stack["DocumentsTableName"], Key={"document_id": {"S": document_id}}
    )["Item"]
    return str(item["execution_arn"]["S"])


def worker_niceness(name_part: str) -> list[int]:
    """Niceness of the local stack's live Lambda workers whose module names ``name_part``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if any(part.startswith(b"rag_fn_") and name_part.encode() in part for part in command):
            # Field 19 of /proc/<pid>/stat, counted after the command name's closing parenthesis.
            found.append(int(stat.rpartition(")")[2].split()[16]))
    return found


def test_a_big_document_runs_in_the_bulk_lane_and_a_small_one_beside_it_in_the_standard_lane(
    client: OfflineClient,
    aws_clients: dict[str, Any],
    local_stack: dict[str, Any],
    vector_store: VectorStore,
    embedder: Embedder,
    stack_process: OfflineStackProcess,
    tmp_path: Path,
) -> None:
    embedding_url = (stack_process.control("GET", "/_local/status") or {})["embedding_server"]["url"]
    bulk_requests_before = embedding_requests(embedding_url)["bulk"]
    assert BULK_PAGES > SESSION_BULK_ABOVE_PAGES and BULK_PAGES > 2 * SESSION_RANGE_PAGES
    big = client.upload(bulk_pdf(tmp_path / "harbour-manual.pdf"))
    small = client.upload(SAMPLES / "sourdough.pdf")
    done = client.wait_until_done([big, small], timeout_seconds=300)
    # The bulk lane's workers are still warm (idle ones stop after 30 s): they run niced.
    bulk_niceness = worker_niceness("BulkFunction")

    assert done[big]["status"] == "READY", done[big]
    assert done[big]["lane"] == "bulk" and done[big]["page_count"] == BULK_PAGES
    assert done[big]["pages_parsed"] == BULK_PAGES
    assert done[small]["status"] == "READY", done[small]
    assert done[small]["lane"] == "standard"

    big_states = states_entered(aws_clients, execution_arn(aws_clients, local_stack, big))
    # Parse's first task plans ranges 7-12 and 13-14 for the bulk Map; the rest runs in the bulk copies.
    assert big_states["ParseRangeBulkTask"] == 2 and big_states["ParseRangesBulk"] == 1
    for state in ("Lane", "ChunkBulk", "EmbedBulk", "IndexBulk", "Finalize"):
        assert big_states[state] == 1, (state, big_states)
    assert not big_states.keys() & {"ParseRanges", "Chunk", "Embed", "Index"}
    small_states = states_entered(aws_clients, execution_arn(aws_clients, local_stack, small))
    # One page range: the Lane choice skips the Map over no other ranges (a transition saved).
    assert small_states["Chunk"] == 1 and small_states["Index"] == 1 and "ParseRanges" not in small_states
    assert not any(state.endswith("Bulk") for state in small_states)

    # Indexed once, last page included (the three ranges were joined).
    assert vector_store.count(document_id=big) == done[big]["chunk_count"]
    [top, *_] = search_passages(
        vector_store, embedder, SearchQuery(tenant_id=client.tenant_id, text=LAST_PAGE_FACT, k=3)
    )
    assert top.document_id == big and top.page_end == BULK_PAGES

    base = os.nice(0)  # the stack inherits this process's niceness
    assert bulk_niceness, "no bulk-lane worker found"
    assert set(bulk_niceness) == {min(19, base + DEFAULT_BULK_LANE_NICE)}
    standard_niceness = worker_niceness("WorkflowChunkFunction") + worker_niceness("WorkflowIndexFunction")
    assert set(standard_niceness) <= {base}
    # The bulk Embed workers call the embedding server under /lanes/bulk: its texts wait behind the
    # standard lane's there. (Some of the big document's chunks may come from the embedding cache.)
    assert embedding_requests(embedding_url)["bulk"] > bulk_requests_before


def embedding_requests(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/_local/stats", timeout=10) as response:
        return dict(json.loads(response.read())["requests_by_lane"])
