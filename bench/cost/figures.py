"""The AWS cost of 1,000 figures read in PDFs, from cdk.json: Textract reading each figure (one
DetectDocumentText call a figure), and, when figures.vision is on (or to price turning it on), the
vision model's tokens; docs/cost.md, "Figures".

Image tokens follow the model's documented rule: Amazon Nova rescales an image to the nearest of
its aspect ratios and bills about 1,300 tokens for a 900 x 900 image, ~800 for 900 x 450, ~1,800
for 1,400 x 900 (https://docs.aws.amazon.com/nova/latest/userguide/modalities-image.html). The
figure size is an assumption, stated in the table (no model runs here).
"""

from __future__ import annotations

from rag_ingest.adapters.vision import MAX_DESCRIPTION_TOKENS
from rag_ingest.core.settings import INFERENCE_PROFILE_PREFIXES
from rag_ingest.core.tokens import count_tokens

from bench.cost import prices
from bench.cost.answers import MODEL_PRICES
from infra.config import RagIngestConfig

#: A figure as rendered for reading (200 dpi): about 900 x 900 pixels, the rule's middle row.
ASSUMED_IMAGE_TOKENS = 1300
ASSUMED_IMAGE_SIZE = "900 x 900 px"
ASSUMED_DESCRIPTION_TOKENS = 150
ASSUMED_CAPTION = "Figure 3: Monthly throughput of the ingest pipeline, 2024"


def figure_cost_lines(config: RagIngestConfig) -> list[tuple[str, float, str]]:
    """(item, USD per 1,000 figures read, how): Textract always (it reads every figure read in AWS),
    the vision model's tokens with the switch's state said."""
    lines: list[tuple[str, float, str]] = [
        ("Textract DetectDocumentText", 1000 * prices.TEXTRACT_DETECT_TEXT_PAGE.usd, "one call per figure read")
    ]
    vision = config.figures.vision
    prefix, _, rest = vision.model_id.partition(".")
    model = rest if prefix in INFERENCE_PROFILE_PREFIXES else vision.model_id
    state = "on" if vision.enabled else "off: the price of turning it on"
    if model not in MODEL_PRICES:
        lines.append((f"Converse, {model} ({state})", 0.0, "price not recorded in bench/cost/prices.py: add it"))
        return lines
    price_in, price_out = MODEL_PRICES[model]
    prompt = count_tokens(f"{vision.prompt}\n\nThe figure's caption: {ASSUMED_CAPTION}")
    tokens_out = min(ASSUMED_DESCRIPTION_TOKENS, MAX_DESCRIPTION_TOKENS)
    tokens_in = ASSUMED_IMAGE_TOKENS + prompt
    lines.append(
        (f"Converse, {model} ({state})", 1000 * (tokens_in * price_in.usd + tokens_out * price_out.usd),
         f"{ASSUMED_IMAGE_TOKENS} image tokens ({ASSUMED_IMAGE_SIZE}, the model's rule) + {prompt} prompt tokens, "
         f"{tokens_out} output tokens (assumed; at most {MAX_DESCRIPTION_TOKENS})")
    )  # fmt: skip
    return lines


def render_figures(config: RagIngestConfig) -> list[str]:
    lines = figure_cost_lines(config)
    out = [
        f"Figures (cdk.json `figures`: up to {config.figures.max_read} read per document; vision "
        f"{'on' if config.figures.vision.enabled else 'off'}), per 1,000 figures read:",
        "",
        "| item | USD per 1,000 figures | how |",
        "|---|---|---|",
    ]
    out.extend(f"| {item} | ${usd:.3f} | {how} |" for item, usd, how in lines)
    charged = [usd for item, usd, _ in lines if "(off" not in item]
    out.append(f"| **total as configured** | **${sum(charged):.3f}** | |")
    return out
