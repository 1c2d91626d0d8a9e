"""Fault injection for tests: the failures a Lambda invocation can have in AWS, on demand.

Stands in for what goes wrong in Lambda itself, not in the code: a function error answered
instead of the result (``raise``, ``raise_after`` once the handler's side effects stand), the
execution environment dying mid-invocation (``crash_after``), a slow answer (``delay``) and a
handler that never returns (``timeout``). Nothing is injected unless a test asks, through the
fault API (:mod:`local.runtime.http.fault_api`) or :class:`FaultInjector` directly.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any, Literal, get_args

FaultMode = Literal["raise", "raise_after", "crash_after", "delay", "timeout"]
FAULT_MODES: tuple[str, ...] = get_args(FaultMode)


@dataclass
class Fault:
    """What to do to the next ``remaining`` matching invocations of a function (see docs/local-stack.md)."""

    function_name: str
    mode: FaultMode
    error_type: str
    error_message: str
    remaining: int
    after_seconds: float | None = None
    # Only invocations whose event (as JSON text) contains this, e.g. a document id or tenant.
    match: str | None = None
    # The chance that a matching invocation is hit; a miss does not use up ``remaining``.
    probability: float = 1.0
    injected: int = 0

    def applies_to(self, function_name: str, event_json: str) -> bool:
        return self.function_name == function_name and (self.match is None or self.match in event_json)

    def describe(self) -> dict[str, Any]:
        return {
            "function": self.function_name,
            "mode": self.mode,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "remaining": self.remaining,
            "after_seconds": self.after_seconds,
            "match": self.match,
            "probability": self.probability,
            "injected": self.injected,
        }


class FaultInjector:
    """Makes the next N (matching) invocations of a function fail in a chosen way."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._random = random.Random(seed)
        # Faults injected so far, per function name (kept after a fault is used up or cleared).
        self._injected: dict[str, int] = {}

    def add(self, fault: Fault) -> None:
        if fault.mode not in FAULT_MODES:
            raise ValueError(f"unknown fault mode {fault.mode!r} ({', '.join(FAULT_MODES)})")
        if fault.remaining < 1:
            raise ValueError("times must be >= 1")
        if not 0 < fault.probability <= 1:
            raise ValueError("probability must be in (0, 1]")
        if fault.mode == "delay" and (fault.after_seconds is None or fault.after_seconds <= 0):
            raise ValueError("mode delay needs after_seconds > 0")
        if fault.after_seconds is not None and fault.after_seconds < 0:
            raise ValueError("after_seconds must be >= 0")
        with self._lock:
            self._faults.append(fault)

    def take(self, function_name: str, event_json: str = "") -> Fault | None:
        """The fault that hits this invocation, if any (the first armed one that applies)."""
        with self._lock:
            for fault in self._faults:
                if not fault.applies_to(function_name, event_json):
                    continue
                if fault.probability < 1 and self._random.random() >= fault.probability:
                    return None
                fault.remaining -= 1
                fault.injected += 1
                self._injected[function_name] = self._injected.get(function_name, 0) + 1
                if fault.remaining == 0:
                    self._faults.remove(fault)
                return fault
        return None

    def clear(self, function_name: str | None = None) -> int:
        with self._lock:
            before = len(self._faults)
            self._faults = [f for f in self._faults if function_name is not None and f.function_name != function_name]
            return before - len(self._faults)

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [fault.describe() for fault in self._faults]

    def injected(self) -> dict[str, int]:
        with self._lock:
            return dict(self._injected)
