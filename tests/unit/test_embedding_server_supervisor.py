"""The local stack's embedding server is supervised: killed (``kill -9``), it is started again on
the same port, so the URL the functions were given keeps working; stopped, it stays stopped.
Runs a stand-in server (tests/support/stand_in_embedding_server.py) instead of the model."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from local.embedding_server.process import EmbeddingServerProcess
from local.runtime.harness import process_state
from tests.support.pipeline_probe import wait_until

pytestmark = pytest.mark.unit

STAND_IN = (sys.executable, "-m", "tests.support.stand_in_embedding_server")


def ping(url: str) -> int:
    """The pid of the server answering at ``url``."""
    with urllib.request.urlopen(f"{url}/ping", timeout=5) as response:
        return int(json.load(response)["pid"])


def answers(url: str) -> int | None:
    try:
        return ping(url)
    except OSError:
        return None


def replaced(url: str, killed: int) -> int | None:
    """The pid of the server answering at ``url`` once it is another process than ``killed``."""
    pid = answers(url)
    return pid if pid != killed else None


@pytest.fixture
def server() -> Iterator[EmbeddingServerProcess]:
    process = EmbeddingServerProcess(command=STAND_IN)
    process.start(timeout=30)
    try:
        yield process
    finally:
        process.stop()


def test_a_killed_server_is_started_again_on_the_same_port(server: EmbeddingServerProcess) -> None:
    url, first = server.url, server.pid
    assert first is not None and ping(url) == first

    os.kill(first, signal.SIGKILL)
    second = wait_until(lambda: replaced(url, first), timeout=20, what="a new server on the same URL")

    assert server.url == url
    assert server.pid == second
    assert server.restarts == 1
    assert process_state(first) is None  # reaped by the supervisor, not left a zombie


def test_it_is_started_again_after_every_kill(server: EmbeddingServerProcess) -> None:
    url = server.url
    for round_number in (1, 2):
        killed = server.pid
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        wait_until(functools.partial(replaced, url, killed), timeout=20, what=f"restart {round_number}")
    assert server.restarts == 2


def test_a_stopped_server_is_not_started_again(server: EmbeddingServerProcess) -> None:
    url, pid = server.url, server.pid
    assert pid is not None
    server.stop()
    time.sleep(1.0)  # a restart takes well under a second (the tests above): none may come

    assert answers(url) is None
    assert server.pid is None and server.port is None
    assert server.restarts == 0
