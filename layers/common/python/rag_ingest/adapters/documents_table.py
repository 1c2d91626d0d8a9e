"""The documents table: the source of truth for a document's state, one repository for every caller.

Every transition is a compare-and-set, so a late or duplicate worker's write is rejected
(``StaleWriteError``) instead of applied: the workflow's on the expected status and version; the
operator's (replay, stuck, expired, deleting, deleted) on the state read before it, status and
version plus ``updated_at`` or ``replays`` where a concurrent writer could slip in. Each caller sees
it through its own port (rag_ingest.core.ports); the transitions: docs/architecture.md, "Status
transitions".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Key

from rag_ingest.adapters.aws import CONDITION_FAILED, resource, translated
from rag_ingest.core.access import DocumentAccess
from rag_ingest.core.errors import ErrorCode, StaleWriteError
from rag_ingest.core.job import ObjectRef, Stage
from rag_ingest.core.record import (
    DocumentRecord,
    DocumentStatus,
    QueueOutcome,
    QueueResult,
    content_key,
    embed_cache_part,
)
from rag_ingest.core.s3_keys import filename_of
from rag_ingest.core.tracing import traced

# The documents table's GSIs (infra/constructs/storage.py): GET /documents, status + updated_at, and
# tenant + sha256 of the uploaded bytes (keys only: a duplicate upload finds the earlier document).
TENANT_INDEX = "by_tenant"
STATUS_INDEX = "by_status"
CONTENT_INDEX = "by_content"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


_IN_FLIGHT = (DocumentStatus.QUEUED.value, DocumentStatus.PROCESSING.value)
# GET /documents reads at most this many index pages per request: a tenant with a long run of
# DELETED documents gets a short page and a cursor, never an unbounded loop.
_MAX_LIST_READS = 5
# Copies of one upload a duplicate check re-reads at most (one READY copy is all it needs to name).
_MAX_COPY_CANDIDATES = 10


@traced
class DocumentsTable:
    def __init__(self, table_name: str, table: Any | None = None) -> None:
        self._table = table if table is not None else resource("dynamodb").Table(table_name)

    # -- reads -----------------------------------------------------------------------------
    def get(self, document_id: str) -> DocumentRecord | None:
        with translated("get document"):
            item = self._table.get_item(Key={"document_id": document_id}, ConsistentRead=True).get("Item")
        return DocumentRecord.model_validate(item) if item else None

    def list_by_tenant(
        self, tenant_id: str, *, limit: int, start_key: Mapping[str, str] | None = None
    ) -> tuple[list[DocumentRecord], dict[str, str] | None]:
        """Up to ``limit`` of the tenant's documents, newest first, without DELETED ones, and the
        index key to continue after (None when there is nothing more).

        A query on the tenant partition of the index, never a scan. The key returned is that of
        the last record returned (not DynamoDB's LastEvaluatedKey, which may lie past records
        this page leaves out), so the next page starts exactly after it.
        """
        kwargs: dict[str, Any] = {
            "IndexName": TENANT_INDEX,
            "KeyConditionExpression": "tenant_id = :tenant",
            "FilterExpression": "#status <> :deleted",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {":tenant": tenant_id, ":deleted": DocumentStatus.DELETED.value},
            "ScanIndexForward": False,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = dict(start_key)
        records: list[DocumentRecord] = []
        for _ in range(_MAX_LIST_READS):
            kwargs["Limit"] = limit - len(records)
            with translated("list documents"):
                page = self._table.query(**kwargs)
            records.extend(DocumentRecord.model_validate(item) for item in page.get("Items", []))
            last_evaluated = page.get("LastEvaluatedKey")
            if last_evaluated is None:
                return records, None
            if len(records) >= limit:
                return records, _tenant_index_key(records[-1])
            kwargs["ExclusiveStartKey"] = last_evaluated
        return records, {str(k): str(v) for k, v in kwargs["ExclusiveStartKey"].items()}

    def list_by_status(
        self,
        status: DocumentStatus,
        *,
        updated_before: str | None = None,
        updated_after: str | None = None,
    ) -> Iterator[DocumentRecord]:
        """Documents in ``status``, least recently updated first (the GSI is eventually consistent:
        re-read a record before acting on it)."""
        condition = Key("status").eq(status.value)
        if updated_before and updated_after:
            condition = condition & Key("updated_at").between(updated_after, updated_before)
        elif updated_before:
            condition = condition & Key("updated_at").lt(updated_before)
        elif updated_after:
            condition = condition & Key("updated_at").gt(updated_after)
        kwargs: dict[str, Any] = {"IndexName": STATUS_INDEX, "KeyConditionExpression": condition}
        while True:
            with translated("query documents by status"):
                page = self._table.query(**kwargs)
            for item in page.get("Items", []):
                yield DocumentRecord.model_validate(item)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def scan_records(self, tenant_id: str | None = None) -> Iterator[DocumentRecord]:
        """Every record, page by page, DELETED ones included, from the GSIs (eventually consistent:
        the reconciler re-reads a record before acting on it), never a Scan: one tenant's by a query
        on its partition of the tenant index, else each status's partition of the status index
        (every record has a status; both project every attribute)."""
        statuses: list[DocumentStatus | None] = [None] if tenant_id is not None else list(DocumentStatus)
        for status in statuses:
            start: dict[str, Any] = {}
            while True:
                with translated("read every document"):
                    if status is None:
                        key = Key("tenant_id").eq(tenant_id)
                        page = self._table.query(IndexName=TENANT_INDEX, KeyConditionExpression=key, **start)
                    else:
                        key = Key("status").eq(status.value)
                        page = self._table.query(IndexName=STATUS_INDEX, KeyConditionExpression=key, **start)
                for item in page.get("Items", []):
                    yield DocumentRecord.model_validate(item)
                if "LastEvaluatedKey" not in page:
                    break
                start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}

    # -- an upload and its workflow --------------------------------------------------------
    def create_awaiting_upload(
        self,
        *,
        document_id: str,
        tenant_id: str,
        filename: str,
        bucket: str,
        key: str,
        metadata: Mapping[str, Any] | None = None,
        uploaded_by: str | None = None,
        access: DocumentAccess | None = None,
        origin: Mapping[str, str] | None = None,
    ) -> DocumentRecord:
        now = utc_now()
        item = awaiting_upload_item(
            document_id=document_id,
            tenant_id=tenant_id,
            filename=filename,
            bucket=bucket,
            key=key,
            now=now,
            metadata=metadata,
            uploaded_by=uploaded_by,
            access=access,
            origin=origin,
        )
        stored = {**item, "metadata": {name: _dynamo_value(value) for name, value in item["metadata"].items()}}
        with translated("create document"):
            self._table.put_item(Item=stored, ConditionExpression="attribute_not_exists(document_id)")
        return DocumentRecord.model_validate(item)

    def mark_queued(
        self, *, document_id: str, tenant_id: str, ref: ObjectRef, event_time: str, size_bytes: int | None
    ) -> QueueResult:
        """Record an uploaded version as QUEUED, unless a duplicate or a late event."""
        now = utc_now()
        filename = filename_of(ref.key)
        with translated("mark queued", expect={CONDITION_FAILED}) as refusal:
            response = self._table.update_item(
                Key={"document_id": document_id},
                UpdateExpression=(
                    "SET tenant_id = :tenant, #status = :queued, #version = :version, #bucket = :bucket, "
                    "#key = :key, filename = if_not_exists(filename, :filename), attempts = :empty, "
                    "timings_ms = :empty, event_time = :event_time, size_bytes = :size, "
                    "created_at = if_not_exists(created_at, :now), updated_at = :now "
                    # A new version starts clean: no replays or errors inherited from the last one.
                    "REMOVE stage, parsed_parts, embedded_parts, embed_total, error_code, error_detail, page_count, "
                    "chunk_count, failed_pages, ocr_pages, lane, execution_arn, replays, last_error_code, "
                    "embed_cache_parts, content_sha256, content_key, duplicate_of, figures"
                ),
                ConditionExpression=(
                    "attribute_not_exists(document_id) OR "
                    # EXPIRED too: an upload begun before its URL expired may land after the grace period.
                    "(tenant_id = :tenant AND #status IN (:awaiting, :expired)) OR "
                    "(tenant_id = :tenant AND #version <> :version AND NOT #status IN (:deleting, :deleted) "
                    " AND (attribute_not_exists(event_time) OR event_time <= :event_time))"
                ),
                ExpressionAttributeNames={
                    "#status": "status",
                    "#version": "version",
                    "#bucket": "bucket",
                    "#key": "key",
                },
                ExpressionAttributeValues={
                    ":tenant": tenant_id,
                    ":queued": DocumentStatus.QUEUED.value,
                    ":awaiting": DocumentStatus.AWAITING_UPLOAD.value,
                    ":expired": DocumentStatus.EXPIRED.value,
                    ":deleting": DocumentStatus.DELETING.value,
                    ":deleted": DocumentStatus.DELETED.value,
                    ":version": ref.version,
                    ":bucket": ref.bucket,
                    ":key": ref.key,
                    ":filename": filename,
                    ":empty": {},
                    ":event_time": event_time,
                    ":size": size_bytes,
                    ":now": now,
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        if refusal.refused:
            current = self.get(document_id)
            return QueueResult.not_queued(current, tenant_id, ref)
        return QueueResult(QueueOutcome.QUEUED, DocumentRecord.model_validate(response["Attributes"]))

    def set_execution(self, document_id: str, version: str, execution_arn: str) -> None:
        self._transition(
            document_id,
            version,
            "SET execution_arn = :arn, updated_at = :now",
            {":arn": execution_arn},
            allowed=(*_IN_FLIGHT, DocumentStatus.READY.value, DocumentStatus.FAILED.value),
        )

    def start_stage(self, document_id: str, version: str, stage: Stage) -> None:
        self._transition(
            document_id,
            version,
            "SET #status = :processing, stage = :stage, updated_at = :now ADD attempts.#stage_name :one"
            # An Embed task starting again is still waiting until it embeds; the next stage is not.
            + ("" if stage is Stage.EMBED else " REMOVE capacity_wait_until"),
            {":processing": DocumentStatus.PROCESSING.value, ":stage": stage.value, ":one": 1},
            names={"#stage_name": stage.value},
            allowed=_IN_FLIGHT,
        )

    def record_stage(
        self, document_id: str, version: str, stage: Stage, elapsed_ms: int, *, accumulate: bool = False, **fields: Any
    ) -> None:
        """Store a finished stage's timing and counts (page_count, chunk_count, ...).

        ``accumulate`` adds the time instead of replacing it: Embed runs as several tasks.
        """
        sets = ["updated_at = :now"] if accumulate else ["timings_ms.#stage_name = :elapsed", "updated_at = :now"]
        values: dict[str, Any] = {":elapsed": elapsed_ms}
        names = {"#stage_name": stage.value}
        for index, (name, value) in enumerate(sorted(fields.items())):
            sets.append(f"#f{index} = :f{index}")
            names[f"#f{index}"] = name
            values[f":f{index}"] = value
        expression = "SET " + ", ".join(sets) + (" ADD timings_ms.#stage_name :elapsed" if accumulate else "")
        self._transition(document_id, version, expression, values, names=names, allowed=_IN_FLIGHT)

    def confirm_current(self, document_id: str, version: str) -> None:
        """Raise StaleWriteError unless ``version`` is still the document's in-flight version."""
        self._transition(document_id, version, "SET updated_at = :now", {}, allowed=_IN_FLIGHT)

    def record_parsed_range(self, document_id: str, version: str, first_page: int, pages: int) -> None:
        """Progress of the Parse Map, like Embed's: adding to a set is idempotent, so a retried
        range counts once, and concurrent ranges never overwrite each other's count."""
        self._transition(
            document_id,
            version,
            "SET updated_at = :now ADD parsed_parts :part",
            {":part": {f"{first_page}:{pages}"}},
            allowed=_IN_FLIGHT,
        )

    def record_embed_plan(self, document_id: str, version: str, total_chunks: int) -> None:
        self._transition(
            document_id,
            version,
            "SET embed_total = :total, updated_at = :now REMOVE embedded_parts, embed_cache_parts",
            {":total": total_chunks},
            allowed=_IN_FLIGHT,
        )

    def record_embedded_part(
        self, document_id: str, version: str, task: int, chunks: int, *, cache_hits: int = 0, cache_misses: int = 0
    ) -> None:
        """Progress of the Embed Map and its cache hits and misses: adding to a set is idempotent,
        so a retried task counts once."""
        self._transition(
            document_id,
            version,
            "SET updated_at = :now ADD embedded_parts :part, embed_cache_parts :cache_part REMOVE capacity_wait_until",
            {":part": {f"{task}:{chunks}"}, ":cache_part": {embed_cache_part(task, cache_hits, cache_misses)}},
            allowed=_IN_FLIGHT,
        )

    def record_capacity_wait(self, document_id: str, version: str, until: str) -> None:
        self._transition(
            document_id,
            version,
            "SET capacity_wait_until = :until, updated_at = :now",
            {":until": until},
            allowed=_IN_FLIGHT,
        )

    def find_ready_copy(self, *, tenant_id: str, content_sha256: str, document_id: str) -> str | None:
        """Another of the tenant's READY documents whose current version has these bytes, if any.

        A query on the tenant+sha256 partition of the content index (keys only, eventually
        consistent), each candidate then re-read: only a READY record of the same tenant with the
        same sha256 counts.
        """
        with translated("find a copy of the document"):
            page = self._table.query(
                IndexName=CONTENT_INDEX,
                KeyConditionExpression=Key("content_key").eq(content_key(tenant_id, content_sha256)),
                Limit=_MAX_COPY_CANDIDATES,
            )
        for item in page.get("Items", []):
            candidate_id = str(item["document_id"])
            if candidate_id == document_id:
                continue
            candidate = self.get(candidate_id)
            if (
                candidate is not None
                and candidate.tenant_id == tenant_id
                and candidate.status == DocumentStatus.READY
                and candidate.content_sha256 == content_sha256
            ):
                return candidate_id
        return None

    def mark_ready(self, document_id: str, version: str) -> None:
        self._transition(
            document_id,
            version,
            "SET #status = :ready, updated_at = :now REMOVE stage",
            {":ready": DocumentStatus.READY.value},
            allowed=(DocumentStatus.PROCESSING.value,),
        )

    def mark_failed(self, document_id: str, version: str, code: ErrorCode, detail: str) -> None:
        self._transition(
            document_id,
            version,
            "SET #status = :failed, error_code = :code, error_detail = :detail, updated_at = :now",
            {":failed": DocumentStatus.FAILED.value, ":code": code.value, ":detail": detail[:2000]},
            allowed=_IN_FLIGHT,
        )

    # -- PATCH /documents/{id} ---------------------------------------------------------------
    def update_fields(self, record: DocumentRecord, fields: Mapping[str, Any]) -> DocumentRecord:
        """Set ``fields`` (the user's: ``metadata`` today) and ``revision`` + 1, if the record is still
        as ``record`` was read: tenant, status, version and revision (a record without ``revision``
        is revision 1). Returns the record as written; ``StaleWriteError`` when it moved on."""
        names: dict[str, str] = {"#status": "status", "#version": "version", "#revision": "revision"}
        values: dict[str, Any] = {
            ":tenant": record.tenant_id,
            ":status": record.status.value,
            ":revision": record.revision,
            ":next": record.revision + 1,
            ":now": utc_now(),
        }
        sets = ["#revision = :next", "updated_at = :now"]
        for index, (name, value) in enumerate(sorted(fields.items())):
            names[f"#u{index}"] = name
            values[f":u{index}"] = _dynamo_fields(value)
            sets.append(f"#u{index} = :u{index}")
        revision = "#revision = :revision" + (" OR attribute_not_exists(#revision)" if record.revision == 1 else "")
        version = "attribute_not_exists(#version)"
        if record.version is not None:
            version = "#version = :version"
            values[":version"] = record.version
        with translated("update document fields", expect={CONDITION_FAILED}) as refusal:
            response = self._table.update_item(
                Key={"document_id": record.document_id},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression=f"tenant_id = :tenant AND #status = :status AND {version} AND ({revision})",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        if refusal.refused:
            raise StaleWriteError(f"document {record.document_id} changed since it was read") from refusal.error
        return DocumentRecord.model_validate(response["Attributes"])

    # -- operator transitions: replay and reaping ------------------------------------------
    def requeue_for_replay(self, record: DocumentRecord, *, execution_arn: str) -> DocumentRecord:
        """``record``'s status → QUEUED with ``replays`` + 1 and the replay execution's ARN.

        Applied only if the record is still exactly as read (status, version, updated_at,
        replays): a second replay of the same failure, or a worker that moved on, loses.
        """
        replay = record.replays + 1
        names = {"#status": "status", "#version": "version"}
        values: dict[str, Any] = {
            ":expected_status": record.status.value,
            ":version": record.version,
            ":updated_at": record.updated_at,
            ":queued": DocumentStatus.QUEUED.value,
            ":replay": replay,
            ":arn": execution_arn,
            ":now": utc_now(),
        }
        replays_condition = "attribute_not_exists(replays)"
        if record.replays:
            replays_condition = "replays = :previous"
            values[":previous"] = record.replays
        sets = "#status = :queued, replays = :replay, execution_arn = :arn, updated_at = :now"
        if record.error_code is not None:
            # Keep the failure being replayed visible to operators after the reset.
            sets += ", last_error_code = :last_error"
            values[":last_error"] = record.error_code.value
        self._update_as_read(
            record.document_id,
            f"SET {sets} REMOVE stage, error_code, error_detail",
            f"#status = :expected_status AND #version = :version AND updated_at = :updated_at AND {replays_condition}",
            names,
            values,
        )
        return record.model_copy(
            update={"status": DocumentStatus.QUEUED, "replays": replay, "execution_arn": execution_arn}
        )

    def mark_stuck(self, record: DocumentRecord, detail: str) -> None:
        """QUEUED/PROCESSING → FAILED(STUCK), if nothing wrote to the record since it was read."""
        self._fail_as_read(record, ErrorCode.STUCK, detail)

    def mark_source_missing(self, record: DocumentRecord, detail: str) -> None:
        """READY/FAILED → FAILED(SOURCE_OBJECT_MISSING) (the reconciler found the uploaded version
        gone), if nothing wrote to the record since it was read."""
        if record.status not in (DocumentStatus.READY, DocumentStatus.FAILED):
            raise StaleWriteError(f"document {record.document_id} is {record.status.value}, not READY or FAILED")
        self._fail_as_read(record, ErrorCode.SOURCE_OBJECT_MISSING, detail)

    def _fail_as_read(self, record: DocumentRecord, code: ErrorCode, detail: str) -> None:
        """``record`` → FAILED(``code``), if its status, version and ``updated_at`` are still as read."""
        self._update_as_read(
            record.document_id,
            "SET #status = :failed, error_code = :code, error_detail = :detail, updated_at = :now",
            "#status = :expected_status AND #version = :version AND updated_at = :updated_at",
            {"#status": "status", "#version": "version"},
            {
                ":expected_status": record.status.value,
                ":version": record.version,
                ":updated_at": record.updated_at,
                ":failed": DocumentStatus.FAILED.value,
                ":code": code.value,
                ":detail": detail[:2000],
                ":now": utc_now(),
            },
        )

    def mark_expired(self, record: DocumentRecord, detail: str) -> None:
        """AWAITING_UPLOAD → EXPIRED (the upload never came), if nothing wrote to the record since it was read."""
        self._update_as_read(
            record.document_id,
            "SET #status = :expired, error_detail = :detail, updated_at = :now",
            "#status = :awaiting AND updated_at = :updated_at",
            {"#status": "status"},
            {
                ":awaiting": DocumentStatus.AWAITING_UPLOAD.value,
                ":expired": DocumentStatus.EXPIRED.value,
                ":updated_at": record.updated_at,
                ":detail": detail[:2000],
                ":now": utc_now(),
            },
        )

    # -- deletion --------------------------------------------------------------------------
    def mark_deleting(self, document_id: str, tenant_id: str) -> DocumentRecord | None:
        """Any state of the tenant's document → DELETING (again, if a delete was interrupted).

        None when there is no such document for this tenant; a DELETED record is returned as is.
        """
        with translated("mark deleting", expect={CONDITION_FAILED}) as refusal:
            response = self._table.update_item(
                Key={"document_id": document_id},
                UpdateExpression="SET #status = :deleting, updated_at = :now",
                ConditionExpression="tenant_id = :tenant AND #status <> :deleted",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":tenant": tenant_id,
                    ":deleting": DocumentStatus.DELETING.value,
                    ":deleted": DocumentStatus.DELETED.value,
                    ":now": utc_now(),
                },
                ReturnValues="ALL_NEW",
            )
        if refusal.refused:
            current = self.get(document_id)
            # Missing, or another tenant's (reported exactly like missing), or already DELETED.
            if current is None or current.tenant_id != tenant_id:
                return None
            return current
        return DocumentRecord.model_validate(response["Attributes"])

    def mark_deleted(self, document_id: str) -> None:
        self._update_as_read(
            document_id,
            "SET #status = :deleted, deleted_at = :now, updated_at = :now "
            "REMOVE stage, error_code, error_detail, execution_arn",
            "#status = :deleting",
            {"#status": "status"},
            {":deleting": DocumentStatus.DELETING.value, ":deleted": DocumentStatus.DELETED.value, ":now": utc_now()},
        )

    # -- helpers ---------------------------------------------------------------------------
    def _transition(
        self,
        document_id: str,
        version: str,
        update_expression: str,
        values: dict[str, Any],
        *,
        allowed: tuple[str, ...],
        names: dict[str, str] | None = None,
    ) -> None:
        """A workflow transition: applied only while ``version`` is current and the status is ``allowed``."""
        allowed_values = {f":allowed{index}": status for index, status in enumerate(allowed)}
        with translated("update document", expect={CONDITION_FAILED}) as refusal:
            self._table.update_item(
                Key={"document_id": document_id},
                UpdateExpression=update_expression,
                ConditionExpression=(f"#version = :version AND #status IN ({', '.join(allowed_values)})"),
                ExpressionAttributeNames={"#status": "status", "#version": "version", **(names or {})},
                ExpressionAttributeValues={
                    ":version": version,
                    ":now": utc_now(),
                    **allowed_values,
                    **values,
                },
            )
        if refusal.refused:
            raise StaleWriteError(
                f"document {document_id} version {version} is no longer in {', '.join(allowed)}"
            ) from refusal.error

    def _update_as_read(
        self, document_id: str, expression: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> None:
        """An operator transition: applied only if ``condition`` (the record as read) still holds."""
        with translated("update document", expect={CONDITION_FAILED}) as refusal:
            self._table.update_item(
                Key={"document_id": document_id},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        if refusal.refused:
            raise StaleWriteError(f"document {document_id} changed since it was read") from refusal.error


def _dynamo_value(value: Any) -> Any:
    """A metadata value as boto3 stores it: a float as a Decimal (boto3 refuses floats), exactly as
    written (``Decimal(str(2.5))``, not the binary expansion); the record reads it back as int or float."""
    if isinstance(value, float):
        return Decimal(str(value))
    return value


def _dynamo_fields(value: Any) -> Any:
    """A user field (metadata: an object of values) as boto3 stores it (floats as Decimal)."""
    if isinstance(value, Mapping):
        return {name: _dynamo_fields(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_dynamo_fields(item) for item in value]
    return _dynamo_value(value)


def _tenant_index_key(record: DocumentRecord) -> dict[str, str]:
    """The key of ``record`` in the tenant index: the table key plus the index's keys."""
    return {"document_id": record.document_id, "tenant_id": record.tenant_id, "created_at": record.created_at}


def awaiting_upload_item(
    *,
    document_id: str,
    tenant_id: str,
    filename: str,
    bucket: str,
    key: str,
    now: str,
    metadata: Mapping[str, Any] | None = None,
    uploaded_by: str | None = None,
    access: DocumentAccess | None = None,
    origin: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A new document's stored item, before its upload arrives (the documents table's and its fakes').
    ``metadata`` is already valid (rag_ingest.core.metadata.validate_metadata); ``uploaded_by`` is the
    caller's ``sub``, ``access`` who else reads it (rag_ingest.core.access; None or open: the tenant)."""
    item: dict[str, Any] = {
        "document_id": document_id,
        "tenant_id": tenant_id,
        "status": DocumentStatus.AWAITING_UPLOAD.value,
        "filename": filename,
        "bucket": bucket,
        "key": key,
        "attempts": {},
        "timings_ms": {},
        "created_at": now,
        "updated_at": now,
        "metadata": dict(metadata or {}),
    }
    if uploaded_by:
        item["uploaded_by"] = uploaded_by
    if access is not None and not access.is_default:
        item["access"] = access.model_dump()
    for name in ("source_id", "source_uri", "change_token"):
        if origin and origin.get(name):
            item[name] = origin[name]
    return item
