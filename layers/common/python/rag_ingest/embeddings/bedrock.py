"""Amazon Titan Text Embeddings V2 on Amazon Bedrock (an adapter: it calls a boto3 client).

The API embeds one text per ``InvokeModel`` call, so texts are sent concurrently on a small
thread pool (boto3 clients are thread-safe) and the results put back in input order. Error
mapping: throttling, unavailability, 5xx, timeouts and connection errors are ``TransientError``
(Step Functions retries them); a ``ValidationException`` is a ``PermanentError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from rag_ingest.errors import ErrorCode, PermanentError, TransientError
from rag_ingest.tokens import count_tokens as minilm_count_tokens
from rag_ingest.tracing import traced

TITAN_V2_MODEL_ID = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
TITAN_V2_MAX_INPUT_TOKENS = 8192
TITAN_V2_MAX_INPUT_CHARS = 50_000
DEFAULT_MAX_CONCURRENCY = 4

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
    """Titan V2 embeddings, normalised, of 256, 512 or 1024 floats."""

    def __init__(
        self,
        client: Any,
        *,
        model_id: str = TITAN_V2_MODEL_ID,
        dimension: int = 1024,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        count_tokens: Callable[[str], int] = minilm_count_tokens,
    ) -> None:
        """``client`` is a boto3 ``bedrock-runtime`` client. ``count_tokens`` only guards the input
        limit: WordPiece counts run above Titan's own for English, so it errs on the safe side."""
        if model_id != TITAN_V2_MODEL_ID:
            raise ValueError(f"the bedrock embedder supports {TITAN_V2_MODEL_ID!r}, not {model_id!r}")
        if dimension not in TITAN_V2_DIMENSIONS:
            raise ValueError(f"{model_id} dimension must be one of {TITAN_V2_DIMENSIONS}, not {dimension}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        self.model_id = model_id
        self.dimension = dimension
        self.max_input_tokens = TITAN_V2_MAX_INPUT_TOKENS
        self.max_concurrency = max_concurrency
        self._client = client
        self._count_tokens = count_tokens

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in input order. Inputs are checked before any call is made."""
        for index, text in enumerate(texts):
            self._check_input(index, text)
        if not texts:
            return []
        if self.max_concurrency == 1 or len(texts) == 1:
            return [self._embed_one(text) for text in texts]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(texts))) as pool:
            futures: list[Future[list[float]]] = [pool.submit(self._embed_one, text) for text in texts]
            try:
                return [future.result() for future in futures]
            except BaseException:
                # One failure fails the call: do not pay for the texts still queued.
                for future in futures:
                    future.cancel()
                raise

    def _check_input(self, index: int, text: str) -> None:
        if not text.strip():
            raise PermanentError(ErrorCode.INVALID_REQUEST, f"text {index} is empty")
        if len(text) > TITAN_V2_MAX_INPUT_CHARS:
            raise PermanentError(
                ErrorCode.INPUT_TOO_LONG,
                f"text {index} has {len(text)} characters; {self.model_id} accepts {TITAN_V2_MAX_INPUT_CHARS}",
            )
        tokens = self._count_tokens(text)
        if tokens > TITAN_V2_MAX_INPUT_TOKENS:
            raise PermanentError(
                ErrorCode.INPUT_TOO_LONG,
                f"text {index} has {tokens} tokens; {self.model_id} accepts {TITAN_V2_MAX_INPUT_TOKENS}",
            )

    def _embed_one(self, text: str) -> list[float]:
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
