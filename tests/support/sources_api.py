"""The sources routes of docs/sources.md, in memory, on a real Werkzeug server on 127.0.0.1: for the
CLI's and the page's tests without the stack.

It also answers the local sign-in (``POST /_local/oidc/token``: a JWT signed with a test key, whose
``custom:tenant_id`` scopes every route), an empty ``GET /documents``, and serves ``web/`` with a
local ``config.json``. Every API request is recorded. A sync advances one step of ``plan`` (statuses,
statistics, failures) each time it is read, so a test decides what a poll sees.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jwt
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".mjs": "text/javascript"}
_STATISTICS = ("scanned", "added", "modified", "unchanged", "deleted", "failed")
_KINDS = ("s3", "web", "custom")
_SIGNING_KEY = "stand-in-key-of-the-sources-api-32b"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    tenant: str
    raw_path: str  # as sent: an external id's "/" arrives as %2F


@dataclass
class Step:
    """What a sync reads as at one poll; ``status`` IN_PROGRESS, COMPLETE or FAILED."""

    status: str
    statistics: dict[str, int]
    failures: list[dict[str, str]] = field(default_factory=list)
    listing_complete: bool = False
    listed: int = 0


class ApiRefusal(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class SourcesApi:
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> source (with "tenant")
    syncs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # source id -> syncs, newest first
    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (source, external id) -> body
    #: The steps each new sync goes through, one per read (GET of the sync or of the list).
    plan: list[Step] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: BaseWSGIServer | None = None
    counter: int = 0

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_port}"

    def config(self) -> dict[str, Any]:
        return {
            "apiUrl": self.url,
            "maxUploadBytes": 52428800,
            "auth": {"kind": "local", "tokenUrl": f"{self.url}/_local/oidc/token"},
        }

    def calls(self) -> list[str]:
        """``METHOD /path`` of each API request (sign-in, documents and the page's files left out)."""
        return [f"{r.method} {r.path}" for r in self.requests if r.path.startswith("/sources")]

    # -- servers ----------------------------------------------------------------------------------

    def start(self) -> SourcesApi:
        self.server = make_server("127.0.0.1", 0, self.wsgi, threaded=True)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            response = self.route(request)
        except ApiRefusal as refusal:
            response = _json(refusal.status, {"error": {"code": refusal.code, "message": refusal.message}})
        return response(environ, start_response)

    # -- routes -----------------------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        path, method = request.path, request.method
        if path == "/_local/oidc/token" and method == "POST":
            return self.token(request.get_json(silent=True) or {})
        if path == "/config.json":
            return _json(200, self.config())
        if not (path in ("/sources", "/documents") or path.startswith("/sources/")):
            return _static(path)
        tenant = self.tenant_of(request)
        body = request.get_json(silent=True) if request.data else None
        raw_path = str(request.environ.get("RAW_URI") or path).partition("?")[0]
        with self.lock:
            self.requests.append(Recorded(method, path, dict(request.args), body, tenant, raw_path))
            if path == "/documents" and method == "GET":
                return _json(200, {"items": [], "next_cursor": None})
            segments = [unquote(part) for part in raw_path.strip("/").split("/")[1:]]
            return self.sources_route(method, segments, dict(request.args), body, tenant)

    def token(self, body: dict[str, Any]) -> Response:
        claims = {
            "sub": f"sub-{body.get('username')}",
            "cognito:username": body.get("username"),
            "custom:tenant_id": body.get("tenant_id"),
            "exp": int(time.time()) + 3600,
        }
        return _json(200, {"id_token": jwt.encode(claims, _SIGNING_KEY, algorithm="HS256"), "token_type": "Bearer"})

    def tenant_of(self, request: Request) -> str:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            claims = jwt.decode(token, _SIGNING_KEY, algorithms=["HS256"])
        except jwt.PyJWTError:
            raise ApiRefusal(401, "UNAUTHORIZED", "Unauthorized") from None
        return str(claims["custom:tenant_id"])

    def sources_route(self, method: str, parts: list[str], query: dict[str, str], body: Any, tenant: str) -> Response:
        if not parts:
            if method == "POST":
                return _json(201, self.create(body, tenant))
            if method == "GET":
                mine = [self.shown(s) for s in self.sources.values() if s["tenant"] == tenant]
                return _json(200, {"sources": mine})
            raise ApiRefusal(405, "METHOD_NOT_ALLOWED", "method not allowed")
        source = self.sources.get(parts[0])
        if source is None or source["tenant"] != tenant:
            raise ApiRefusal(404, "NOT_FOUND", "no such source")
        rest = parts[1:]
        if not rest and method == "GET":
            return _json(200, self.shown(source))
        if not rest and method == "DELETE":
            if query.get("documents") not in ("delete", "keep"):
                raise ApiRefusal(400, "INVALID_REQUEST", "documents: must be delete or keep")
            del self.sources[source["id"]]
            return Response(status=204)
        if rest == ["sync"] and method == "POST":
            return _json(202, self.start_sync(source))
        if rest == ["syncs"] and method == "GET":
            return _json(200, {"syncs": [self.advance(sync) for sync in self.syncs.get(source["id"], [])]})
        if len(rest) == 2 and rest[0] == "syncs" and method == "GET":
            found = [s for s in self.syncs.get(source["id"], []) if s["id"] == rest[1]]
            if not found:
                raise ApiRefusal(404, "NOT_FOUND", "no such sync")
            return _json(200, self.advance(found[0]))
        if len(rest) == 2 and rest[0] == "items" and method in ("PUT", "DELETE"):
            if source["kind"] != "custom":
                raise ApiRefusal(400, "INVALID_REQUEST", "items are pushed to custom sources only")
            return self.item(method, source, rest[1], body)
        raise ApiRefusal(404, "NOT_FOUND", "no such route")

    def create(self, body: Any, tenant: str) -> dict[str, Any]:
        if not isinstance(body, dict) or body.get("kind") not in _KINDS:
            raise ApiRefusal(400, "INVALID_REQUEST", "kind: must be s3, web or custom")
        if not body.get("name"):
            raise ApiRefusal(400, "INVALID_REQUEST", "name: required")
        config = body.get("config") or {}
        if body["kind"] == "s3" and not config.get("bucket"):
            raise ApiRefusal(400, "INVALID_REQUEST", "config.bucket: required")
        if body["kind"] == "web" and not (config.get("seeds") or config.get("sitemaps")):
            raise ApiRefusal(400, "INVALID_REQUEST", "config.seeds: a seed or a sitemap is required")
        schedule = body.get("schedule")
        if schedule is not None and not str(schedule).startswith(("rate(", "cron(")):
            raise ApiRefusal(400, "INVALID_SCHEDULE", "schedule: rate(...) or cron(...)")
        self.counter += 1
        now = _now()
        source = {
            "id": f"src_{self.counter:04d}",
            "kind": body["kind"],
            "name": body["name"],
            "config": config,
            "schedule": schedule,
            "metadata": body.get("metadata") or {},
            "access": body.get("access") or {"users": [], "groups": []},
            "created_at": now,
            "updated_at": now,
            "tenant": tenant,
        }
        self.sources[source["id"]] = source
        return self.shown(source)

    def shown(self, source: dict[str, Any]) -> dict[str, Any]:
        syncs = self.syncs.get(source["id"]) or []
        return {**{k: v for k, v in source.items() if k != "tenant"}, "last_sync": _public(syncs[0]) if syncs else None}

    def start_sync(self, source: dict[str, Any]) -> dict[str, Any]:
        history = self.syncs.setdefault(source["id"], [])
        if history and history[0]["status"] == "IN_PROGRESS":
            raise ApiRefusal(409, "SYNC_IN_PROGRESS", f"sync {history[0]['id']} is running")
        self.counter += 1
        sync = {
            "id": f"sync_{self.counter:04d}",
            "source_id": source["id"],
            "status": "IN_PROGRESS",
            "started_at": _now(),
            "ended_at": None,
            "listing_complete": False,
            "listed": 0,
            "statistics": dict.fromkeys(_STATISTICS, 0),
            "failures": [],
            "_plan": list(self.plan),
        }
        history.insert(0, sync)
        return _public(sync)

    def advance(self, sync: dict[str, Any]) -> dict[str, Any]:
        if sync["_plan"]:
            step = sync["_plan"].pop(0)
            sync.update(
                status=step.status,
                statistics={**dict.fromkeys(_STATISTICS, 0), **step.statistics},
                failures=step.failures,
                listing_complete=step.listing_complete or step.status != "IN_PROGRESS",
                listed=step.listed,
                ended_at=None if step.status == "IN_PROGRESS" else _now(),
            )
        return _public(sync)

    def item(self, method: str, source: dict[str, Any], external_id: str, body: Any) -> Response:
        key = (source["id"], external_id)
        if method == "DELETE":
            if self.items.pop(key, None) is None:
                raise ApiRefusal(404, "NOT_FOUND", "no such item")
            return Response(status=204)
        if not isinstance(body, dict) or not body.get("filename") or ("text" in body) == ("content_base64" in body):
            raise ApiRefusal(400, "INVALID_REQUEST", "filename and one of text or content_base64 are required")
        previous = self.items.get(key)
        outcome = "added" if previous is None else "unchanged" if previous == body else "modified"
        self.items[key] = body
        return _json(200, {"external_id": external_id, "document_id": f"doc-{external_id}", "outcome": outcome})


def _public(sync: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sync.items() if not k.startswith("_")}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _json(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


def _static(path: str) -> Response:
    name = "index.html" if path in ("", "/") else path.lstrip("/")
    file = (WEB_DIR / name).resolve()
    if not file.is_relative_to(WEB_DIR) or not file.is_file():
        return Response("not found", status=404)
    return Response(file.read_bytes(), content_type=_TYPES.get(file.suffix, "application/octet-stream"))
