"""Live status over the WebSocket API (AWS): who may connect, who is connected, and the push.

``$connect``'s authorizer verifies the ``token`` query parameter as the HTTP API's JWT authorizer
does (``rag_ingest.core.auth.TokenVerifier``) and passes tenant, subject and groups in its context;
``$connect`` stores the connection with a two-hour TTL (a WebSocket's longest life) and
``$disconnect`` deletes it. Every change of a documents-table item becomes one message
(``rag_ingest.live.updates.update_for``) posted to each of the tenant's connections whose principal
may read the document: a gone connection (410) is deleted, a throttled post retried with backoff,
any other failure fails the record for the stream to retry (a message twice shows the same state).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from rag_ingest.core.access import DEFAULT_TENANT_ADMIN_GROUP, GROUPS_CLAIM, Principal, can_read, groups_of
from rag_ingest.core.auth import InvalidTenantError, InvalidTokenError, TokenVerifier, tenant_of, validate_tenant_id
from rag_ingest.live.updates import LiveUpdate, update_for

# API Gateway closes a WebSocket connection after two hours, whatever happens on it.
MAX_CONNECTION_SECONDS = 2 * 60 * 60
# The authorizer context keys the $connect handler reads (API Gateway passes them as strings).
CONTEXT_TENANT = "tenant_id"
CONTEXT_SUBJECT = "sub"
CONTEXT_USERNAME = "username"
CONTEXT_GROUPS = "groups"  # the token's groups as a JSON array in a string: a context value is a string


class ConnectionGoneError(Exception):
    """The connection no longer exists (PostToConnection answered 410 Gone)."""


class PostThrottledError(Exception):
    """PostToConnection was throttled (429 / LimitExceeded): worth retrying after a pause."""


class UnauthorizedError(Exception):
    """Raised by the authorizer with the message API Gateway turns into a 401."""

    def __init__(self) -> None:
        # API Gateway answers 401 only for exactly this message.
        super().__init__("Unauthorized")


# -- authorizer -------------------------------------------------------------------------------


def _policy(principal_id: str, effect: str, resource: str, context: Mapping[str, str]) -> dict[str, Any]:
    return {
        "principalId": principal_id,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}],
        },
        "context": dict(context),
    }


def authorize_connect(verifier: TokenVerifier, token: str | None, method_arn: str) -> dict[str, Any]:
    """The REQUEST authorizer's answer for ``$connect``.

    An invalid token raises :class:`UnauthorizedError` (API Gateway: 401). A valid token without
    a valid tenant is denied (403): it is someone, but no tenant's documents are theirs.
    """
    if not token:
        raise UnauthorizedError()
    try:
        claims = verifier.verify(token)
    except InvalidTokenError as exc:
        raise UnauthorizedError() from exc
    subject = str(claims.get("sub") or "unknown")
    try:
        tenant = tenant_of(claims)
    except InvalidTenantError:
        return _policy(subject, "Deny", method_arn, {})
    context = {
        CONTEXT_TENANT: tenant,
        CONTEXT_SUBJECT: subject,
        CONTEXT_USERNAME: str(claims.get("cognito:username") or claims.get("email") or ""),
        CONTEXT_GROUPS: json.dumps(sorted(groups_of(claims.get(GROUPS_CLAIM)))),
    }
    return _policy(subject, "Allow", method_arn, context)


# -- connections ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    connection_id: str
    tenant_id: str
    subject: str
    connected_at: int  # epoch seconds
    expires_at: int  # epoch seconds: the table's TTL attribute
    groups: tuple[str, ...] = ()  # the token's groups (what it may read: rag_ingest.core.access)

    def principal(self, tenant_admin_group: str = DEFAULT_TENANT_ADMIN_GROUP) -> Principal:
        return Principal(
            tenant_id=self.tenant_id,
            subject=self.subject,
            groups=frozenset(self.groups),
            is_tenant_admin=bool(tenant_admin_group) and tenant_admin_group in self.groups,
        )


class ConnectionStore(Protocol):
    def put(self, connection: Connection) -> None: ...

    def delete(self, connection_id: str) -> None: ...

    def get(self, connection_id: str) -> Connection | None:
        """The connection and who holds it; None when it is not (or no longer) recorded."""
        ...

    def for_tenant(self, tenant_id: str) -> list[str]:
        """The ids of the tenant's open connections."""
        ...

    def connections_for_tenant(self, tenant_id: str) -> list[Connection]:
        """The tenant's open connections, with who holds each (subject, groups)."""
        ...


def open_connection(
    store: ConnectionStore,
    connection_id: str,
    authorizer_context: Mapping[str, Any],
    *,
    now: int | None = None,
    ttl_seconds: int = MAX_CONNECTION_SECONDS,
) -> Connection:
    """Records a connection ``$connect`` accepted; the tenant comes from the authorizer's context.

    The authorizer already validated the tenant; it is validated again because it becomes a key.
    """
    if not connection_id:
        raise ValueError("no connection id")
    tenant = validate_tenant_id(authorizer_context.get(CONTEXT_TENANT))
    connected_at = int(time.time()) if now is None else now
    connection = Connection(
        connection_id=connection_id,
        tenant_id=tenant,
        subject=str(authorizer_context.get(CONTEXT_SUBJECT) or ""),
        connected_at=connected_at,
        expires_at=connected_at + ttl_seconds,
        groups=tuple(sorted(groups_of(authorizer_context.get(CONTEXT_GROUPS)))),
    )
    store.put(connection)
    return connection


def close_connection(store: ConnectionStore, connection_id: str) -> None:
    """``$disconnect``: idempotent (deleting a connection twice is fine)."""
    if connection_id:
        store.delete(connection_id)


# -- push -------------------------------------------------------------------------------------


class ConnectionPoster(Protocol):
    def post(self, connection_id: str, data: bytes) -> None:
        """Sends ``data`` to the connection; raises ConnectionGoneError / PostThrottledError."""
        ...


def post_with_retries(
    poster: ConnectionPoster,
    connection_id: str,
    data: bytes,
    *,
    max_attempts: int,
    sleep: Callable[[float], None] = time.sleep,
    base_delay_seconds: float = 0.05,
    max_delay_seconds: float = 1.0,
) -> None:
    """Posts ``data``, retrying a throttled post with capped exponential backoff and full jitter;
    the last throttle, a gone connection and any other error are raised."""
    for attempt in range(1, max_attempts + 1):
        try:
            poster.post(connection_id, data)
            return
        except PostThrottledError:
            if attempt == max_attempts:
                raise
            sleep(random.uniform(0, min(max_delay_seconds, base_delay_seconds * 2 ** (attempt - 1))))


@dataclass
class PushReport:
    document_id: str | None = None
    tenant_id: str | None = None
    delivered: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    # Connections of the tenant whose principal may not read the document: sent nothing.
    withheld: list[str] = field(default_factory=list)
    skipped_reason: str | None = None


class PushFailedError(Exception):
    """Some connections could not be sent the update: the record fails, so the stream retries it."""

    def __init__(self, report: PushReport, causes: list[Exception]) -> None:
        self.report = report
        self.causes = causes
        kinds = ", ".join(sorted({type(cause).__name__ for cause in causes}))
        super().__init__(
            f"document {report.document_id}: {len(report.failed)} of "
            f"{len(report.failed) + len(report.delivered) + len(report.gone)} connections failed ({kinds})"
        )


@dataclass
class LivePusher:
    """Posts each document change to its tenant's open connections."""

    store: ConnectionStore
    poster: ConnectionPoster
    max_attempts: int = 4
    base_delay_seconds: float = 0.05
    max_delay_seconds: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    tenant_admin_group: str = DEFAULT_TENANT_ADMIN_GROUP

    def push(self, new_image: Mapping[str, Any] | None) -> PushReport:
        """Pushes one changed item (the stream record's deserialized ``NewImage``).

        A record without a new image (a removed item) or one that is not a valid document has
        nothing to tell a subscriber: it is skipped, never retried (it could only fail again and
        hold up the shard). Other failures raise, so the stream retries the record.
        """
        if not new_image:
            return PushReport(skipped_reason="no new image (the item was removed)")
        try:
            update = update_for(new_image)
        except (ValidationError, ValueError) as exc:
            return PushReport(
                document_id=str(new_image.get("document_id") or "") or None,
                skipped_reason=f"not a valid document record: {exc}",
            )
        return self.deliver(update)

    def deliver(self, update: LiveUpdate) -> PushReport:
        report = PushReport(document_id=update.message["document"]["document_id"], tenant_id=update.tenant_id)
        data = json.dumps(update.message, separators=(",", ":")).encode()
        failures: list[Exception] = []
        for connection in self.store.connections_for_tenant(update.tenant_id):
            connection_id = connection.connection_id
            if not can_read(connection.principal(self.tenant_admin_group), update.record):
                report.withheld.append(connection_id)
                continue
            try:
                self._post_with_retries(connection_id, data)
            except ConnectionGoneError:
                self.store.delete(connection_id)
                report.gone.append(connection_id)
            except Exception as exc:  # one bad connection must not cost the others this update
                report.failed.append(connection_id)
                failures.append(exc)
            else:
                report.delivered.append(connection_id)
        if failures:
            raise PushFailedError(report, failures)
        return report

    def _post_with_retries(self, connection_id: str, data: bytes) -> None:
        post_with_retries(
            self.poster,
            connection_id,
            data,
            max_attempts=self.max_attempts,
            sleep=self.sleep,
            base_delay_seconds=self.base_delay_seconds,
            max_delay_seconds=self.max_delay_seconds,
        )
