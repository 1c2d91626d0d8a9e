"""moto's one Lambda seam: every invocation moto makes runs in the local Lambda runner.

moto runs functions only in Docker; its seam ``LambdaFunction._invoke_lambda(self, event) ->
(output, errored, logs)`` is called for every invocation (Step Functions tasks, ``lambda.invoke``,
the SQS poller, the API adapter). ``install_moto_seam`` replaces it in the server process and
stores each invocation's log in moto's CloudWatch Logs; ``verify_moto_seam`` fails loudly when a
moto upgrade moves it. ``invoke_in_process`` is Invoke for a caller in this process (the API
adapter, as API Gateway calls Lambda from inside AWS), without boto3 and moto's HTTP server in
between (their cost: docs/local-stack.md, The API adapter).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from local.runtime.lambda_.runner import LambdaRunner

LOG = logging.getLogger("local.runtime.lambda")
MOTO_VERSION = "5.2.5"
# What AWS returns to callers in x-amz-log-result: the last 4 KB of the invocation's log.
LOG_TAIL_BYTES = 4096


class MotoSeamError(RuntimeError):
    """moto's Lambda invocation seam moved or changed: the local runner cannot attach."""


def verify_moto_seam() -> None:
    """Fail loudly if ``LambdaFunction._invoke_lambda`` moved or changed (moto pinned at 5.2.5)."""
    try:
        from moto.awslambda.models import LambdaFunction
    except ImportError as exc:
        raise MotoSeamError(f"moto.awslambda.models.LambdaFunction is gone: {exc}") from exc
    seam = getattr(LambdaFunction, "_invoke_lambda", None)
    if seam is None or not callable(seam):
        raise MotoSeamError("moto.awslambda.models.LambdaFunction._invoke_lambda is gone")
    signature = inspect.signature(seam)
    if list(signature.parameters) != ["self", "event"]:
        raise MotoSeamError(f"LambdaFunction._invoke_lambda signature changed: {signature}")
    if "tuple[str, bool, str]" not in str(signature.return_annotation):
        raise MotoSeamError(f"LambdaFunction._invoke_lambda return type changed: {signature.return_annotation}")
    if "self._invoke_lambda(event=body)" not in inspect.getsource(LambdaFunction.invoke):
        raise MotoSeamError("LambdaFunction.invoke no longer calls self._invoke_lambda(event=body)")


def invoke_in_process(account_id: str, region: str, function_name: str, payload: bytes) -> tuple[int, str, bool]:
    """A ``RequestResponse`` Invoke through moto's Lambda backend in this process: (status code,
    payload, function error), as boto3's ``invoke`` would return them. An unknown function is
    moto's ResourceNotFoundException (raised)."""
    from moto.awslambda.models import lambda_backends

    backend = lambda_backends[account_id][region]
    response_headers: dict[str, str] = {}
    request_headers = {"x-amz-invocation-type": "RequestResponse"}
    body = backend.invoke(function_name, None, payload.decode("utf-8"), request_headers, response_headers)
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else str(body or "")
    return 200, text, "x-amz-function-error" in response_headers


def install_moto_seam(runner: LambdaRunner) -> Callable[[], None]:
    """Route every moto Lambda invocation to the runner; returns a function that undoes it."""
    verify_moto_seam()
    import moto
    from moto.awslambda.models import LambdaFunction

    if moto.__version__ != MOTO_VERSION:
        LOG.warning(
            "moto %s is not the pinned %s: the Lambda seam was verified, but check", moto.__version__, MOTO_VERSION
        )
    original = LambdaFunction._invoke_lambda

    def _invoke_lambda(self: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
        result = runner.invoke(self.function_name, event)
        if result.logs:
            try:
                # Also into moto's CloudWatch Logs, as Lambda would.
                self.logs_backend.ensure_log_group(self.logs_group_name)
                self.save_logs(result.logs)
            except Exception:  # logging must never fail an invocation
                LOG.debug("could not store logs in moto", exc_info=True)
        tail = result.logs.encode()[-LOG_TAIL_BYTES:].decode("utf-8", errors="ignore")
        return result.output, result.errored, tail

    LambdaFunction._invoke_lambda = _invoke_lambda  # type: ignore[method-assign]

    def uninstall() -> None:
        LambdaFunction._invoke_lambda = original  # type: ignore[method-assign]

    return uninstall
