"""The AWS cost of 1,000 answers (``POST /answer``) from cdk.json: the Converse model's tokens, the
rerank query, the API function's time and the HTTP API request; docs/answers.md, "Cost".

Token counts are the prompt as rag_ingest.answers.prompt writes it for ``k`` passages of the
configured chunk size (counted with the project's tokenizer, an estimate of the model's); the
answer's length and the model's latency are assumptions, stated in the table (no model runs here).
"""

from __future__ import annotations

from rag_ingest.answers.prompt import PromptPassage, answer_prompt
from rag_ingest.core.settings import INFERENCE_PROFILE_PREFIXES
from rag_ingest.core.tokens import count_tokens

from bench.cost import prices
from infra.config import RagIngestConfig

ANSWER_PASSAGES = 5
#: Tokens of the 5 passages a search returns with expand "section" (the default), the mean over the
#: eval's test split (docs/retrieval.md, "Small-to-big"); "none" returns 5 chunks of chunkTokens.
MEASURED_SECTION_TOKENS_PER_QUERY = 2795
ASSUMED_OUTPUT_TOKENS = 150
ASSUMED_CONVERSE_SECONDS = 2.0
QUESTION = "How long are signed contracts kept after they end, and who may read them?"
HTTP_API_REQUEST = prices.Price(1.00 / 1_000_000, "request, HTTP API (first 300 million a month)", prices.API_GATEWAY)
#: Model id (without a cross-Region profile's prefix) -> input and output token prices.
MODEL_PRICES = {"amazon.nova-lite-v1:0": (prices.NOVA_LITE_INPUT_TOKEN, prices.NOVA_LITE_OUTPUT_TOKEN)}


def prompt_tokens(passage_tokens: int, passages: int = ANSWER_PASSAGES) -> int:
    """The tokens of a prompt of ``passages`` passages of ``passage_tokens`` each (words as filler)."""
    filler = " ".join(["retention"] * passage_tokens)
    system, message = answer_prompt(
        QUESTION, [PromptPassage(n, f"contracts-{n}.pdf, page {n}", filler) for n in range(1, passages + 1)]
    )
    return count_tokens(system) + count_tokens(message)


def answer_cost_lines(config: RagIngestConfig) -> list[tuple[str, float, str]]:
    """(item, USD per 1,000 answers, how) for the configured answer model, or a line saying its
    price is not recorded."""
    answer = config.search.answer
    prefix, _, rest = answer.model_id.partition(".")
    model = rest if prefix in INFERENCE_PROFILE_PREFIXES else answer.model_id
    passage_tokens = MEASURED_SECTION_TOKENS_PER_QUERY // ANSWER_PASSAGES
    tokens_in = prompt_tokens(passage_tokens)
    tokens_out = min(ASSUMED_OUTPUT_TOKENS, answer.max_tokens)
    lines: list[tuple[str, float, str]] = []
    if model in MODEL_PRICES:
        price_in, price_out = MODEL_PRICES[model]
        lines.append(
            (f"Converse, {model}", 1000 * (tokens_in * price_in.usd + tokens_out * price_out.usd),
             f"{tokens_in} input tokens ({ANSWER_PASSAGES} sections of {passage_tokens}, measured mean), "
             f"{tokens_out} output tokens (assumed)")
        )  # fmt: skip
    else:
        lines.append((f"Converse, {model}", 0.0, "price not recorded in bench/cost/prices.py: add it"))
    if answer.rerank:
        lines.append(("Rerank", 1000 * prices.RERANK_QUERY.usd, "one query of up to 100 passages per answer"))
    memory_gb = config.functions.api.memory_mb / 1024
    lambda_usd = ASSUMED_CONVERSE_SECONDS * memory_gb * prices.LAMBDA_GB_SECOND[config.functions.architecture].usd
    lines.append(
        ("Lambda (API function)", 1000 * (lambda_usd + prices.LAMBDA_REQUEST.usd),
         f"{ASSUMED_CONVERSE_SECONDS:.1f} s at {config.functions.api.memory_mb} MB (assumed: the model's latency)")
    )  # fmt: skip
    lines.append(("API Gateway", 1000 * HTTP_API_REQUEST.usd, "one HTTP API request"))
    return lines


def render_answers(config: RagIngestConfig) -> list[str]:
    lines = answer_cost_lines(config)
    out = [f"Answers (`POST /answer`, cdk.json `search.answer`), per 1,000 answers of k = {ANSWER_PASSAGES}:", ""]
    out.append("| item | USD per 1,000 answers | how |")
    out.append("|---|---|---|")
    out.extend(f"| {item} | ${usd:.3f} | {how} |" for item, usd, how in lines)
    out.append(f"| **total** | **${sum(usd for _, usd, _ in lines):.3f}** | |")
    return out
