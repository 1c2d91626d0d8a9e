"""make load's verdict after the users stop: what each document must have become, and the tables.

Pure (stdlib only, no locust, no stack): ``bench.load`` reads the records, the index and the reconciler
and hands them here; tests/unit/test_load_aftermath.py checks the rules. A document ends READY with its
chunks indexed once, or FAILED with the code its input deserves and nothing indexed, or DELETED with
nothing indexed when a DELETE of it answered 200; a PATCH that answered 200 is what the record and every
passage carry. Imports nothing of the project.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

READY, FAILED, DELETED = "READY", "FAILED", "DELETED"
TERMINAL = frozenset({READY, FAILED, DELETED})
# The metadata key every PATCH sets (a number: the chunk index keeps it under metadata.n.<key>).
REVISION_KEY = "load_rev"


@dataclass(frozen=True)
class Tracked:
    """A document as the users left it: what it was made from and what the API said yes to."""

    document_id: str
    tenant_id: str
    file: str
    expected_code: str | None  # None: a good input, it must end READY
    uploaded: bool = True  # False: the presigned POST to S3 failed, no bytes were stored
    deleted: bool = False  # a DELETE answered 200
    patched_revision: int | None = None  # REVISION_KEY of the last PATCH that answered 200


@dataclass(frozen=True)
class Observed:
    """The document after the wait: its record, and its chunks in the index."""

    status: str | None  # None: no record
    error_code: str | None = None
    version: str | None = None  # the version's hash, as the chunks carry it
    chunk_count: int | None = None
    revision_value: int | None = None  # the record's metadata[REVISION_KEY]
    chunks_by_version: Mapping[str, int] = field(default_factory=dict)
    # REVISION_KEY on the indexed chunks of the record's version: value (None: missing) -> chunks.
    chunk_revisions: Mapping[int | None, int] = field(default_factory=dict)


def problems(tracked: Tracked, observed: Observed) -> list[str]:
    """What is wrong with one document (nothing: it ended as its input and its requests call for)."""
    found: list[str] = []
    indexed = sum(observed.chunks_by_version.values())
    if observed.status is None:
        return ["no status record"]
    if not tracked.uploaded:
        return (
            []
            if observed.status in ("AWAITING_UPLOAD", DELETED) and not indexed
            else [f"never uploaded, yet {observed.status} with {indexed} chunks indexed"]
        )
    if observed.status not in TERMINAL:
        return [f"not settled: {observed.status}"]
    if tracked.deleted:
        if observed.status != DELETED:
            found.append(f"deleted (200), but {observed.status}")
        if indexed:
            found.append(f"deleted, yet {indexed} chunks indexed")
        return found
    if observed.status == DELETED:
        return ["DELETED, but no DELETE of it answered 200"]
    wanted = READY if tracked.expected_code is None else tracked.expected_code
    got = READY if observed.status == READY else f"{observed.status} {observed.error_code}"
    if observed.status == FAILED and observed.error_code == tracked.expected_code:
        got = wanted
    if got != wanted:
        found.append(f"{got}, expected {wanted}")
    if observed.status == FAILED and indexed:
        found.append(f"FAILED, yet {indexed} chunks indexed")
    if observed.status == READY:
        current = observed.chunks_by_version.get(observed.version or "", 0)
        if not observed.chunk_count or current != observed.chunk_count:
            found.append(f"{current} chunks indexed for the current version, the record says {observed.chunk_count}")
        others = indexed - current
        if others:
            found.append(f"{others} chunks of other versions indexed")
    if tracked.patched_revision is not None:
        if observed.revision_value != tracked.patched_revision:
            found.append(
                f"record's {REVISION_KEY} {observed.revision_value}, last PATCH set {tracked.patched_revision}"
            )
        if observed.status == READY:
            stale = sum(n for value, n in observed.chunk_revisions.items() if value != tracked.patched_revision)
            if stale:
                found.append(f"{stale} passages without the last PATCH's {REVISION_KEY}")
    return found


@dataclass
class Aftermath:
    """Every document's outcome, the reconciler's findings, duplicated passages: the verdict."""

    documents: int = 0
    chunks: int = 0  # chunks of the tracked documents found in the index (the checks are not vacuous)
    outcomes: Counter[str] = field(default_factory=Counter)  # READY, DELETED, FAILED <code>, ...
    problems: dict[str, list[str]] = field(default_factory=dict)  # document id -> what is wrong
    drift: dict[str, int] = field(default_factory=dict)  # tenant -> reconciler findings
    drift_kinds: Counter[str] = field(default_factory=Counter)
    duplicated_passages: int = 0  # extra chunk documents for one (document, version, chunk index)
    same_text: int = 0  # the same text twice in one document version (reported)
    server_errors: int = 0  # responses of 500 or above but 503 (which is throttling, with Retry-After)

    @property
    def passed(self) -> bool:
        return (
            not self.problems
            and not any(self.drift.values())
            and self.duplicated_passages == 0
            and self.server_errors == 0
        )

    def failures(self) -> list[str]:
        lines = [f"{document_id}: {'; '.join(found)}" for document_id, found in sorted(self.problems.items())]
        lines += [
            f"tenant {tenant}: {count} reconciler findings" for tenant, count in sorted(self.drift.items()) if count
        ]
        if self.duplicated_passages:
            lines.append(f"{self.duplicated_passages} passages indexed twice (same document, version and chunk index)")
        if self.server_errors:
            lines.append(f"{self.server_errors} responses of 500 or above (503 aside)")
        return lines


def outcome_label(observed: Observed) -> str:
    if observed.status == FAILED:
        return f"FAILED {observed.error_code}"
    return observed.status or "no record"


def judge(
    documents: Iterable[tuple[Tracked, Observed]],
    drift: Mapping[str, Sequence[Mapping[str, Any]]],
    duplicated_passages: int,
    same_text: int,
    status_codes: Mapping[str, Mapping[str, int]],
) -> Aftermath:
    """The verdict over every tracked document, each tenant's reconciler findings, the duplicate counts
    and the users' status codes per route (route -> status -> responses)."""
    aftermath = Aftermath(duplicated_passages=duplicated_passages, same_text=same_text)
    for tracked, observed in documents:
        aftermath.documents += 1
        aftermath.chunks += sum(observed.chunks_by_version.values())
        aftermath.outcomes[outcome_label(observed)] += 1
        found = problems(tracked, observed)
        if found:
            aftermath.problems[tracked.document_id] = [f"{tracked.file} ({tracked.tenant_id})", *found]
    for tenant, findings in drift.items():
        aftermath.drift[tenant] = len(findings)
        aftermath.drift_kinds.update(str(finding.get("kind")) for finding in findings)
    aftermath.server_errors = sum(
        count
        for codes in status_codes.values()
        for status, count in codes.items()
        if status.isdigit() and int(status) >= 500 and int(status) != 503
    )
    return aftermath


# -- the tables ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RouteRow:
    """One line of the latency table: a route's requests and response times in milliseconds."""

    route: str
    requests: int
    failures: int
    p50: float
    p95: float
    p99: float
    average: float
    maximum: float
    per_second: float


def latency_table(rows: Sequence[RouteRow]) -> str:
    """The per-route table as markdown (docs/benchmarks.md takes it as it is)."""
    lines = [
        "| route | requests | failures | p50 ms | p95 ms | p99 ms | mean ms | max ms | req/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.route} | {r.requests} | {r.failures} | {r.p50:.0f} | {r.p95:.0f} | {r.p99:.0f} "
            f"| {r.average:.0f} | {r.maximum:.0f} | {r.per_second:.2f} |"
        )
    return "\n".join(lines)


def aftermath_table(aftermath: Aftermath) -> str:
    outcomes = ", ".join(f"{label} {count}" for label, count in sorted(aftermath.outcomes.items())) or "none"
    drift = sum(aftermath.drift.values())
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(aftermath.drift_kinds.items()))
    return "\n".join(
        [
            "| check | result |",
            "| --- | --- |",
            f"| documents | {aftermath.documents}: {outcomes} |",
            f"| their chunks in the index | {aftermath.chunks} |",
            f"| not as their input and requests call for | {len(aftermath.problems)} |",
            f"| reconciler drift ({len(aftermath.drift)} tenants) | {drift}{f' ({kinds})' if kinds else ''} |",
            f"| passages indexed twice (by chunk id) | {aftermath.duplicated_passages} |",
            f"| same text twice in one document version | {aftermath.same_text} |",
            f"| responses >= 500 but 503 | {aftermath.server_errors} |",
            f"| verdict | {'pass' if aftermath.passed else 'FAIL'} |",
        ]
    )
