"""``/_local/alarm-clock`` on moto's port: tests step CloudWatch's time instead of waiting for it.

``GET``: the clock (``now``, ``offset_seconds``, ``period_scale``, ``tick_seconds``). ``POST
{"advance_seconds": s}``: :meth:`AlarmEvaluator.advance` by ``s`` (every tick of that time runs at
once), answered with the clock and the transitions made. A WSGI middleware in front of moto's app
(beside moto's own ``/moto-api/``); ``503`` until the evaluator exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from local.runtime.alarms.evaluator import AlarmEvaluator
from local.runtime.moto_server import WsgiApp

ALARM_CLOCK_PATH = "/_local/alarm-clock"
# One call advances at most this much: every tick of it runs before the answer.
MAX_ADVANCE_SECONDS = 3600.0


def with_alarm_clock_control(app: WsgiApp, evaluator: Callable[[], AlarmEvaluator | None]) -> WsgiApp:
    """``app``, with :data:`ALARM_CLOCK_PATH` answered before it (``evaluator``: the current one)."""

    def routed(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "").rstrip("/") != ALARM_CLOCK_PATH:
            return app(environ, start_response)
        status, body = _respond(environ, evaluator())
        payload = json.dumps(body).encode()
        start_response(
            f"{status.value} {status.phrase}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
        )
        return [payload]

    return routed


def _respond(environ: dict[str, Any], evaluator: AlarmEvaluator | None) -> tuple[HTTPStatus, dict[str, Any]]:
    if evaluator is None:
        return HTTPStatus.SERVICE_UNAVAILABLE, {"message": "the alarm evaluator is not running yet"}
    method = environ.get("REQUEST_METHOD", "GET")
    if method == "GET":
        return HTTPStatus.OK, _clock(evaluator)
    if method != "POST":
        return HTTPStatus.METHOD_NOT_ALLOWED, {"message": "GET or POST"}
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        request = json.loads(environ["wsgi.input"].read(length) or b"{}")
        seconds = float(request["advance_seconds"])
        if not 0 <= seconds <= MAX_ADVANCE_SECONDS:
            raise ValueError(f"{seconds} is not in [0, {MAX_ADVANCE_SECONDS:g}]")
        changes = evaluator.advance(seconds)
    except (KeyError, TypeError, ValueError) as exc:
        return HTTPStatus.BAD_REQUEST, {"message": f'expected {{"advance_seconds": s >= 0}}: {exc}'}
    transitions = [
        {"alarm": alarm.logical_id, "name": alarm.name, "from": old, "to": verdict.state}
        for alarm, old, verdict in changes
    ]
    return HTTPStatus.OK, {**_clock(evaluator), "transitions": transitions}


def _clock(evaluator: AlarmEvaluator) -> dict[str, Any]:
    return {
        "now": evaluator.clock.now(),
        "offset_seconds": evaluator.clock.offset_seconds,
        "period_scale": evaluator.scale,
        "tick_seconds": evaluator.tick_seconds,
    }
