"""The operator commands' runs (their arguments: ``rag_ingest_client.cli.operator_args``).

``redrive``, ``replay`` and ``reap`` run the Redrive and Reaper functions' own code from an
operator's machine, against the local stack (``--outputs``) or ``--stack NAME`` (its outputs, the
usual AWS credentials), and print the report as JSON: exit 1 when a document could not be handled.
``reconcile`` invokes the stack's Reconciler function instead, whose role the OpenSearch domain
admits and whose drift metric the alarm reads (docs/operations.md, "The reconciler"): exit 0 when
nothing drifted or every finding was repaired.
May import: the domain package (its operations, adapters and wiring).
"""

from __future__ import annotations

import argparse
import json
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


# Longer than the Reconciler function's timeout (infra/config.py, functions.reconciler).
RECONCILE_READ_TIMEOUT_SECONDS = 910


def request_for(args: argparse.Namespace) -> RedriveRequest | ReplayRequest | ReapRequest:
    """The request of an operator command's arguments; an unknown error code is an ``ArgumentTypeError``."""
    if args.command in ("redrive", "replay") and args.error_codes:
        args.error_codes = [error_code(text) for text in args.error_codes]
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


def run_operator_command(
    args: argparse.Namespace, parser: argparse.ArgumentParser, *, stack_name: str | None, outputs: Path
) -> int:
    """The operator command of ``args`` against the deployed stack ``stack_name`` (None: the local stack)."""
    if args.command == "reconcile":
        return run_reconcile(args, parser, stack_name=stack_name, outputs=outputs)
    try:
        request = request_for(args)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
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
