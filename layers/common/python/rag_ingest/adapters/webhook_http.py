"""The webhook POST, connected to the address the URL policy just checked (``Target.address``).

``http.client`` connections whose ``connect`` opens the socket to the pinned address while the
Host header and the TLS server name (SNI and certificate check) stay the URL's host name: nothing
resolves the name again between the check and the connection. Redirects are not followed (a 3xx
is a failed attempt: following one would reach a URL nobody checked). At most 64 KB of the
response is read.
"""

from __future__ import annotations

import http.client
import socket
import ssl

from rag_ingest.core.tracing import traced
from rag_ingest.core.url_policy import Target

USER_AGENT = "rag-ingest-webhooks/1"
MAX_RESPONSE_BYTES = 64 * 1024


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=context)
        self._address = target.address
        self._context = context

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        # The certificate is checked against the host name, not the address connected to.
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


@traced
class PinnedHttpTransport:
    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context or ssl.create_default_context()

    def post(self, target: Target, body: bytes, headers: dict[str, str], timeout_seconds: float) -> int:
        connection: http.client.HTTPConnection = (
            _PinnedHTTPSConnection(target, timeout_seconds, self._context)
            if target.scheme == "https"
            else _PinnedHTTPConnection(target, timeout_seconds)
        )
        try:
            connection.request("POST", target.path, body=body, headers={"user-agent": USER_AGENT, **headers})
            response = connection.getresponse()
            response.read(MAX_RESPONSE_BYTES)
            return response.status
        except http.client.HTTPException as exc:  # a malformed response: no answer we can trust
            raise OSError(f"bad HTTP response: {exc!r}") from exc
        finally:
            connection.close()
