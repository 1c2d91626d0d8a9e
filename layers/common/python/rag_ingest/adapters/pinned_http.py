"""``http.client`` connections pinned to the address the URL policy checked (``Target.address``).

``connect`` opens the socket to the pinned address while the Host header and the TLS server name
(SNI and certificate check) stay the URL's host name: nothing resolves the name again between the
check and the connection. Used by the webhook POST and the crawler's GET. Imports ``core`` only.
"""

from __future__ import annotations

import http.client
import socket
import ssl

from rag_ingest.core.url_policy import Target


class PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=context)
        self._address = target.address
        self._context = context

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        # The certificate is checked against the host name, not the address connected to.
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def pinned_connection(target: Target, timeout: float, context: ssl.SSLContext) -> http.client.HTTPConnection:
    if target.scheme == "https":
        return PinnedHTTPSConnection(target, timeout, context)
    return PinnedHTTPConnection(target, timeout)
