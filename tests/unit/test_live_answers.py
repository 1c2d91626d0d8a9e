"""Answers over the live channel (rag_ingest.live.answers): the asker is the connection's recorded
principal, the events go back to that connection with the client's request id, and every refusal
is an ``answer.failed`` event with a code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from rag_ingest.answers.extractive import ExtractiveAnswerModel
from rag_ingest.answers.ports import Generation
from rag_ingest.answers.service import AnswerService, AnswerSettings
from rag_ingest.core.errors import TransientError
from rag_ingest.live.answers import LiveAnswers
from rag_ingest.live.connections import Connection, ConnectionGoneError, PostThrottledError
from rag_ingest.retrieval.rerank import LexicalStandInReranker
from rag_ingest.retrieval.search import RerankSettings, SearchService

from tests.support.fakes import CountingEmbedder, MemoryConnections
from tests.unit.test_answers import Store

pytestmark = pytest.mark.unit

TEXTS = ["Invoices are kept for seven years. Then they are shredded.", "The cafeteria opens at eight."]


class Posts:
    """A poster that records what each connection was sent; ``throttle`` posts are refused first."""

    def __init__(self, throttle: int = 0, gone_after: int | None = None) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.throttle = throttle
        self.gone_after = gone_after

    def post(self, connection_id: str, data: bytes) -> None:
        if self.throttle:
            self.throttle -= 1
            raise PostThrottledError(connection_id)
        if self.gone_after is not None and len(self.sent) >= self.gone_after:
            raise ConnectionGoneError(connection_id)
        self.sent.append((connection_id, json.loads(data)))

    def events(self) -> list[dict[str, Any]]:
        return [event for _, event in self.sent]


class FailingModel(ExtractiveAnswerModel):
    def stream(self, system: str, message: str, *, max_tokens: int) -> Iterator[str | Generation]:
        yield "Invoices "
        raise TransientError("ConverseStream: throttlingException")


def live(posts: Posts, model: ExtractiveAnswerModel | None = None) -> LiveAnswers:
    store = Store(TEXTS)
    search = SearchService(
        store=lambda: store,  # type: ignore[arg-type, return-value]
        embedder=CountingEmbedder,
        reranker=LexicalStandInReranker,
        rerank=RerankSettings(default=False, candidates=10),
    )
    model = model or ExtractiveAnswerModel("amazon.nova-lite-v1:0")
    answers = AnswerService(search, lambda: model, AnswerSettings(model_id=model.model_id))
    connections = MemoryConnections()
    connections.put(Connection("c1", "acme", "user-1", 0, 7200, ("readers",)))
    return LiveAnswers(answers, connections, posts, sleep=lambda _: None)


def ask(query: str = "How long are invoices kept?", **fields: Any) -> str:
    return json.dumps({"action": "answer", "request_id": "r-1", "request": {"query": query, **fields}})


def test_the_answer_streams_to_the_asking_connection_with_its_request_id() -> None:
    posts = Posts()
    assert live(posts).handle("c1", ask()) == "answered"

    events = posts.events()
    assert {connection for connection, _ in posts.sent} == {"c1"}
    assert {event["request_id"] for event in events} == {"r-1"}
    types = [event["type"] for event in events]
    assert types[0] == "answer.passages" and types[-1] == "answer.completed"
    assert set(types[1:-1]) == {"answer.delta"} and len(types) > 3
    completed = events[-1]["answer"]
    assert "".join(event["text"] for event in events[1:-1]) == completed["answer"]
    assert completed["supported"] and completed["citations"][0]["passage"]["document_id"] == "d0"


def test_a_message_that_is_no_answer_request_fails_with_its_problems() -> None:
    posts = Posts()
    assert live(posts).handle("c1", ask(query="", k=99)) == "INVALID_REQUEST"
    [event] = posts.events()
    assert event["type"] == "answer.failed" and event["request_id"] == "r-1"
    assert event["error"]["code"] == "INVALID_REQUEST" and "request.k" in event["error"]["message"]
    assert live(posts).handle("c1", "not json") == "INVALID_REQUEST"
    assert posts.events()[-1]["request_id"] is None


def test_an_unrecorded_connection_gets_no_answer() -> None:
    posts = Posts()
    assert live(posts).handle("c-unknown", ask()) == "UNKNOWN_CONNECTION"
    assert [event["error"]["code"] for event in posts.events()] == ["UNKNOWN_CONNECTION"]
    assert not any(event["type"] == "answer.delta" for event in posts.events())


def test_a_model_failing_mid_stream_ends_the_answer_with_a_retryable_code() -> None:
    posts = Posts()
    assert live(posts, FailingModel("m")).handle("c1", ask()) == "SERVICE_UNAVAILABLE"
    assert [event["type"] for event in posts.events()] == ["answer.passages", "answer.delta", "answer.failed"]


def test_throttled_posts_are_retried_and_a_gone_connection_ends_the_answer_quietly() -> None:
    throttled = Posts(throttle=2)
    assert live(throttled).handle("c1", ask()) == "answered"
    assert throttled.events()[-1]["type"] == "answer.completed"
    gone = Posts(gone_after=2)
    assert live(gone).handle("c1", ask()) == "gone"
    assert len(gone.sent) == 2
