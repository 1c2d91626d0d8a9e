"""Per-request latency for the Bedrock emulation: a distribution parsed from a short spec
(``none``, ``fixed:<ms>``, ``lognormal:median=<ms>,p95=<ms>`` or ``p99=``), sampled from a seeded
generator. A log-normal is fixed by its median and one upper quantile:
``sigma = ln(p / median) / z``. The sample is the least time a request takes once admitted. The
``bedrock`` profile's default (:data:`ASSUMED_BEDROCK_LATENCY`) is an assumption: no published
figure was found (docs/local-stack.md, "The Bedrock emulation").
"""

from __future__ import annotations

import math
import random
import re
import threading
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist

_STANDARD_NORMAL = NormalDist()


class LatencyKind(StrEnum):
    NONE = "none"
    FIXED = "fixed"
    LOGNORMAL = "lognormal"


#: The upper quantiles a log-normal spec may name.
_UPPER_QUANTILES = {"p95": 0.95, "p99": 0.99}
_FIXED = re.compile(r"^fixed:(?P<ms>[^,=]+)$")
_LOGNORMAL = re.compile(r"^lognormal:(?P<params>.+)$")


@dataclass(frozen=True)
class LatencyDistribution:
    """``kind`` with its figures in milliseconds: ``median_ms`` (fixed: the value), and for the
    log-normal the upper quantile ``upper_ms`` at probability ``upper_q``."""

    kind: LatencyKind = LatencyKind.NONE
    median_ms: float = 0.0
    upper_ms: float = 0.0
    upper_q: float = 0.95

    def __post_init__(self) -> None:
        if not all(math.isfinite(value) for value in (self.median_ms, self.upper_ms)):
            raise ValueError("latency figures must be finite numbers")
        if self.kind is LatencyKind.FIXED and self.median_ms < 0:
            raise ValueError(f"a fixed latency must not be negative, got {self.median_ms} ms")
        if self.kind is LatencyKind.LOGNORMAL:
            if self.median_ms <= 0:
                raise ValueError(f"a log-normal latency needs a median above 0 ms, got {self.median_ms}")
            if self.upper_ms < self.median_ms:
                raise ValueError(
                    f"a log-normal latency's p{round(self.upper_q * 100)} ({self.upper_ms} ms) "
                    f"must not be below its median ({self.median_ms} ms)"
                )
            if not 0.5 < self.upper_q < 1:
                raise ValueError(f"the upper quantile must be between 0.5 and 1, got {self.upper_q}")

    @classmethod
    def parse(cls, spec: str) -> LatencyDistribution:
        """``none``, ``fixed:<ms>`` or ``lognormal:median=<ms>,p95=<ms>`` (or ``p99=``); a
        ValueError that quotes the spec otherwise."""
        text = spec.strip().lower()
        if text in ("", LatencyKind.NONE):
            return cls()
        try:
            fixed = _FIXED.match(text)
            if fixed:
                return cls(LatencyKind.FIXED, median_ms=float(fixed["ms"]))
            lognormal = _LOGNORMAL.match(text)
            if lognormal:
                params = dict(_key_value(part) for part in lognormal["params"].split(","))
                uppers = [name for name in params if name in _UPPER_QUANTILES]
                unknown = sorted(set(params) - {"median", *_UPPER_QUANTILES})
                if "median" not in params or len(uppers) != 1 or unknown:
                    raise ValueError("it takes median= and one of p95= or p99=")
                upper = uppers[0]
                return cls(
                    LatencyKind.LOGNORMAL,
                    median_ms=float(params["median"]),
                    upper_ms=float(params[upper]),
                    upper_q=_UPPER_QUANTILES[upper],
                )
        except ValueError as exc:
            raise ValueError(f"latency {spec!r}: {exc}") from None
        raise ValueError(f"latency {spec!r}: expected none, fixed:<ms> or lognormal:median=<ms>,p95=<ms> (or p99=<ms>)")

    @property
    def sigma(self) -> float:
        """The log-normal's shape (the standard deviation of ln(latency)); 0 for the others."""
        if self.kind is not LatencyKind.LOGNORMAL:
            return 0.0
        return math.log(self.upper_ms / self.median_ms) / _STANDARD_NORMAL.inv_cdf(self.upper_q)

    def quantile_ms(self, q: float) -> float:
        """The ``q`` quantile (0 < q < 1) in milliseconds, from the configuration."""
        if not 0 < q < 1:
            raise ValueError(f"q must be between 0 and 1, got {q}")
        if self.kind is LatencyKind.NONE:
            return 0.0
        if self.kind is LatencyKind.FIXED:
            return self.median_ms
        return self.median_ms * math.exp(self.sigma * _STANDARD_NORMAL.inv_cdf(q))

    def sample_ms(self, rng: random.Random) -> float:
        """One latency in milliseconds, drawn from ``rng`` (the log-normal draws one normal variate)."""
        if self.kind is LatencyKind.NONE:
            return 0.0
        if self.kind is LatencyKind.FIXED:
            return self.median_ms
        return self.median_ms * math.exp(self.sigma * rng.gauss(0.0, 1.0))

    def describe(self) -> str:
        """The spec that :meth:`parse` reads back to this distribution."""
        if self.kind is LatencyKind.FIXED:
            return f"fixed:{self.median_ms:g}"
        if self.kind is LatencyKind.LOGNORMAL:
            return f"lognormal:median={self.median_ms:g},p{round(self.upper_q * 100)}={self.upper_ms:g}"
        return LatencyKind.NONE.value


def _key_value(part: str) -> tuple[str, str]:
    key, separator, value = part.partition("=")
    if not separator or not key.strip() or not value.strip():
        raise ValueError(f"{part!r} is not name=value")
    return key.strip(), value.strip()


#: No added latency (the server as it always was).
NO_LATENCY = LatencyDistribution()

#: The ``bedrock`` profile's latency, an assumption (docs/local-stack.md, "The Bedrock emulation");
#: LOCAL_EMBEDDING_LATENCY replaces it once a measurement exists.
ASSUMED_BEDROCK_LATENCY = LatencyDistribution(LatencyKind.LOGNORMAL, median_ms=60.0, upper_ms=150.0, upper_q=0.95)


class LatencySampler:
    """Draws request latencies, in seconds, from ``distribution`` with a generator seeded by ``seed``.

    The sequence of draws is reproducible; which request gets which draw depends on the order in
    which concurrent requests are admitted. Thread-safe."""

    def __init__(self, distribution: LatencyDistribution, seed: int) -> None:
        self.distribution = distribution
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.samples = 0
        self.total_ms = 0.0

    def next_seconds(self) -> float:
        with self._lock:
            value = self.distribution.sample_ms(self._rng)
            self.samples += 1
            self.total_ms += value
        return value / 1000

    def stats(self) -> dict[str, object]:
        with self._lock:
            return {
                "distribution": self.distribution.describe(),
                "samples": self.samples,
                "mean_ms": round(self.total_ms / self.samples, 3) if self.samples else 0.0,
            }
