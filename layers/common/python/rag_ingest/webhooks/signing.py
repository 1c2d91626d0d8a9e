"""Standard Webhooks signatures (https://www.standardwebhooks.com, the spec's "Signature scheme").

``webhook-signature`` is ``v1,`` + base64(HMAC-SHA256(key, f"{id}.{timestamp}.{body}")), the key being
the base64-decoded part of the secret after ``whsec_``. Receivers verify with any Standard Webhooks
library (or Svix's): the spec's own test vector is in tests/unit/test_webhooks_signing.py.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # the spec asks for 24 to 64 random bytes
SIGNATURE_VERSION = "v1"
ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"


class InvalidSecretError(ValueError):
    """Not ``whsec_`` + base64."""


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise InvalidSecretError("a webhook secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error as exc:
        raise InvalidSecretError("a webhook secret is whsec_ + base64") from exc
    if not key:
        raise InvalidSecretError("empty webhook secret")
    return key


def sign(secret: str, message_id: str, timestamp: int, body: bytes | str) -> str:
    """The ``webhook-signature`` value of one message."""
    payload = body.encode("utf-8") if isinstance(body, str) else body
    signed = f"{message_id}.{timestamp}.".encode() + payload
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def signed_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        ID_HEADER: message_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(secret, message_id, timestamp, body),
        "content-type": "application/json",
    }


def verify(secret: str, headers: dict[str, str], body: bytes | str, *, now: int, tolerance_seconds: int = 300) -> bool:
    """What a receiver does (used by the tests' receivers): any listed ``v1`` signature matches, and the
    timestamp is within the tolerance (replay protection)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    try:
        message_id, timestamp = lowered[ID_HEADER], int(lowered[TIMESTAMP_HEADER])
        listed = lowered[SIGNATURE_HEADER].split()
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance_seconds:
        return False
    expected = sign(secret, message_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in listed)
