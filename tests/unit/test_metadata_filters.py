"""Metadata rules and RetrievalFilter-shaped filters: validation (every rule and error path), the
evaluation in code, and the translation to OpenSearch's query DSL (the real server runs it in
tests/integration/test_filtered_search.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rag_ingest.adapters.opensearch_filters import (
    FILTER_FIELDS_MAPPING,
    METADATA_DYNAMIC_TEMPLATES,
    chunk_metadata,
    filter_query,
)
from rag_ingest.core.filters import (
    CONDITION_OPS,
    MAX_CONDITIONS,
    Condition,
    FilterError,
    Group,
    matches,
    parse_filter,
)
from rag_ingest.core.metadata import (
    MAX_METADATA_BYTES,
    RESERVED_KEYS,
    MetadataError,
    MetadataType,
    iso_datetime,
    type_of,
    validate_metadata,
)

pytestmark = pytest.mark.unit


# -- metadata -------------------------------------------------------------------------------------
def test_valid_metadata_is_kept_as_given() -> None:
    metadata = {"customer": "acme", "year": 2024, "score": 0.5, "signed": True, "tags": ["nda", "eu"]}
    assert validate_metadata(metadata) == metadata


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("acme", MetadataType.STRING),
        ("2024-03-01", MetadataType.DATE),
        ("2024-03-01T10:15", MetadataType.DATE),
        ("2024-03-01T10:15:30.123456789Z", MetadataType.DATE),
        ("2024-03-01T10:15:30+02:00", MetadataType.DATE),
        ("2024-13-01", MetadataType.STRING),  # no 13th month: a string
        ("2024-3-1", MetadataType.STRING),
        ("20240301", MetadataType.STRING),
        (3, MetadataType.NUMBER),
        (2.5, MetadataType.NUMBER),
        (False, MetadataType.BOOLEAN),
        (["a"], MetadataType.STRING_LIST),
    ],
)
def test_values_are_typed_dates_being_iso_8601_strings(value: Any, kind: MetadataType) -> None:
    assert type_of(value) is kind


def test_a_date_without_an_offset_is_utc() -> None:
    assert iso_datetime("2024-03-01") == iso_datetime("2024-03-01T00:00:00Z") == iso_datetime("2024-03-01T01:00+01:00")


@pytest.mark.parametrize(
    ("metadata", "path"),
    [
        ({"Customer": "x"}, "metadata"),
        ({"1st": "x"}, "metadata"),
        ({"a" * 65: "x"}, "metadata"),
        ({"with-dash": "x"}, "metadata"),
        ({"filename": "x"}, "metadata.filename"),
        ({"page": 1}, "metadata.page"),
        ({"tenant_id": "x"}, "metadata.tenant_id"),
        ({"text": "x"}, "metadata.text"),
        ({"note": None}, "metadata.note"),
        ({"note": {"a": 1}}, "metadata.note"),
        ({"note": "x" * 1025}, "metadata.note"),
        ({"tags": ["a", 1]}, "metadata.tags[1]"),
        ({"tags": ["a"] * 51}, "metadata.tags"),
        ({"tags": ["x" * 1025]}, "metadata.tags[0]"),
        ({"big": 2**53 + 1}, "metadata.big"),
        ({"nan": float("nan")}, "metadata.nan"),
        ({f"k{i}": i for i in range(33)}, "metadata"),
        ({f"k{i}": "x" * 1000 for i in range(9)}, "metadata"),
    ],
)
def test_bad_metadata_names_the_bad_part(metadata: dict[str, Any], path: str) -> None:
    with pytest.raises(MetadataError) as caught:
        validate_metadata(metadata)
    assert caught.value.path == path


def test_every_builtin_and_index_field_is_reserved() -> None:
    for key in ("document_id", "filename", "created_at", "page", "content_type"):
        assert key in RESERVED_KEYS
    chunk_fields = {"tenant_id", "version", "chunk_index", "page_start", "page_end", "heading_path", "text"}
    assert chunk_fields | {"indexed_text", "embedding", "metadata"} <= RESERVED_KEYS


def test_metadata_of_exactly_the_size_limit_is_accepted() -> None:
    overhead = len(json.dumps({"k": ""}, separators=(",", ":")))
    assert validate_metadata({"k": "x" * 1024})  # one string at its own limit
    metadata = {f"k{i:02d}": "x" * 1000 for i in range(8)}
    size = len(json.dumps(metadata, separators=(",", ":")))
    assert size < MAX_METADATA_BYTES and overhead < 10
    assert validate_metadata(metadata) == metadata


# -- parsing: every operator ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"equals": {"key": "customer", "value": "acme"}}, Condition("equals", "customer", "acme")),
        ({"notEquals": {"key": "year", "value": 2024}}, Condition("notEquals", "year", 2024)),
        ({"greaterThan": {"key": "year", "value": 2020}}, Condition("greaterThan", "year", 2020)),
        ({"greaterThanOrEquals": {"key": "score", "value": 0.5}}, Condition("greaterThanOrEquals", "score", 0.5)),
        ({"lessThan": {"key": "signed", "value": "2024-01-01"}}, Condition("lessThan", "signed", "2024-01-01")),
        ({"lessThanOrEquals": {"key": "page", "value": 3}}, Condition("lessThanOrEquals", "page", 3)),
        ({"in": {"key": "customer", "value": ["a", "b"]}}, Condition("in", "customer", ("a", "b"))),
        ({"notIn": {"key": "year", "value": [1, 2]}}, Condition("notIn", "year", (1, 2))),
        ({"startsWith": {"key": "filename", "value": "con"}}, Condition("startsWith", "filename", "con")),
        ({"listContains": {"key": "tags", "value": "nda"}}, Condition("listContains", "tags", "nda")),
        ({"stringContains": {"key": "title", "value": "rent"}}, Condition("stringContains", "title", "rent")),
        ({"equals": {"key": "signed", "value": True}}, Condition("equals", "signed", True)),
    ],
)
def test_each_condition_operator_parses(raw: dict[str, Any], expected: Condition) -> None:
    assert parse_filter(raw) == expected


def test_groups_parse_nested() -> None:
    raw = {
        "andAll": [
            {"equals": {"key": "customer", "value": "acme"}},
            {"orAll": [{"equals": {"key": "year", "value": 2023}}, {"equals": {"key": "year", "value": 2024}}]},
        ]
    }
    assert parse_filter(raw) == Group(
        "andAll",
        (
            Condition("equals", "customer", "acme"),
            Group("orAll", (Condition("equals", "year", 2023), Condition("equals", "year", 2024))),
        ),
    )


def _nested(levels: int) -> dict[str, Any]:
    leaf: dict[str, Any] = {"equals": {"key": "a", "value": 1}}
    for _ in range(levels - 1):
        leaf = {"andAll": [leaf, {"equals": {"key": "b", "value": 2}}]}
    return leaf


# -- parsing: every error path -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ("customer=acme", "filter"),
        ([], "filter"),
        ({}, "filter"),
        ({"equals": {"key": "a", "value": 1}, "notEquals": {"key": "a", "value": 2}}, "filter"),
        ({"matches": {"key": "a", "value": 1}}, "filter.matches"),
        ({"equals": ["a", 1]}, "filter.equals"),
        ({"equals": {"value": 1}}, "filter.equals.key"),
        ({"equals": {"key": "a"}}, "filter.equals.value"),
        ({"equals": {"key": "a", "value": 1, "type": "x"}}, "filter.equals.type"),
        ({"equals": {"key": "Bad Key", "value": 1}}, "filter.equals.key"),
        ({"equals": {"key": 7, "value": 1}}, "filter.equals.key"),
        ({"equals": {"key": "a", "value": None}}, "filter.equals.value"),
        ({"equals": {"key": "a", "value": {"x": 1}}}, "filter.equals.value"),
        ({"equals": {"key": "a", "value": [1]}}, "filter.equals.value"),
        ({"equals": {"key": "a", "value": "x" * 1025}}, "filter.equals.value"),
        ({"equals": {"key": "a", "value": 2**60}}, "filter.equals.value"),
        ({"greaterThan": {"key": "a", "value": "soon"}}, "filter.greaterThan.value"),
        ({"greaterThan": {"key": "a", "value": True}}, "filter.greaterThan.value"),
        ({"lessThan": {"key": "filename", "value": 3}}, "filter.lessThan.value"),
        ({"in": {"key": "a", "value": "x"}}, "filter.in.value"),
        ({"in": {"key": "a", "value": []}}, "filter.in.value"),
        ({"notIn": {"key": "a", "value": ["x", None]}}, "filter.notIn.value[1]"),
        ({"in": {"key": "a", "value": list(range(101))}}, "filter.in.value"),
        ({"startsWith": {"key": "a", "value": 3}}, "filter.startsWith.value"),
        ({"startsWith": {"key": "a", "value": ""}}, "filter.startsWith.value"),
        ({"stringContains": {"key": "page", "value": "3"}}, "filter.stringContains.value"),
        ({"listContains": {"key": "tags", "value": 3}}, "filter.listContains.value"),
        ({"equals": {"key": "page", "value": 2.5}}, "filter.equals.value"),
        ({"equals": {"key": "page", "value": "3"}}, "filter.equals.value"),
        ({"equals": {"key": "created_at", "value": "yesterday"}}, "filter.equals.value"),
        ({"equals": {"key": "document_id", "value": 3}}, "filter.equals.value"),
        ({"andAll": {"equals": {"key": "a", "value": 1}}}, "filter.andAll"),
        ({"andAll": [{"equals": {"key": "a", "value": 1}}]}, "filter.andAll"),
        ({"orAll": [{"equals": {"key": "a", "value": 1}}, {"nope": {}}]}, "filter.orAll[1].nope"),
        (
            {"andAll": [{"equals": {"key": "a", "value": 1}}, {"equals": {"key": "BAD", "value": 1}}]},
            "filter.andAll[1].equals.key",
        ),
        (_nested(6), "filter" + ".andAll[0]" * 5),
        ({"orAll": [{"equals": {"key": "a", "value": i}} for i in range(MAX_CONDITIONS + 1)]}, "filter.orAll"),
    ],
)
def test_a_bad_filter_names_the_json_path_of_the_bad_part(raw: Any, path: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(raw)
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: ")


def test_five_levels_and_a_hundred_conditions_are_allowed() -> None:
    assert parse_filter(_nested(5))
    wide = {"andAll": [{"orAll": [{"equals": {"key": "a", "value": i}} for i in range(50)]}] * 2}
    assert parse_filter(wide)
    too_wide = {"andAll": [*wide["andAll"], {"equals": {"key": "b", "value": 1}}]}
    with pytest.raises(FilterError, match="at most 100 conditions"):
        parse_filter(too_wide)


def test_documents_refuse_page() -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter({"equals": {"key": "page", "value": 1}}, allow_page=False)
    assert caught.value.path == "filter.equals.key"


# -- evaluation in code -------------------------------------------------------------------------
DOCUMENT = {
    "document_id": "01ABC",
    "filename": "contract-acme.pdf",
    "created_at": "2026-12-01T05:00:00.000+00:00",
    "content_type": "application/pdf",
    "page_start": 3,
    "page_end": 5,
    "metadata": {
        "customer": "acme",
        "year": 2024,
        "score": 0.75,
        "signed": True,
        "signed_on": "2024-03-01",
        "tags": ["nda", "eu"],
    },
}
BOTH = [
    ({"equals": {"key": "customer", "value": "acme"}}, True),
    ({"equals": {"key": "customer", "value": "globex"}}, False),
    ({"equals": {"key": "year", "value": 2024}}, True),
    ({"equals": {"key": "year", "value": 2024.0}}, True),
    ({"equals": {"key": "year", "value": "2024"}}, False),  # a string is compared with strings
    ({"equals": {"key": "signed", "value": True}}, True),
    ({"equals": {"key": "signed", "value": 1}}, False),
    ({"equals": {"key": "signed_on", "value": "2024-03-01"}}, True),
    ({"equals": {"key": "tags", "value": "eu"}}, True),
    ({"equals": {"key": "missing", "value": "x"}}, False),
    ({"notEquals": {"key": "customer", "value": "acme"}}, False),
    ({"notEquals": {"key": "customer", "value": "globex"}}, True),
    ({"notEquals": {"key": "missing", "value": "x"}}, True),
    ({"greaterThan": {"key": "year", "value": 2023}}, True),
    ({"greaterThan": {"key": "year", "value": 2024}}, False),
    ({"greaterThanOrEquals": {"key": "year", "value": 2024}}, True),
    ({"lessThan": {"key": "score", "value": 0.8}}, True),
    ({"lessThanOrEquals": {"key": "score", "value": 0.7}}, False),
    ({"greaterThan": {"key": "signed_on", "value": "2024-02-29T23:59:59Z"}}, True),
    ({"lessThan": {"key": "signed_on", "value": "2024-03-01"}}, False),
    ({"lessThanOrEquals": {"key": "signed_on", "value": "2024-03-01T00:00:00+00:00"}}, True),
    ({"greaterThan": {"key": "customer", "value": 1}}, False),
    ({"in": {"key": "customer", "value": ["globex", "acme"]}}, True),
    ({"in": {"key": "year", "value": [2022, 2023]}}, False),
    ({"notIn": {"key": "customer", "value": ["globex", "initech"]}}, True),
    ({"notIn": {"key": "tags", "value": ["nda"]}}, False),
    ({"startsWith": {"key": "customer", "value": "ac"}}, True),
    ({"startsWith": {"key": "customer", "value": "me"}}, False),
    ({"startsWith": {"key": "filename", "value": "contract-"}}, True),
    ({"listContains": {"key": "tags", "value": "nda"}}, True),
    ({"listContains": {"key": "tags", "value": "us"}}, False),
    ({"stringContains": {"key": "customer", "value": "cm"}}, True),
    ({"stringContains": {"key": "filename", "value": "acme"}}, True),
    ({"stringContains": {"key": "customer", "value": "*"}}, False),
    ({"equals": {"key": "document_id", "value": "01ABC"}}, True),
    ({"equals": {"key": "content_type", "value": "application/pdf"}}, True),
    ({"greaterThan": {"key": "created_at", "value": "2026-12-01"}}, True),
    ({"equals": {"key": "created_at", "value": "2026-12-01T05:00:00Z"}}, True),
    ({"andAll": [{"equals": {"key": "customer", "value": "acme"}}, {"equals": {"key": "year", "value": 2023}}]}, False),
    ({"orAll": [{"equals": {"key": "customer", "value": "x"}}, {"equals": {"key": "year", "value": 2024}}]}, True),
]
PAGES = [
    ({"equals": {"key": "page", "value": 4}}, True),
    ({"equals": {"key": "page", "value": 3}}, True),
    ({"equals": {"key": "page", "value": 6}}, False),
    ({"notEquals": {"key": "page", "value": 4}}, False),
    ({"greaterThan": {"key": "page", "value": 4}}, True),
    ({"greaterThan": {"key": "page", "value": 5}}, False),
    ({"greaterThanOrEquals": {"key": "page", "value": 5}}, True),
    ({"lessThan": {"key": "page", "value": 3}}, False),
    ({"lessThanOrEquals": {"key": "page", "value": 3}}, True),
    ({"in": {"key": "page", "value": [1, 5]}}, True),
    ({"notIn": {"key": "page", "value": [1, 2]}}, True),
]


@pytest.mark.parametrize(("raw", "expected"), BOTH + PAGES, ids=lambda v: json.dumps(v) if isinstance(v, dict) else "")
def test_matches_evaluates_every_operator(raw: dict[str, Any], expected: bool) -> None:
    assert matches(parse_filter(raw), DOCUMENT) is expected


# -- the OpenSearch side ------------------------------------------------------------------------
def test_metadata_is_laid_out_by_type_on_chunks() -> None:
    assert chunk_metadata(DOCUMENT["metadata"]) == {  # type: ignore[arg-type]
        "s": {"customer": "acme", "signed_on": "2024-03-01", "tags": ["nda", "eu"]},
        "n": {"year": 2024, "score": 0.75},
        "b": {"signed": True},
        "d": {"signed_on": "2024-03-01"},
    }
    assert chunk_metadata({}) == {}


def test_the_mapping_types_metadata_by_path() -> None:
    templates = {
        next(iter(t.values()))["path_match"]: next(iter(t.values()))["mapping"]["type"]
        for t in METADATA_DYNAMIC_TEMPLATES
    }
    assert templates == {
        "metadata.s.*": "keyword",
        "metadata.n.*": "double",
        "metadata.b.*": "boolean",
        "metadata.d.*": "date",
    }
    assert FILTER_FIELDS_MAPPING["metadata"]["dynamic"] is True


@pytest.mark.parametrize(
    ("raw", "clause"),
    [
        ({"equals": {"key": "customer", "value": "acme"}}, {"term": {"metadata.s.customer": "acme"}}),
        ({"equals": {"key": "year", "value": 2024}}, {"term": {"metadata.n.year": 2024}}),
        ({"equals": {"key": "signed", "value": False}}, {"term": {"metadata.b.signed": False}}),
        ({"listContains": {"key": "tags", "value": "nda"}}, {"term": {"metadata.s.tags": "nda"}}),
        (
            {"notEquals": {"key": "customer", "value": "acme"}},
            {"bool": {"must_not": [{"term": {"metadata.s.customer": "acme"}}]}},
        ),
        ({"greaterThan": {"key": "year", "value": 2020}}, {"range": {"metadata.n.year": {"gt": 2020}}}),
        ({"greaterThanOrEquals": {"key": "year", "value": 2020}}, {"range": {"metadata.n.year": {"gte": 2020}}}),
        (
            {"lessThan": {"key": "signed_on", "value": "2025-01-01"}},
            {"range": {"metadata.d.signed_on": {"lt": "2025-01-01"}}},
        ),
        (
            {"lessThanOrEquals": {"key": "created_at", "value": "2025-01-01"}},
            {"range": {"created_at": {"lte": "2025-01-01"}}},
        ),
        (
            {"in": {"key": "customer", "value": ["a", 1]}},
            {
                "bool": {
                    "should": [{"term": {"metadata.s.customer": "a"}}, {"term": {"metadata.n.customer": 1}}],
                    "minimum_should_match": 1,
                }
            },
        ),
        (
            {"notIn": {"key": "document_id", "value": ["x"]}},
            {"bool": {"must_not": [{"bool": {"should": [{"term": {"document_id": "x"}}], "minimum_should_match": 1}}]}},
        ),
        ({"startsWith": {"key": "filename", "value": "con"}}, {"prefix": {"filename": {"value": "con"}}}),
        (
            {"stringContains": {"key": "note", "value": "a*b?"}},
            {"wildcard": {"metadata.s.note": {"value": "*a\\*b\\?*"}}},
        ),
        (
            {"equals": {"key": "page", "value": 4}},
            {"bool": {"filter": [{"range": {"page_start": {"lte": 4}}}, {"range": {"page_end": {"gte": 4}}}]}},
        ),
        ({"greaterThan": {"key": "page", "value": 4}}, {"range": {"page_end": {"gt": 4}}}),
        ({"lessThan": {"key": "page", "value": 4}}, {"range": {"page_start": {"lt": 4}}}),
        (
            {"equals": {"key": "content_type", "value": "application/pdf"}},
            {
                "bool": {
                    "should": [
                        {"term": {"content_type": "application/pdf"}},
                        {"bool": {"must_not": [{"exists": {"field": "content_type"}}]}},
                    ],
                    "minimum_should_match": 1,
                }
            },
        ),
        (
            {"orAll": [{"equals": {"key": "a", "value": 1}}, {"equals": {"key": "b", "value": 2}}]},
            {
                "bool": {
                    "should": [{"term": {"metadata.n.a": 1}}, {"term": {"metadata.n.b": 2}}],
                    "minimum_should_match": 1,
                }
            },
        ),
        (
            {"andAll": [{"equals": {"key": "a", "value": 1}}, {"equals": {"key": "b", "value": 2}}]},
            {"bool": {"filter": [{"term": {"metadata.n.a": 1}}, {"term": {"metadata.n.b": 2}}]}},
        ),
    ],
)
def test_filters_translate_to_query_dsl(raw: dict[str, Any], clause: dict[str, Any]) -> None:
    assert filter_query(parse_filter(raw)) == clause


def test_every_condition_operator_translates() -> None:
    values = {
        "in": ["x"],
        "notIn": ["x"],
        "greaterThan": 1,
        "greaterThanOrEquals": 1,
        "lessThan": 1,
        "lessThanOrEquals": 1,
    }
    for op in CONDITION_OPS:
        assert filter_query(parse_filter({op: {"key": "k", "value": values.get(op, "x")}}))


def test_offsets_past_eighteen_hours_are_no_date() -> None:
    assert iso_datetime("2024-01-01T00:00+18:00") is not None
    assert iso_datetime("2024-01-01T00:00+20:00") is None
    assert type_of("2024-01-01T00:00-23:59") is MetadataType.STRING


def test_each_value_of_an_in_list_counts_as_a_condition() -> None:
    half = {"in": {"key": "a", "value": list(range(50))}}
    assert parse_filter({"andAll": [half, half]})
    with pytest.raises(FilterError, match="at most 100 conditions"):
        parse_filter({"andAll": [half, half, {"equals": {"key": "b", "value": 1}}]})


def test_a_chunks_metadata_reads_back_as_given() -> None:
    from rag_ingest.adapters.opensearch_filters import metadata_of_chunk

    metadata = DOCUMENT["metadata"]
    assert metadata_of_chunk(chunk_metadata(metadata)) == metadata  # type: ignore[arg-type]
    assert metadata_of_chunk(None) == {} and metadata_of_chunk({}) == {}
