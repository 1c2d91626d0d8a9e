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


#: Titan Text Embeddings V2's default on-demand quotas, per account and Region, as issue 30 quotes
#: AWS's quota table ("Amazon Bedrock endpoints and quotas", docs.aws.amazon.com/general/latest/gr/
#: bedrock.html: "On-demand model inference requests per minute for Amazon Titan Text Embeddings
#: V2" and "... tokens per minute ...", Service Quotas codes L-26C560CE and L-DE641971 as public
#: projects that read them quote them). NOT VERIFIED here: the
#: stored copies of that table reachable from this machine do not show the Titan V2 rows. What was
#: verified is that the figures are moving: the bedrock-runtime quotas page now says Bedrock "no
#: longer enforces requests-per-minute (RPM) quotas on the bedrock-runtime endpoint" and that
#: throttling is governed by the per-model tokens-per-minute quota (docs.aws.amazon.com/bedrock/
#: latest/userguide/quotas-runtime.html), while an earlier copy of the Titan embeddings page said
#: embedding models are throttled by requests per minute, not tokens. Both quotas are enforced here,
#: each can be switched off (LOCAL_EMBEDDING_RPM=off), and an account reads its own values from
#: Service Quotas.
TITAN_V2_DEFAULT_REQUESTS_PER_MINUTE = 2_000
TITAN_V2_DEFAULT_TOKENS_PER_MINUTE = 300_000
#: The low-quota example: 60 requests a minute, issue 30's example of what a new account may get
#: (AWS: quotas "might be lower than the default values" depending on account age and history,
#: docs.aws.amazon.com/bedrock/latest/userguide/quotas.html). Its tokens per minute are an
#: ASSUMPTION: kept at the default, so the requests quota is the one that binds.
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
    # A request not taken into a batch within this is answered ModelTimeoutException (Bedrock's 408)
    # and never embedded: below the functions' boto3 read timeout (30 s), so on an overloaded machine
    # the client gets an answer it retries, instead of timing out while the server still does the work.
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
