"""The local stack's cache of moto's Step Functions boto3 clients (local/runtime/moto_sfn_clients.py)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest

from local.runtime.moto_sfn_clients import (
    MAX_POOL_CONNECTIONS,
    SEAM_MODULE,
    SfnClientSeamError,
    install_sfn_client_cache,
    verify_sfn_client_seam,
)

pytestmark = pytest.mark.unit

LAMBDA_TASK_MODULE = "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils"
SQS_TASK_MODULE = "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sqs"


@pytest.fixture
def installed() -> Iterator[None]:
    uninstall = install_sfn_client_cache()
    try:
        yield
    finally:
        uninstall()


def _factory(module: str) -> Any:
    return importlib.import_module(module).boto_client_for


def test_every_task_module_gets_one_client_per_region_and_service(installed: None) -> None:
    lambda_tasks, sqs_tasks = _factory(LAMBDA_TASK_MODULE), _factory(SQS_TASK_MODULE)
    first = lambda_tasks(region="eu-west-1", service="lambda", state_credentials=None)
    # A second task, another module, other credentials (moto ignores them): the same client.
    assert sqs_tasks(region="eu-west-1", service="lambda", state_credentials=object()) is first
    assert lambda_tasks(region="eu-west-1", service="sqs", state_credentials=None) is not first
    assert lambda_tasks(region="us-east-1", service="lambda", state_credentials=None) is not first


def test_the_cached_client_is_the_one_moto_builds_with_a_larger_pool() -> None:
    moto_built = verify_sfn_client_seam()(region="eu-west-1", service="lambda", state_credentials=None)
    uninstall = install_sfn_client_cache()
    try:
        cached = _factory(LAMBDA_TASK_MODULE)(region="eu-west-1", service="lambda", state_credentials=None)
    finally:
        uninstall()
    pool = cached.meta.config.max_pool_connections
    assert pool == MAX_POOL_CONNECTIONS != moto_built.meta.config.max_pool_connections
    for setting in ("retries", "parameter_validation", "connect_timeout", "read_timeout"):
        assert getattr(cached.meta.config, setting) == getattr(moto_built.meta.config, setting), setting
    assert cached.meta.endpoint_url == moto_built.meta.endpoint_url
    assert cached.meta.region_name == moto_built.meta.region_name == "eu-west-1"
    assert cached.meta.service_model.service_name == moto_built.meta.service_model.service_name
    keys, moto_keys = cached._get_credentials(), moto_built._get_credentials()
    assert (keys.access_key, keys.secret_key) == (moto_keys.access_key, moto_keys.secret_key)


def test_uninstall_restores_moto_factory() -> None:
    original = verify_sfn_client_seam()
    uninstall = install_sfn_client_cache()
    assert _factory(LAMBDA_TASK_MODULE) is not original
    uninstall()
    assert _factory(LAMBDA_TASK_MODULE) is original
    assert _factory(SEAM_MODULE) is original
    first = original(region="eu-west-1", service="lambda", state_credentials=None)
    assert original(region="eu-west-1", service="lambda", state_credentials=None) is not first


def test_a_moved_or_changed_factory_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module(SEAM_MODULE)

    def different(region: str, service: str) -> None:  # a changed signature
        return None

    monkeypatch.setattr(module, "boto_client_for", different)
    with pytest.raises(SfnClientSeamError, match="signature changed"):
        install_sfn_client_cache()
    monkeypatch.delattr(module, "boto_client_for")
    with pytest.raises(SfnClientSeamError, match="is gone"):
        verify_sfn_client_seam()
