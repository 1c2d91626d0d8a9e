"""The one listener on the local API port (Werkzeug's threaded server), and who answers what.

In AWS these are separate endpoints: the HTTP API, CloudFront, Cognito, the WebSocket API. Here
each request goes, in order, to: a CORS preflight (answered as API Gateway does, before routes and
authorizers); the ``/_local/`` endpoints of ``LOCAL_ROUTES`` (identity provider, live channel and
its ``@connections`` API, control endpoints); the page (``web/``, ``/config.json``); else the HTTP
API (:mod:`local.runtime.http.api_gateway`), once the stack is ready. Answers to an allowed
``Origin`` get the template's CORS headers. Imports Werkzeug and this package's stand-ins.
Rationale: docs/local-stack.md, "The API adapter".
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule, WebsocketMismatch
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from local.runtime.cloudformation.provisioned import ApiRoute
from local.runtime.http.api_gateway import HttpApiGateway
from local.runtime.http.fault_api import FaultApi
from local.runtime.http.identity import OIDC_PATH, LocalIdentityProvider
from local.runtime.http.response import json_response
from local.runtime.http.static_site import StaticSite
from local.runtime.http.template_api import HttpApiDefinition
from local.runtime.http.websocket_gateway import SWITCHED, WebSocketGateway
from local.runtime.lambda_.runner import LambdaRunner
from local.runtime.settings import LIVE_PATH

LOG = logging.getLogger("local.runtime.api")

_TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&\s]*")
LOCAL_ROUTES = Map(
    [
        Rule(f"{OIDC_PATH}/.well-known/openid-configuration", methods=["GET"], endpoint="oidc_configuration"),
        Rule(f"{OIDC_PATH}/jwks.json", methods=["GET"], endpoint="oidc_keys"),
        Rule(f"{OIDC_PATH}/.well-known/jwks.json", methods=["GET"], endpoint="oidc_keys"),
        Rule(f"{OIDC_PATH}/token", methods=["POST"], endpoint="oidc_token"),
        Rule(LIVE_PATH, methods=["GET"], endpoint="live", websocket=True),
        Rule(f"{LIVE_PATH}/@connections/<connection_id>", methods=["GET", "POST", "DELETE"], endpoint="connection"),
        Rule("/_local/health", methods=["GET"], endpoint="health"),
        Rule("/_local/status", methods=["GET"], endpoint="status"),
        Rule("/_local/outputs", methods=["GET"], endpoint="outputs"),
        Rule("/_local/faults", methods=["GET", "POST", "DELETE"], endpoint="faults"),
    ],
    strict_slashes=False,
)


class _RequestHandler(WSGIRequestHandler):
    # Headers and body are separate writes: without TCP_NODELAY a client's delayed ACK holds the
    # body back about 40 ms.
    disable_nagle_algorithm = True

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # the application logs each request, without the live channel's token

    def log(self, type: str, message: str, *args: Any) -> None:
        text = message % args if args else message
        LOG.debug("%s %s", self.address_string(), _TOKEN_IN_QUERY.sub(r"\1<redacted>", text))

    def connection_dropped(self, error: BaseException, environ: Any = None) -> None:
        self.close_connection = True  # a WebSocket session took the socket over and closed it


class ApiServer:
    """The threaded HTTP server on the API port."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        account_id: str,
        region: str,
        web_dir: Path | None,
        invoke: Callable[[str, bytes], tuple[int, str, bool]],
        health: Callable[[], dict[str, Any]],
        status: Callable[[], dict[str, Any]],
        outputs: Callable[[], dict[str, Any]],
        identity: LocalIdentityProvider,
        page_config: Callable[[], dict[str, Any] | None] = lambda: None,
        on_live_connect: Callable[[], None] = lambda: None,
    ) -> None:
        self.host = host
        self.port = port
        self.identity = identity
        self.gateway = HttpApiGateway(host=host, port=port, account_id=account_id, identity=identity, invoke=invoke)
        self.live = WebSocketGateway(invoke=invoke, account_id=account_id, region=region, on_connect=on_live_connect)
        self.site = StaticSite(web_dir, page_config)
        self.runner: LambdaRunner | None = None
        self.faults = FaultApi(lambda: self.runner)
        self._health = health
        self._status = status
        self._outputs = outputs
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def set_routes(self, routes: list[ApiRoute], definition: HttpApiDefinition | None = None) -> None:
        """The HTTP API's routes, with the template's authorization and CORS (``definition``)."""
        self.gateway.set_routes(routes, definition)

    def start(self) -> None:
        self._server = make_server(self.host, self.port, self.wsgi, threaded=True, request_handler=_RequestHandler)
        # A short poll: stop() waits for the loop to notice (socketserver's default is 0.5 s).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="api-adapter", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.live.close_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    # -- WSGI ---------------------------------------------------------------------------------

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(environ)
        started = time.monotonic()
        try:
            response = self._dispatch(request)
        except Exception as exc:
            LOG.exception("API %s %s failed", request.method, request.path)
            response = json_response(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": f"local adapter error: {exc}"})
        self._log(request, response, started)
        if response.status_code == SWITCHED:
            # The WebSocket session wrote on the socket and closed it: Werkzeug must write nothing.
            raise ConnectionError("the WebSocket connection has closed")
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        origin = request.headers.get("Origin")
        asked_method = request.headers.get("Access-Control-Request-Method")
        if request.method == "OPTIONS" and origin and asked_method:
            headers = self.gateway.cors.preflight_headers(
                origin, asked_method, request.headers.get("Access-Control-Request-Headers", "")
            )
            return Response(status=HTTPStatus.NO_CONTENT, headers=headers)
        response = self._answer(request)
        if response.status_code != SWITCHED:
            for name, value in self.gateway.cors.response_headers(origin).items():
                response.headers.setdefault(name, value)
        return response

    def _answer(self, request: Request) -> Response:
        if request.path.startswith("/_local/"):
            adapter = LOCAL_ROUTES.bind_to_environ(request.environ)
            try:
                endpoint, arguments = adapter.match()
            except MethodNotAllowed as refused:
                allowed = ", ".join(refused.valid_methods or [])
                return json_response(HTTPStatus.METHOD_NOT_ALLOWED, {"message": f"{request.method}: {allowed} only"})
            except WebsocketMismatch:
                return self.live.not_an_upgrade()
            except NotFound:
                return json_response(HTTPStatus.NOT_FOUND, {"message": f"no endpoint {request.method} {request.path}"})
            return self._local(str(endpoint), request, arguments)
        health = self._health()
        page = self.site.respond(request, health)
        if page is not None:
            return page
        if not health.get("ready"):
            return json_response(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "local stack is starting", **health})
        return self.gateway.respond(
            method=request.method,
            raw_path=request.environ.get("RAW_URI", request.path).split("?", 1)[0] or "/",
            raw_query=request.query_string.decode("latin-1"),
            headers=list(request.headers.items()),
            body=request.get_data(),
            source_ip=request.remote_addr or "",
        )

    def _local(self, endpoint: str, request: Request, arguments: Mapping[str, Any]) -> Response:
        if endpoint == "oidc_configuration":
            return json_response(HTTPStatus.OK, self.identity.openid_configuration())
        if endpoint == "oidc_keys":
            return json_response(HTTPStatus.OK, self.identity.jwks())
        if endpoint == "oidc_token":
            answer = self.identity.token_response(request.get_data())
            return json_response(answer.status, answer.payload)
        if endpoint == "live":
            return self.live.serve(request)
        if endpoint == "connection":
            return self.live.manage(request.method, str(arguments["connection_id"]), request.get_data())
        if endpoint == "health":
            health = self._health()
            return json_response(HTTPStatus.OK if health.get("ready") else HTTPStatus.SERVICE_UNAVAILABLE, health)
        if endpoint == "status":
            return json_response(HTTPStatus.OK, self._status())
        if endpoint == "outputs":
            return json_response(HTTPStatus.OK, self._outputs())
        return self.faults.respond(request.method, request.query_string.decode("latin-1"), request.get_data())

    def _log(self, request: Request, response: Response, started: float) -> None:
        path = request.path
        level = (
            logging.DEBUG
            if path.startswith("/_local/") and not path.startswith((OIDC_PATH, LIVE_PATH))
            else logging.INFO
        )
        shown = path if path.startswith(LIVE_PATH) or not request.query_string else request.full_path
        note = getattr(response, "note", "")
        LOG.log(
            level,
            "API %s %s -> %d (%.0f ms)%s",
            request.method,
            shown,
            response.status_code,
            (time.monotonic() - started) * 1000,
            f" ({note})" if note else "",
        )
