"""The batch inference path's cost model (bench.cost.batch): the wait loop's turns, the bulk lane's
state transitions, and what the path changes in the measured run (tokens at the batch price, no
Embed function, no embedding-cache writes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cost import prices
from bench.cost.batch import BATCH_FUNCTION, EMBED_FUNCTION, batch_table, batch_usage, bulk_transitions, looks
from bench.cost.report import settings_from_config, usage_from_measurement
from infra.config import CONTEXT_KEY, parse_config

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENT = ROOT / "bench" / "cost" / "measured-2026-12-04.json"


def test_turns_of_the_wait_loop() -> None:
    # Submit, then a look after 60 s, 120 s, 240 s: 420 s > 300 s.
    assert looks(300 / 3600, 60, 900) == 4
    # 24 h at 60 s doubling to 1,800 s: 60+120+240+480+960 = 1,860 s, then 47 waits of 1,800 s.
    assert looks(24, 60, 1800) == 53


def test_bulk_transitions_of_a_2000_page_document() -> None:
    # 7 fixed states, 39 more Parse ranges, a task and a Choice per turn, a Wait between turns.
    assert bulk_transitions(2000, 50, 53) == 7 + 39 + 106 + 52


def test_the_batch_path_prices_tokens_at_half_and_writes_no_cache_entry() -> None:
    usage = usage_from_measurement(json.loads(MEASUREMENT.read_text()))
    config = parse_config(json.loads((ROOT / "cdk.json").read_text())["context"][CONTEXT_KEY])
    settings = settings_from_config(config)
    knobs = {"pages": 2000, "range_pages": 50, "turns": 53, "dimension": 1024, "noncurrent_days": 7}
    modelled = batch_usage(usage, **knobs)
    assert modelled.embedding_cache_writes == 0 and EMBED_FUNCTION not in modelled.lambda_ms
    assert modelled.lambda_invocations[BATCH_FUNCTION] == 53
    (document,) = modelled.documents
    assert document.pages == 2000
    table = batch_table(usage, settings, **knobs)
    tokens = document.chunk_tokens
    assert table.line("Bedrock Titan v2 input tokens").usd == pytest.approx(
        tokens * prices.TITAN_V2_BATCH_INPUT_TOKEN.usd
    )
    assert prices.TITAN_V2_BATCH_INPUT_TOKEN.usd == pytest.approx(prices.TITAN_V2_INPUT_TOKEN.usd / 2)
    assert table.total_per_thousand_pages < 0.02
