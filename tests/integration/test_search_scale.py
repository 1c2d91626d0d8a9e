"""make bench-search in quick mode (2,000 chunks): it runs end to end through a local stack and reports
what it should. Only the shape of the report is asserted, never a timing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rag_ingest.adapters.vector_store import connect

from bench import search_scale

pytestmark = pytest.mark.integration

URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
QUERIES = 12
WARMUP = 2
QUICK_RUN = ["--chunks", "2000", "--base-passages", "60", "--queries", str(QUERIES), "--ef", "40"]
QUICK_RUN += ["--warmup", str(WARMUP), "--warmup-seconds", "0"]


def test_a_quick_run_reports_latency_per_mode_recall_and_tenant_isolation(tmp_path: Path) -> None:
    output = tmp_path / "search-scale.json"
    result = search_scale.main([*QUICK_RUN, "--output", str(output)])

    assert json.loads(output.read_text()) == json.loads(json.dumps(result))
    assert result["index"]["docs"] == 2000 + 200  # the main tenant's and a tenth for the other tenant
    assert result["index"]["concurrent_segment_search"] == "auto"  # the product's mapping, as shipped
    assert (result["index"]["merge_segments_per_tier"], result["index"]["merge_floor_segment"]) == ("4", "256mb")
    for mode in ("knn", "bm25", "hybrid"):
        api = result["api_latency_ms"][mode]
        assert api["n"] == QUERIES
        assert 0 < api["p50"] <= api["p95"] <= api["p99"]
        steal = result["api_cpu_steal_share"][mode]  # Linux has /proc/stat
        assert steal is not None and 0.0 <= steal <= 1.0
        loop = result["api_reference_loop_ms"][mode]
        assert 0 < loop["best"] <= loop["p50"]
        warmup = result["api_warmup"][mode]  # no time asked for: the count alone
        assert warmup["requests"] == WARMUP and warmup["first_p50"] > 0 and warmup["last_p50"] > 0
        took = result["in_process"][mode]["opensearch_took_ms"]
        assert took["n"] == QUERIES and took["p50"] >= 0
    # Only k-NN and hybrid embed the query; hybrid asks OpenSearch twice.
    assert result["in_process"]["knn"]["query_embedding_ms"]["n"] == QUERIES
    assert result["in_process"]["bm25"]["query_embedding_ms"]["n"] == 0
    assert result["in_process"]["hybrid"]["opensearch_requests_per_search"] == 2

    recall = result["recall_at_10"]
    assert 0.0 <= recall["api_knn"] <= 1.0
    assert recall["ef_search"] == result["ef_search_configured"] >= 1
    assert [row["ef_search"] for row in recall["sweep"]] == sorted({40, recall["ef_search"]})
    assert all(0.0 <= row["recall_at_10"] <= 1.0 for row in recall["sweep"])

    isolation = result["tenant_isolation"]
    assert isolation["main"]["passages_checked"] >= 3 * QUERIES * 10
    assert isolation["other"]["passages_checked"] > 0
    assert isolation["main"]["foreign_passages"] == 0
    assert isolation["other"]["foreign_passages"] == 0
    # The check means something: without the tenant filter, the other tenant's chunks would be found.
    assert isolation["queries_whose_unfiltered_top10_holds_other_tenant_chunks"] > 0

    # The filtered pass: one customer's chunks (1 % at 100,000 chunks; 40 documents here, so one
    # document's 50 chunks, 2.5 %), inside both legs: k passages come back, none outside the filter.
    filtered = result["filtered"]
    assert filtered["selected_share_of_chunks"] == {"min": 0.025, "max": 0.025}
    assert filtered["passages_checked"] >= 2 * QUERIES * 10  # k-NN and hybrid return k
    assert filtered["passages_outside_filter"] == 0
    assert filtered["short_responses"]["knn"] == filtered["short_responses"]["hybrid"] == 0
    for mode in ("knn", "bm25", "hybrid"):
        assert filtered["latency_ms"][mode]["n"] == filtered["paired_unfiltered_latency_ms"][mode]["n"] == QUERIES
        assert filtered["p95_over_unfiltered"][mode] > 0

    # hybrid+rerank, paired with plain hybrid query by query (the route answered reranked: true).
    rerank = result["rerank"]
    assert rerank["mode"] == "hybrid+rerank"
    assert rerank["latency_ms"]["n"] == rerank["paired_hybrid_latency_ms"]["n"] == QUERIES
    assert rerank["paired_difference_ms"]["n"] == QUERIES
    assert set(rerank["added_ms"]) == {"p50", "p95"}

    # Everything it loaded is gone with its index.
    assert not connect(URL).indices.exists(index=result["index"]["name"])
