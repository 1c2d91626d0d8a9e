"""The local model server's Converse route (its own process, as the local stack runs it), called
through the real boto3 bedrock-runtime client and BedrockConverse, as POST /answer does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from rag_ingest.adapters.converse import BedrockConverse
from rag_ingest.answers.extractive import extractive_answer
from rag_ingest.answers.ports import Generation
from rag_ingest.answers.prompt import PromptPassage, answer_prompt

from local.embedding_server.process import EmbeddingServerProcess
from tests.support.model_server import client_of, running_model_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddingServerProcess]:
    with running_model_server() as process:
        yield process


def runtime(endpoint: str) -> Any:
    return client_of("bedrock-runtime", endpoint)


def test_converse_through_the_server_answers_as_the_stand_in_and_says_so(server: EmbeddingServerProcess) -> None:
    system, message = answer_prompt(
        "How long are invoices kept?",
        [
            PromptPassage(1, "a.pdf, page 1", "The cafeteria opens at eight."),
            PromptPassage(2, "b.pdf, page 4", "Invoices are kept for seven years. Then they are shredded."),
        ],
    )
    generation = BedrockConverse("amazon.nova-lite-v1:0", runtime(server.url)).generate(system, message, max_tokens=64)

    assert generation.text == extractive_answer(message) == "Invoices are kept for seven years. [2]"
    assert generation.stand_in == "extractive-stand-in"
    assert generation.model_id == "amazon.nova-lite-v1:0" and generation.stop_reason == "end_turn"
    assert generation.input_tokens > generation.output_tokens > 0


def test_an_answer_over_its_token_cap_stops_there(server: EmbeddingServerProcess) -> None:
    _, message = answer_prompt("invoices", [PromptPassage(1, "b.pdf", "Invoices are kept for seven long years.")])
    generation = BedrockConverse("eu.amazon.nova-lite-v1:0", runtime(server.url)).generate("s", message, max_tokens=3)
    assert (generation.text, generation.stop_reason) == ("Invoices are kept", "max_tokens")


def test_a_request_without_a_user_message_is_bedrocks_validation_error(server: EmbeddingServerProcess) -> None:
    with pytest.raises(ClientError) as raised:
        runtime(server.url).converse(
            modelId="amazon.nova-lite-v1:0", messages=[{"role": "assistant", "content": [{"text": "hi"}]}]
        )
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert "user" in raised.value.response["Error"]["Message"]


def test_converse_stream_through_boto3_sends_the_same_answer_in_pieces(server: EmbeddingServerProcess) -> None:
    system, message = answer_prompt(
        "How long are invoices kept?",
        [
            PromptPassage(1, "a.pdf, page 1", "The cafeteria opens at eight."),
            PromptPassage(2, "b.pdf, page 4", "Invoices are kept for seven years. Then they are shredded."),
        ],
    )
    converse = BedrockConverse("amazon.nova-lite-v1:0", runtime(server.url))
    *deltas, generation = list(converse.stream(system, message, max_tokens=64))

    assert len(deltas) > 1 and all(isinstance(delta, str) and delta for delta in deltas)
    assert isinstance(generation, Generation)
    assert (
        "".join(str(delta) for delta in deltas)
        == generation.text
        == converse.generate(system, message, max_tokens=64).text
    )
    assert (generation.stand_in, generation.stop_reason) == ("extractive-stand-in", "end_turn")
    assert generation.input_tokens > generation.output_tokens > 0


def test_converse_stream_refuses_a_bad_request_before_streaming(server: EmbeddingServerProcess) -> None:
    with pytest.raises(ClientError) as raised:
        runtime(server.url).converse_stream(
            modelId="amazon.nova-lite-v1:0", messages=[{"role": "assistant", "content": [{"text": "hi"}]}]
        )
    assert raised.value.response["Error"]["Code"] == "ValidationException"
