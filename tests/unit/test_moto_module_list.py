"""The local runtime computes moto's list of service modules once (local.runtime.moto_server):
moto's server would list its package directory on every request."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator

import pytest
from moto import backends
from moto.moto_server import werkzeug_app

from local.runtime.moto_server import cache_moto_module_list

pytestmark = pytest.mark.unit


@pytest.fixture
def restored() -> Iterator[None]:
    original = backends.list_of_moto_modules
    yield
    backends.list_of_moto_modules = original


def test_the_cached_list_is_moto_s_own_and_no_longer_reads_the_disk(
    restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = list(backends.list_of_moto_modules())
    assert {"s3", "sqs", "stepfunctions", "dynamodb"} <= set(listed)
    cache_moto_module_list()
    cache_moto_module_list()  # a second call keeps the first cache
    monkeypatch.setattr(os, "listdir", lambda *_: pytest.fail("listed the directory again"))
    assert list(backends.list_of_moto_modules()) == listed
    # The dispatcher finds a service named by the Host header through the cached list.
    dispatcher = werkzeug_app.DomainDispatcherApplication(create_app=lambda _: None)  # type: ignore[arg-type,return-value]
    assert dispatcher.get_backend_for_host("sqs") == "sqs"


def test_the_dispatcher_still_calls_the_module_function_it_caches() -> None:
    # The seam: moto's server looks the function up on the backends module at each request.
    source = inspect.getsource(werkzeug_app.DomainDispatcherApplication.get_backend_for_host)
    assert "backends.list_of_moto_modules()" in source
