"""The CLI's metadata and filter options: ``upload --meta k=v``, ``search``/``ls --where k=v`` and
``--filter-json '<json>'`` (or ``@file``), turned into the API's ``metadata`` and ``filter``.

A value is typed as JSON would type it (:func:`typed_value`); a comma or an ``=`` is part of a
string, and a list is the same key repeated. ``--where`` matches a value typed or as written, since
a list holds strings and another client may have stored ``"2024"`` (docs/cli.md, "Metadata and
filters"). The API checks the rest (docs/api.md).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from rag_ingest_client.cli.errors import CliError

# JSON's numbers, in ASCII digits: a leading zero or plus sign keeps a value as written (a postcode, a
# phone number). Integers past 15 digits stay strings, a decimal without digits before its point is one.
_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,14})")
_DECIMAL = re.compile(r"-?((0|[1-9][0-9]*)\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def typed_value(text: str) -> Any:
    """``text`` as JSON would type it: an integer (``2024``, ``-3``), a decimal (``0.5``), ``true`` or
    ``false``; anything else is the string as written, ISO 8601 dates included (the API reads a
    date-shaped string as a date too)."""
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text) and math.isfinite(float(text)):
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
    """``--meta k=v`` options as the upload's metadata (None when there are none): a key given once
    is its typed value, a key repeated the list of its values as written."""
    if not pairs:
        return None
    written: dict[str, list[str]] = {}
    for text in pairs:
        key, raw = _pair(text, "--meta")
        written.setdefault(key, []).append(raw)
    return {key: typed_value(values[0]) if len(values) == 1 else values for key, values in written.items()}


def where_condition(text: str) -> dict[str, Any]:
    """``--where k=v``: ``k`` equals ``v`` typed, or ``v`` as written when typing changed it."""
    key, raw = _pair(text, "--where")
    value = typed_value(raw)
    typed = {"equals": {"key": key, "value": value}}
    if isinstance(value, str):
        return typed
    return {"orAll": [typed, {"equals": {"key": key, "value": raw}}]}


def build_filter(where: list[str] | None, filter_json: str | None) -> dict[str, Any] | None:
    """``--where k=v`` (each :func:`where_condition`) and ``--filter-json`` (JSON, or ``@file``), all
    of them required together (``andAll``); None when neither is given."""
    filters = [where_condition(text) for text in where or []]
    if filter_json:
        source = filter_json
        if filter_json.startswith("@"):
            try:
                source = Path(filter_json[1:]).read_text(encoding="utf-8-sig")
            except OSError as exc:
                raise CliError(f"--filter-json {filter_json}: {exc.strerror or exc}") from None
            except UnicodeDecodeError as exc:
                raise CliError(f"--filter-json {filter_json}: not UTF-8 text ({exc.reason})") from None
        try:
            filters.append(json.loads(source))
        except ValueError as exc:
            raise CliError(f"--filter-json: not valid JSON ({exc})") from None
    if not filters:
        return None
    return filters[0] if len(filters) == 1 else {"andAll": filters}
