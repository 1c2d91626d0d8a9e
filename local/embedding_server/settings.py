"""The embedding server's knobs, read from the environment (docs/local-stack.md lists them)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


def _positive_int(environ: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    raw = environ.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def _non_negative_float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


@dataclass(frozen=True)
class EmbeddingServerSettings:
    # onnxruntime intra-op threads of the one session (measured on 2 cores: docs/benchmarks.md).
    intra_op_threads: int = 2
    # Requests embedded together in one ONNX run, at most. The run's memory grows with batch x length:
    # peak RSS 0.7 GiB at 8 x 300 tokens, 1.2 GiB at 16 or 32 (docs/benchmarks.md).
    max_batch: int = 8
    # How long the batcher waits for more requests after the first one of a batch.
    max_wait_ms: float = 5.0
    # Requests accepted at once (queued or running); one more is answered ThrottlingException.
    max_in_flight: int = 128
    # A request not taken into a batch within this is answered ModelTimeoutException (Bedrock's 408)
    # and never embedded: below the functions' boto3 read timeout (30 s), so on an overloaded machine
    # the client gets an answer it retries, instead of timing out while the server still does the work.
    queue_timeout_seconds: float = 20.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EmbeddingServerSettings:
        env = os.environ if environ is None else environ
        return cls(
            intra_op_threads=_positive_int(env, "LOCAL_EMBEDDING_THREADS", cls.intra_op_threads),
            max_batch=_positive_int(env, "LOCAL_EMBEDDING_MAX_BATCH", cls.max_batch),
            max_wait_ms=_non_negative_float(env, "LOCAL_EMBEDDING_MAX_WAIT_MS", cls.max_wait_ms),
            max_in_flight=_positive_int(env, "LOCAL_EMBEDDING_MAX_IN_FLIGHT", cls.max_in_flight, minimum=0),
            queue_timeout_seconds=_non_negative_float(env, "LOCAL_EMBEDDING_QUEUE_TIMEOUT", cls.queue_timeout_seconds),
        )
