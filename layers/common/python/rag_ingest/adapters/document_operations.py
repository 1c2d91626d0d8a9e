"""Operator transitions on the documents table: replay, reaping and deletion.

The workflow's own transitions live in ``status_repository``; these are the ones only operator
tooling makes (FAILED → QUEUED for a replay, QUEUED/PROCESSING → QUEUED or FAILED(STUCK) for
the reaper, → DELETING → DELETED for the API). They use the same table and the same style:
every write is a compare-and-set on the state read before it (status and version, plus
``updated_at`` or ``replays`` where a concurrent writer could slip in), so a write that lost a
race raises ``StaleWriteError`` instead of overwriting a newer state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from rag_ingest.adapters.aws import as_transient, error_code, is_transient, resource
from rag_ingest.adapters.status_repository import utc_now
from rag_ingest.errors import ErrorCode, StaleWriteError
from rag_ingest.models import DocumentRecord, DocumentStatus
from rag_ingest.tracing import traced

# The documents table's GSI (infra/constructs/storage.py STATUS_INDEX): status + updated_at.
STATUS_INDEX = "by_status"


@traced
class DocumentOperations:
    def __init__(self, table_name: str, table: Any | None = None) -> None:
        self._table = table if table is not None else resource("dynamodb").Table(table_name)

    # -- reads -----------------------------------------------------------------------------
    def get(self, document_id: str) -> DocumentRecord | None:
        try:
            item = self._table.get_item(Key={"document_id": document_id}, ConsistentRead=True).get("Item")
        except ClientError as exc:
            raise _translate(exc, "get document") from exc
        return DocumentRecord.model_validate(item) if item else None

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
            try:
                page = self._table.query(**kwargs)
            except ClientError as exc:
                raise _translate(exc, "query documents by status") from exc
            for item in page.get("Items", []):
                yield DocumentRecord.model_validate(item)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # -- replay and reaping ------------------------------------------------------------------
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
        self._update(
            record.document_id,
            f"SET {sets} REMOVE stage, error_code, error_detail",
            "#status = :expected_status AND #version = :version AND updated_at = :updated_at "
            f"AND {replays_condition}",
            names,
            values,
        )
        return record.model_copy(
            update={"status": DocumentStatus.QUEUED, "replays": replay, "execution_arn": execution_arn}
        )

    def mark_stuck(self, record: DocumentRecord, detail: str) -> None:
        """QUEUED/PROCESSING → FAILED(STUCK), if nothing wrote to the record since it was read."""
        self._update(
            record.document_id,
            "SET #status = :failed, error_code = :code, error_detail = :detail, updated_at = :now",
            "#status = :expected_status AND #version = :version AND updated_at = :updated_at",
            {"#status": "status", "#version": "version"},
            {
                ":expected_status": record.status.value,
                ":version": record.version,
                ":updated_at": record.updated_at,
                ":failed": DocumentStatus.FAILED.value,
                ":code": ErrorCode.STUCK.value,
                ":detail": detail[:2000],
                ":now": utc_now(),
            },
        )

    def mark_expired(self, record: DocumentRecord, detail: str) -> None:
        """AWAITING_UPLOAD → EXPIRED (the upload never came), if nothing wrote to the record since it was read."""
        self._update(
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
        try:
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
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise _translate(exc, "mark deleting") from exc
            current = self.get(document_id)
            # Missing, or another tenant's (reported exactly like missing), or already DELETED.
            if current is None or current.tenant_id != tenant_id:
                return None
            return current
        return DocumentRecord.model_validate(response["Attributes"])

    def mark_deleted(self, document_id: str) -> None:
        self._update(
            document_id,
            "SET #status = :deleted, deleted_at = :now, updated_at = :now "
            "REMOVE stage, error_code, error_detail, execution_arn",
            "#status = :deleting",
            {"#status": "status"},
            {":deleting": DocumentStatus.DELETING.value, ":deleted": DocumentStatus.DELETED.value, ":now": utc_now()},
        )

    # -- helpers ---------------------------------------------------------------------------
    def _update(
        self, document_id: str, expression: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> None:
        try:
            self._table.update_item(
                Key={"document_id": document_id},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise StaleWriteError(f"document {document_id} changed since it was read") from exc
            raise _translate(exc, "update document") from exc


def _translate(exc: ClientError, what: str) -> Exception:
    return as_transient(exc, what) if is_transient(exc) else exc
