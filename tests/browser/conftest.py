"""Browser tests: the page in headless Chromium against the session's local stack (tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from selenium import webdriver

from local.runtime.harness import LocalStackProcess
from tests.browser.page import Page, new_driver


@pytest.fixture
def driver() -> Iterator[webdriver.Chrome]:
    browser = new_driver()
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def page(driver: webdriver.Chrome, stack_process: LocalStackProcess, request: pytest.FixtureRequest) -> Page:
    """The page, loaded from the local stack's API server (which serves web/ and /config.json)."""
    name = "-".join(request.node.name.removeprefix("test_").split("_")[:4])  # screenshot file prefix
    opened = Page(driver, stack_process.api_url, name)
    opened.open()
    return opened


@pytest.fixture
def tenant() -> str:
    # OpenSearch keeps data between runs; a tenant of its own per test keeps lists and search clean.
    return f"web-{uuid.uuid4().hex[:10]}"
