"""The webhook POST, connected to the address the URL policy just checked (``Target.address``).

The connection is pinned (adapters.pinned_http): the socket goes to the checked address while the
Host header and the TLS server name stay the URL's host name. Redirects are not followed (a 3xx
is a failed attempt: following one would reach a URL nobody checked). At most 64 KB of the
response is read.
"""

from __future__ import annotations

import http.client
import ssl

from rag_ingest.adapters.pinned_http import pinned_connection
from rag_ingest.core.tracing import traced
from rag_ingest.core.url_policy import Target

USER_AGENT = "rag-ingest-webhooks/1"
MAX_RESPONSE_BYTES = 64 * 1024


@traced
class PinnedHttpTransport:
    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context or ssl.create_default_context()

    def post(self, target: Target, body: bytes, headers: dict[str, str], timeout_seconds: float) -> int:
        connection = pinned_connection(target, timeout_seconds, self._context)
        try:
            connection.request("POST", target.path, body=body, headers={"user-agent": USER_AGENT, **headers})
            response = connection.getresponse()
            response.read(MAX_RESPONSE_BYTES)
            return response.status
        except http.client.HTTPException as exc:  # a malformed response: no answer we can trust
            raise OSError(f"bad HTTP response: {exc!r}") from exc
        finally:
            connection.close()
