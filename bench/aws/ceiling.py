"""The quota's ceiling for a corpus, and the embedding server's counters read from ``/_local/stats``.

The ceiling is the pages per second a quota allows for a corpus as one system chunks it: each chunk
is one ``InvokeModel`` call (Titan V2 embeds one text per call), counted in tokens as the local server
counts them. With R requests, K tokens, P pages and quotas RPM and TPM a minute:

    minutes = max(R / RPM, K / TPM)        ceiling = P / (60 * minutes) pages/s

A quota not enforced drops out of the max. Pure arithmetic and JSON; imports nothing of the project.
Why the steady rate, and the sliding window's minimum: docs/benchmarks.md (bench-aws, The ceiling).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

SECONDS_PER_MINUTE = 60.0


@dataclass(frozen=True)
class Quota:
    """Requests and tokens a minute, per model (None: not enforced)."""

    requests_per_minute: int | None
    tokens_per_minute: int | None

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any]) -> Quota:
        """The quota the server enforces, from its ``/_local/stats``."""
        quota = stats["quota"]
        return cls(_optional_int(quota.get("requests_per_minute")), _optional_int(quota.get("tokens_per_minute")))


@dataclass(frozen=True)
class Ceiling:
    pages: int
    requests: int
    tokens: int
    quota: Quota
    minutes_for_requests: float | None  # None: the quota is not enforced
    minutes_for_tokens: float | None

    @property
    def binding(self) -> str | None:
        """Which quota sets the ceiling: "requests", "tokens", or None when neither is enforced."""
        candidates = {"requests": self.minutes_for_requests, "tokens": self.minutes_for_tokens}
        enforced = {name: minutes for name, minutes in candidates.items() if minutes is not None}
        return max(enforced, key=lambda name: enforced[name]) if enforced else None

    @property
    def minutes(self) -> float | None:
        """The least time the quota allows for the corpus at the steady rate."""
        binding = self.binding
        if binding is None:
            return None
        return self.minutes_for_tokens if binding == "tokens" else self.minutes_for_requests

    @property
    def pages_per_second(self) -> float | None:
        """The ceiling (None: no quota enforced; 0.0 for a quota of 0)."""
        minutes = self.minutes
        if minutes is None:
            return None
        if math.isinf(minutes):
            return 0.0
        return math.inf if minutes == 0 else self.pages / (SECONDS_PER_MINUTE * minutes)

    @property
    def sliding_window_minimum_seconds(self) -> float | None:
        """60 * (W - 1): the earliest a sliding-minute window can have admitted the whole corpus."""
        windows = [
            math.ceil(units / limit) if limit else math.inf
            for units, limit in (
                (self.requests, self.quota.requests_per_minute),
                (self.tokens, self.quota.tokens_per_minute),
            )
            if limit is not None
        ]
        if not windows:
            return None
        return SECONDS_PER_MINUTE * (max(windows) - 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "formula": "pages / (60 * max(requests / requests_per_minute, tokens / tokens_per_minute))",
            "pages": self.pages,
            "requests": self.requests,
            "tokens": self.tokens,
            "requests_per_minute": self.quota.requests_per_minute,
            "tokens_per_minute": self.quota.tokens_per_minute,
            "minutes_for_requests": self.minutes_for_requests,
            "minutes_for_tokens": self.minutes_for_tokens,
            "binding": self.binding,
            "pages_per_second": self.pages_per_second,
            "sliding_window_minimum_seconds": self.sliding_window_minimum_seconds,
        }


def ceiling(pages: int, requests: int, tokens: int, quota: Quota) -> Ceiling:
    """The quota's ceiling for ``pages`` pages that need ``requests`` calls of ``tokens`` tokens in all."""

    def minutes(units: int, limit: int | None) -> float | None:
        if limit is None:
            return None
        if limit == 0:
            return math.inf if units else 0.0
        return units / limit

    return Ceiling(
        pages,
        requests,
        tokens,
        quota,
        minutes(requests, quota.requests_per_minute),
        minutes(tokens, quota.tokens_per_minute),
    )


@dataclass(frozen=True)
class EmbeddingCounters:
    """What the embedding server counted for one run (a fresh server per run; ``since`` takes off
    what it counted before the clock, e.g. a warm-up's calls)."""

    calls: int  # every InvokeModel received: admitted, throttled or refused
    admitted: int
    admitted_tokens: int
    throttled_requests_per_minute: int
    throttled_tokens_per_minute: int
    throttled_in_flight: int  # the server's own in-flight limit (Bedrock has none), counted apart

    @property
    def throttled(self) -> int:
        return self.throttled_requests_per_minute + self.throttled_tokens_per_minute + self.throttled_in_flight

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any]) -> EmbeddingCounters:
        quota = stats["quota"]
        by_quota = quota.get("throttled") or {}
        return cls(
            calls=int(stats["requests"]),
            admitted=int(quota.get("admitted", 0)),
            admitted_tokens=int(quota.get("admitted_tokens", 0)),
            throttled_requests_per_minute=int(by_quota.get("requests_per_minute", 0)),
            throttled_tokens_per_minute=int(by_quota.get("tokens_per_minute", 0)),
            throttled_in_flight=int(stats.get("throttled_in_flight", 0)),
        )

    def since(self, baseline: EmbeddingCounters) -> EmbeddingCounters:
        """What was counted after ``baseline`` (the same server's counters, read earlier)."""
        now, before = asdict(self), asdict(baseline)
        return EmbeddingCounters(**{name: now[name] - before[name] for name in now})

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "throttled": self.throttled}


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
