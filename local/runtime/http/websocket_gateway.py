"""The WebSocket API (API Gateway v2) for live status: ``$connect``, routes, ``@connections``.

An upgrade on ``/_local/live`` runs the template's ``$connect`` authorizer function (a REQUEST
authorizer: 401 without its identity sources or on ``Unauthorized``, 403 on a Deny) and the
``$connect`` integration, then accepts the socket (simple-websocket on Werkzeug's server). Messages
go to the route the selection expression picks, ``$disconnect`` runs when the socket closes. The
management API the pusher posts to, ``POST|GET|DELETE /_local/live/@connections/{id}``, answers
as API Gateway's (410 ``GoneException`` for a closed connection). Functions run through ``invoke``
(moto's Lambda backend, the runner). Imports simple-websocket, Werkzeug and this package.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from simple_websocket import ConnectionClosed, Server
from werkzeug.wrappers import Request

from local.runtime.http.response import LocalResponse, json_response
from local.runtime.http.websocket_api import WebSocketApiDefinition, WebSocketRoute

LOG = logging.getLogger("local.runtime.live")

Invoke = Callable[[str, bytes], tuple[int, str, bool]]
# PostToConnection's limit: a message of at most 128 KB.
MAX_POST_BYTES = 128 * 1024
# How long a post waits for a connection whose $connect is running (locally slower than in AWS).
OPENING_WAIT_SECONDS = 10.0
# A status that tells the server the socket was taken over and has closed: nothing more to write.
SWITCHED = HTTPStatus.SWITCHING_PROTOCOLS


@dataclass(eq=False)
class Connection:
    connection_id: str
    socket: Server
    source_ip: str
    user_agent: str
    connected_at: float = field(default_factory=time.time)
    last_active_at: float = field(default_factory=time.time)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, data: bytes) -> None:
        """One message, as a text frame when it is UTF-8 (as API Gateway sends JSON), else binary."""
        try:
            message: str | bytes = data.decode()
        except UnicodeDecodeError:
            message = data
        with self.lock:  # the pusher's workers may post to one connection at once
            self.socket.send(message)
            self.last_active_at = time.time()


class WebSocketGateway:
    """The template's WebSocket API on the local API port, and its open connections."""

    def __init__(self, *, invoke: Invoke, account_id: str, region: str, on_connect: Callable[[], None]) -> None:
        self._invoke = invoke
        self.account_id = account_id
        self.region = region
        # Called before a connection is accepted: the stream poller takes its position then.
        self._on_connect = on_connect
        self.definition: WebSocketApiDefinition | None = None
        self._lock = threading.Lock()
        self._connections: dict[str, Connection] = {}
        self._connecting = 0
        # Connections past their authorizer, not yet accepted: a post to one waits for its socket.
        self._opening: dict[str, threading.Event] = {}
        self._stopping = False
        self.posted = 0
        self.gone = 0

    # -- state --------------------------------------------------------------------------------

    def listening(self) -> bool:
        """Whether someone is connected or connecting (the stream poller reads only then)."""
        with self._lock:
            return bool(self._connections) or self._connecting > 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"connections": len(self._connections), "posted": self.posted, "gone": self.gone}

    def close_all(self) -> None:
        """Close every connection (the stack is stopping: no ``$disconnect`` runs)."""
        with self._lock:
            self._stopping = True
            connections = list(self._connections.values())
        for connection in connections:
            self._close(connection, 1001, "the local stack is stopping")

    # -- $connect, messages, $disconnect --------------------------------------------------------

    def not_an_upgrade(self) -> LocalResponse:
        """The answer to a plain request on the live path."""
        if self.definition is None or self._stopping:
            return json_response(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "no live channel: no WebSocket API"})
        return json_response(HTTPStatus.UPGRADE_REQUIRED, {"message": "a WebSocket upgrade is expected"})

    def serve(self, request: Request) -> LocalResponse:
        """An upgrade request: a refusal, or (once the socket has closed) ``SWITCHED``."""
        definition = self.definition
        if definition is None or self._stopping:
            return self.not_an_upgrade()
        with self._lock:
            self._connecting += 1
        try:
            connection_id = base64.urlsafe_b64encode(secrets.token_bytes(11)).decode()
            context = self._request_context(definition, request, connection_id, "$connect", "CONNECT")
            refusal, authorizer = self._authorize(definition, request, context)
            if refusal is not None:
                return refusal
            self._on_connect()
            if authorizer:
                context["authorizer"] = authorizer
            with self._lock:
                self._opening[connection_id] = threading.Event()
            refusal = self._run_route(definition.routes.get("$connect"), self._event(request, context))
            if refusal is not None:
                return refusal
            socket = Server.accept(request.environ)
            connection = Connection(connection_id, socket, context["identity"]["sourceIp"], request.user_agent.string)
            with self._lock:
                self._connections[connection_id] = connection
        finally:
            with self._lock:
                self._connecting -= 1
                opening = self._opening.pop(connection_id, None)
            if opening is not None:
                opening.set()
        note = f"connection {connection_id} of tenant {authorizer.get('tenant_id', '?')}"
        LOG.info("live: %s opened", note)
        reason = self._receive(definition, connection, request, context)
        response = LocalResponse(status=SWITCHED)
        response.note = f"{note}, closed: {reason}"
        return response

    def _authorize(
        self, definition: WebSocketApiDefinition, request: Request, context: dict[str, Any]
    ) -> tuple[LocalResponse | None, dict[str, Any]]:
        """The ``$connect`` authorizer's verdict: a refusal, or the context it passes on."""
        route = definition.routes.get("$connect")
        authorizer = route.authorizer if route is not None else None
        if authorizer is None:
            return None, {}
        headers = {name.lower(): value for name, value in request.headers.items()}
        if not authorizer.has_identity(request.args, headers):
            return json_response(HTTPStatus.UNAUTHORIZED, {"message": "Unauthorized"}, note="no identity source"), {}
        api = f"arn:aws:execute-api:{self.region}:{self.account_id}:{definition.api_id}"
        event = {
            "type": "REQUEST",
            "methodArn": f"{api}/{definition.stage}/$connect",
            **self._event(request, context),
        }
        status, payload, errored = self._invoke(authorizer.function_name, json.dumps(event).encode())
        answer = _json(payload)
        if errored or status != 200:
            if isinstance(answer, dict) and answer.get("errorMessage") == "Unauthorized":
                return json_response(HTTPStatus.UNAUTHORIZED, {"message": "Unauthorized"}, note="the authorizer"), {}
            LOG.warning("live: the $connect authorizer failed: %s", payload[:500])
            return json_response(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": "Internal server error"}), {}
        if not isinstance(answer, dict) or not _allows(answer.get("policyDocument"), event["methodArn"]):
            return json_response(HTTPStatus.FORBIDDEN, {"message": "Forbidden"}, note="the authorizer denied"), {}
        passed = {name: _context_value(value) for name, value in (answer.get("context") or {}).items()}
        return None, {"principalId": str(answer.get("principalId", "")), "integrationLatency": 0, **passed}

    def _run_route(self, route: WebSocketRoute | None, event: dict[str, Any]) -> LocalResponse | None:
        """Invoke a route's integration; for ``$connect`` a refusal unless it answers 2xx."""
        if route is None or route.function_name is None:
            return None
        status, payload, errored = self._invoke(route.function_name, json.dumps(event).encode())
        answer = _json(payload)
        if errored or status != 200:
            LOG.warning("live: route %s failed: %s", route.route_key, payload[:500])
            return json_response(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": "Internal server error"})
        code = int(answer.get("statusCode", 200)) if isinstance(answer, dict) else 200
        if not 200 <= code < 300:
            return json_response(code, {"message": "the $connect route refused the connection"})
        return None

    def _receive(
        self, definition: WebSocketApiDefinition, connection: Connection, request: Request, context: dict[str, Any]
    ) -> str:
        """Route the client's messages until the socket closes; then ``$disconnect``. The reason."""
        socket = connection.socket
        try:
            while True:
                message = socket.receive()
                if message is None:
                    continue
                connection.last_active_at = time.time()
                self._message(definition, connection, request, context, message)
        except ConnectionClosed:
            pass
        with self._lock:
            self._connections.pop(connection.connection_id, None)
            stopping = self._stopping
        reason = f"{int(socket.close_reason)} {socket.close_message or ''}".strip()
        if not stopping:
            closed = {**context, "routeKey": "$disconnect", "eventType": "DISCONNECT"}
            closed.update({"disconnectStatusCode": int(socket.close_reason), "disconnectReason": socket.close_message})
            self._run_route(definition.routes.get("$disconnect"), self._event(request, closed))
        return reason

    def _message(
        self,
        definition: WebSocketApiDefinition,
        connection: Connection,
        request: Request,
        context: dict[str, Any],
        message: str | bytes,
    ) -> None:
        route = definition.routes.get(_route_key(definition, message)) or definition.routes.get("$default")
        request_id = str(uuid.uuid4())
        if route is None:
            # API Gateway's answer to a message no route takes.
            answer = {"message": "Forbidden", "connectionId": connection.connection_id, "requestId": request_id}
            connection.send(json.dumps(answer).encode())
            return
        text = message if isinstance(message, str) else base64.b64encode(message).decode()
        event = self._event(request, {**context, "routeKey": route.route_key, "eventType": "MESSAGE"})
        event.update({"body": text, "isBase64Encoded": isinstance(message, bytes)})
        event["requestContext"].update({"messageId": request_id, "requestId": request_id})
        self._run_route(route, event)

    # -- @connections (the management API) ------------------------------------------------------

    def manage(self, method: str, connection_id: str, body: bytes) -> LocalResponse:
        """PostToConnection (POST), GetConnection (GET), DeleteConnection (DELETE)."""
        with self._lock:
            opening = self._opening.get(connection_id)
        if opening is not None:
            opening.wait(OPENING_WAIT_SECONDS)
        with self._lock:
            connection = self._connections.get(connection_id)
        if connection is None:
            return self._gone()
        if method == "GET":
            identity = {"sourceIp": connection.source_ip, "userAgent": connection.user_agent}
            times = {"connectedAt": _iso(connection.connected_at), "lastActiveAt": _iso(connection.last_active_at)}
            return json_response(HTTPStatus.OK, {**times, "identity": identity})
        if method == "DELETE":
            self._close(connection, 1000, "deleted")
            return LocalResponse(status=HTTPStatus.NO_CONTENT)
        if len(body) > MAX_POST_BYTES:
            headers = {"x-amzn-ErrorType": "PayloadTooLargeException"}
            return json_response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"message": "Message too long"}, headers=headers)
        try:
            connection.send(body)
        except (ConnectionClosed, OSError):
            return self._gone()  # it closed meanwhile
        with self._lock:
            self.posted += 1
        return LocalResponse(status=HTTPStatus.OK)

    # -- helpers ------------------------------------------------------------------------------

    def _gone(self) -> LocalResponse:
        with self._lock:
            self.gone += 1
        headers = {"x-amzn-ErrorType": "GoneException"}
        return json_response(HTTPStatus.GONE, {"message": None}, headers=headers, note="gone")

    def _close(self, connection: Connection, code: int, reason: str) -> None:
        try:
            with connection.lock:
                connection.socket.close(code, reason)
        except (ConnectionClosed, OSError):
            pass
        connection.socket.event.set()  # wakes the connection's thread waiting in receive()

    def _request_context(
        self, definition: WebSocketApiDefinition, request: Request, connection_id: str, route_key: str, kind: str
    ) -> dict[str, Any]:
        now = datetime.datetime.now(datetime.UTC)
        return {
            "routeKey": route_key,
            "eventType": kind,
            "extendedRequestId": str(uuid.uuid4()),
            "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "messageDirection": "IN",
            "stage": definition.stage,
            "connectedAt": int(now.timestamp() * 1000),
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "identity": {"sourceIp": request.remote_addr or "", "userAgent": request.user_agent.string},
            "requestId": str(uuid.uuid4()),
            "domainName": request.host,
            "connectionId": connection_id,
            "apiId": definition.api_id,
        }

    @staticmethod
    def _event(request: Request, context: dict[str, Any]) -> dict[str, Any]:
        """A WebSocket proxy event (version 1.0 shape: single and multi-value headers and query)."""
        return {
            "headers": {name: value for name, value in request.headers.items()},
            "multiValueHeaders": {name: request.headers.getlist(name) for name, _ in request.headers.items()},
            "queryStringParameters": request.args.to_dict() or None,
            "multiValueQueryStringParameters": request.args.to_dict(flat=False) or None,
            "requestContext": dict(context),
            "isBase64Encoded": False,
        }


def _route_key(definition: WebSocketApiDefinition, message: str | bytes) -> str:
    """The route key ``$request.body.<field>`` selects; ``$default`` for anything else."""
    expression = definition.route_selection_expression
    if not expression.startswith("$request.body.") or isinstance(message, bytes):
        return "$default"
    try:
        value: Any = json.loads(message)
        for part in expression.removeprefix("$request.body.").split("."):
            value = value.get(part) if isinstance(value, dict) else None
    except ValueError:
        return "$default"
    key = str(value) if isinstance(value, str | int | float) else "$default"
    return "$default" if key in ("$connect", "$disconnect") else key


def _allows(policy: Any, method_arn: str) -> bool:
    """Whether an IAM policy Allows ``execute-api:Invoke`` on ``method_arn`` and Denies nothing of it."""
    statements = (policy or {}).get("Statement") if isinstance(policy, dict) else None
    allowed = False
    for statement in statements if isinstance(statements, list) else [statements]:
        if not isinstance(statement, dict):
            continue
        resources = statement.get("Resource")
        names = resources if isinstance(resources, list) else [resources]
        if not any(_arn_matches(str(name), method_arn) for name in names):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    return allowed


def _arn_matches(pattern: str, arn: str) -> bool:
    return pattern == arn or pattern == "*" or (pattern.endswith("*") and arn.startswith(pattern[:-1]))


def _context_value(value: Any) -> str:
    """An authorizer context value as API Gateway passes it on: a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json(payload: str) -> Any:
    try:
        return json.loads(payload) if payload.strip() else None
    except ValueError:
        return None


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
