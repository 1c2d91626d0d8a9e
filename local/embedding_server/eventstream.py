"""The AWS event-stream encoding (``application/vnd.amazon.eventstream``), for the local model
server's ``ConverseStream``: botocore decodes these frames as Bedrock's.

A message is a prelude (total length, headers length, the prelude's CRC32), string headers, the
payload, and the whole message's CRC32, all big-endian
(https://docs.aws.amazon.com/AmazonS3/latest/API/RESTSelectObjectAppendix.html).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7  # the header value type of a UTF-8 string


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", _STRING, len(raw_value)) + raw_value


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack("!I", zlib.crc32(body))


def event(event_type: str, payload: dict[str, Any]) -> bytes:
    """An event of ``event_type`` (``contentBlockDelta``, ``messageStop``...) with a JSON payload."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return message(headers, json.dumps(payload).encode())
