"""The operator commands: ``rag-ingest [--local | --stack NAME] redrive|replay|reap|reconcile ...``.

``redrive``, ``replay`` and ``reap`` run the same code as the Redrive and Reaper functions, from an
operator's machine, against the local stack (``.local/runtime/outputs.json``, the default) or, with
``--stack NAME``, the deployed stack (resources from its CloudFormation outputs, credentials from the
usual AWS chain). Prints the report as JSON; exits 1 when a document could not be handled, 2 on bad usage.

``reconcile`` invokes the stack's Reconciler function instead (``ReconcilerFunctionName``): the
OpenSearch domain admits the functions' roles, not an operator's, and the run's ``ReconcilerDrift``
metric is the function's (the alarm, locally too). Exits 0 when nothing drifted (or every finding
was repaired), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from rag_ingest.adapters.events import EventPublisher
from rag_ingest.adapters.stack_resources import (
    StackResources,
    StackResourcesError,
    deployed_stack,
    local_stack,
)
from rag_ingest.core.config import REAPER_MAX_DOCUMENTS_PER_RUN, REAPER_MAX_REDRIVES, REAPER_STUCK_AFTER_MINUTES
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.telemetry import NoTelemetry
from rag_ingest.operations.reaper import ReaperSettings, ReapRequest
from rag_ingest.operations.reconciler import ReconcileReport, ReconcileRequest, describe
from rag_ingest.operations.redrive import RedriveRequest
from rag_ingest.operations.replay import ReplayReport, ReplayRequest
from rag_ingest.wiring import reaper_for, recovery_for

# The deployed reaper's defaults; flags override them.
DEFAULT_REAPER = ReaperSettings(
    stuck_after_seconds=REAPER_STUCK_AFTER_MINUTES * 60,
    max_redrives=REAPER_MAX_REDRIVES,
    max_documents=REAPER_MAX_DOCUMENTS_PER_RUN,
)
_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> int:
    """``90``, ``90s``, ``15m``, ``2h``, ``3d`` → seconds."""
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 15m, 2h, 3d)")
    return int(match.group(1)) * _UNITS[match.group(2)]


def error_code(text: str) -> ErrorCode:
    try:
        return ErrorCode(text.upper())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown error code {text!r}; one of {', '.join(code.value for code in ErrorCode)}"
        ) from None


class EventsOnlyTelemetry(NoTelemetry):
    """The documents the reaper fails still announce DocumentFailed; EMF metrics printed by a CLI
    reach no CloudWatch (and would garble its JSON), so there are none."""

    def __init__(self, events: EventPublisher) -> None:
        self._events = events

    def document_failed(self, code: ErrorCode, detail: dict[str, Any]) -> None:
        self._events.publish("DocumentFailed", detail)


OPERATOR_COMMANDS = ("redrive", "replay", "reap", "reconcile")
# Longer than the Reconciler function's timeout (infra/config.py: 900 s, Lambda's maximum).
RECONCILE_READ_TIMEOUT_SECONDS = 910


def add_operator_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """``redrive``, ``replay`` and ``reap`` under the ``rag-ingest`` command (``commands`` is its subparsers)."""
    redrive = commands.add_parser(
        "redrive", parents=[common], help="operator: move dead-lettered upload events back to the ingest queue"
    )
    redrive.add_argument("--dry-run", action="store_true", help="list what would move, move nothing")
    redrive.add_argument("--max-messages", type=int, default=100)
    redrive.add_argument("--document-id", help="only messages about this document")
    redrive.add_argument(
        "--error-code", type=error_code, action="append", dest="error_codes", help="only documents failed with it"
    )
    redrive.add_argument("--older-than", type=duration, help="only messages sent at least this long ago")
    redrive.add_argument("--newer-than", type=duration, help="only messages sent at most this long ago")
    redrive.add_argument("--include-unparseable", action="store_true", help="move messages intake cannot parse")

    replay = commands.add_parser(
        "replay", parents=[common], help="operator: re-run FAILED documents from their first unfinished stage"
    )
    replay.add_argument("--dry-run", action="store_true", help="list what would be replayed, change nothing")
    replay.add_argument("--document-id", action="append", dest="document_ids", default=[], help="repeatable")
    replay.add_argument(
        "--error-code",
        type=error_code,
        action="append",
        dest="error_codes",
        help="repeatable; default without --document-id: the system codes "
        "(INTERNAL_ERROR, TRANSIENT_RETRIES_EXHAUSTED, EMBEDDING_CAPACITY, TIMEOUT, STUCK)",
    )
    replay.add_argument("--older-than", type=duration, help="only documents failed at least this long ago")
    replay.add_argument("--newer-than", type=duration, help="only documents failed at most this long ago")
    replay.add_argument("--max-documents", type=int, default=100)

    reap = commands.add_parser("reap", parents=[common], help="operator: run the stuck-document reaper once")
    reap.add_argument("--dry-run", action="store_true", help="report what it would do, change nothing")
    reap.add_argument("--stuck-after", type=duration, help=f"default {REAPER_STUCK_AFTER_MINUTES}m")
    reap.add_argument("--max-redrives", type=int)
    reap.add_argument("--max-documents", type=int)

    reconcile = commands.add_parser(
        "reconcile",
        parents=[common],
        help="operator: compare the documents table, the uploaded files and the index (--tenant T: one tenant)",
    )
    reconcile.add_argument("--repair", action="store_true", help="fix what is safe (default: report only)")
    reconcile.add_argument(
        "--grace", type=duration, help="objects younger than this may still be on their way through intake (15m)"
    )


def request_for(args: argparse.Namespace) -> RedriveRequest | ReplayRequest | ReapRequest:
    if args.command == "redrive":
        return RedriveRequest(
            dry_run=args.dry_run,
            max_messages=args.max_messages,
            document_id=args.document_id,
            error_codes=args.error_codes,
            older_than_seconds=args.older_than,
            newer_than_seconds=args.newer_than,
            include_unparseable=args.include_unparseable,
        )
    if args.command == "replay":
        return ReplayRequest(
            dry_run=args.dry_run,
            document_ids=args.document_ids,
            error_codes=args.error_codes,
            older_than_seconds=args.older_than,
            newer_than_seconds=args.newer_than,
            max_documents=args.max_documents,
        )
    return ReapRequest(
        dry_run=args.dry_run,
        stuck_after_seconds=args.stuck_after,
        max_redrives=args.max_redrives,
        max_documents=args.max_documents,
    )


def run(request: RedriveRequest | ReplayRequest | ReapRequest, resources: StackResources) -> BaseModel:
    if isinstance(request, ReapRequest):
        reaper = reaper_for(
            documents_table_name=resources.documents_table,
            state_machine_arn=resources.state_machine_arn,
            settings=DEFAULT_REAPER,
            telemetry=EventsOnlyTelemetry,
            clients=resources,
        )
        return reaper.reap(request)
    recovery = recovery_for(
        documents_table_name=resources.documents_table,
        state_machine_arn=resources.state_machine_arn,
        dlq_url=resources.dead_letter_queue_url,
        queue_url=resources.ingest_queue_url,
        clients=resources,
    )
    return recovery.run(request)


def reconcile_request(args: argparse.Namespace) -> ReconcileRequest:
    return ReconcileRequest(
        repair=bool(args.repair), tenant_id=getattr(args, "tenant", None), object_grace_seconds=args.grace
    )


def invoke_reconciler(request: ReconcileRequest, resources: StackResources) -> ReconcileReport:
    """Run the stack's Reconciler function once, synchronously, and read its report."""
    if not resources.reconciler_function:
        raise StackResourcesError("the stack has no ReconcilerFunctionName output (deployed before the reconciler?)")
    client = resources.slow_client("lambda", RECONCILE_READ_TIMEOUT_SECONDS)
    response = client.invoke(
        FunctionName=resources.reconciler_function,
        Payload=json.dumps(request.model_dump(mode="json", exclude_none=True)).encode(),
    )
    payload = json.loads(response["Payload"].read() or b"null")
    if response.get("FunctionError"):
        message = payload.get("errorMessage") if isinstance(payload, dict) else payload
        raise StackResourcesError(f"the Reconciler function failed: {message}")
    return ReconcileReport.model_validate(payload)


def print_reconcile(report: ReconcileReport, *, as_json: bool) -> int:
    if as_json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        scope = f"tenant {report.tenant_id}" if report.tenant_id else "every tenant"
        print(
            f"{scope}: {report.records} records, {report.object_keys} uploaded files, {report.chunks} chunks in "
            f"{report.indexed_versions} document versions; {report.drift} findings ({report.elapsed_ms} ms)"
        )
        for line in describe(report.findings):
            print(line)
    unresolved = [f for f in report.findings if f.repaired is None]
    return 1 if unresolved else 0


def run_operator(
    args: argparse.Namespace, parser: argparse.ArgumentParser, *, stack_name: str | None, outputs: Path
) -> int:
    """The operator command of ``args`` against the deployed stack ``stack_name`` (None: the local stack)."""
    if args.command == "reconcile":
        return run_reconcile(args, parser, stack_name=stack_name, outputs=outputs)
    try:
        request = request_for(args)
    except ValidationError as exc:
        parser.error("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    try:
        resources = local_stack(outputs) if stack_name is None else deployed_stack(stack_name, args.region)
    except StackResourcesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report = run(request, resources)
    print(json.dumps(report.model_dump(mode="json"), indent=2))
    return 1 if isinstance(report, ReplayReport) and report.errors else 0


def run_reconcile(
    args: argparse.Namespace, parser: argparse.ArgumentParser, *, stack_name: str | None, outputs: Path
) -> int:
    try:
        request = reconcile_request(args)
    except ValidationError as exc:
        parser.error("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    try:
        resources = local_stack(outputs) if stack_name is None else deployed_stack(stack_name, args.region)
        report = invoke_reconciler(request, resources)
    except StackResourcesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return print_reconcile(report, as_json=bool(getattr(args, "json", False)))
