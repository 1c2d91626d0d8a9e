"""The local embedding server: Bedrock Runtime's InvokeModel wire format, batching across callers,
throttling. In-process on a loopback port, with a stand-in model (vectors from word counts) so the
tests need no ONNX run; tests/integration/test_embedding_server_boto3.py serves the real MiniLM."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from rag_ingest.core.errors import ErrorCode, PermanentError, TransientError
from rag_ingest.embeddings.base import LOCAL_MODEL_ID
from rag_ingest.embeddings.bedrock import TITAN_V2_MODEL_ID, BedrockTitanEmbedder

from local.embedding_server.batcher import Lane
from local.embedding_server.server import EmbeddingServer, ServedModel, lane_endpoint
from local.embedding_server.settings import EmbeddingServerSettings

pytestmark = pytest.mark.unit

DIMENSION = 384
MAX_TOKENS = 10


class StandInModel:
    """Records every batch it embeds; a text's vector is [words, 0, 0, ...]."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.batches.append(list(texts))
        return [[float(len(text.split()))] + [0.0] * (DIMENSION - 1) for text in texts]

    def served(self) -> ServedModel:
        return ServedModel(
            model_id=LOCAL_MODEL_ID,
            dimension=DIMENSION,
            max_input_tokens=MAX_TOKENS,
            count_tokens=lambda text: len(text.split()),
            embed=self.embed,
        )


ServerFactory = Callable[..., tuple[EmbeddingServer, StandInModel]]


@pytest.fixture
def make_server() -> Iterator[ServerFactory]:
    servers: list[EmbeddingServer] = []

    def make(**settings: Any) -> tuple[EmbeddingServer, StandInModel]:
        model = StandInModel()
        server = EmbeddingServer(model.served(), EmbeddingServerSettings(**settings))
        server.start()
        servers.append(server)
        return server, model

    yield make
    for server in servers:
        server.batcher.resume()
        server.stop()


def bedrock_client(server: EmbeddingServer, *, attempts: int = 1, lane: Lane | None = None) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=server.url if lane is None else lane_endpoint(server.url, lane),
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": attempts}, max_pool_connections=16),
    )


def post(server: EmbeddingServer, path: str, body: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    request = urllib.request.Request(server.url + path, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def invoke_path(model_id: str = LOCAL_MODEL_ID) -> str:
    return "/model/" + urllib.request.quote(model_id, safe="") + "/invoke"


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


def test_invoke_model_answers_in_titan_v2_shape(make_server: ServerFactory) -> None:
    server, _ = make_server()
    body = json.dumps({"inputText": "three little words", "dimensions": DIMENSION, "normalize": True}).encode()

    status, headers, payload = post(server, invoke_path(), body)

    assert status == 200
    assert set(payload) == {"embedding", "inputTextTokenCount"}
    assert payload["embedding"] == [3.0] + [0.0] * (DIMENSION - 1)
    assert payload["inputTextTokenCount"] == 3
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Amzn-Bedrock-Input-Token-Count"] == "3"
    assert headers["x-amzn-RequestId"]


def test_the_bedrock_embedder_calls_it_through_boto3(make_server: ServerFactory) -> None:
    server, _ = make_server()
    embedder = BedrockTitanEmbedder(bedrock_client(server), model_id=LOCAL_MODEL_ID, dimension=DIMENSION)

    vectors = embedder.embed(["one", "one two", "one two three"])

    assert [vector[0] for vector in vectors] == [1.0, 2.0, 3.0]
    assert all(len(vector) == DIMENSION for vector in vectors)


def test_concurrent_requests_share_one_model_run(make_server: ServerFactory) -> None:
    server, model = make_server(max_batch=32, max_wait_ms=5)
    embedder = BedrockTitanEmbedder(
        bedrock_client(server), model_id=LOCAL_MODEL_ID, dimension=DIMENSION, max_concurrency=8
    )
    texts = [" ".join(["word"] * (index + 1)) for index in range(8)]
    server.batcher.pause()  # requests pile up until all 8 are queued
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(embedder.embed, texts)
        # The batcher thread holds the first text; the other seven wait in the queue.
        wait_until(lambda: server.batcher.queued() == 7)
        server.batcher.resume()
        vectors = result.result(timeout=10)

    assert [vector[0] for vector in vectors] == [float(index + 1) for index in range(8)]
    assert len(model.batches) == 1 and sorted(model.batches[0]) == sorted(texts)
    stats = server.stats()["batcher"]
    assert (stats["batches"], stats["texts"], stats["largest_batch"]) == (1, 8, 8)


def test_a_batch_holds_at_most_max_batch_texts(make_server: ServerFactory) -> None:
    server, model = make_server(max_batch=4, max_wait_ms=5)
    embedder = BedrockTitanEmbedder(
        bedrock_client(server), model_id=LOCAL_MODEL_ID, dimension=DIMENSION, max_concurrency=10
    )
    server.batcher.pause()
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(embedder.embed, [f"text {index}" for index in range(10)])
        wait_until(lambda: server.batcher.queued() == 9)
        server.batcher.resume()
        assert len(result.result(timeout=10)) == 10

    assert [len(batch) for batch in model.batches] == [4, 4, 2]


def test_above_the_in_flight_quota_it_answers_throttling_exception(make_server: ServerFactory) -> None:
    server, _ = make_server(max_in_flight=2)
    body = json.dumps({"inputText": "held"}).encode()
    server.batcher.pause()
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(post, server, invoke_path(), body) for _ in range(2)]
        wait_until(lambda: server.in_flight() == 2)

        status, headers, payload = post(server, invoke_path(), body)
        assert status == 429
        assert headers["x-amzn-ErrorType"].split(":", 1)[0] == "ThrottlingException"
        assert payload["message"]

        # Through boto3 and the embedder (no SDK retry): Bedrock's throttling is a TransientError.
        embedder = BedrockTitanEmbedder(bedrock_client(server), model_id=LOCAL_MODEL_ID, dimension=DIMENSION)
        with pytest.raises(TransientError, match="ThrottlingException"):
            embedder.embed(["throttled"])

        server.batcher.resume()
        assert [future.result(timeout=10)[0] for future in held] == [200, 200]
    assert server.stats()["throttled"] == 2


def test_a_throttled_call_succeeds_on_the_sdk_retry(make_server: ServerFactory) -> None:
    # The functions' boto3 config retries throttling (standard mode) before the Embed task fails.
    server, _ = make_server(max_in_flight=1)
    server.batcher.pause()
    with ThreadPoolExecutor(2) as pool:
        held = pool.submit(post, server, invoke_path(), json.dumps({"inputText": "held"}).encode())
        wait_until(lambda: server.in_flight() == 1)
        embedder = BedrockTitanEmbedder(
            bedrock_client(server, attempts=10), model_id=LOCAL_MODEL_ID, dimension=DIMENSION
        )
        retried = pool.submit(embedder.embed, ["two words"])
        wait_until(lambda: server.stats()["throttled"] >= 1)
        server.batcher.resume()  # the held request completes and frees the quota

        assert retried.result(timeout=60)[0][0] == 2.0
        assert held.result(timeout=10)[0] == 200


def test_a_request_left_waiting_past_the_queue_timeout_is_not_embedded(make_server: ServerFactory) -> None:
    # On an overloaded machine the server answers ModelTimeoutException before the client's read
    # timeout, and spends no model run on it; the embedder makes it a TransientError (retried).
    server, model = make_server(queue_timeout_seconds=0.05)
    server.batcher.pause()
    embedder = BedrockTitanEmbedder(bedrock_client(server), model_id=LOCAL_MODEL_ID, dimension=DIMENSION)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(embedder.embed, ["too late"])
        wait_until(lambda: server.in_flight() == 1)
        time.sleep(0.1)  # past the 0.05 s deadline
        server.batcher.resume()
        with pytest.raises(TransientError, match="ModelTimeoutException"):
            waiting.result(timeout=10)

    assert model.batches == []
    assert server.stats()["batcher"]["expired"] == 1
    assert embedder.embed(["in time"])[0][0] == 2.0


def test_an_unknown_model_id_is_resource_not_found(make_server: ServerFactory) -> None:
    server, model = make_server()
    client = bedrock_client(server)
    with pytest.raises(ClientError) as caught:
        client.invoke_model(modelId=TITAN_V2_MODEL_ID, body=json.dumps({"inputText": "hello"}))
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert model.batches == []


def test_oversize_input_is_a_validation_exception(make_server: ServerFactory) -> None:
    server, model = make_server()
    too_long = " ".join(["word"] * (MAX_TOKENS + 1))
    with pytest.raises(ClientError) as caught:
        bedrock_client(server).invoke_model(modelId=LOCAL_MODEL_ID, body=json.dumps({"inputText": too_long}))
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "Too many input tokens" in caught.value.response["Error"]["Message"]

    # The embedder's own guard passed (a counter that undercounts): the server's refusal is permanent.
    embedder = BedrockTitanEmbedder(
        bedrock_client(server), model_id=LOCAL_MODEL_ID, dimension=DIMENSION, count_tokens=lambda text: 1
    )
    with pytest.raises(PermanentError) as refused:
        embedder.embed([too_long])
    assert refused.value.code is ErrorCode.INPUT_TOO_LONG
    assert model.batches == []


@pytest.mark.parametrize(
    "request_body",
    [
        b"not json",
        b"[]",
        json.dumps({"dimensions": DIMENSION}).encode(),
        json.dumps({"inputText": ""}).encode(),
        json.dumps({"inputText": "x" * 50_001}).encode(),
        json.dumps({"inputText": "hello", "dimensions": 1024}).encode(),
        json.dumps({"inputText": "hello", "normalize": "yes"}).encode(),
        json.dumps({"inputText": "hello", "embeddingTypes": ["binary"], "extra": 1}).encode(),
    ],
)
def test_malformed_requests_are_validation_exceptions(make_server: ServerFactory, request_body: bytes) -> None:
    server, model = make_server()
    status, headers, payload = post(server, invoke_path(), request_body)
    assert status == 400
    assert headers["x-amzn-ErrorType"].startswith("ValidationException")
    assert payload["message"]
    assert model.batches == []


def test_stats_and_ping(make_server: ServerFactory) -> None:
    server, _ = make_server(max_batch=7, max_wait_ms=2, intra_op_threads=1, max_in_flight=9)
    with urllib.request.urlopen(server.url + "/ping", timeout=5) as response:
        assert json.loads(response.read()) == {"status": "healthy"}
    post(server, invoke_path(), json.dumps({"inputText": "one"}).encode())
    with urllib.request.urlopen(server.url + "/_local/stats", timeout=5) as response:
        stats = json.loads(response.read())
    assert stats["settings"] == {
        "intra_op_threads": 1,
        "max_batch": 7,
        "max_wait_ms": 2,
        "max_in_flight": 9,
        "queue_timeout_seconds": 20.0,
    }
    assert (stats["requests"], stats["throttled"], stats["in_flight"]) == (1, 0, 0)
    assert stats["batcher"]["texts"] == 1


def test_settings_from_the_environment() -> None:
    settings = EmbeddingServerSettings.from_env(
        {
            "LOCAL_EMBEDDING_THREADS": "1",
            "LOCAL_EMBEDDING_MAX_BATCH": "8",
            "LOCAL_EMBEDDING_MAX_WAIT_MS": "2.5",
            "LOCAL_EMBEDDING_MAX_IN_FLIGHT": "0",
            "LOCAL_EMBEDDING_QUEUE_TIMEOUT": "3",
        }
    )
    assert settings == EmbeddingServerSettings(
        intra_op_threads=1, max_batch=8, max_wait_ms=2.5, max_in_flight=0, queue_timeout_seconds=3.0
    )
    assert EmbeddingServerSettings.from_env({}) == EmbeddingServerSettings()
    with pytest.raises(ValueError, match="LOCAL_EMBEDDING_MAX_BATCH"):
        EmbeddingServerSettings.from_env({"LOCAL_EMBEDDING_MAX_BATCH": "0"})


# -- lanes -------------------------------------------------------------------------------------------
def test_the_bulk_lane_fills_what_the_standard_lane_leaves_and_always_gets_one_slot(
    make_server: ServerFactory,
) -> None:
    server, model = make_server(max_batch=8, max_wait_ms=200)
    batcher = server.batcher
    batcher.pause()
    futures = [batcher.submit("s0")]  # the batcher thread holds it while paused
    wait_until(lambda: batcher.queued() == 0)
    futures += [batcher.submit(f"b{i}", lane=Lane.BULK) for i in range(1, 6)]
    futures += [batcher.submit(f"s{i}") for i in range(1, 11)]
    assert (batcher.queued(Lane.BULK), batcher.queued(Lane.STANDARD)) == (5, 10)
    batcher.resume()
    for future in futures:
        future.result(timeout=10)
    # Standard texts first, one slot for the waiting bulk lane; the next batch takes the rest.
    assert model.batches == [
        ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "b1"],
        ["s7", "s8", "s9", "s10", "b2", "b3", "b4", "b5"],
    ]


def test_queries_run_first_in_batches_of_their_own(make_server: ServerFactory) -> None:
    server, model = make_server(max_batch=8, max_wait_ms=200)
    batcher = server.batcher
    batcher.pause()
    futures = [batcher.submit("q0", lane=Lane.QUERY)]  # the batcher thread holds it while paused
    wait_until(lambda: batcher.queued() == 0)
    futures += [batcher.submit("s1"), batcher.submit("b1", lane=Lane.BULK), batcher.submit("s2")]
    futures += [batcher.submit("q1", lane=Lane.QUERY)]
    batcher.resume()
    for future in futures:
        future.result(timeout=10)
    # The queries, then a batch of passages: a short query is never padded to a passage's length.
    assert model.batches == [["q0", "q1"], ["s1", "s2", "b1"]]


def test_a_query_does_not_wait_for_the_batching_window(make_server: ServerFactory) -> None:
    server, model = make_server(max_batch=8, max_wait_ms=30_000)
    query = server.batcher.submit("alone", lane=Lane.QUERY)
    assert query.result(timeout=10) == [1.0] + [0.0] * (DIMENSION - 1)
    # A passage opens a 30 s window; a query arriving in it ends the window at once.
    passage = server.batcher.submit("one passage")
    wait_until(lambda: server.batcher.queued() == 0)
    second = server.batcher.submit("second query", lane=Lane.QUERY)
    assert passage.result(timeout=10)[0] == 2.0 and second.result(timeout=10)[0] == 2.0
    assert model.batches == [["alone"], ["one passage"], ["second query"]]


def test_query_batches_go_to_the_query_embed_function_and_passages_to_the_other() -> None:
    passages, queries = StandInModel(), StandInModel()
    served = dataclasses.replace(passages.served(), embed_queries=queries.embed)
    server = EmbeddingServer(served, EmbeddingServerSettings(max_wait_ms=0))
    server.start()
    try:
        passage_embedder = BedrockTitanEmbedder(bedrock_client(server), model_id=LOCAL_MODEL_ID, dimension=DIMENSION)
        passage_embedder.embed(["a passage to index"])
        query_client = bedrock_client(server, lane=Lane.QUERY)
        query_embedder = BedrockTitanEmbedder(query_client, model_id=LOCAL_MODEL_ID, dimension=DIMENSION)
        [vector] = query_embedder.embed(["what is indexed"])
    finally:
        server.stop()
    assert vector[0] == 3.0
    assert passages.batches == [["a passage to index"]]
    assert queries.batches == [["what is indexed"]]


def test_the_bulk_lane_is_bedrocks_route_under_lanes_bulk_through_boto3(make_server: ServerFactory) -> None:
    server, _ = make_server()
    bulk = BedrockTitanEmbedder(
        boto3.client(
            "bedrock-runtime",
            endpoint_url=f"{server.url}/lanes/bulk",  # as the local runtime sets it for the bulk lane's workers
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ),
        model_id=LOCAL_MODEL_ID,
        dimension=DIMENSION,
    )
    assert [vector[0] for vector in bulk.embed(["one two", "three"])] == [2.0, 1.0]
    BedrockTitanEmbedder(bedrock_client(server), model_id=LOCAL_MODEL_ID, dimension=DIMENSION).embed(["x"])
    assert server.stats()["requests_by_lane"] == {"query": 0, "standard": 1, "bulk": 2}
    status, _, body = post(server, "/lanes/express" + invoke_path(), b"{}")
    assert status == 404 and "no operation" in body["message"]
