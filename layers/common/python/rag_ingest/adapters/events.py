"""EventBridge: DocumentReady / DocumentFailed for the frontend and other consumers.

Delivery is at least once (a retried stage may publish again): events carry document_id and
version so consumers can drop duplicates.
"""

from __future__ import annotations

import json
from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.core.errors import TransientError
from rag_ingest.core.tracing import traced

EVENT_SOURCE = "rag-ingest"


@traced
class EventPublisher:
    def __init__(self, bus_name: str = "default", events_client: Any | None = None) -> None:
        self._bus_name = bus_name
        self._events = events_client if events_client is not None else client("events")

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        entry = {
            "Source": EVENT_SOURCE,
            "DetailType": detail_type,
            "Detail": json.dumps(detail, default=str),
            "EventBusName": self._bus_name,
        }
        with translated("put events"):
            response = self._events.put_events(Entries=[entry])
        if response.get("FailedEntryCount"):
            # PutEvents reports per-entry failures (mostly throttling) in a 200 response.
            raise TransientError(f"EventBridge rejected {detail_type}: {response['Entries'][0]}")
