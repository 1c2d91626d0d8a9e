"""moto's server, configured the way the local stack needs it."""

from __future__ import annotations

import logging
import os
import socket

from moto.core.config import default_user_config
from moto.server import ThreadedMotoServer


class PortInUseError(RuntimeError):
    pass


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


def start_moto_server(host: str, port: int) -> ThreadedMotoServer:
    ensure_port_free(host, port, "LOCAL_MOTO_PORT")
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    return server
