"""A document's user metadata: the rules its keys and values follow, and how a value is typed.

Metadata is given at upload (``POST /documents``) or in an S3 sidecar, kept on the record and by
later versions, written onto every chunk, and filtered on (``rag_ingest.core.filters``). A value is
a string, a number (an integer within ±2^53, which a double holds exactly), a boolean or a list of
strings, within the limits below; a string that parses as ISO 8601 (:func:`iso_datetime`) is a date
as well, compared as an instant. The rules: docs/api.md, "Metadata" and "S3 sidecars".
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Any

MAX_KEYS = 32
MAX_STRING_CHARS = 1024
MAX_LIST_ITEMS = 50
MAX_METADATA_BYTES = 8 * 1024
KEY_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: Integers beyond ±2^53 are not exact as doubles (the chunk index maps numbers as double).
MAX_EXACT_INTEGER = 2**53

#: The built-in keys a filter can name (docs/api.md): no user key may take them.
BUILTIN_KEYS = frozenset({"document_id", "filename", "created_at", "page", "content_type"})
#: The chunk index's own fields (rag_ingest.adapters.vector_store) and the record's, also refused.
RESERVED_KEYS = BUILTIN_KEYS | frozenset(
    {
        "tenant_id",
        "version",
        "chunk_index",
        "page_start",
        "page_end",
        "heading_path",
        "text",
        "indexed_text",
        "embedding",
        "metadata",
        "status",
        # Where a passage stands (the retrievers put them beside the user's metadata).
        "document_format",
        "source_uri",
        "anchor",
        "paragraph_index",
        "boxes",
        "figure_sources",
        "cell_range",
    }
)

_MAX_OFFSET = timedelta(hours=18)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?")


class MetadataType(StrEnum):
    """The type a value is filtered and indexed as."""

    STRING = "string"
    NUMBER = "number"
    BOOLEAN = "boolean"
    DATE = "date"  # a string that parses as ISO 8601 (also a string)
    STRING_LIST = "string_list"


class MetadataError(ValueError):
    """Metadata that breaks a rule; ``path`` names the bad part (``metadata.<key>``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def iso_datetime(value: str) -> datetime | None:
    """``value`` as an aware datetime when it is an ISO 8601 date or date-time (module doc), else None.
    A date alone is midnight UTC; a date-time without an offset is UTC."""
    try:
        if _DATE.fullmatch(value):
            day = date.fromisoformat(value)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        if _DATETIME.fullmatch(value):
            fraction = re.search(r"\.(\d+)", value)
            text = value
            if fraction and len(fraction.group(1)) > 6:  # Python keeps microseconds only
                text = value.replace(fraction.group(0), "." + fraction.group(1)[:6])
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            offset = moment.utcoffset()
            if offset is not None and abs(offset) > _MAX_OFFSET:  # Java (OpenSearch) refuses those
                return None
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    except ValueError:
        return None
    return None


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def type_of(value: Any) -> MetadataType:
    """The type of a valid value (:func:`validate_metadata` has accepted it)."""
    if isinstance(value, bool):
        return MetadataType.BOOLEAN
    if is_number(value):
        return MetadataType.NUMBER
    if isinstance(value, list):
        return MetadataType.STRING_LIST
    if isinstance(value, str) and iso_datetime(value) is not None:
        return MetadataType.DATE
    return MetadataType.STRING


def check_number(value: int | float, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise MetadataError(path, "a number must be finite")
    if isinstance(value, int) and abs(value) > MAX_EXACT_INTEGER:
        raise MetadataError(path, f"an integer must be within ±{MAX_EXACT_INTEGER}")


def check_key(key: Any, path: str) -> str:
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise MetadataError(path, f"a key must match ^{KEY_PATTERN.pattern}$ (got {str(key)[:80]!r})")
    if key in RESERVED_KEYS:
        raise MetadataError(path, f"{key!r} is a reserved name")
    return key


def validate_metadata(metadata: Any, path: str = "metadata") -> dict[str, Any]:
    """``metadata`` checked against the rules (module doc), as a new dict; raises :class:`MetadataError`
    naming the first bad part."""
    if not isinstance(metadata, Mapping):
        raise MetadataError(path, "must be an object")
    if len(metadata) > MAX_KEYS:
        raise MetadataError(path, f"at most {MAX_KEYS} keys (got {len(metadata)})")
    checked: dict[str, Any] = {}
    for key, value in metadata.items():
        where = f"{path}.{key}" if isinstance(key, str) and KEY_PATTERN.fullmatch(key) else path
        check_key(key, where)
        if isinstance(value, bool):
            pass
        elif is_number(value):
            check_number(value, where)
        elif isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                raise MetadataError(where, f"a string is at most {MAX_STRING_CHARS} characters")
        elif isinstance(value, list):
            if len(value) > MAX_LIST_ITEMS:
                raise MetadataError(where, f"a list holds at most {MAX_LIST_ITEMS} strings")
            for index, item in enumerate(value):
                if not isinstance(item, str):
                    raise MetadataError(f"{where}[{index}]", "a list holds strings only")
                if len(item) > MAX_STRING_CHARS:
                    raise MetadataError(f"{where}[{index}]", f"a string is at most {MAX_STRING_CHARS} characters")
            value = list(value)
        else:
            kind = "null" if value is None else type(value).__name__
            raise MetadataError(where, f"a value is a string, number, boolean or list of strings, not {kind}")
        checked[key] = value
    size = len(json.dumps(checked, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES:
        raise MetadataError(path, f"at most {MAX_METADATA_BYTES} bytes as JSON (got {size})")
    return checked


# -- S3 sidecars: Bedrock Knowledge Bases' <name>.metadata.json (docs/api.md, "S3 sidecars") -------------
# {"metadataAttributes": {key: plain or typed value}}; includeForEmbedding is accepted and ignored.
SIDECAR_SUFFIX = ".metadata.json"
#: A sidecar holds at most 8 KB of metadata; anything much bigger is refused unread.
MAX_SIDECAR_BYTES = 64 * 1024
_TYPED_FIELDS = {
    "STRING": "stringValue",
    "NUMBER": "numberValue",
    "BOOLEAN": "booleanValue",
    "STRING_LIST": "stringListValue",
}


def metadata_from_sidecar(raw: bytes, path: str = "metadataAttributes") -> dict[str, Any]:
    """A sidecar's bytes as valid metadata (:func:`validate_metadata`'s rules), or :class:`MetadataError`
    naming the bad part (``metadataAttributes.<key>``)."""
    if len(raw) > MAX_SIDECAR_BYTES:
        raise MetadataError(path, f"the sidecar is over {MAX_SIDECAR_BYTES} bytes")
    try:
        document = json.loads(raw.decode("utf-8"), parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MetadataError(path, "the sidecar is not UTF-8 JSON") from None
    if not isinstance(document, Mapping) or not isinstance(document.get("metadataAttributes"), Mapping):
        raise MetadataError(path, 'the sidecar must be {"metadataAttributes": {...}}')
    plain: dict[Any, Any] = {}
    for key, value in document["metadataAttributes"].items():
        plain[key] = _plain_value(value, f"{path}.{key}")
    return validate_metadata(plain, path)


def _plain_value(value: Any, path: str) -> Any:
    if not isinstance(value, Mapping):
        return value
    typed = value.get("value")
    if not isinstance(typed, Mapping) or typed.get("type") not in _TYPED_FIELDS:
        raise MetadataError(path, 'a typed value is {"value": {"type": "STRING|NUMBER|BOOLEAN|STRING_LIST", ...}}')
    field = _TYPED_FIELDS[str(typed["type"])]
    if field not in typed:
        raise MetadataError(path, f"a {typed['type']} value needs {field}")
    result = typed[field]
    expected = {
        "stringValue": isinstance(result, str),
        "numberValue": is_number(result),
        "booleanValue": isinstance(result, bool),
        "stringListValue": isinstance(result, list),
    }[field]
    if not expected:
        raise MetadataError(path, f"{field} does not hold a {typed['type']}")
    return result


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
