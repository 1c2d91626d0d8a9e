"""The CLI's metadata and filter options: how values are typed, lists, --where and --filter-json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rag_ingest_client.cli import build_parser
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.filters import build_filter, parse_meta, typed_value

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2024", 2024),
        ("-3", -3),
        ("0.5", 0.5),
        ("1e3", "1e3"),
        ("1.5e3", 1500.0),
        ("true", True),
        ("false", False),
        ("True", "True"),
        ("2024-03-01", "2024-03-01"),
        ("acme", "acme"),
        ("Smith, J.", "Smith, J."),
        ("", ""),
        ("1234567890123456", "1234567890123456"),  # past 15 digits: kept as written
    ],
)
def test_values_are_typed_like_json(text: str, value: Any) -> None:
    assert typed_value(text) == value and type(typed_value(text)) is type(value)


def test_meta_pairs_become_metadata_and_a_repeated_key_a_list() -> None:
    metadata = parse_meta(["customer=acme", "year=2024", "tags=nda", "tags=eu", "tags=2024", "note=a=b"])
    assert metadata == {"customer": "acme", "year": 2024, "tags": ["nda", "eu", "2024"], "note": "a=b"}
    assert parse_meta(None) is None and parse_meta([]) is None


@pytest.mark.parametrize("pair", ["customer", "=acme", " =x"])
def test_a_pair_without_a_key_is_a_usage_error(pair: str) -> None:
    with pytest.raises(CliError, match="expected key=value"):
        parse_meta([pair])


def test_where_is_equals_and_several_are_all_of_them(tmp_path: Path) -> None:
    assert build_filter(None, None) is None
    assert build_filter(["customer=acme"], None) == {"equals": {"key": "customer", "value": "acme"}}
    both = build_filter(["customer=acme", "year=2024"], '{"greaterThan": {"key": "page", "value": 2}}')
    assert both == {
        "andAll": [
            {"equals": {"key": "customer", "value": "acme"}},
            {"equals": {"key": "year", "value": 2024}},
            {"greaterThan": {"key": "page", "value": 2}},
        ]
    }
    stored = tmp_path / "filter.json"
    stored.write_text(json.dumps({"in": {"key": "customer", "value": ["a", "b"]}}))
    assert build_filter(None, f"@{stored}") == {"in": {"key": "customer", "value": ["a", "b"]}}


def test_bad_filter_json_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="not valid JSON"):
        build_filter(None, "{nope")
    with pytest.raises(CliError, match="--filter-json @"):
        build_filter(None, f"@{tmp_path / 'missing.json'}")


def test_the_options_parse() -> None:
    parser = build_parser()
    upload = parser.parse_args(["upload", "a.pdf", "--meta", "customer=acme", "--meta", "year=2024"])
    assert upload.meta == ["customer=acme", "year=2024"]
    search = parser.parse_args(["search", "rent", "--where", "customer=acme", "--filter-json", "{}"])
    assert search.where == ["customer=acme"] and search.filter_json == "{}"
    ls = parser.parse_args(["ls", "--where", "year=2024"])
    assert ls.where == ["year=2024"] and ls.filter_json is None


def test_docs_cli_names_the_options() -> None:
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    for option in ("--meta", "--where", "--filter-json"):
        assert f"`{option}" in text, option
