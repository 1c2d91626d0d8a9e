"""Filters in the JSON shape of Bedrock Knowledge Bases' ``RetrievalFilter``: parsed, checked, evaluated.

A filter is one object with one operator: a condition ``{"<op>": {"key", "value"}}`` (:data:`CONDITION_OPS`)
or a group ``{"andAll"|"orAll": [<filter>, ...]}`` of at least 2. Keys are user metadata or a
built-in (:data:`BUILTINS`); a value's type chooses what it is compared with, and a missing key
matches no positive condition. :func:`parse_filter` raises :class:`FilterError` naming the JSON path
of the bad part; :func:`matches` evaluates a filter in code with the chunk index's semantics
(rag_ingest.adapters.opensearch_filters translates it). Here, not in ``retrieval``: search and the
document listing both use it. Semantics, ``page`` included: docs/api.md, "Filters".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from rag_ingest.core.metadata import (
    KEY_PATTERN,
    MAX_STRING_CHARS,
    MetadataError,
    check_number,
    is_number,
    iso_datetime,
)

MAX_DEPTH = 5
MAX_CONDITIONS = 100
MAX_LIST_VALUES = 100


class Builtin(StrEnum):
    DOCUMENT_ID = "document_id"
    FILENAME = "filename"
    CREATED_AT = "created_at"
    PAGE = "page"
    CONTENT_TYPE = "content_type"


BUILTINS = frozenset(b.value for b in Builtin)

EQUALITY_OPS = ("equals", "notEquals")
RANGE_OPS = ("greaterThan", "greaterThanOrEquals", "lessThan", "lessThanOrEquals")
LIST_OPS = ("in", "notIn")
STRING_OPS = ("startsWith", "stringContains")
CONDITION_OPS = (*EQUALITY_OPS, *RANGE_OPS, *LIST_OPS, *STRING_OPS, "listContains")
GROUP_OPS = ("andAll", "orAll")

Scalar = str | int | float | bool


class FilterError(ValueError):
    """A filter that cannot be used; ``path`` is the JSON path of the bad part."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class Condition:
    """One comparison. ``value`` is a scalar, or a tuple of scalars for ``in``/``notIn``."""

    op: str
    key: str
    value: Any

    @property
    def builtin(self) -> Builtin | None:
        return Builtin(self.key) if self.key in BUILTINS else None


@dataclass(frozen=True)
class Group:
    op: str  # andAll | orAll
    filters: tuple[Filter, ...]


Filter = Condition | Group


def count_conditions(where: Filter) -> int:
    """Conditions in all, each value of an ``in``/``notIn`` list counting as one (each is a clause
    of the query: OpenSearch refuses more than 1,024 clauses in a query)."""
    if isinstance(where, Condition):
        return len(where.value) if where.op in LIST_OPS else 1
    return sum(count_conditions(child) for child in where.filters)


# -- parsing ------------------------------------------------------------------------------------
def parse_filter(raw: Any, path: str = "filter", *, allow_page: bool = True) -> Filter:
    """``raw`` (decoded JSON) as a :data:`Filter`; raises :class:`FilterError` naming the bad part.
    ``allow_page=False`` refuses the ``page`` key (documents have no pages)."""
    parsed = _parse(raw, path, 1, allow_page)
    conditions = count_conditions(parsed)
    if conditions > MAX_CONDITIONS:
        raise FilterError(path, f"at most {MAX_CONDITIONS} conditions (got {conditions})")
    return parsed


def _parse(raw: Any, path: str, depth: int, allow_page: bool) -> Filter:
    if depth > MAX_DEPTH:
        raise FilterError(path, f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(raw, Mapping):
        raise FilterError(path, "a filter is a JSON object with one operator")
    if len(raw) != 1:
        names = ", ".join(sorted(map(str, raw))) or "none"
        raise FilterError(path, f"a filter has exactly one operator (got {names})")
    op, body = next(iter(raw.items()))
    where = f"{path}.{op}"
    if op in GROUP_OPS:
        if not isinstance(body, list):
            raise FilterError(where, "a list of filters")
        if len(body) < 2:
            raise FilterError(where, "at least 2 filters")
        if len(body) > MAX_CONDITIONS:
            raise FilterError(where, f"at most {MAX_CONDITIONS} filters")
        return Group(op, tuple(_parse(child, f"{where}[{i}]", depth + 1, allow_page) for i, child in enumerate(body)))
    if op not in CONDITION_OPS:
        known = ", ".join((*CONDITION_OPS, *GROUP_OPS))
        raise FilterError(where, f"unknown operator (expected one of {known})")
    if not isinstance(body, Mapping):
        raise FilterError(where, 'a condition is {"key": ..., "value": ...}')
    extra = sorted(set(map(str, body)) - {"key", "value"})
    if extra:
        raise FilterError(f"{where}.{extra[0]}", "unexpected field (a condition has key and value)")
    if "key" not in body:
        raise FilterError(f"{where}.key", "missing")
    if "value" not in body:
        raise FilterError(f"{where}.value", "missing")
    key = body["key"]
    if not isinstance(key, str) or not (key in BUILTINS or KEY_PATTERN.fullmatch(key)):
        raise FilterError(f"{where}.key", f"a built-in or a metadata key matching ^{KEY_PATTERN.pattern}$")
    if key == Builtin.PAGE and not allow_page:
        raise FilterError(f"{where}.key", "documents have no page; page filters passages only")
    return Condition(op, key, _value(op, key, body["value"], f"{where}.value"))


def _scalar(value: Any, path: str) -> Scalar:
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise FilterError(path, f"a string is at most {MAX_STRING_CHARS} characters")
        return value
    if isinstance(value, bool):
        return value
    if is_number(value):
        try:
            check_number(value, path)
        except MetadataError as exc:
            raise FilterError(path, exc.message) from None
        return value  # type: ignore[no-any-return]
    kind = "null" if value is None else type(value).__name__
    raise FilterError(path, f"a string, number or boolean, not {kind}")


def _value(op: str, key: str, value: Any, path: str) -> Any:
    builtin = Builtin(key) if key in BUILTINS else None
    if op in LIST_OPS:
        if not isinstance(value, list) or not value:
            raise FilterError(path, "a non-empty list of values")
        if len(value) > MAX_LIST_VALUES:
            raise FilterError(path, f"at most {MAX_LIST_VALUES} values")
        return tuple(_builtin_value(builtin, _scalar(v, f"{path}[{i}]"), f"{path}[{i}]") for i, v in enumerate(value))
    scalar = _scalar(value, path)
    if op in RANGE_OPS:
        if builtin in (Builtin.DOCUMENT_ID, Builtin.FILENAME, Builtin.CONTENT_TYPE):
            raise FilterError(path, f"{key} is a string: it has no order to compare")
        if not (is_number(scalar) or (isinstance(scalar, str) and iso_datetime(scalar) is not None)):
            raise FilterError(path, "a number or an ISO 8601 date")
    if op in (*STRING_OPS, "listContains") and not isinstance(scalar, str):
        raise FilterError(path, "a string")
    if op in STRING_OPS and builtin in (Builtin.CREATED_AT, Builtin.PAGE):
        raise FilterError(path, f"{op} compares strings; {key} is not one")
    if op in STRING_OPS and not scalar:
        raise FilterError(path, "a non-empty string")
    return _builtin_value(builtin, scalar, path)


def _builtin_value(builtin: Builtin | None, value: Scalar, path: str) -> Scalar:
    """A built-in's value has the built-in's type."""
    if builtin is Builtin.PAGE and not (is_number(value) and float(value).is_integer()):
        raise FilterError(path, "a page number (an integer)")
    if builtin is Builtin.CREATED_AT and not (isinstance(value, str) and iso_datetime(value) is not None):
        raise FilterError(path, "an ISO 8601 date or date-time")
    if builtin in (Builtin.DOCUMENT_ID, Builtin.FILENAME, Builtin.CONTENT_TYPE) and not isinstance(value, str):
        raise FilterError(path, "a string")
    return value


# -- evaluation in code -------------------------------------------------------------------------
def matches(where: Filter, fields: Mapping[str, Any]) -> bool:
    """Whether a document or chunk matches: ``fields`` holds the built-ins it has (``document_id``,
    ``filename``, ``created_at``, ``content_type``; a chunk also ``page_start`` and ``page_end``)
    and its user metadata under ``metadata``."""
    if isinstance(where, Group):
        results = (matches(child, fields) for child in where.filters)
        return all(results) if where.op == "andAll" else any(results)
    if where.op == "notEquals":
        return not _positive(Condition("equals", where.key, where.value), fields)
    if where.op == "notIn":
        return not _positive(Condition("in", where.key, where.value), fields)
    return _positive(where, fields)


def _positive(cond: Condition, fields: Mapping[str, Any]) -> bool:
    if cond.op == "in":
        return any(_positive(Condition("equals", cond.key, v), fields) for v in cond.value)
    if cond.builtin is Builtin.PAGE:
        start, end = fields.get("page_start"), fields.get("page_end")
        if not (isinstance(start, int | float) and isinstance(end, int | float)):
            return False
        return _page_matches(cond.op, float(cond.value), float(start), float(end))
    candidates = _values_like(cond, fields)
    test = _test(cond)
    return any(test(candidate) for candidate in candidates)


def _page_matches(op: str, page: float, start: float, end: float) -> bool:
    """Some page of the span ``start``..``end`` satisfies ``op page``."""
    return {
        "equals": start <= page <= end,
        "listContains": start <= page <= end,
        "greaterThan": end > page,
        "greaterThanOrEquals": end >= page,
        "lessThan": start < page,
        "lessThanOrEquals": start <= page,
    }.get(op, False)


def _values_like(cond: Condition, fields: Mapping[str, Any]) -> list[Any]:
    """The stored values comparable with ``cond``'s value: of its type (dates as instants)."""
    stored = fields.get(cond.key) if cond.builtin is not None else (fields.get("metadata") or {}).get(cond.key)
    values = stored if isinstance(stored, list) else [stored]
    wanted = cond.value
    if (cond.op in RANGE_OPS and isinstance(wanted, str)) or cond.builtin is Builtin.CREATED_AT:
        return [m for m in (iso_datetime(v) for v in values if isinstance(v, str)) if m is not None]
    if isinstance(wanted, bool):
        return [v for v in values if isinstance(v, bool)]
    if is_number(wanted):
        return [v for v in values if is_number(v)]
    return [v for v in values if isinstance(v, str)]


def _test(cond: Condition) -> Callable[[Any], bool]:
    wanted: Any = cond.value
    if isinstance(wanted, str) and (cond.op in RANGE_OPS or cond.builtin is Builtin.CREATED_AT):
        wanted = iso_datetime(wanted)
    elif is_number(wanted):
        wanted = float(wanted)
    op = cond.op
    if op in ("equals", "listContains"):
        return lambda v: _comparable(v, wanted) == wanted
    if op == "greaterThan":
        return lambda v: _comparable(v, wanted) > wanted
    if op == "greaterThanOrEquals":
        return lambda v: _comparable(v, wanted) >= wanted
    if op == "lessThan":
        return lambda v: _comparable(v, wanted) < wanted
    if op == "lessThanOrEquals":
        return lambda v: _comparable(v, wanted) <= wanted
    if op == "startsWith":
        return lambda v: str(v).startswith(wanted)
    if op == "stringContains":
        return lambda v: wanted in str(v)
    raise AssertionError(f"no test for {op}")  # pragma: no cover - parse_filter admits no other


def _comparable(value: Any, wanted: Any) -> Any:
    if isinstance(wanted, datetime) or isinstance(value, bool):
        return value
    return float(value) if is_number(value) else value
