"""One boto3 client per service for moto's Step Functions interpreter, instead of one per task.

moto's interpreter calls ``moto.stepfunctions.parser.asl.utils.boto_client.boto_client_for(region,
service, state_credentials)`` for every Task and builds a new client each time, a CPU cost Step
Functions in AWS does not charge (measured: docs/local-stack.md, Facts about moto). That client
depends only on (region, service, moto's port, in-process interception); moto ignores
``state_credentials``, so clients are cached on those (boto3 clients are thread-safe; each
execution runs in its own thread). ``install_sfn_client_cache`` replaces the function in every
interpreter module that imported it; ``verify_sfn_client_seam`` fails loudly if moto changes it.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

SEAM_MODULE = "moto.stepfunctions.parser.asl.utils.boto_client"
SEAM_NAME = "boto_client_for"
INTERPRETER_PACKAGE = "moto.stepfunctions.parser"
# The keys moto signs the interpreter's calls with (its server does not check them).
_MOTO_ACCESS_KEY, _MOTO_SECRET_KEY = "ak", "sk"
# A shared client holds one connection per concurrent call (a Lambda task's invoke lasts as long as
# the function runs); botocore's default pool of 10 would log "pool is full" in a burst.
MAX_POOL_CONNECTIONS = 64


class SfnClientSeamError(RuntimeError):
    """moto's Step Functions client factory moved or changed: the cache cannot attach."""


def verify_sfn_client_seam() -> Callable[..., Any]:
    """The original ``boto_client_for``; raises if it is gone or its signature changed."""
    try:
        module = importlib.import_module(SEAM_MODULE)
    except ImportError as exc:
        raise SfnClientSeamError(f"{SEAM_MODULE} is gone: {exc}") from exc
    factory = getattr(module, SEAM_NAME, None)
    if factory is None or not callable(factory):
        raise SfnClientSeamError(f"{SEAM_MODULE}.{SEAM_NAME} is gone")
    parameters = list(inspect.signature(factory).parameters)
    if parameters != ["region", "service", "state_credentials"]:
        raise SfnClientSeamError(f"{SEAM_NAME} signature changed: {parameters}")
    source = inspect.getsource(factory)
    # The cache key below is everything the client depends on; a new input would need a new key.
    expected_inputs = ("botocore_stubber.enabled", "moto_server_port()", "region_name=region", "service_name=service")
    expected_keys = (f'aws_access_key_id="{_MOTO_ACCESS_KEY}"', f'aws_secret_access_key="{_MOTO_SECRET_KEY}"')
    for expected in (*expected_inputs, *expected_keys):
        if expected not in source:
            raise SfnClientSeamError(f"{SEAM_NAME} no longer builds its client from {expected!r}")
    return factory  # type: ignore[no-any-return]


def _modules_importing_the_seam() -> list[Any]:
    """Every module of moto's interpreter that imports ``boto_client_for`` by name, imported now (a
    module imported later would keep the original). Found by their source, so the rest of the
    interpreter is not imported for nothing."""
    package_root = Path(importlib.import_module(INTERPRETER_PACKAGE).__path__[0])
    statement = f"from {SEAM_MODULE} import {SEAM_NAME}"
    modules = [importlib.import_module(SEAM_MODULE)]
    for path in sorted(package_root.rglob("*.py")):
        if statement not in path.read_text(encoding="utf-8"):
            continue
        relative = path.relative_to(package_root).with_suffix("")
        name = ".".join((INTERPRETER_PACKAGE, *relative.parts)).removesuffix(".__init__")
        try:
            modules.append(importlib.import_module(name))
        except ImportError:  # an optional integration whose dependency is absent: it cannot run either
            continue
    return modules


def _with_larger_pool(client: Any, service: str) -> Any:
    """The same client as moto builds (its endpoint, config, keys) with a pool sized for sharing."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        service,
        region_name=client.meta.region_name,
        endpoint_url=client.meta.endpoint_url,
        aws_access_key_id=_MOTO_ACCESS_KEY,
        aws_secret_access_key=_MOTO_SECRET_KEY,
        config=client.meta.config.merge(Config(max_pool_connections=MAX_POOL_CONNECTIONS)),
    )


def install_sfn_client_cache() -> Callable[[], None]:
    """Cache moto's Step Functions boto3 clients; returns a function that undoes it."""
    original = verify_sfn_client_seam()
    from moto.core.models import botocore_stubber
    from moto.settings import moto_server_port

    clients: dict[tuple[str, str, str, bool], Any] = {}
    lock = threading.Lock()

    def cached_boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        key = (region, service, moto_server_port(), bool(botocore_stubber.enabled))
        client = clients.get(key)
        if client is None:
            with lock:
                client = clients.get(key)
                if client is None:
                    client = clients[key] = _with_larger_pool(
                        original(region=region, service=service, state_credentials=state_credentials), service
                    )
        return client

    patched: list[Any] = []
    for module in _modules_importing_the_seam():
        if getattr(module, SEAM_NAME, None) is original:
            setattr(module, SEAM_NAME, cached_boto_client_for)
            patched.append(module)
    if sys.modules[SEAM_MODULE] not in patched:
        raise SfnClientSeamError(f"{SEAM_MODULE}.{SEAM_NAME} was not patched")

    def uninstall() -> None:
        for module in patched:
            setattr(module, SEAM_NAME, original)
        clients.clear()

    return uninstall
