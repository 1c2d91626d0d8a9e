"""The client's HTTP (rag_ingest_client.http): the streamed multipart body of a presigned POST (exact
bytes, exact length, real progress), the error shapes it turns into one-line messages, and what a dead
server looks like."""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from rag_ingest_client.http import ApiError, ApiSession, RateLimitRetry, Unreachable, api_error, upload_file

from tests.support.aws import free_port

pytestmark = pytest.mark.unit

FIELDS = {
    "key": "raw/acme/01J/report.pdf",
    "Content-Type": "application/pdf",
    "policy": "eyJ4Ijox",
    "x-amz-signature": "ab",
}


def parse_form(content_type: str, body: bytes) -> list[tuple[str, str | None, bytes]]:
    """The parts as a server parses them (the standard library's MIME parser): name, filename, bytes."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    return [
        (str(part.get_param("name", header="content-disposition")), part.get_filename(), part.get_payload(decode=True))
        for part in message.iter_parts()
    ]


@pytest.fixture
def pdf(tmp_path: Path) -> Path:
    path = tmp_path / 'quarterly "final".pdf'
    path.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 1000 + b"\r\n--not-a-boundary\r\n%%EOF")
    return path


@dataclass
class Received:
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: int = 204
    answer: bytes = b""


@pytest.fixture
def upload_server() -> Iterator[tuple[str, Received]]:
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": self.rfile.read(length)}
            )
            self.send_response(received.status)
            self.send_header("Content-Length", str(len(received.answer)))
            self.end_headers()
            self.wfile.write(received.answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/bucket-name", received
    server.shutdown()
    server.server_close()


def _upload(url: str, pdf: Path, progress: list[int] | None = None) -> int:
    on_bytes = progress.append if progress is not None else None
    return upload_file(url, FIELDS, pdf, filename=pdf.name, content_type="application/pdf", on_bytes=on_bytes)


def test_multipart_body_has_the_fields_first_then_the_file_byte_for_byte(
    pdf: Path, upload_server: tuple[str, Received]
) -> None:
    url, received = upload_server
    assert _upload(url, pdf) == 204
    request = received.requests[0]
    # The Content-Length sent up front is the body's exact size (S3 refuses a chunked POST).
    assert int(request["headers"]["Content-Length"]) == len(request["body"])
    parts = parse_form(request["headers"]["Content-Type"], request["body"])
    assert [name for name, _, _ in parts] == [*FIELDS, "file"]  # S3 ignores fields after the file
    assert {name: value.decode() for name, _, value in parts[:-1]} == FIELDS
    assert parts[-1][1] == "quarterly %22final%22.pdf" and parts[-1][2] == pdf.read_bytes()


def test_multipart_body_streams_in_chunks(pdf: Path, upload_server: tuple[str, Received]) -> None:
    url, _ = upload_server
    progress: list[int] = []
    _upload(url, pdf, progress)
    assert max(progress) <= 64 * 1024  # the file is never read whole
    assert len(progress) >= -(-pdf.stat().st_size // (64 * 1024))


def test_post_multipart_reports_every_byte_it_sends(pdf: Path, upload_server: tuple[str, Received]) -> None:
    url, received = upload_server
    progress: list[int] = []
    assert _upload(url, pdf, progress) == 204
    request = received.requests[0]
    assert request["path"] == "/bucket-name" and "Transfer-Encoding" not in request["headers"]
    assert int(request["headers"]["Content-Length"]) == sum(progress) == len(request["body"])
    assert len(progress) > 3  # progress arrives while sending, not once at the end
    assert parse_form(request["headers"]["Content-Type"], request["body"])[-1][2] == pdf.read_bytes()


def test_a_refusal_by_storage_carries_its_code(pdf: Path, upload_server: tuple[str, Received]) -> None:
    url, received = upload_server
    received.status = 400
    received.answer = (
        b"<?xml version='1.0'?><Error><Code>EntityTooLarge</Code>"
        b"<Message>Your proposed upload exceeds the maximum allowed size</Message></Error>"
    )
    with pytest.raises(ApiError) as error:
        _upload(url, pdf)
    assert (error.value.status, error.value.code) == (400, "EntityTooLarge")
    assert "exceeds the maximum allowed size" in str(error.value)


@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        (409, {"error": {"code": "NOT_RETRYABLE", "message": "it is READY"}}, "NOT_RETRYABLE", "it is READY"),
        (401, {"message": "Unauthorized"}, "", "Unauthorized"),
        (400, {"error": "invalid_grant", "error_description": "Refresh Token has expired"}, "invalid_grant",
         "Refresh Token has expired"),
        (502, "<html>Bad Gateway</html>", "", "<html>Bad Gateway</html>"),
        (503, "", "", "Service Unavailable"),
    ],
)  # fmt: skip
def test_error_bodies(status: int, body: Any, code: str, message: str) -> None:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    error = api_error(status, raw, "http://api/x")
    assert (error.status, error.code, error.message) == (status, code, message)


def test_an_unreachable_server_is_a_network_error_naming_it() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(Unreachable, match=f"cannot reach http://127.0.0.1:{port}"):
        ApiSession(f"http://127.0.0.1:{port}", timeout=5).call("GET", "/documents")


@dataclass
class Throttling:
    """A JSON API that answers 429 (with ``retry_after``, when set) ``refusals`` times, then 200."""

    refusals: int
    retry_after: str | None = "2"
    calls: int = 0


@pytest.fixture
def throttling_server() -> Iterator[tuple[str, Throttling]]:
    state = Throttling(refusals=0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.calls += 1
            refused = state.calls <= state.refusals
            body = (
                json.dumps({"error": {"code": "RATE_LIMITED", "message": "slow down"}})
                if refused
                else json.dumps({"calls": state.calls})
            ).encode()
            self.send_response(429 if refused else 200)
            if refused and state.retry_after is not None:
                self.send_header("Retry-After", state.retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()
    server.server_close()


def _recording_retry(waits: list[float], **options: Any) -> RateLimitRetry:
    async def async_sleep(seconds: float) -> None:
        waits.append(seconds)

    return RateLimitRetry(sleep=waits.append, async_sleep=async_sleep, **options)


def test_a_429_is_sent_again_after_its_retry_after(throttling_server: tuple[str, Throttling]) -> None:
    url, state = throttling_server
    state.refusals = 2
    waits: list[float] = []
    with ApiSession(url, retry=_recording_retry(waits)) as session:
        assert session.call("GET", "/documents") == {"calls": 3}
    assert waits == [2.0, 2.0]


def test_a_429_without_retry_after_backs_off_with_jitter(throttling_server: tuple[str, Throttling]) -> None:
    url, state = throttling_server
    state.refusals, state.retry_after = 3, None
    waits: list[float] = []
    assert asyncio.run(ApiSession(url, retry=_recording_retry(waits)).acall("GET", "/documents")) == {"calls": 4}
    assert [0.5 <= waits[0] <= 1.0, 1.0 <= waits[1] <= 2.0, 2.0 <= waits[2] <= 4.0] == [True, True, True]


def test_a_429_is_final_after_the_attempts_or_past_the_longest_wait(
    throttling_server: tuple[str, Throttling],
) -> None:
    url, state = throttling_server
    state.refusals = 10
    waits: list[float] = []
    with ApiSession(url, retry=_recording_retry(waits, attempts=2)) as session, pytest.raises(ApiError) as refused:
        session.call("GET", "/documents")
    assert (refused.value.status, refused.value.code, waits, state.calls) == (429, "RATE_LIMITED", [2.0, 2.0], 3)
    state.calls, state.retry_after = 0, "3600"  # a daily quota: until midnight
    waits.clear()
    with ApiSession(url, retry=_recording_retry(waits)) as session, pytest.raises(ApiError):
        session.call("GET", "/documents")
    assert (waits, state.calls) == ([], 1)
