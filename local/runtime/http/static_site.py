"""The page's hosting: CloudFront in front of the private web bucket, and the page's ``config.json``.

In AWS, CloudFront serves ``web/`` from a bucket and CDK's ``BucketDeployment`` writes the page's
``config.json`` (API URL, sign-in, live channel) next to it. Locally the API port serves the
files of ``web/`` as they are (paths that leave ``web/`` are not served) and ``/config.json``
from the provisioned stack, once the stack is ready (``503`` before).
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from local.runtime.http.response import HttpResponse, json_response

PAGE_CONFIG_PATH = "/config.json"


class StaticSite:
    def __init__(self, web_dir: Path | None, page_config: Callable[[], dict[str, Any] | None]) -> None:
        self.web_dir = web_dir.resolve() if web_dir is not None and web_dir.is_dir() else None
        self._page_config = page_config

    def respond(self, method: str, raw_path: str, health: dict[str, Any]) -> HttpResponse | None:
        """The page's answer for a GET or HEAD of ``raw_path``; None when the page has no such file."""
        if method not in ("GET", "HEAD"):
            return None
        head = method == "HEAD"
        if raw_path == PAGE_CONFIG_PATH:
            config = self._page_config() if health.get("ready") else None
            if config is None:
                return json_response(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "local stack is starting", **health})
            raw = json.dumps(config, indent=2).encode()
            headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
            return HttpResponse(HTTPStatus.OK, headers, raw, head=head)
        path = self.file_for(raw_path)
        if path is None:
            return None
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return HttpResponse(HTTPStatus.OK, {"Content-Type": content_type}, path.read_bytes(), head=head)

    def file_for(self, raw_path: str) -> Path | None:
        if self.web_dir is None:
            return None
        relative = unquote(raw_path).lstrip("/") or "index.html"
        try:
            candidate = (self.web_dir / relative).resolve()
        except ValueError:  # an embedded NUL (%00): no file has that name, the API routes decide
            return None
        if candidate.is_dir():
            candidate = candidate / "index.html"
        if not candidate.is_file() or not candidate.is_relative_to(self.web_dir):
            return None
        return candidate
