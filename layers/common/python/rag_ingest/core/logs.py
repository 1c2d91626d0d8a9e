"""The one structured logger of a function: Powertools Logger, one JSON object per line.

Every module of the domain and every handler logs through :data:`logger`: service
``POWERTOOLS_SERVICE_NAME``, level ``AWS_LAMBDA_LOG_LEVEL`` or ``POWERTOOLS_LOG_LEVEL`` (another
``Logger()`` of the service shares its handler and keys). Not ``logging.getLogger``: Lambda's Python
runtime leaves the root logger at WARNING (every ``info`` dropped) and its text format loses ``extra``.
:func:`run_keys` adds a run's keys (``document_id``, ``tenant_id``, ``stage``) for the lines of one
stage run, SQS record or reaped document; handlers clear all keys at each invocation. Outside Lambda
lines go to stderr, so that a command's stdout stays its result.
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
