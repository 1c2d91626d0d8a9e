"""A moto server on a free loopback port, a fake Lambda context (as in Powertools' examples), and a
handler imported fresh with its environment (a cold start)."""

from __future__ import annotations

import importlib
import os
import socket
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from local.runtime.moto_server import WrappedMotoServer

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def moto_server() -> Iterator[str]:
    """Start moto's server and point boto3 at it through the environment, as the local stack does."""
    port = free_port()
    server = WrappedMotoServer("127.0.0.1", port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in _AWS_ENV}
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }
    )
    try:
        yield endpoint
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_AWS_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)


@dataclass
class FakeLambdaContext:
    function_name: str = "test"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:test"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/test"
    log_stream_name: str = "test"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def import_handler(function_dir: str, env: Mapping[str, str]) -> ModuleType:
    """A fresh import of ``functions/<dir>/app.py`` (``functions.<dir>.app``) with ``env`` set first:
    handlers validate their environment at import, like a Lambda cold start, so a cached module
    would keep the environment of the test that imported it first. Its sibling modules (the API's
    ``routes``) are imported afresh with it, as in a new execution environment."""
    os.environ.update(env)
    package = f"functions.{function_dir}"
    for cached in [module for module in sys.modules if module.startswith(f"{package}.")]:
        sys.modules.pop(cached, None)
    return importlib.import_module(f"{package}.app")
