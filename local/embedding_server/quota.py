"""Bedrock's on-demand quotas, emulated: requests and tokens per minute, per model.

A request counts once admitted (well formed, within the input limit; a throttled one spends
nothing); its tokens are the ``inputTextTokenCount`` the server answers with. The window is a
sliding minute (a log of the last 60 s), the strictest reading of "N per minute"; the clock is
injected so tests never sleep. A request must fit both quotas; the refusal names the first one it
exceeds, with Bedrock's messages. Why a sliding log and where the figures come from:
docs/local-stack.md, "The Bedrock emulation".
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

Clock = Callable[[], float]
WINDOW_SECONDS = 60.0


class QuotaKind(StrEnum):
    REQUESTS_PER_MINUTE = "requests_per_minute"
    TOKENS_PER_MINUTE = "tokens_per_minute"


#: Bedrock's ThrottlingException messages, as clients quote them (sources in docs/local-stack.md,
#: "The Bedrock emulation").
THROTTLE_MESSAGES = {
    QuotaKind.REQUESTS_PER_MINUTE: "Too many requests, please wait before trying again.",
    QuotaKind.TOKENS_PER_MINUTE: "Too many tokens, please wait before trying again.",
}


class SlidingWindow:
    """At most ``limit`` units in any ``window_seconds``: the units admitted, with their times.

    Not thread-safe on its own (:class:`ModelQuota` holds one lock over both of its windows)."""

    def __init__(self, limit: int, window_seconds: float = WINDOW_SECONDS) -> None:
        if limit < 0:
            raise ValueError(f"a quota must not be negative, got {limit}")
        if window_seconds <= 0:
            raise ValueError(f"the window must be positive, got {window_seconds}")
        self.limit = limit
        self.window_seconds = window_seconds
        self._log: deque[tuple[float, int]] = deque()
        self._used = 0

    def _expire(self, now: float) -> None:
        # An entry admitted at t counts while now < t + window: at exactly t + window it has left.
        horizon = now - self.window_seconds
        while self._log and self._log[0][0] <= horizon:
            _, units = self._log.popleft()
            self._used -= units

    def used(self, now: float) -> int:
        self._expire(now)
        return self._used

    def fits(self, units: int, now: float) -> bool:
        return self.used(now) + units <= self.limit

    def record(self, units: int, now: float) -> None:
        self._expire(now)
        self._log.append((now, units))
        self._used += units

    def seconds_until_fits(self, units: int, now: float) -> float | None:
        """How long until ``units`` more fit if nothing else is admitted; None: never (more than the limit)."""
        if units > self.limit:
            return None
        excess = self.used(now) + units - self.limit
        if excess <= 0:
            return 0.0
        freed = 0
        for admitted_at, admitted_units in self._log:
            freed += admitted_units
            if freed >= excess:
                return admitted_at + self.window_seconds - now
        return None  # unreachable: the log holds every used unit


@dataclass(frozen=True)
class Refusal:
    """Why a request was throttled, and Bedrock's message for it."""

    kind: QuotaKind
    message: str


class ModelQuota:
    """One model's requests-per-minute and tokens-per-minute quotas (None: not enforced)."""

    def __init__(
        self,
        requests_per_minute: int | None,
        tokens_per_minute: int | None,
        *,
        clock: Clock = time.monotonic,
        window_seconds: float = WINDOW_SECONDS,
    ) -> None:
        self.clock = clock
        self._windows: dict[QuotaKind, SlidingWindow] = {}
        if requests_per_minute is not None:
            self._windows[QuotaKind.REQUESTS_PER_MINUTE] = SlidingWindow(requests_per_minute, window_seconds)
        if tokens_per_minute is not None:
            self._windows[QuotaKind.TOKENS_PER_MINUTE] = SlidingWindow(tokens_per_minute, window_seconds)
        self._lock = threading.Lock()

    def admit(self, tokens: int) -> Refusal | None:
        """Admit one request of ``tokens`` (recorded against both quotas), or say why not (nothing recorded)."""
        units = {QuotaKind.REQUESTS_PER_MINUTE: 1, QuotaKind.TOKENS_PER_MINUTE: tokens}
        with self._lock:
            now = self.clock()
            for kind, window in self._windows.items():
                if not window.fits(units[kind], now):
                    return Refusal(kind, THROTTLE_MESSAGES[kind])
            for kind, window in self._windows.items():
                window.record(units[kind], now)
        return None

    def usage(self) -> dict[str, dict[str, int]]:
        """Each enforced quota's limit and what the last minute used of it."""
        with self._lock:
            now = self.clock()
            return {kind.value: {"limit": w.limit, "used": w.used(now)} for kind, w in self._windows.items()}


class QuotaBook:
    """The quotas of every model the server serves (Bedrock's are per model, per account and Region),
    the same figures for each, and how many requests each quota has throttled."""

    def __init__(
        self,
        requests_per_minute: int | None,
        tokens_per_minute: int | None,
        *,
        clock: Clock = time.monotonic,
    ) -> None:
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.clock = clock
        self._models: dict[str, ModelQuota] = {}
        self._throttled = dict.fromkeys(QuotaKind, 0)
        self._admitted = 0
        self._admitted_tokens = 0
        self._lock = threading.Lock()

    @property
    def enforced(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

    def _quota(self, model_id: str) -> ModelQuota:
        with self._lock:
            quota = self._models.get(model_id)
            if quota is None:
                quota = self._models[model_id] = ModelQuota(
                    self.requests_per_minute, self.tokens_per_minute, clock=self.clock
                )
            return quota

    def admit(self, model_id: str, tokens: int) -> Refusal | None:
        refusal = self._quota(model_id).admit(tokens)
        with self._lock:
            if refusal is None:
                self._admitted += 1
                self._admitted_tokens += tokens
            else:
                self._throttled[refusal.kind] += 1
        return refusal

    def stats(self) -> dict[str, object]:
        with self._lock:
            models = dict(self._models)
            counters: dict[str, object] = {
                "admitted": self._admitted,
                "admitted_tokens": self._admitted_tokens,
                "throttled": {kind.value: count for kind, count in self._throttled.items()},
            }
        return {
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "window": f"sliding {WINDOW_SECONDS:g} s",
            **counters,
            "last_minute": {model_id: quota.usage() for model_id, quota in sorted(models.items())},
        }
