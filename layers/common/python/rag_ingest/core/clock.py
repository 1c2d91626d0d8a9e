"""Time: a clock the operator tools can be given, and the tables' timestamps."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], float]  # seconds since the epoch


def iso_before(clock: Clock, seconds: int) -> str:
    """``seconds`` before now, in the status table's ``updated_at`` format (sortable as text)."""
    moment = datetime.fromtimestamp(clock(), UTC) - timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds")


def utc_now() -> str:
    """Now, in the tables' timestamp format (ISO 8601, milliseconds, sortable as text)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
