"""The one structured logger of a function: Powertools Logger, one JSON object per line.

Every module of the domain and every handler logs through :data:`logger` (``from rag_ingest.core.logs
import logger``). Its service is ``POWERTOOLS_SERVICE_NAME`` (one per function, set by the
template) and its level ``AWS_LAMBDA_LOG_LEVEL`` (the function's application log level) or
``POWERTOOLS_LOG_LEVEL``. A ``Logger()`` created elsewhere for the same service shares its
handler and its keys (Powertools keys loggers by service name).

Why not ``logging.getLogger(__name__)``: in the Lambda Python runtime the root logger stays at
WARNING, so every ``info`` of the domain was dropped, and ``extra`` fields were lost in the text
format.

The keys of a run (``document_id``, ``tenant_id``, ``stage``) are appended with :func:`run_keys`
for the lines of one stage run, SQS record or reaped document, and removed after it; handlers
also clear all keys at the start of each invocation (``inject_lambda_context(clear_state=True)``).

Outside Lambda (tests, the operator CLI, benchmarks) lines go to stderr, so that a command's
stdout stays its result.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from aws_lambda_powertools import Logger

#: Keys that identify what a line is about; every line of a run carries those that apply.
RUN_KEYS = ("document_id", "tenant_id", "stage")

logger = Logger(stream=sys.stdout if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else sys.stderr)


@contextmanager
def run_keys(**keys: object) -> Iterator[None]:
    """Append ``keys`` (None values are skipped) to every line logged inside the block; on exit,
    restore what those keys were before (nested runs keep the outer run's keys)."""
    present = {name: value for name, value in keys.items() if value is not None}
    current = logger.get_current_keys()
    previous = {name: current[name] for name in present if name in current}
    logger.append_keys(**present)
    try:
        yield
    finally:
        logger.remove_keys([name for name in present if name not in previous])
        if previous:
            logger.append_keys(**previous)
