"""moto's server, configured the way the local stack needs it."""

from __future__ import annotations

import inspect
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from moto.core.config import default_user_config
from moto.server import ThreadedMotoServer


class PortInUseError(RuntimeError):
    pass


class MotoS3EventSeamError(RuntimeError):
    """moto's S3 event builder moved or changed: the versionId fix cannot attach."""


def verify_s3_event_seam() -> None:
    from moto.s3 import notifications

    builder = getattr(notifications, "_get_s3_event", None)
    if builder is None:
        raise MotoS3EventSeamError("moto.s3.notifications._get_s3_event is gone")
    parameters = list(inspect.signature(builder).parameters)
    if parameters != ["event_name", "bucket", "key", "notification_id"]:
        raise MotoS3EventSeamError(f"moto.s3.notifications._get_s3_event signature changed: {parameters}")


def patch_s3_event_version_id() -> Callable[[], None]:
    """Add ``versionId`` (versioned buckets) and ``sequencer`` to moto's S3 event records.

    S3 puts both in every ObjectCreated record; moto 5.2.5 omits them, so a versioned
    bucket's object would reach the pipeline without its version. Returns the undo function.
    """
    verify_s3_event_seam()
    from moto.s3 import notifications

    original = notifications._get_s3_event

    def _get_s3_event(event_name: str, bucket: Any, key: Any, notification_id: str) -> dict[str, Any]:
        event: dict[str, Any] = original(event_name, bucket, key, notification_id)
        version_id = getattr(key, "_version_id", None)
        for record in event.get("Records", []):
            s3_object = record.get("s3", {}).get("object", {})
            if version_id:
                s3_object.setdefault("versionId", str(version_id))
            s3_object.setdefault("sequencer", f"{time.time_ns():016X}")
        return event

    notifications._get_s3_event = _get_s3_event

    def undo() -> None:
        notifications._get_s3_event = original

    return undo


def cache_moto_module_list() -> None:
    """moto's server asks ``backends.list_of_moto_modules()`` on every request whether the Host
    header names a service, a listdir and a stat per entry (its cost: docs/local-stack.md, Facts
    about moto). The list cannot change while the process runs: computed once instead."""
    from moto import backends

    if getattr(backends.list_of_moto_modules, "__wrapped__", None) is not None:
        return  # already cached
    modules = tuple(backends.list_of_moto_modules())

    def cached() -> Iterable[str]:
        return modules

    cached.__wrapped__ = backends.list_of_moto_modules  # type: ignore[attr-defined]
    backends.list_of_moto_modules = cached


def ensure_port_free(host: str, port: int, setting: str) -> None:
    # ThreadedMotoServer.start() would wait forever if its server thread cannot bind.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise PortInUseError(f"{host}:{port} is in use ({setting}): {exc}") from exc


def configure_moto(port: int, *, verbose: bool = False) -> None:
    """Process-wide moto settings; call before the first request reaches moto."""
    # The Step Functions interpreter calls Lambda back at http://localhost:$MOTO_PORT.
    os.environ["MOTO_PORT"] = str(port)
    # Run state machines for real (the default only records executions).
    default_user_config["stepfunctions"]["execute_state_machine"] = True
    if not verbose:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    patch_s3_event_version_id()
    cache_moto_module_list()


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
WsgiWrapper = Callable[[WsgiApp], WsgiApp]


class WrappedMotoServer(ThreadedMotoServer):
    """moto's threaded server, its WSGI app optionally wrapped (the kept state's journal:
    persistence/), polling for a stop request every 50 ms instead of socketserver's 500."""

    def __init__(self, ip_address: str, port: int, wrap: WsgiWrapper | None = None) -> None:
        super().__init__(ip_address=ip_address, port=port, verbose=False)
        self._wrap = wrap

    def _server_entry(self) -> None:  # ThreadedMotoServer's, with the app wrapped
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        app: WsgiApp = DomainDispatcherApplication(create_backend_app)
        if self._wrap is not None:
            app = self._wrap(app)
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever(poll_interval=0.05)


def start_moto_server(host: str, port: int, wrap: WsgiWrapper | None = None) -> ThreadedMotoServer:
    ensure_port_free(host, port, "LOCAL_MOTO_PORT")
    server = WrappedMotoServer(host, port, wrap)
    server.start()
    return server
