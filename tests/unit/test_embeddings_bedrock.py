"""BedrockTitanEmbedder against a real bedrock-runtime client, stubbed with botocore's Stubber."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from rag_ingest.core.errors import ErrorCode, PermanentError, TransientError
from rag_ingest.embeddings.bedrock import TITAN_V2_MODEL_ID, BedrockTitanEmbedder
from rag_ingest.embeddings.factory import create_embedder

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPECTED_PARAMS = {
    "modelId": TITAN_V2_MODEL_ID,
    "body": ANY,
    "contentType": "application/json",
    "accept": "application/json",
}


@pytest.fixture
def client() -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def stubber(client: Any) -> Iterator[Stubber]:
    with Stubber(client) as active:
        yield active
        active.assert_no_pending_responses()


@pytest.fixture
def sent_bodies(client: Any) -> list[dict[str, Any]]:
    """The decoded request bodies, captured before the Stubber answers."""
    bodies: list[dict[str, Any]] = []

    def capture(params: dict[str, Any], **_: Any) -> None:
        bodies.append(json.loads(params["body"]))

    client.meta.events.register("provide-client-params.bedrock-runtime.InvokeModel", capture)
    return bodies


def titan_response(embedding: list[float]) -> dict[str, Any]:
    payload = json.dumps({"embedding": embedding, "inputTextTokenCount": 5}).encode()
    return {"body": StreamingBody(io.BytesIO(payload), len(payload)), "contentType": "application/json"}


def test_request_body_and_response_parsing(client: Any, stubber: Stubber, sent_bodies: list[dict[str, Any]]) -> None:
    stubber.add_response("invoke_model", titan_response([0.5] * 256), EXPECTED_PARAMS)
    stubber.add_response("invoke_model", titan_response([-0.25] * 256), EXPECTED_PARAMS)
    embedder = BedrockTitanEmbedder(client, dimension=256, max_concurrency=1)

    vectors = embedder.embed(["first text", "second text"])

    assert vectors == [[0.5] * 256, [-0.25] * 256]
    assert sent_bodies == [
        {"inputText": "first text", "dimensions": 256, "normalize": True},
        {"inputText": "second text", "dimensions": 256, "normalize": True},
    ]


@pytest.mark.parametrize(
    ("error_code", "status"),
    [
        ("ThrottlingException", 429),
        ("ServiceUnavailableException", 503),
        ("ModelNotReadyException", 429),
        ("InternalServerException", 500),
        ("ModelTimeoutException", 408),
        ("SomethingNew", 502),
    ],
)
def test_throttling_and_server_errors_are_transient(
    client: Any, stubber: Stubber, error_code: str, status: int
) -> None:
    stubber.add_client_error("invoke_model", service_error_code=error_code, http_status_code=status)
    with pytest.raises(TransientError, match=error_code):
        BedrockTitanEmbedder(client, max_concurrency=1).embed(["text"])


@pytest.mark.parametrize(
    ("message", "code"),
    [
        (
            "400 Bad Request: Too many input tokens. Max input tokens: 8192, request input token count: 9000",
            ErrorCode.INPUT_TOO_LONG,
        ),
        ("Malformed input request: #/dimensions: 300 is not a valid enum value", ErrorCode.INVALID_REQUEST),
    ],
)
def test_validation_errors_are_permanent(client: Any, stubber: Stubber, message: str, code: ErrorCode) -> None:
    stubber.add_client_error(
        "invoke_model", service_error_code="ValidationException", service_message=message, http_status_code=400
    )
    with pytest.raises(PermanentError) as caught:
        BedrockTitanEmbedder(client, max_concurrency=1).embed(["text"])
    assert caught.value.code is code


def test_access_denied_is_left_as_is(client: Any, stubber: Stubber) -> None:
    stubber.add_client_error("invoke_model", service_error_code="AccessDeniedException", http_status_code=403)
    with pytest.raises(ClientError):
        BedrockTitanEmbedder(client, max_concurrency=1).embed(["text"])


def test_too_many_tokens_is_refused_before_any_call(client: Any, stubber: Stubber) -> None:
    with pytest.raises(PermanentError) as caught:
        BedrockTitanEmbedder(client).embed(["fine", "word " * 8193])
    assert caught.value.code is ErrorCode.INPUT_TOO_LONG
    assert "8193 tokens" in caught.value.detail


def test_input_at_the_token_limit_is_sent(client: Any, stubber: Stubber) -> None:
    stubber.add_response("invoke_model", titan_response([0.0] * 1024), EXPECTED_PARAMS)
    assert len(BedrockTitanEmbedder(client).embed(["word " * 8192])[0]) == 1024


def test_too_many_characters_is_refused(client: Any, stubber: Stubber) -> None:
    embedder = BedrockTitanEmbedder(client, count_tokens=lambda text: 1)
    with pytest.raises(PermanentError) as caught:
        embedder.embed(["x" * 50_001])
    assert caught.value.code is ErrorCode.INPUT_TOO_LONG


def test_empty_text_is_invalid(client: Any, stubber: Stubber) -> None:
    with pytest.raises(PermanentError) as caught:
        BedrockTitanEmbedder(client).embed(["   "])
    assert caught.value.code is ErrorCode.INVALID_REQUEST


def test_empty_input_makes_no_call(client: Any, stubber: Stubber) -> None:
    assert BedrockTitanEmbedder(client).embed([]) == []


@pytest.mark.parametrize("dimension", [128, 384, 768, 2048])
def test_only_titan_v2_dimensions_are_accepted(client: Any, dimension: int) -> None:
    with pytest.raises(ValueError, match="256, 512, 1024"):
        BedrockTitanEmbedder(client, dimension=dimension)


def test_other_model_ids_are_refused(client: Any) -> None:
    with pytest.raises(ValueError, match=r"amazon\.titan-embed-text-v1"):
        BedrockTitanEmbedder(client, model_id="amazon.titan-embed-text-v1")


def test_factory_builds_the_bedrock_embedder(client: Any) -> None:
    embedder = create_embedder("bedrock", TITAN_V2_MODEL_ID, 512, bedrock_client=client)
    assert isinstance(embedder, BedrockTitanEmbedder)
    assert (embedder.dimension, embedder.max_input_tokens) == (512, 8192)


class FakeBedrockClient:
    """Answers each text with a vector that encodes it, slowly, and records peak concurrency."""

    def __init__(self, dimension: int, failures: dict[str, Exception] | None = None) -> None:
        self.dimension = dimension
        self.failures = failures or {}
        self.in_flight = 0
        self.peak_in_flight = 0
        self.calls = 0
        self._lock = threading.Lock()

    def invoke_model(self, **request: Any) -> dict[str, Any]:
        text = json.loads(request["body"])["inputText"]
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            time.sleep(0.02 if int(text.split()[-1]) % 2 else 0.005)  # uneven latency reorders completions
            if text in self.failures:
                raise self.failures[text]
            payload = json.dumps({"embedding": [float(text.split()[-1])] * self.dimension}).encode()
            return {"body": StreamingBody(io.BytesIO(payload), len(payload))}
        finally:
            with self._lock:
                self.in_flight -= 1


def test_concurrent_calls_are_bounded_and_order_is_preserved() -> None:
    fake = FakeBedrockClient(dimension=256)
    embedder = BedrockTitanEmbedder(fake, dimension=256, max_concurrency=3)

    vectors = embedder.embed([f"text {index}" for index in range(24)])

    assert [vector[0] for vector in vectors] == [float(index) for index in range(24)]
    assert 1 < fake.peak_in_flight <= 3


def test_default_concurrency_is_four() -> None:
    fake = FakeBedrockClient(dimension=1024)
    BedrockTitanEmbedder(fake).embed([f"text {index}" for index in range(16)])
    assert 1 < fake.peak_in_flight <= 4


@pytest.mark.parametrize(
    "network_error",
    [
        ReadTimeoutError(endpoint_url="https://bedrock-runtime"),
        EndpointConnectionError(endpoint_url="https://bedrock-runtime"),
    ],
)
def test_timeouts_and_connection_errors_are_transient(network_error: Exception) -> None:
    fake = FakeBedrockClient(dimension=256, failures={"text 5": network_error})
    with pytest.raises(TransientError):
        BedrockTitanEmbedder(fake, dimension=256, max_concurrency=2).embed([f"text {index}" for index in range(40)])
    assert fake.calls < 40  # queued texts are cancelled after the failure


def test_bedrock_path_never_imports_onnxruntime_or_numpy() -> None:
    # The Lambda layer ships neither: importing the package and the Bedrock embedder must not need them.
    code = (
        "import sys\n"
        "import rag_ingest.embeddings.factory, rag_ingest.embeddings.bedrock\n"
        "import rag_ingest.core.tokens, rag_ingest.ingest.chunking\n"
        "assert 'onnxruntime' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "layers" / "common" / "python")}
    subprocess.run([sys.executable, "-c", code], check=True, env=environment, timeout=60)
