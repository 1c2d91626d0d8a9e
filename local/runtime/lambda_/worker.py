"""One warm Lambda execution environment: imports a handler once, then runs invocations.

Run by the runner as ``python -P worker.py <fd> <module-name>`` with the function's environment
(``-P``: this directory must not shadow the handler's imports); standard library only, so nothing
of the runtime leaks into the function's imports. JSON messages over a ``Connection`` on ``fd``
(stdout is the handler's log): worker -> runner once ``ready`` or ``init_error``; runner -> worker
``invoke`` (``request_id``, ``event``, ``deadline_ms``, ``invoked_function_arn``, ``fault``: null,
``crash_after`` or ``hang``); worker -> runner ``result`` (``payload``) or ``error``. After each
invocation ``LOG_END_MARKER + request_id`` on fd 1 tells the runner it has the whole log.
"""

from __future__ import annotations

import decimal
import importlib.util
import json
import logging
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection
from types import ModuleType
from typing import Any

LOG_END_MARKER = "\x1elocal-runtime-end "


class LambdaContext:
    """The context object of the Python runtime (same attribute names and types)."""

    def __init__(self, request_id: str, deadline_ms: int, invoked_function_arn: str) -> None:
        self.aws_request_id = request_id
        self.invoked_function_arn = invoked_function_arn
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))

    def log(self, message: str) -> None:
        sys.stdout.write(message)


def _error_payload(exc: BaseException, request_id: str | None, error_type: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "errorMessage": str(exc),
        "errorType": error_type or type(exc).__name__,
        "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)),
    }
    if request_id:
        payload["requestId"] = request_id
    return payload


def _json_default(value: Any) -> Any:
    # As the Python runtime does: Decimals (from DynamoDB) serialize as numbers.
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _log_end(request_id: str) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, f"{LOG_END_MARKER}{request_id}\n".encode())


def _send(connection: Connection, message: dict[str, Any]) -> None:
    connection.send_bytes(json.dumps(message).encode())


def _configure_root_logger() -> None:
    # The Python runtime installs one root handler (level stays WARNING unless the code sets it).
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(levelname)s]\t%(asctime)s\t%(message)s"))
    logging.getLogger().addHandler(handler)


def _load_handler(handler: str, code_dir: str, module_name: str) -> Any:
    module_path, _, function_name = handler.rpartition(".")
    if not module_path or not function_name:
        raise _RuntimeFault("Runtime.MalformedHandlerName", f"Bad handler '{handler}': not enough values to unpack")
    file_path = os.path.join(code_dir, *module_path.split(".")) + ".py"
    if not os.path.isfile(file_path):
        file_path = os.path.join(code_dir, module_path.replace(".", "/")) + ".py"
    spec = importlib.util.spec_from_file_location(module_name, file_path)
    if spec is None or spec.loader is None or not os.path.isfile(file_path):
        raise _RuntimeFault("Runtime.ImportModuleError", f"Unable to import module '{module_path}': No module file")
    module: ModuleType = importlib.util.module_from_spec(spec)
    # A unique name: every function's file is app.py, and so is the CDK entry point.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise _RuntimeFault("Runtime.ImportModuleError", f"Unable to import module '{module_path}': {exc}") from exc
    except SyntaxError as exc:
        raise _RuntimeFault("Runtime.UserCodeSyntaxError", f"Syntax error in module '{module_path}': {exc}") from exc
    try:
        return getattr(module, function_name)
    except AttributeError as exc:
        raise _RuntimeFault(
            "Runtime.HandlerNotFound", f"Handler '{function_name}' missing on module '{module_path}'"
        ) from exc


class _RuntimeFault(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _print_error(error: dict[str, Any]) -> None:
    trace = "".join(error.get("stackTrace", []))
    print(
        f"[ERROR] {error['errorType']}: {error['errorMessage']}\nTraceback (most recent call last):\n{trace}",
        file=sys.stderr,
    )


def _invoke(handler: Any, message: dict[str, Any]) -> dict[str, Any]:
    request_id = str(message["request_id"])
    context = LambdaContext(request_id, int(message["deadline_ms"]), str(message["invoked_function_arn"]))
    try:
        result = handler(json.loads(message["event"]), context)
    except Exception as exc:
        error = _error_payload(exc, request_id)
        _print_error(error)
        return {"type": "error", "error": error}
    try:
        return {"type": "result", "payload": json.dumps(result, default=_json_default)}
    except (TypeError, ValueError) as exc:
        error = _error_payload(exc, request_id, "Runtime.MarshalError")
        error["errorMessage"] = f"Unable to marshal response: {exc}"
        _print_error(error)
        return {"type": "error", "error": error}


def main(argv: list[str]) -> int:
    connection = Connection(int(argv[1]))
    module_name = argv[2]
    _configure_root_logger()
    try:
        handler = _load_handler(os.environ["_HANDLER"], os.environ["LAMBDA_TASK_ROOT"], module_name)
    except _RuntimeFault as fault:
        error = _error_payload(fault, None, fault.error_type)
        _print_error(error)
        _log_end("init")
        _send(connection, {"type": "init_error", "error": error})
        return 1
    except Exception as exc:
        # An exception at import (e.g. a configuration check at cold start) is the init error.
        error = _error_payload(exc, None)
        _print_error(error)
        _log_end("init")
        _send(connection, {"type": "init_error", "error": error})
        return 1
    _log_end("init")
    _send(connection, {"type": "ready"})
    while True:
        try:
            message = json.loads(connection.recv_bytes())
        except (EOFError, OSError):
            return 0  # the runner closed the connection (or died): the environment ends
        if message.get("type") != "invoke":
            continue
        fault_mode = message.get("fault")
        if fault_mode == "hang":
            # Fault injection: a handler stuck past its timeout (the runner kills the worker).
            while True:
                time.sleep(3600)
        response = _invoke(handler, message)
        _log_end(str(message["request_id"]))
        if fault_mode == "crash_after":
            # Fault injection: the work is done, then the environment dies before answering.
            os.kill(os.getpid(), signal.SIGKILL)
        _send(connection, response)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
