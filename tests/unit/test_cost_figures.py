"""make cost's figures table: Textract per figure read, the vision model's tokens by its rule."""

from __future__ import annotations

import pytest

from bench.cost import prices
from bench.cost.figures import ASSUMED_DESCRIPTION_TOKENS, ASSUMED_IMAGE_TOKENS, figure_cost_lines, render_figures
from infra.config import parse_config

pytestmark = pytest.mark.unit


def test_off_textract_is_charged_and_the_vision_model_is_priced_but_not_counted() -> None:
    config = parse_config({})
    [textract, vision] = figure_cost_lines(config)

    assert textract == ("Textract DetectDocumentText", pytest.approx(1.50), "one call per figure read")
    assert vision[0] == "Converse, amazon.nova-lite-v1:0 (off: the price of turning it on)"
    tokens_in = vision[2].split(" image tokens")[0]
    assert int(tokens_in) == ASSUMED_IMAGE_TOKENS
    expected = 1000 * (ASSUMED_DESCRIPTION_TOKENS * prices.NOVA_LITE_OUTPUT_TOKEN.usd)
    assert vision[1] > expected  # the input tokens add to the output's
    assert "**total as configured** | **$1.500**" in "\n".join(render_figures(config))


def test_on_through_an_inference_profile_the_model_is_counted() -> None:
    config = parse_config({"figures": {"vision": {"enabled": True, "modelId": "eu.amazon.nova-lite-v1:0"}}})
    [textract, vision] = figure_cost_lines(config)

    assert "(on)" in vision[0] and vision[1] > 0
    assert f"**${textract[1] + vision[1]:.3f}**" in "\n".join(render_figures(config))


def test_a_model_without_a_recorded_price_says_so() -> None:
    config = parse_config({"figures": {"vision": {"modelId": "anthropic.claude-3-haiku-20240307-v1:0"}}})

    assert figure_cost_lines(config)[1][1:] == (0.0, "price not recorded in bench/cost/prices.py: add it")
