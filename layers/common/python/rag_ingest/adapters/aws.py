"""boto3 clients, and the one translation of adapter errors into the pipeline's error taxonomy."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError

from rag_ingest.core.errors import TransientError
from rag_ingest.embeddings.bedrock import SERVED_MODELS

# Adaptive retries inside one Lambda attempt; what survives becomes a TransientError for
# Step Functions, whose Retry adds backoff with jitter on top.
BOTO_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=5,
    read_timeout=30,
)

_TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        # Errors inside a Bedrock event stream (ConverseStream) are named in camel case.
        "throttlingException",
        "serviceUnavailableException",
        "internalServerException",
        "modelStreamErrorException",
        "ThrottledException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "SlowDown",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalError",
        "InternalServerError",
        "InternalFailure",
        "RequestTimeout",
        "RequestTimeoutException",
        "TransactionConflictException",
    }
)


#: DynamoDB's answer to a write whose condition did not hold: an outcome the adapters expect.
CONDITION_FAILED = "ConditionalCheckFailedException"


def client(service: str) -> Any:
    """A boto3 client; AWS_ENDPOINT_URL (moto locally) is honoured by boto3 itself."""
    return boto3.client(service, config=BOTO_CONFIG)  # type: ignore[call-overload]


def presigning_s3_client() -> Any:
    """An S3 client for presigned URLs and POSTs handed to browsers: SigV4 (S3 refuses SigV2 on
    buckets created since mid-2020, and SigV2 is boto3's presigning default) and the bucket's
    regional virtual-hosted endpoint (the global one redirects, which breaks a browser's POST).
    A custom endpoint (moto locally) keeps path-style addressing."""
    config = BOTO_CONFIG.merge(Config(signature_version="s3v4", s3={"addressing_style": "virtual"}))
    return boto3.client("s3", config=config)  # type: ignore[call-overload]


def resource(service: str) -> Any:
    return boto3.resource(service, config=BOTO_CONFIG)  # type: ignore[call-overload]


def error_code(exc: BaseException | None) -> str:
    """A botocore ``ClientError``'s error code ("" for any other exception)."""
    if not isinstance(exc, ClientError):
        return ""
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_message(exc: BaseException | None) -> str:
    """A botocore ``ClientError``'s message ("" for any other exception)."""
    if not isinstance(exc, ClientError):
        return ""
    return str(exc.response.get("Error", {}).get("Message", ""))


def http_status(exc: BaseException | None) -> int:
    """A botocore ``ClientError``'s HTTP status (0 when it has none, or for any other exception)."""
    if not isinstance(exc, ClientError):
        return 0
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ClientError):
        status = http_status(exc)
        return error_code(exc) in _TRANSIENT_CODES or status >= 500 or status == 429
    return isinstance(exc, ConnectionError | ReadTimeoutError | BotoCoreError)


def translate(exc: Exception, what: str, *, transient: Callable[[BaseException], bool] = is_transient) -> Exception:
    """What an adapter raises for ``exc``: a ``TransientError`` (retried by Step Functions with
    backoff) when ``transient(exc)``, else ``exc`` itself. ``transient`` is the AWS test by default;
    the vector store passes OpenSearch's."""
    if isinstance(exc, TransientError):
        return exc
    return TransientError(f"{what}: {type(exc).__name__}: {exc}") if transient(exc) else exc


@dataclass
class Refusal:
    """How a ``translated`` block ended: ``error`` and its ``code`` when the call was refused with a
    code the block expects (an answer, not a failure), else None and ""."""

    error: BaseException | None = None
    code: str = ""

    @property
    def refused(self) -> bool:
        return self.error is not None


@contextmanager
def translated(
    what: str,
    *,
    expect: Collection[str] = (),
    catch: type[BaseException] | tuple[type[BaseException], ...] = ClientError,
    transient: Callable[[BaseException], bool] = is_transient,
    code_of: Callable[[BaseException], str] = error_code,
) -> Iterator[Refusal]:
    """Run the block's calls with their errors translated once (httpx's ``map_exceptions``): a
    ``catch`` error whose code (``code_of``) is in ``expect`` is kept on the yielded ``Refusal``
    and the block ends quietly; any other is raised as ``translate(exc, what)`` says. For example::

        with translated(f"head {key}", expect={"404"}) as refusal:
            s3.head_object(Bucket=bucket, Key=key)
        exists = not refusal.refused
    """
    refusal = Refusal()
    try:
        yield refusal
    except catch as exc:
        code = code_of(exc)
        if code and code in expect:
            refusal.error, refusal.code = exc, code
            return
        raised = translate(exc, what, transient=transient) if isinstance(exc, Exception) else exc
        if raised is exc:
            raise
        raise raised from exc


#: botocore's adaptive retry mode (a client-side rate, lowered on throttles): per client, so per Lambda,
#: never shared between Embed tasks (docs/architecture.md, "One limiter across all Embed work").
ADAPTIVE_RETRIES = {"mode": "adaptive", "max_attempts": 10}


def bedrock_runtime_client(*, adaptive: bool = False) -> Any:
    """The embedder's client: the default chain and endpoint (locally ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``,
    the local embedding server), with a connection per text the embedder sends at once; ``adaptive``
    switches botocore's adaptive retry mode on."""
    connections = max(model.default_concurrency for model in SERVED_MODELS.values())
    config = BOTO_CONFIG.merge(Config(max_pool_connections=connections))
    if adaptive:
        config = config.merge(Config(retries=ADAPTIVE_RETRIES))  # type: ignore[arg-type]
    return boto3.client("bedrock-runtime", config=config)  # type: ignore[call-overload]


def bedrock_agent_runtime_client() -> Any:
    """The reranker's client (``Rerank`` is a bedrock-agent-runtime operation): the default chain and
    endpoint (locally ``AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME``, the local embedding server's
    ``/rerank`` route)."""
    return boto3.client("bedrock-agent-runtime", config=BOTO_CONFIG)  # type: ignore[call-overload]
