"""The embedding server's knobs, read from the environment (docs/local-stack.md lists them), and the
Bedrock emulation's profiles (quotas, latency, deterministic vectors)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from local.embedding_server.latency import ASSUMED_BEDROCK_LATENCY, NO_LATENCY, LatencyDistribution


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


def _quota(environ: Mapping[str, str], name: str, default: int | None) -> int | None:
    """A quota: a whole number of requests or tokens per minute (0: every request throttled), or
    ``off`` (not enforced)."""
    raw = environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw == "off":
        return None
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a whole number per minute or off, got {raw!r}") from exc
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


class Vectors(StrEnum):
    """What the server answers with: the model's vectors, or deterministic ones without a model
    (:mod:`local.embedding_server.deterministic`; retrieval quality is meaningless then)."""

    MODEL = "model"
    DETERMINISTIC = "deterministic"


#: Titan Text Embeddings V2's default on-demand quotas per account and Region; where they come from
#: and what is uncertain about them: docs/decisions/bedrock-quota-figures.md.
TITAN_V2_DEFAULT_REQUESTS_PER_MINUTE = 2_000
TITAN_V2_DEFAULT_TOKENS_PER_MINUTE = 300_000
#: What a new account may get: 60 requests a minute; its tokens per minute stay at the default (an
#: assumption), so the requests quota binds (docs/decisions/bedrock-quota-figures.md).
LOW_QUOTA_REQUESTS_PER_MINUTE = 60


@dataclass(frozen=True)
class BedrockEmulation:
    """How much the server behaves like Bedrock beyond the wire format: per-model quotas (None: not
    enforced), per-request latency sampled with ``seed``, and which vectors it answers with.
    The default (profile ``none``) is the server as it always was."""

    profile: str = "none"
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    latency: LatencyDistribution = NO_LATENCY
    seed: int = 0
    vectors: Vectors = Vectors.MODEL

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "latency": self.latency.describe(),
            "seed": self.seed,
            "vectors": self.vectors.value,
        }


#: The server as it always was: no quotas, no latency, the model's vectors.
NO_EMULATION = BedrockEmulation()

#: The named profiles (LOCAL_EMBEDDING_PROFILE or --profile); each of their values can be overridden.
PROFILES: dict[str, BedrockEmulation] = {
    "none": NO_EMULATION,
    "bedrock": BedrockEmulation(
        "bedrock",
        requests_per_minute=TITAN_V2_DEFAULT_REQUESTS_PER_MINUTE,
        tokens_per_minute=TITAN_V2_DEFAULT_TOKENS_PER_MINUTE,
        latency=ASSUMED_BEDROCK_LATENCY,
    ),
    "bedrock-low-quota": BedrockEmulation(
        "bedrock-low-quota",
        requests_per_minute=LOW_QUOTA_REQUESTS_PER_MINUTE,
        tokens_per_minute=TITAN_V2_DEFAULT_TOKENS_PER_MINUTE,
        latency=ASSUMED_BEDROCK_LATENCY,
    ),
}


def emulation_from_env(env: Mapping[str, str]) -> BedrockEmulation:
    """LOCAL_EMBEDDING_PROFILE's profile, with any of LOCAL_EMBEDDING_RPM, _TPM, _LATENCY, _SEED and
    _VECTORS overriding its values; a ValueError naming the variable for anything malformed."""
    name = env.get("LOCAL_EMBEDDING_PROFILE", "").strip().lower() or "none"
    if name not in PROFILES:
        raise ValueError(f"LOCAL_EMBEDDING_PROFILE must be one of {', '.join(PROFILES)}, got {name!r}")
    profile = PROFILES[name]
    latency = profile.latency
    raw_latency = env.get("LOCAL_EMBEDDING_LATENCY", "").strip()
    if raw_latency:
        try:
            latency = LatencyDistribution.parse(raw_latency)
        except ValueError as exc:
            raise ValueError(f"LOCAL_EMBEDDING_LATENCY: {exc}") from None
    raw_vectors = env.get("LOCAL_EMBEDDING_VECTORS", "").strip().lower()
    if raw_vectors and raw_vectors not in set(Vectors):
        raise ValueError(f"LOCAL_EMBEDDING_VECTORS must be one of {', '.join(Vectors)}, got {raw_vectors!r}")
    return replace(
        profile,
        requests_per_minute=_quota(env, "LOCAL_EMBEDDING_RPM", profile.requests_per_minute),
        tokens_per_minute=_quota(env, "LOCAL_EMBEDDING_TPM", profile.tokens_per_minute),
        latency=latency,
        seed=_positive_int(env, "LOCAL_EMBEDDING_SEED", profile.seed, minimum=0),
        vectors=Vectors(raw_vectors) if raw_vectors else profile.vectors,
    )


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
    # Then ModelTimeoutException (408), never embedded: below the functions' 30 s read timeout, so an
    # overloaded server answers a retryable error instead of working for a client that gave up.
    queue_timeout_seconds: float = 20.0
    # Quotas, latency and deterministic vectors (profile "none": none of them).
    emulation: BedrockEmulation = NO_EMULATION

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EmbeddingServerSettings:
        env = os.environ if environ is None else environ
        return cls(
            intra_op_threads=_positive_int(env, "LOCAL_EMBEDDING_THREADS", cls.intra_op_threads),
            max_batch=_positive_int(env, "LOCAL_EMBEDDING_MAX_BATCH", cls.max_batch),
            max_wait_ms=_non_negative_float(env, "LOCAL_EMBEDDING_MAX_WAIT_MS", cls.max_wait_ms),
            max_in_flight=_positive_int(env, "LOCAL_EMBEDDING_MAX_IN_FLIGHT", cls.max_in_flight, minimum=0),
            queue_timeout_seconds=_non_negative_float(env, "LOCAL_EMBEDDING_QUEUE_TIMEOUT", cls.queue_timeout_seconds),
            emulation=emulation_from_env(env),
        )
