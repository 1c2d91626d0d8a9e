"""The port the crawler reads pages through, and the failure codes a fetch can end with.

``PageFetcher.get`` sends one GET (following redirects only to targets ``may_follow`` admits) and
answers the final response, its body capped at ``max_bytes``; a fetch that cannot answer raises
``FetchRefusedError`` with one of the ``WEB_*`` codes below. The adapter behind it checks every
address against the URL policy (rag_ingest.adapters.web_fetch). Imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

USER_AGENT = "rag-ingest-crawler/1 (+docs/sources.md)"
#: The token robots.txt groups are matched against.
ROBOTS_AGENT = "rag-ingest-crawler"
MAX_REDIRECTS = 5

PAGE_TOO_LARGE = "WEB_PAGE_TOO_LARGE"
REDIRECT_REFUSED = "WEB_REDIRECT_REFUSED"
TOO_MANY_REDIRECTS = "WEB_TOO_MANY_REDIRECTS"
FETCH_FAILED = "WEB_FETCH_FAILED"
HTTP_ERROR = "WEB_HTTP_ERROR"
ROBOTS_UNAVAILABLE = "WEB_ROBOTS_UNAVAILABLE"
SITEMAP_INVALID = "WEB_SITEMAP_INVALID"
#: The URL policy's refusals keep their reason: WEB_URL_INVALID, WEB_URL_NOT_HTTPS,
#: WEB_URL_UNRESOLVABLE, WEB_URL_FORBIDDEN_ADDRESS.
URL_REFUSED_PREFIX = "WEB_URL_"


@dataclass(frozen=True)
class FetchResponse:
    """The final answer: ``url`` is the one that answered (after redirects); header names lowercase."""

    status: int
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


class FetchRefusedError(Exception):
    """No answer to use: refused by the policy or ``may_follow``, too large, or the network failed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class PageFetcher(Protocol):
    def get(
        self, url: str, headers: Mapping[str, str], max_bytes: int, may_follow: Callable[[str], bool]
    ) -> FetchResponse: ...
