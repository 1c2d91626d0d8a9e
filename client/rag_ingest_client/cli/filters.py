"""The CLI's metadata and filter options: ``upload --meta k=v``, ``search``/``ls --where k=v`` and
``--filter-json '<json>'`` (or ``@file``), turned into the API's ``metadata`` and ``filter``.

A value is read as JSON would type it where it looks like one: an integer (``year=2024``), a
decimal number (``score=0.5``), ``true``/``false``; anything else is a string, ISO 8601 dates
included (``signed=2024-03-01``: the API types a date-shaped string as a date). A comma is part of
a string (``title=Smith, J.`` stays one string): a list is the same key repeated
(``--meta tags=nda --meta tags=eu`` is ``["nda", "eu"]``). The API checks the rest (docs/api.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rag_ingest_client.cli.errors import CliError

_INTEGER = re.compile(r"[+-]?\d{1,15}")
_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?")


def typed_value(text: str) -> Any:
    """``text`` as the CLI reads a value (module doc)."""
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    if text in ("true", "false"):
        return text == "true"
    return text


def _pair(text: str, option: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise CliError(f"{option} {text!r}: expected key=value")
    return key.strip(), value


def parse_meta(pairs: list[str] | None) -> dict[str, Any] | None:
    """``--meta k=v`` options as the upload's metadata (None when there are none)."""
    if not pairs:
        return None
    metadata: dict[str, Any] = {}
    for text in pairs:
        key, raw = _pair(text, "--meta")
        value = typed_value(raw)
        if key not in metadata:
            metadata[key] = value
            continue
        # The same key again: a list of strings.
        previous = metadata[key] if isinstance(metadata[key], list) else [str(metadata[key])]
        metadata[key] = [*previous, raw]
    return metadata


def build_filter(where: list[str] | None, filter_json: str | None) -> dict[str, Any] | None:
    """``--where k=v`` (each an ``equals``) and ``--filter-json`` (JSON, or ``@file``), all of them
    required together (``andAll``); None when neither is given."""
    filters: list[dict[str, Any]] = []
    for text in where or []:
        key, raw = _pair(text, "--where")
        filters.append({"equals": {"key": key, "value": typed_value(raw)}})
    if filter_json:
        source = filter_json
        if filter_json.startswith("@"):
            try:
                source = Path(filter_json[1:]).read_text()
            except OSError as exc:
                raise CliError(f"--filter-json {filter_json}: {exc.strerror or exc}") from None
        try:
            filters.append(json.loads(source))
        except ValueError as exc:
            raise CliError(f"--filter-json: not valid JSON ({exc})") from None
    if not filters:
        return None
    return filters[0] if len(filters) == 1 else {"andAll": filters}
