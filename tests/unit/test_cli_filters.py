"""The CLI's metadata and filter options: how values are typed, lists, --where and --filter-json."""

from __future__ import annotations

import json
import shlex
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
        # Not JSON numbers: kept as written, so nothing is lost.
        ("02134", "02134"),  # a postcode
        ("+4915112345678", "+4915112345678"),  # a phone number
        ("-0.25", -0.25),
        ("0", 0),
        ("1.0e400", "1.0e400"),  # no float holds it (JSON has no Infinity)
        ("٢٠٢٤", "٢٠٢٤"),  # other scripts' digits are text
        ("\uff12\uff10\uff12\uff14", "\uff12\uff10\uff12\uff14"),  # fullwidth digits
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
    # A typed value also matches as written (a list member, or "2024" stored by another client).
    year = {"orAll": [{"equals": {"key": "year", "value": 2024}}, {"equals": {"key": "year", "value": "2024"}}]}
    assert both == {
        "andAll": [
            {"equals": {"key": "customer", "value": "acme"}},
            year,
            {"greaterThan": {"key": "page", "value": 2}},
        ]
    }
    stored = tmp_path / "filter.json"
    stored.write_text(json.dumps({"in": {"key": "customer", "value": ["a", "b"]}}))
    assert build_filter(None, f"@{stored}") == {"in": {"key": "customer", "value": ["a", "b"]}}


# What a shell passes for what a person types (quoted as they would quote it), then what the API's
# own rules make of it (rag_ingest.core.metadata, rag_ingest.core.filters).
TYPED_IN_A_SHELL = (
    "upload report.pdf --meta 'title=Smith, J.' --meta signed=2024-03-01 --meta 'at=2024-03-01T09:30:00+01:00' "
    "--meta delta=-3 --meta ratio=-0.25 --meta zip=02134 --meta phone=+4915112345678 --meta 'note=a=b=c' "
    "--meta tags=nda --meta tags=2024 --meta tags=true --meta city=Zürich --meta 'quoted=\"Q3 report\"' "
    "--meta big=1.0e400 --meta draft=false --meta year=٢٠٢٤ --meta 'empty='"
)
STORED = {
    "title": "Smith, J.",
    "signed": "2024-03-01",
    "at": "2024-03-01T09:30:00+01:00",
    "delta": -3,
    "ratio": -0.25,
    "zip": "02134",
    "phone": "+4915112345678",
    "note": "a=b=c",
    "tags": ["nda", "2024", "true"],
    "city": "Zürich",
    "quoted": '"Q3 report"',
    "big": "1.0e400",
    "draft": False,
    "year": "٢٠٢٤",
    "empty": "",
}


def test_real_values_typed_in_a_shell_are_kept_and_the_api_accepts_them() -> None:
    from rag_ingest.core.metadata import validate_metadata

    metadata = parse_meta(build_parser().parse_args(shlex.split(TYPED_IN_A_SHELL)).meta)
    assert metadata == STORED
    assert validate_metadata(json.loads(json.dumps(metadata, allow_nan=False))) == STORED


@pytest.mark.parametrize(
    "where",
    ["title=Smith, J.", "signed=2024-03-01", "delta=-3", "ratio=-0.25", "zip=02134", "phone=+4915112345678",
     "note=a=b=c", "tags=2024", "tags=true", "tags=nda", "city=Zürich", "draft=false",
     "year=٢٠٢٤", "empty="],
)  # fmt: skip
def test_where_finds_what_upload_stored_from_the_same_text(where: str) -> None:
    """``--where`` with the text given to ``--meta`` matches the stored document, as the API evaluates it."""
    from rag_ingest.core.filters import matches, parse_filter

    argv = shlex.split(f"search q --where {shlex.quote(where)}")
    parsed = parse_filter(json.loads(json.dumps(build_filter(build_parser().parse_args(argv).where, None))))
    assert matches(parsed, {"metadata": STORED}), where
    assert not matches(parsed, {"metadata": {}}), where


def test_filter_json_from_a_file_is_utf8_with_or_without_a_bom(tmp_path: Path) -> None:
    wanted = {"equals": {"key": "city", "value": "Zürich"}}
    for encoding in ("utf-8", "utf-8-sig"):
        stored = tmp_path / f"{encoding}.json"
        stored.write_text(json.dumps(wanted, ensure_ascii=False), encoding=encoding)
        assert build_filter(None, f"@{stored}") == wanted
    latin = tmp_path / "latin.json"
    latin.write_bytes(json.dumps(wanted, ensure_ascii=False).encode("latin-1"))
    with pytest.raises(CliError, match="not UTF-8"):
        build_filter(None, f"@{latin}")


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
