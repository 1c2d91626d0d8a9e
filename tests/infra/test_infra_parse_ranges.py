"""Parse's fan-out over page ranges in the synthesized workflow, and the page limits in the config."""

from __future__ import annotations

from typing import Any

import pytest

from infra.config import MAX_PARSE_RANGES, ConfigError, parse_config
from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra


@pytest.fixture(scope="module")
def definition(synth: SynthResult) -> dict[str, Any]:
    return synth.state_machine_definition()


def test_parse_ranges_is_a_map_over_the_planned_ranges_with_bounded_concurrency(
    synth: SynthResult, definition: dict[str, Any]
) -> None:
    parse_map = definition["States"]["ParseRanges"]
    assert parse_map["Type"] == "Map"
    assert parse_map["ItemsPath"] == "$.parse_tasks"
    assert parse_map["ItemSelector"] == {"job.$": "$", "range.$": "$$.Map.Item.Value"}
    assert parse_map["MaxConcurrency"] == synth.config.parsing.max_concurrency == 10
    # Nothing the iterations return is kept: the state holds pointers, never page text.
    assert parse_map["ResultPath"] is None
    processor = parse_map["ItemProcessor"]
    assert list(processor["States"]) == ["ParseRangeTask"]
    task = processor["States"]["ParseRangeTask"]
    assert task["End"] is True
    # The same Parse function (its memory bounded by the range size) runs every range.
    assert task["Resource"] == f"${{{synth.logical_id('Workflow/ParseFunction')}.Arn}}"


def test_parse_runs_the_first_range_before_the_map_and_chunk_after_it(definition: dict[str, Any]) -> None:
    states = definition["States"]
    # Parse's first task, then the Lane choice, then the lane's Map over the other ranges (if any).
    assert states["Parse"]["Next"] == "Lane"
    assert (states["ParseRanges"]["Next"], states["ParseRangesBulk"]["Next"]) == ("Chunk", "ChunkBulk")


def test_the_stages_get_the_range_size_and_the_page_limit(synth: SynthResult) -> None:
    env = synth.resource("Workflow/ParseFunction")["Properties"]["Environment"]["Variables"]
    assert env["PARSE_RANGE_PAGES"] == str(synth.config.parsing.range_pages) == "50"
    assert env["MAX_PAGES"] == str(synth.config.limits.max_pages) == "5000"


def test_the_default_page_limit_is_five_thousand_pages_in_a_hundred_ranges() -> None:
    config = parse_config({})
    assert config.limits.max_pages == 5000 and config.parsing.range_pages == 50
    assert -(-config.limits.max_pages // config.parsing.range_pages) == 100 <= MAX_PARSE_RANGES


def test_more_page_ranges_than_one_execution_history_holds_is_refused_at_synth() -> None:
    parse_config({"limits": {"maxPages": MAX_PARSE_RANGES * 10}, "parsing": {"rangePages": 10}})
    with pytest.raises(ConfigError, match="page ranges"):
        parse_config({"limits": {"maxPages": MAX_PARSE_RANGES * 10 + 1}, "parsing": {"rangePages": 10}})
    with pytest.raises(ConfigError, match="rangePages"):
        parse_config({"parsing": {"rangePages": 0}})
    with pytest.raises(ConfigError, match="maxConcurrency"):
        parse_config({"parsing": {"maxConcurrency": 0}})
