"""JSON answers of the local API port's stand-ins, as Werkzeug responses.

``note`` is why (an authorizer's refusal, a stream's end): the server writes it in the request's
log line, never in the answer. Imports Werkzeug only.
"""

from __future__ import annotations

import json
from typing import Any

from werkzeug.wrappers import Response


class LocalResponse(Response):
    """A Werkzeug response that may carry a note for the log (not sent)."""

    note: str = ""


def json_response(status: int, payload: Any, *, headers: dict[str, str] | None = None, note: str = "") -> LocalResponse:
    response = LocalResponse(
        json.dumps(payload, indent=2, default=str), status, headers, content_type="application/json"
    )
    response.note = note
    return response
