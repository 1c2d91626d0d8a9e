"""The page's hosting: CloudFront in front of the web bucket, and the page's ``config.json``.

In AWS, CloudFront serves ``web/`` and CDK's ``BucketDeployment`` writes ``config.json`` next to it.
Here ``GET``/``HEAD`` of a file under ``web/`` is Werkzeug's ``send_from_directory`` (paths that
leave ``web/`` are not served) and ``/config.json`` comes from the provisioned stack once it is
ready (503 before). A path with no file is not the page's: :meth:`StaticSite.respond` answers None.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from werkzeug.exceptions import NotFound
from werkzeug.utils import send_from_directory
from werkzeug.wrappers import Request, Response

from local.runtime.http.response import json_response

PAGE_CONFIG_PATH = "/config.json"


class StaticSite:
    def __init__(self, web_dir: Path | None, page_config: Callable[[], dict[str, Any] | None]) -> None:
        self.web_dir = web_dir.resolve() if web_dir is not None and web_dir.is_dir() else None
        self._page_config = page_config

    def respond(self, request: Request, health: dict[str, Any]) -> Response | None:
        """The page's answer to a GET or HEAD; None when the page has no such file."""
        if request.method not in ("GET", "HEAD"):
            return None
        if request.path == PAGE_CONFIG_PATH:
            config = self._page_config() if health.get("ready") else None
            if config is None:
                return json_response(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "local stack is starting", **health})
            headers = {"Cache-Control": "no-store"}
            return Response(json.dumps(config, indent=2), HTTPStatus.OK, headers, content_type="application/json")
        if self.web_dir is None or "\x00" in request.path:
            return None
        relative = request.path.lstrip("/")
        if not relative or relative.endswith("/"):
            relative += "index.html"
        try:
            return send_from_directory(self.web_dir, relative, request.environ)
        except NotFound:
            return None
