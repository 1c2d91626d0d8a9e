"""Standard Webhooks signatures: the spec's published test vector, and what a receiver checks."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from rag_ingest.webhooks.signing import (
    SECRET_PREFIX,
    InvalidSecretError,
    new_secret,
    secret_key,
    sign,
    signed_headers,
    verify,
)

pytestmark = pytest.mark.unit

# The Standard Webhooks / Svix reference libraries' own test vector (their "sign" tests).
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = '{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_spec_test_vector() -> None:
    assert sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE
    assert sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY.encode()) == VECTOR_SIGNATURE


def test_matches_an_independent_hmac() -> None:
    secret = new_secret()
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, b"id1.1700000000.{}", hashlib.sha256).digest()).decode()
    assert sign(secret, "id1", 1700000000, "{}") == f"v1,{expected}"


def test_new_secrets_are_whsec_and_32_random_bytes() -> None:
    secrets = {new_secret() for _ in range(20)}
    assert len(secrets) == 20
    for secret in secrets:
        assert secret.startswith(SECRET_PREFIX)
        assert len(secret_key(secret)) == 32


@pytest.mark.parametrize("bad", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_not base64!"])
def test_a_malformed_secret_is_refused(bad: str) -> None:
    with pytest.raises(InvalidSecretError):
        secret_key(bad)


def test_headers_and_verification() -> None:
    secret = new_secret()
    body = b'{"type":"document.ready"}'
    headers = signed_headers(secret, "msg_1", 1_700_000_000, body)
    assert headers["webhook-id"] == "msg_1" and headers["webhook-timestamp"] == "1700000000"
    assert verify(secret, headers, body, now=1_700_000_010)
    assert not verify(secret, headers, body + b" ", now=1_700_000_010)  # the body changed
    assert not verify(new_secret(), headers, body, now=1_700_000_010)  # another secret
    assert not verify(secret, headers, body, now=1_700_001_000)  # too old: a replay
    assert not verify(secret, {**headers, "webhook-id": "msg_2"}, body, now=1_700_000_010)
    # Several signatures (a rotation): any one that matches is enough.
    assert verify(
        secret, {**headers, "webhook-signature": "v1,bm9wZQ== " + headers["webhook-signature"]}, body, now=1_700_000_000
    )
