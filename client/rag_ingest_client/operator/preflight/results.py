"""One check's result: ``ok``, ``warn`` or ``missing``, its finding, and the fix when it is not ok."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["ok", "warn", "missing"]


@dataclass(frozen=True)
class CheckResult:
    status: Status
    name: str
    finding: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "name": self.name, "finding": self.finding, "fix": self.fix}


def ok(name: str, finding: str) -> CheckResult:
    return CheckResult("ok", name, finding)


def warn(name: str, finding: str, fix: str | None = None) -> CheckResult:
    return CheckResult("warn", name, finding, fix)


def missing(name: str, finding: str, fix: str) -> CheckResult:
    return CheckResult("missing", name, finding, fix)


def exit_code(results: list[CheckResult]) -> int:
    return 1 if any(result.status == "missing" for result in results) else 0
