"""The pinned POST (rag_ingest.adapters.webhook_http) against real loopback servers: it connects to the
address the URL policy checked, while the Host header, the TLS server name and the certificate check
use the URL's host name; a certificate for another name is refused; redirects are not followed."""

from __future__ import annotations

import datetime
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from rag_ingest.adapters.webhook_http import PinnedHttpTransport
from rag_ingest.core.url_policy import Target

pytestmark = pytest.mark.integration


def self_signed(name: str, directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / f"{name}.pem", directory / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


@contextmanager
def server(status: int = 200, tls: tuple[Path, Path] | None = None) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1], seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_https_to_the_pinned_address_with_the_hosts_name_and_certificate(tmp_path: Path) -> None:
    cert, key = self_signed("hooks.example.test", tmp_path)
    trusting = ssl.create_default_context(cafile=str(cert))
    with server(204, tls=(cert, key)) as (port, seen):
        # The name does not resolve anywhere: only the pinned address is ever connected to.
        target = Target(scheme="https", host="hooks.example.test", port=port, path="/in?x=1", address="127.0.0.1")
        status = PinnedHttpTransport(trusting).post(target, b'{"a":1}', {"webhook-id": "msg_1"}, 5)
    assert status == 204
    assert seen[0]["path"] == "/in?x=1" and seen[0]["body"] == b'{"a":1}'
    assert seen[0]["headers"]["Host"] == f"hooks.example.test:{port}"
    assert seen[0]["headers"]["webhook-id"] == "msg_1"


def test_a_certificate_for_another_name_is_refused(tmp_path: Path) -> None:
    cert, key = self_signed("other.example.test", tmp_path)
    trusting = ssl.create_default_context(cafile=str(cert))
    with server(200, tls=(cert, key)) as (port, seen):
        target = Target(scheme="https", host="hooks.example.test", port=port, path="/", address="127.0.0.1")
        with pytest.raises(ssl.SSLCertVerificationError):
            PinnedHttpTransport(trusting).post(target, b"{}", {}, 5)
    assert seen == []


def test_redirects_are_answers_not_followed() -> None:
    with server(302) as (port, seen):
        target = Target(scheme="http", host="localhost", port=port, path="/hook", address="127.0.0.1")
        assert PinnedHttpTransport().post(target, b"{}", {}, 5) == 302
    assert len(seen) == 1


def test_nothing_listening_is_an_os_error() -> None:
    with server() as (port, _):
        pass  # closed: the port is free again
    target = Target(scheme="http", host="localhost", port=port, path="/", address="127.0.0.1")
    with pytest.raises(OSError):
        PinnedHttpTransport().post(target, b"{}", {}, 2)
