"""The page's Cognito sign-in (authorization code + PKCE, state, logout) and its polling fallback,
in headless Chromium against a strict stand-in of the managed login (tests/browser/oauth_standin.py):
the real Cognito is not reachable from the tests."""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import pytest

from tests.browser.oauth_standin import CLIENT_ID, CognitoStandIn
from tests.browser.page import Page

pytestmark = pytest.mark.browser


def test_cognito_sign_in_uses_code_flow_with_pkce_and_state_then_signs_out_at_the_managed_login(
    cognito_page: Page, cognito: CognitoStandIn
) -> None:
    page = cognito_page
    page.wait(lambda: page.find("#cognito-button").is_displayed(), "the Cognito sign-in button shows")
    assert not page.find("#local-sign-in").is_displayed()
    page.screenshot("signed-out")
    page.find("#cognito-button").click()
    page.wait(lambda: page.find("#workspace").is_displayed(), "signed in after the redirect back")

    [authorize] = cognito.authorize_requests
    assert authorize["client_id"] == CLIENT_ID and authorize["redirect_uri"] == cognito.page_url
    assert authorize["scope"] == "openid email profile" and authorize["code_challenge_method"] == "S256"
    [exchange] = cognito.token_requests
    assert exchange["valid"], exchange  # the verifier hashed to the challenge; code, client and redirect matched
    assert page.find("#who-user").text == "frank" and page.find("#who-tenant").text == "acme"
    # The code and state are gone from the address bar; the verifier is gone from storage.
    assert urlsplit(page.driver.current_url).query == ""
    storage = page.js("return Object.assign({}, sessionStorage)")
    assert "rag-ingest.pkce" not in storage and json.loads(storage["rag-ingest.session"])["token"]
    page.screenshot("signed-in")

    # No WebSocket answers here: the page polls instead and keeps trying to reconnect.
    page.wait(lambda: page.stats()["live"]["errors"] >= 1, "the live channel fails", 20)
    page.wait(lambda: page.stats()["polls"] >= 1, "the page polls while the channel is down", 20)
    assert page.stats()["live"]["state"] in ("polling", "connecting")

    page.find("#sign-out").click()
    page.wait(lambda: page.find("#cognito-button").is_displayed(), "back on the page, signed out")
    [logout] = cognito.logout_requests
    assert logout == {"client_id": CLIENT_ID, "logout_uri": cognito.page_url}
    assert "rag-ingest.session" not in page.js("return Object.assign({}, sessionStorage)")


def test_a_callback_with_a_forged_state_is_refused_without_asking_for_a_token(
    cognito_page: Page, cognito: CognitoStandIn
) -> None:
    page = cognito_page
    page.js("sessionStorage.setItem('rag-ingest.pkce', JSON.stringify({verifier: 'v'.repeat(64), state: 'mine'}))")
    page.driver.get(f"{cognito.page_url}?code=stolen&state=forged")
    page.wait(lambda: page.find("#sign-in-error").is_displayed(), "the sign-in error shows")
    assert "state did not match" in page.find("#sign-in-error").text
    assert cognito.token_requests == []
    assert not page.find("#workspace").is_displayed()


def test_an_expired_token_signs_the_user_out(cognito_page: Page, cognito: CognitoStandIn) -> None:
    page = cognito_page
    page.find("#cognito-button").click()
    page.wait(lambda: page.find("#workspace").is_displayed(), "signed in")
    # A token that expired a minute ago, as if the tab had been left open: a reload finds it stale.
    expired = page.js(
        """const [h, p, s] = JSON.parse(sessionStorage.getItem('rag-ingest.session')).token.split('.');
           const claims = JSON.parse(atob(p.replace(/-/g, '+').replace(/_/g, '/')));
           claims.exp = Math.floor(Date.now() / 1000) - 60;
           const body = btoa(JSON.stringify(claims)).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
           sessionStorage.setItem('rag-ingest.session', JSON.stringify({token: [h, body, s].join('.')}));
           return claims.exp;"""
    )
    assert expired < time.time()
    page.driver.refresh()
    page.wait(lambda: page.find("#cognito-button").is_displayed(), "signed out after the reload")
    assert "rag-ingest.session" not in page.js("return Object.assign({}, sessionStorage)")
