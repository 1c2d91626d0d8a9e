"""Sources' schedules in EventBridge Scheduler (``rag_ingest.sources.ports.SyncSchedules``): one
schedule per source in the stack's group, named by the source id, whose target starts the sync
workflow with ``{"tenant_id", "source_id", "phase": "start"}`` under the scheduler's own role.
The expression is the source's (``rate(...)`` or ``cron(...)``); Scheduler evaluates it.
"""

from __future__ import annotations

import json
from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.core.tracing import traced

_GONE = frozenset({"ResourceNotFoundException"})


@traced
class SyncScheduler:
    def __init__(self, group: str, state_machine_arn: str, role_arn: str, scheduler_client: Any | None = None) -> None:
        self._group = group
        self._state_machine_arn = state_machine_arn
        self._role_arn = role_arn
        self._scheduler = scheduler_client if scheduler_client is not None else client("scheduler")

    def set(self, tenant_id: str, source_id: str, expression: str) -> None:
        request = {
            "Name": source_id,
            "GroupName": self._group,
            "ScheduleExpression": expression,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED",
            "Target": {
                "Arn": self._state_machine_arn,
                "RoleArn": self._role_arn,
                "Input": json.dumps({"tenant_id": tenant_id, "source_id": source_id, "phase": "start"}),
            },
        }
        with translated("create schedule", expect={"ConflictException"}) as refusal:
            self._scheduler.create_schedule(**request)
        if refusal.refused:  # the source had one: it changes
            with translated("update schedule"):
                self._scheduler.update_schedule(**request)

    def clear(self, tenant_id: str, source_id: str) -> None:
        with translated("delete schedule", expect=_GONE):
            self._scheduler.delete_schedule(Name=source_id, GroupName=self._group)
