"""Amazon Titan Text Embeddings V2 on Amazon Bedrock (an adapter: it calls a boto3 client).

The same code serves the local stack: its embedding server (``local/embedding_server``) speaks
Bedrock Runtime's ``InvokeModel`` wire format on loopback and serves the local MiniLM under its own
model id, so only the client's endpoint and the model id differ (``SERVED_MODELS``).

The API embeds one text per ``InvokeModel`` call, so texts are sent concurrently on a small
thread pool (boto3 clients are thread-safe) and the results put back in input order. Error
mapping: throttling, unavailability, 5xx, timeouts and connection errors are ``TransientError``
(Step Functions retries them); a ``ValidationException`` is a ``PermanentError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from rag_ingest.core.errors import ErrorCode, PermanentError, TransientError
from rag_ingest.core.tokens import count_tokens as minilm_count_tokens
from rag_ingest.core.tracing import traced
from rag_ingest.embeddings.base import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.embeddings.capacity import CapacityLimiter, sleep_until

TITAN_V2_MODEL_ID = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
TITAN_V2_MAX_INPUT_TOKENS = 8192
TITAN_V2_MAX_INPUT_CHARS = 50_000
DEFAULT_MAX_CONCURRENCY = 4
# MiniLM's 512 positions less [CLS] and [SEP] (rag_ingest.core.tokens), counted like the chunker counts.
LOCAL_MAX_INPUT_TOKENS = 510
# Texts in flight per embed() call against the local server: it batches concurrent requests into
# one ONNX run, so one call's whole Embed batch (16) in flight at once fills a batch (docs/benchmarks.md).
LOCAL_CLIENT_CONCURRENCY = 16


@dataclass(frozen=True)
class ServedModel:
    """A model this embedder can call: its vector sizes, its input limits, and how many texts one
    ``embed`` call sends at once by default."""

    model_id: str
    dimensions: tuple[int, ...]
    max_input_tokens: int
    max_input_chars: int
    default_concurrency: int


SERVED_MODELS: dict[str, ServedModel] = {
    model.model_id: model
    for model in (
        # Bedrock's quota is per account: 4 in flight per call, the Map's MaxConcurrency bounds the calls.
        ServedModel(
            TITAN_V2_MODEL_ID,
            TITAN_V2_DIMENSIONS,
            TITAN_V2_MAX_INPUT_TOKENS,
            TITAN_V2_MAX_INPUT_CHARS,
            DEFAULT_MAX_CONCURRENCY,
        ),
        # The local embedding server's model (offline only).
        ServedModel(
            LOCAL_MODEL_ID,
            (MINILM_DIMENSION,),
            LOCAL_MAX_INPUT_TOKENS,
            TITAN_V2_MAX_INPUT_CHARS,
            LOCAL_CLIENT_CONCURRENCY,
        ),
    )
}

_TRANSIENT_ERROR_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "InternalServerException",
    }
)
_TOO_LONG_MESSAGE = re.compile(r"too (many|long)|max(imum)? input|exceed", re.IGNORECASE)


@traced
class BedrockTitanEmbedder:
    """Titan V2 embeddings, normalised, of 256, 512 or 1024 floats; or, offline, the local
    embedding server's MiniLM (384 floats) through the same wire format."""

    def __init__(
        self,
        client: Any,
        *,
        model_id: str = TITAN_V2_MODEL_ID,
        dimension: int = 1024,
        max_concurrency: int | None = None,
        count_tokens: Callable[[str], int] = minilm_count_tokens,
        limiter: CapacityLimiter | None = None,
    ) -> None:
        """``client`` is a boto3 ``bedrock-runtime`` client. ``count_tokens`` guards the input limit
        and prices each text for the ``limiter``: WordPiece counts run above Titan's own for English,
        so both err on the safe side. ``max_concurrency`` defaults to the model's (``SERVED_MODELS``).
        With a ``limiter``, each ``embed`` call books its texts on the shared quota first and sends
        each at its moment (rag_ingest.embeddings.capacity)."""
        model = SERVED_MODELS.get(model_id)
        if model is None:
            raise ValueError(f"the bedrock embedder supports {sorted(SERVED_MODELS)}, not {model_id!r}")
        if dimension not in model.dimensions:
            raise ValueError(f"{model_id} dimension must be one of {model.dimensions}, not {dimension}")
        max_concurrency = model.default_concurrency if max_concurrency is None else max_concurrency
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        self.model_id = model_id
        self.dimension = dimension
        self.max_input_tokens = model.max_input_tokens
        self.max_input_chars = model.max_input_chars
        self.max_concurrency = max_concurrency
        self._client = client
        self._count_tokens = count_tokens
        self._limiter = limiter

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in input order. Inputs are checked before any call is made; with a
        limiter, the first texts are booked before any call too (EmbeddingCapacityWait when the quota
        has no room for them), and the rest as the first are sent, a few seconds ahead each."""
        token_counts = [self._check_input(index, text) for index, text in enumerate(texts)]
        if not texts:
            return []
        parts = self._booked_parts(token_counts)
        if self.max_concurrency == 1 or len(texts) == 1:
            return [self._embed_one(texts[index], at) for index, at in parts]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(texts))) as pool:
            futures: list[Future[list[float]]] = []
            try:
                # Each text is submitted as soon as it is booked: the pool sends the first while
                # the rest is booked.
                futures.extend(pool.submit(self._embed_one, texts[index], at) for index, at in parts)
                return [future.result() for future in futures]
            except BaseException:
                # One failure fails the call: do not pay for the texts still queued.
                for future in futures:
                    future.cancel()
                raise

    def _booked_parts(self, token_counts: list[int]) -> Iterator[tuple[int, float | None]]:
        """(index, moment to send it) for each text, as the limiter books them: the first call may
        give way; the rest of the batch waits for its turn (rag_ingest.embeddings.capacity)."""
        if self._limiter is None:
            yield from ((index, None) for index in range(len(token_counts)))
            return
        done = 0
        while done < len(token_counts):
            moments = self._limiter.schedule(token_counts[done:], give_way=done == 0)
            yield from zip(range(done, done + len(moments)), moments, strict=True)
            done += len(moments)

    def _check_input(self, index: int, text: str) -> int:
        """The text's token count, once it is known to fit."""
        if not text.strip():
            raise PermanentError(ErrorCode.INVALID_REQUEST, f"text {index} is empty")
        if len(text) > self.max_input_chars:
            raise PermanentError(
                ErrorCode.INPUT_TOO_LONG,
                f"text {index} has {len(text)} characters; {self.model_id} accepts {self.max_input_chars}",
            )
        tokens = self._count_tokens(text)
        if tokens > self.max_input_tokens:
            raise PermanentError(
                ErrorCode.INPUT_TOO_LONG,
                f"text {index} has {tokens} tokens; {self.model_id} accepts {self.max_input_tokens}",
            )
        return tokens

    def _embed_one(self, text: str, send_at: float | None = None) -> list[float]:
        if send_at is not None:
            sleep_until(send_at)
        body = json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True})
        try:
            response = self._client.invoke_model(
                modelId=self.model_id, body=body, contentType="application/json", accept="application/json"
            )
        except ClientError as error:
            raise _map_client_error(error) from error
        except (BotocoreConnectionError, HTTPClientError) as error:
            # Connect/read timeouts, refused or dropped connections.
            raise TransientError(f"bedrock {self.model_id}: {error}") from error
        try:
            payload = json.loads(response["body"].read())
            embedding = [float(value) for value in payload["embedding"]]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"unexpected response from {self.model_id}: {error!r}") from error
        if len(embedding) != self.dimension:
            raise ValueError(f"{self.model_id} returned {len(embedding)} floats, expected {self.dimension}")
        return embedding


def _map_client_error(error: ClientError) -> Exception:
    details = error.response.get("Error", {})
    code = str(details.get("Code", ""))
    message = str(details.get("Message", ""))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if code in _TRANSIENT_ERROR_CODES or status >= 500 or status == 429:
        return TransientError(f"bedrock {code} ({status}): {message}")
    if code == "ValidationException":
        error_code = ErrorCode.INPUT_TOO_LONG if _TOO_LONG_MESSAGE.search(message) else ErrorCode.INVALID_REQUEST
        return PermanentError(error_code, f"bedrock rejected the input: {message}")
    # AccessDenied, ResourceNotFound and the like are deployment faults: keep them as they are.
    return error
