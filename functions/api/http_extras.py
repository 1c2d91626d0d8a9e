"""What the API needs beyond Powertools' resolver: a JSON parser that refuses NaN, Infinity and deep
nesting (``strict_json``), and the methods each path is served with, read from the OpenAPI document
(``MethodTable``: a 405 names them in ``Allow``). Standard library only."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# JSON nesting beyond this is refused (Python's parser would otherwise hit its recursion limit).
MAX_JSON_DEPTH = 32


def strict_json(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity and deep nesting (both raise JSONDecodeError)."""
    depth = 0
    in_string = escaped = False
    for char in text:  # a linear pre-scan: cheap next to the 64 KB body limit
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise json.JSONDecodeError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", text, 0)
        elif char in "]}":
            depth -= 1

    def no_constants(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not JSON", text, 0)

    return json.loads(text, parse_constant=no_constants)


class MethodTable:
    """The methods served on each path of an OpenAPI document's ``paths`` (``{name}`` matches one segment)."""

    def __init__(self, paths: Mapping[str, Mapping[str, Any]]) -> None:
        self._patterns: list[tuple[re.Pattern[str], tuple[str, ...]]] = []
        for path, item in sorted(paths.items()):
            regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path))
            self._patterns.append((re.compile(regex), tuple(sorted(method.upper() for method in item))))

    def allowed(self, path: str) -> tuple[str, ...]:
        """The methods served on ``path`` (empty: no such path)."""
        for pattern, methods in self._patterns:
            if pattern.fullmatch(path):
                return methods
        return ()
