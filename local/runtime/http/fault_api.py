"""``/_local/faults``: the tests' control of injected Lambda failures, over HTTP.

No AWS API is emulated here: this is how a test process arms, lists and clears the faults the
Lambda runner applies (:mod:`local.runtime.lambda_.faults`), as a chaos tool would in AWS.

- ``GET``: the armed faults and the count injected so far per function;
- ``POST {"function", "mode", "times", "after_seconds", "match", "probability", "error_type",
  "error_message"}``: arm one (``201``, its description); the function by name, logical id,
  ARN or construct path;
- ``DELETE [?function=...]``: clear them (all, or one function's).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http import HTTPStatus
from urllib.parse import parse_qsl

from local.runtime.http.response import LocalResponse, json_response
from local.runtime.lambda_.faults import Fault
from local.runtime.lambda_.runner import LambdaRunner

LOG = logging.getLogger("local.runtime.api")


class FaultApi:
    def __init__(self, runner: Callable[[], LambdaRunner | None]) -> None:
        # The runner exists only once moto is up; until then the API answers 503.
        self._runner = runner

    def respond(self, method: str, raw_query: str, body: bytes) -> LocalResponse:
        runner = self._runner()
        if runner is None:
            return json_response(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "the Lambda runner is not ready"})
        if method == "GET":
            armed = {"faults": runner.faults.pending(), "injected": runner.faults.injected()}
            return json_response(HTTPStatus.OK, armed)
        if method == "DELETE":
            name = dict(parse_qsl(raw_query)).get("function")
            target = runner.find_function(name) if name else None
            if name and target is None:
                return json_response(HTTPStatus.NOT_FOUND, {"message": f"unknown function {name}"})
            cleared = runner.faults.clear(target.name if target else None)
            return json_response(HTTPStatus.OK, {"cleared": cleared})
        if method != "POST":
            return json_response(HTTPStatus.METHOD_NOT_ALLOWED, {"message": "GET, POST or DELETE"})
        return self._arm(runner, body)

    def _arm(self, runner: LambdaRunner, body: bytes) -> LocalResponse:
        try:
            request = json.loads(body or b"{}")
            name = str(request["function"])
            mode = str(request.get("mode", "raise"))
            times = int(request.get("times", 1))
            after = float(request["after_seconds"]) if request.get("after_seconds") is not None else None
            match = request.get("match")
            probability = float(request.get("probability", 1.0))
        except (ValueError, KeyError, TypeError) as exc:
            return json_response(HTTPStatus.BAD_REQUEST, {"message": f"bad fault request: {exc}"})
        function = runner.find_function(name)
        if function is None:
            known = sorted(f.display_name for f in runner.functions)
            return json_response(HTTPStatus.NOT_FOUND, {"message": f"unknown function {name}", "known": known})
        error_type = str(request.get("error_type", "TransientError"))
        fault = Fault(
            function_name=function.name,
            mode=mode,  # type: ignore[arg-type]  # validated by FaultInjector.add
            error_type=error_type,
            error_message=str(request.get("error_message", f"injected fault: {error_type}")),
            remaining=times,
            after_seconds=after,
            match=str(match) if match else None,
            probability=probability,
        )
        try:
            runner.faults.add(fault)
        except ValueError as exc:
            return json_response(HTTPStatus.BAD_REQUEST, {"message": str(exc)})
        LOG.warning("fault armed: %s", fault.describe())
        return json_response(HTTPStatus.CREATED, fault.describe())
