"""The shared embedding-quota timeline on DynamoDB (the ``CapacityTimeline`` port): one item per
budget (model and Region), holding the moment the timeline is free again, ``free_at_us``.

A reservation is one conditional ``UpdateItem``, no read: the usual case, a timeline already booked
ahead, adds the cost to ``free_at_us`` on condition that it lies between now and the latest start
the caller accepts; a failed condition returns the item as it was
(``ReturnValuesOnConditionCheckFailure``), which says which case it was: an idle timeline (free
before now: booked from now with a second write, conditional on still being idle) or one booked too
far ahead (nothing written; the caller gives way). A race between two writers only means another
round (bounded). Every write is one write unit: the item is a few dozen bytes.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from rag_ingest.adapters.aws import error_code, resource, translate
from rag_ingest.core.errors import TransientError
from rag_ingest.core.tracing import traced
from rag_ingest.embeddings.capacity import Reservation

SCOPE_ATTRIBUTE = "scope"
FREE_AT_ATTRIBUTE = "free_at_us"
# Rounds of the two writes before giving up on a race (each round loses only to another reservation).
_MAX_ROUNDS = 8


@traced
class CapacityTable:
    def __init__(self, table_name: str, table_service: Any | None = None) -> None:
        service = table_service if table_service is not None else resource("dynamodb")
        self._table = service.Table(table_name)

    def reserve(self, scope: str, cost_us: int, now_us: int, latest_start_us: int) -> Reservation:
        for _ in range(_MAX_ROUNDS):
            booked = self._extend(scope, cost_us, now_us, latest_start_us)
            if isinstance(booked, Reservation):
                return booked
            if booked is not None and booked > latest_start_us:
                return Reservation(granted=False, start_us=booked, queue_end_us=booked)
            # Idle (or never used): book from now, unless someone booked it meanwhile.
            if self._start(scope, cost_us, now_us):
                return Reservation(granted=True, start_us=now_us, queue_end_us=now_us + cost_us)
        raise TransientError(f"embedding capacity {scope}: {_MAX_ROUNDS} rounds lost to concurrent reservations")

    def _extend(self, scope: str, cost_us: int, now_us: int, latest_start_us: int) -> Reservation | int | None:
        """The reservation after what is booked; else the ``free_at_us`` found (None: no item)."""
        try:
            answer = self._table.update_item(
                Key={SCOPE_ATTRIBUTE: scope},
                UpdateExpression="ADD #free :cost",
                ConditionExpression="#free BETWEEN :now AND :latest",
                ExpressionAttributeNames={"#free": FREE_AT_ATTRIBUTE},
                ExpressionAttributeValues={":cost": cost_us, ":now": now_us, ":latest": latest_start_us},
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise translate(exc, "reserve embedding capacity") from exc
            item = exc.response.get("Item") or {}
            found = item.get(FREE_AT_ATTRIBUTE)
            # The low-level shape ({"N": "..."}) is what a resource's exception carries.
            if isinstance(found, dict):
                found = found.get("N")
            return int(found) if found is not None else None
        end = int(answer["Attributes"][FREE_AT_ATTRIBUTE])
        return Reservation(granted=True, start_us=end - cost_us, queue_end_us=end)

    def _start(self, scope: str, cost_us: int, now_us: int) -> bool:
        try:
            self._table.update_item(
                Key={SCOPE_ATTRIBUTE: scope},
                UpdateExpression="SET #free = :end",
                ConditionExpression="attribute_not_exists(#free) OR #free < :now",
                ExpressionAttributeNames={"#free": FREE_AT_ATTRIBUTE},
                ExpressionAttributeValues={":end": now_us + cost_us, ":now": now_us},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise translate(exc, "reserve embedding capacity") from exc
        return True
