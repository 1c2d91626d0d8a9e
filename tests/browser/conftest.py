"""Browser tests: the page in headless Chromium against the session's local stack (tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from selenium import webdriver

from local.runtime.harness import OfflineStackProcess
from tests.browser.oauth_standin import CognitoStandIn
from tests.browser.page import Page, new_driver


@pytest.fixture
def driver() -> Iterator[webdriver.Chrome]:
    browser = new_driver()
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def page(driver: webdriver.Chrome, stack_process: OfflineStackProcess, request: pytest.FixtureRequest) -> Page:
    """The page, loaded from the local stack's API server (which serves web/ and /config.json)."""
    name = "-".join(request.node.name.removeprefix("test_").split("_")[:4])  # screenshot file prefix
    opened = Page(driver, stack_process.api_url, name)
    opened.open()
    return opened


@pytest.fixture
def tenant() -> str:
    # OpenSearch keeps data between runs; a tenant of its own per test keeps lists and search clean.
    return f"web-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def cognito() -> Iterator[CognitoStandIn]:
    stand_in = CognitoStandIn()
    stand_in.start()
    try:
        yield stand_in
    finally:
        stand_in.stop()


@pytest.fixture
def cognito_page(driver: webdriver.Chrome, cognito: CognitoStandIn) -> Page:
    page = Page(driver, cognito.page_url, "cognito")
    page.open()
    return page


def sign_in_with_cognito(page: Page) -> None:
    page.wait(lambda: page.find("#cognito-button").is_displayed(), "the Cognito sign-in button shows")
    page.find("#cognito-button").click()
    page.wait(lambda: page.find("#workspace").is_displayed(), "signed in after the redirect back")
    page.mark()  # the redirects were navigations; from here on there must be none
