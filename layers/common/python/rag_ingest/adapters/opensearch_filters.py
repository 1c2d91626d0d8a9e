"""The chunk index's side of metadata and filters: how a document's metadata is laid out on its
chunks, the mapping that types it, and a parsed filter (``rag_ingest.core.filters``) as query DSL.

Pure functions (no client) for ``rag_ingest.adapters.vector_store``. A chunk's metadata sits under
``metadata``, split by value type (``metadata.s|n|b|d.<key>``: strings, numbers, booleans, dates) so
that one key's values of different types never conflict in the index's one mapping; dynamic
templates type them (:data:`METADATA_DYNAMIC_TEMPLATES`). Each chunk carries its document's access
as keyword fields (editors among the readers, the deny lists apart), and :func:`access_query` is a
reader's clause next to the tenant's term. The
layout and the access fields: docs/api.md, "Metadata" and "Per-document access".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_ingest.core.access import DocumentAccess, Principal
from rag_ingest.core.filters import RANGE_OPS, Builtin, Condition, Filter, Group
from rag_ingest.core.metadata import MetadataType, is_number, iso_datetime, type_of

METADATA_FIELD = "metadata"
#: What chunks written before content_type was indexed are (every upload was a PDF then).
LEGACY_CONTENT_TYPE = "application/pdf"
TOTAL_FIELDS_LIMIT = 10_000

_TYPED = {"s": "keyword", "n": "double", "b": "boolean", "d": "date"}

METADATA_DYNAMIC_TEMPLATES: list[dict[str, Any]] = [
    {
        f"metadata_{suffix}": {
            "path_match": f"{METADATA_FIELD}.{suffix}.*",
            # A date the server cannot read is left out of the date field (kept as a string), never
            # a failed Index stage: rag_ingest.core.metadata.iso_datetime means to admit only readable ones.
            "mapping": {
                "type": kind,
                **({"format": "strict_date_optional_time", "ignore_malformed": True} if kind == "date" else {}),
            },
        }
    }
    for suffix, kind in _TYPED.items()
]

#: The fields metadata and the built-in filters need; also added to an index made before them.
FILTER_FIELDS_MAPPING: dict[str, Any] = {
    METADATA_FIELD: {
        "type": "object",
        "dynamic": True,
        "properties": {suffix: {"type": "object", "dynamic": True} for suffix in _TYPED},
    },
    "created_at": {"type": "date"},
    "content_type": {"type": "keyword"},
}


ACCESS_USERS_FIELD = "access_users"
ACCESS_GROUPS_FIELD = "access_groups"
ACCESS_OPEN_FIELD = "access_open"
ACCESS_DENY_USERS_FIELD = "access_deny_users"
ACCESS_DENY_GROUPS_FIELD = "access_deny_groups"
UPLOADED_BY_FIELD = "uploaded_by"
#: The access fields of a chunk (module doc); also added to an index made before them.
ACCESS_FIELDS_MAPPING: dict[str, Any] = {
    ACCESS_USERS_FIELD: {"type": "keyword"},
    ACCESS_GROUPS_FIELD: {"type": "keyword"},
    ACCESS_OPEN_FIELD: {"type": "boolean"},
    ACCESS_DENY_USERS_FIELD: {"type": "keyword"},
    ACCESS_DENY_GROUPS_FIELD: {"type": "keyword"},
    UPLOADED_BY_FIELD: {"type": "keyword"},
}


def chunk_access(access: DocumentAccess | None, uploaded_by: str | None) -> dict[str, Any]:
    """A document's access as each of its chunks holds it (module doc): an editor is listed as a
    reader, since every editor reads; ``access_open`` says no reader is listed."""
    access = access if access is not None else DocumentAccess()
    return {
        ACCESS_USERS_FIELD: _union(access.users, access.editors.users),
        ACCESS_GROUPS_FIELD: _union(access.groups, access.editors.groups),
        ACCESS_OPEN_FIELD: access.is_open,
        ACCESS_DENY_USERS_FIELD: list(access.deny.users),
        ACCESS_DENY_GROUPS_FIELD: list(access.deny.groups),
        UPLOADED_BY_FIELD: uploaded_by,
    }


def _union(first: list[str], second: list[str]) -> list[str]:
    return first + [name for name in second if name not in first]


def access_query(reader: Principal) -> dict[str, Any]:
    """The chunks ``reader`` may read (rag_ingest.core.access.can_read), as one clause for a
    ``bool.filter`` or a k-NN query's ``filter``; the tenant's own term is separate. A tenant admin
    reads every chunk that does not deny them."""
    not_denied = deny_clauses(reader)
    if reader.is_tenant_admin:
        return {"bool": {"must_not": not_denied}} if not_denied else {"match_all": {}}
    readable: list[dict[str, Any]] = [
        {"term": {ACCESS_OPEN_FIELD: True}},
        {"bool": {"must_not": [{"exists": {"field": ACCESS_OPEN_FIELD}}]}},  # written before access existed
    ]
    if reader.subject:
        readable.append({"term": {ACCESS_USERS_FIELD: reader.subject}})
        readable.append({"term": {UPLOADED_BY_FIELD: reader.subject}})
    if reader.groups:
        readable.append({"terms": {ACCESS_GROUPS_FIELD: sorted(reader.groups)}})
    clause: dict[str, Any] = {"should": readable, "minimum_should_match": 1}
    if not_denied:
        clause["must_not"] = not_denied
    return {"bool": clause}


def deny_clauses(reader: Principal) -> list[dict[str, Any]]:
    """The ``must_not`` clauses that leave out the chunks whose document denies ``reader``."""
    clauses: list[dict[str, Any]] = []
    if reader.subject:
        clauses.append({"term": {ACCESS_DENY_USERS_FIELD: reader.subject}})
    if reader.groups:
        clauses.append({"terms": {ACCESS_DENY_GROUPS_FIELD: sorted(reader.groups)}})
    return clauses


def chunk_metadata(metadata: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A document's metadata as its chunks hold it (module doc): ``{"s": ..., "n": ..., "b": ..., "d": ...}``."""
    typed: dict[str, dict[str, Any]] = {suffix: {} for suffix in _TYPED}
    for key, value in metadata.items():
        kind = type_of(value)
        if kind is MetadataType.BOOLEAN:
            typed["b"][key] = value
        elif kind is MetadataType.NUMBER:
            typed["n"][key] = value
        elif kind is MetadataType.STRING_LIST:
            typed["s"][key] = list(value)
            dates = [item for item in value if iso_datetime(item) is not None]
            if dates:
                typed["d"][key] = dates
        else:
            typed["s"][key] = value
            if kind is MetadataType.DATE:
                typed["d"][key] = value
    return {suffix: fields for suffix, fields in typed.items() if fields}


def metadata_of_chunk(typed: Mapping[str, Any] | None) -> dict[str, Any]:
    """A chunk's ``metadata`` (:func:`chunk_metadata`'s layout) as the document's metadata again:
    strings and lists are in ``s`` as written (dates too), numbers in ``n``, booleans in ``b``."""
    if not typed:
        return {}
    return {**typed.get("s", {}), **typed.get("n", {}), **typed.get("b", {})}


def filter_query(where: Filter) -> dict[str, Any]:
    """``where`` as one query clause, for a ``bool.filter`` (BM25) or a k-NN query's ``filter``."""
    if isinstance(where, Group):
        clauses = [filter_query(child) for child in where.filters]
        if where.op == "andAll":
            return {"bool": {"filter": clauses}}
        return {"bool": {"should": clauses, "minimum_should_match": 1}}
    if where.op == "notEquals":
        return {"bool": {"must_not": [_positive(Condition("equals", where.key, where.value))]}}
    if where.op == "notIn":
        return {"bool": {"must_not": [_positive(Condition("in", where.key, where.value))]}}
    return _positive(where)


def _positive(cond: Condition) -> dict[str, Any]:
    if cond.op == "in":
        return {
            "bool": {
                "should": [_positive(Condition("equals", cond.key, value)) for value in cond.value],
                "minimum_should_match": 1,
            }
        }
    if cond.builtin is Builtin.PAGE:
        return _page(cond.op, int(cond.value))
    field = _field(cond)
    if cond.op in ("equals", "listContains"):
        term = {"term": {field: cond.value}}
        if cond.builtin is Builtin.CONTENT_TYPE and cond.value == LEGACY_CONTENT_TYPE:
            legacy = {"bool": {"must_not": [{"exists": {"field": "content_type"}}]}}
            return {"bool": {"should": [term, legacy], "minimum_should_match": 1}}
        return term
    if cond.op in RANGE_OPS:
        bound = {"greaterThan": "gt", "greaterThanOrEquals": "gte", "lessThan": "lt", "lessThanOrEquals": "lte"}
        return {"range": {field: {bound[cond.op]: cond.value}}}
    if cond.op == "startsWith":
        return {"prefix": {field: {"value": cond.value}}}
    if cond.op == "stringContains":
        return {"wildcard": {field: {"value": f"*{_escape_wildcard(cond.value)}*"}}}
    raise AssertionError(f"no clause for {cond.op}")  # pragma: no cover - parse_filter admits no other


def _field(cond: Condition) -> str:
    """The indexed field ``cond`` compares: a built-in's own, or the metadata path of its value's type."""
    if cond.builtin is not None:
        return cond.builtin.value
    value = cond.value
    if isinstance(value, bool):
        suffix = "b"
    elif is_number(value):
        suffix = "n"
    elif cond.op in RANGE_OPS:  # a string compared by order is a date (parse_filter checked it)
        suffix = "d"
    else:
        suffix = "s"
    return f"{METADATA_FIELD}.{suffix}.{cond.key}"


def _page(op: str, page: int) -> dict[str, Any]:
    """Some page of the chunk's span ``page_start``..``page_end`` satisfies ``op page``."""
    if op in ("equals", "listContains"):
        return {"bool": {"filter": [{"range": {"page_start": {"lte": page}}}, {"range": {"page_end": {"gte": page}}}]}}
    bounds = {
        "greaterThan": ("page_end", "gt"),
        "greaterThanOrEquals": ("page_end", "gte"),
        "lessThan": ("page_start", "lt"),
        "lessThanOrEquals": ("page_start", "lte"),
    }
    if op in bounds:
        field, bound = bounds[op]
        return {"range": {field: {bound: page}}}
    raise AssertionError(f"no page clause for {op}")  # pragma: no cover - parse_filter refuses the others


def _escape_wildcard(text: str) -> str:
    return "".join("\\" + char if char in "\\*?" else char for char in text)
