"""Textract's AnalyzeDocument with TABLES (botocore's Stubber; Textract cannot run here): TABLE,
CELL and MERGED_CELL blocks become rows under their header, and a scanned page's table becomes a
TABLE block of its page as a text layer's does."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from rag_ingest.adapters.textract import TextractEngine, textract_tables
from rag_ingest.core.parsed import BlockKind, TextSource
from rag_ingest.parsing.ocr.engine import PageOcr
from rag_ingest.parsing.pdf.extract import parse_pdf

from tests.unit.test_textract_adapter import PNG, scanned_pdf

pytestmark = pytest.mark.unit


def _box(top: float) -> dict[str, Any]:
    return {
        "BoundingBox": {"Width": 0.2, "Height": 0.03, "Left": 0.1, "Top": top},
        "Polygon": [
            {"X": 0.1, "Y": top},
            {"X": 0.3, "Y": top},
            {"X": 0.3, "Y": top + 0.03},
            {"X": 0.1, "Y": top + 0.03},
        ],
    }


def _word(ident: str, text: str) -> dict[str, Any]:
    return {
        "BlockType": "WORD",
        "Id": ident,
        "Text": text,
        "TextType": "PRINTED",
        "Confidence": 99.0,
        "Geometry": _box(0.3),
    }


def _line(ident: str, text: str, words: list[str], top: float) -> dict[str, Any]:
    return {
        "BlockType": "LINE",
        "Id": ident,
        "Text": text,
        "Confidence": 98.0,
        "Geometry": _box(top),
        "Relationships": [{"Type": "CHILD", "Ids": words}],
    }


def _cell(ident: str, row: int, column: int, words: list[str], header: bool = False) -> dict[str, Any]:
    cell: dict[str, Any] = {
        "BlockType": "CELL",
        "Id": ident,
        "RowIndex": row,
        "ColumnIndex": column,
        "RowSpan": 1,
        "ColumnSpan": 1,
        "Confidence": 95.0,
        "Geometry": _box(0.3 + 0.04 * row),
    }
    if words:
        cell["Relationships"] = [{"Type": "CHILD", "Ids": words}]
    if header:
        cell["EntityTypes"] = ["COLUMN_HEADER"]
    return cell


#: An AnalyzeDocument answer (FeatureTypes TABLES) for a page holding a sentence and a 3 x 3 table
#: whose "EUR" cell is merged over two columns: LINE and WORD blocks as DetectDocumentText gives them,
#: the TABLE with its CELL children and a MERGED_CELL relationship, as the developer guide shows.
ANALYZE_RESPONSE: dict[str, Any] = {
    "DocumentMetadata": {"Pages": 1},
    "AnalyzeDocumentModelVersion": "1.0",
    "Blocks": [
        {
            "BlockType": "PAGE",
            "Id": "page",
            "Geometry": _box(0.0),
            "Relationships": [{"Type": "CHILD", "Ids": ["l1", "l2", "l3", "l4", "table"]}],
        },
        _line("l1", "Currencies of the survey countries are listed below.", ["w0"], 0.1),
        _line("l2", "Country Capital Currency", ["w1", "w2", "w3"], 0.34),
        _line("l3", "Austria Vienna EUR", ["w4", "w5", "w6"], 0.38),
        _line("l4", "France Paris", ["w7", "w8"], 0.42),
        _word("w0", "Currencies"),
        _word("w1", "Country"),
        _word("w2", "Capital"),
        _word("w3", "Currency"),
        _word("w4", "Austria"),
        _word("w5", "Vienna"),
        _word("w6", "EUR"),
        _word("w7", "France"),
        _word("w8", "Paris"),
        {
            "BlockType": "TABLE",
            "Id": "table",
            "EntityTypes": ["STRUCTURED_TABLE"],
            "Confidence": 97.0,
            "Geometry": _box(0.33),
            "Relationships": [
                {"Type": "CHILD", "Ids": ["c11", "c12", "c13", "c21", "c22", "c23", "c31", "c32", "c33"]},
                {"Type": "MERGED_CELL", "Ids": ["m1"]},
            ],
        },
        _cell("c11", 1, 1, ["w1"], header=True),
        _cell("c12", 1, 2, ["w2"], header=True),
        _cell("c13", 1, 3, ["w3"], header=True),
        _cell("c21", 2, 1, ["w4"]),
        _cell("c22", 2, 2, ["w5"]),
        _cell("c23", 2, 3, ["w6"]),
        _cell("c31", 3, 1, ["w7"]),
        _cell("c32", 3, 2, ["w8"]),
        _cell("c33", 3, 3, []),
        {
            "BlockType": "MERGED_CELL",
            "Id": "m1",
            "RowIndex": 2,
            "ColumnIndex": 3,
            "RowSpan": 2,
            "ColumnSpan": 1,
            "Confidence": 90.0,
            "Geometry": _box(0.38),
            "Relationships": [{"Type": "CHILD", "Ids": ["c23", "c33"]}],
        },
    ],
}
EXPECTED_ROWS = [["Country", "Capital", "Currency"], ["Austria", "Vienna", "EUR"], ["France", "Paris", "EUR"]]


def _client() -> Any:
    return boto3.client("textract", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def test_table_cells_become_rows_under_the_header_and_a_merged_cell_fills_its_span() -> None:
    assert textract_tables(ANALYZE_RESPONSE) == (EXPECTED_ROWS,)
    assert textract_tables({"Blocks": [b for b in ANALYZE_RESPONSE["Blocks"] if b["BlockType"] != "TABLE"]}) == ()


def test_the_engine_asks_analyze_document_for_tables_and_parse_makes_them_a_table_block() -> None:
    client = _client()
    stub = Stubber(client)
    stub.add_response("analyze_document", ANALYZE_RESPONSE, {"Document": {"Bytes": PNG}, "FeatureTypes": ["TABLES"]})
    with stub:
        result = TextractEngine(client, tables=True).recognize(PNG)
    assert result.tables == (EXPECTED_ROWS,)
    stub.assert_no_pending_responses()

    stub = Stubber(client)
    stub.add_response("analyze_document", ANALYZE_RESPONSE)
    with stub:
        parsed = parse_pdf(
            scanned_pdf(1), max_bytes=1 << 24, max_pages=10, ocr=PageOcr(TextractEngine(client, tables=True))
        )
    page = parsed.pages[0]
    assert page.source is TextSource.OCR
    [block] = page.blocks
    assert block.kind is BlockKind.TABLE
    assert (
        page.text[block.start : block.end]
        == "Country | Capital | Currency\nAustria | Vienna | EUR\nFrance | Paris | EUR"
    )
    assert page.text.startswith("Currencies of the survey countries are listed below.\n\n")

    stub = Stubber(client)
    stub.add_response("analyze_document", ANALYZE_RESPONSE)
    with stub:  # the ablation's switch: the same answer, its lines as they are
        plain = parse_pdf(
            scanned_pdf(1),
            max_bytes=1 << 24,
            max_pages=10,
            ocr=PageOcr(TextractEngine(client, tables=True)),
            tables=False,
        )
    assert plain.pages[0].blocks == [] and "France Paris" in plain.pages[0].text


_STAGE_ENV = {
    "DOCUMENTS_TABLE": "documents",
    "BUCKET_NAME": "docs",
    "OPENSEARCH_ENDPOINT": "http://127.0.0.1:9200",
    "OPENSEARCH_INDEX": "chunks",
    "EMBEDDING_PROVIDER": "local",
    "EMBEDDING_MODEL_ID": "fake-embedder",
    "EMBEDDING_DIMENSION": "4",
    "MAX_FILE_BYTES": "1048576",
    "MAX_PAGES": "50",
    "CHUNK_TOKENS": "120",
    "CHUNK_OVERLAP_TOKENS": "20",
}


@pytest.mark.parametrize(("variable", "analyzes"), [("true", True), ("false", False), (None, False)])
def test_ocr_textract_tables_picks_the_api_at_cold_start(
    monkeypatch: pytest.MonkeyPatch, variable: str | None, analyzes: bool
) -> None:
    """cdk.json parsing.textractTables -> OCR_TEXTRACT_TABLES -> the engine Parse builds at cold start."""
    from rag_ingest import wiring
    from rag_ingest.core.config import StagesEnv

    environ = {**_STAGE_ENV, "OCR_ENGINE": "textract"} | ({"OCR_TEXTRACT_TABLES": variable} if variable else {})
    env = StagesEnv.from_env(environ)
    assert env.ocr_textract_tables is analyzes
    client = _client()
    monkeypatch.setattr(wiring.aws, "client", lambda _service: client)
    engine = wiring.ocr_engine_for(env)
    assert isinstance(engine, TextractEngine)
    stub = Stubber(client)
    if analyzes:
        stub.add_response(
            "analyze_document", ANALYZE_RESPONSE, {"Document": {"Bytes": PNG}, "FeatureTypes": ["TABLES"]}
        )
    else:
        stub.add_response("detect_document_text", {"Blocks": []}, {"Document": {"Bytes": PNG}})
    with stub:
        engine.recognize(PNG)
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(("engine", "value"), [("local", "true"), ("off", "true"), ("textract", "maybe")])
def test_ocr_textract_tables_is_validated_at_cold_start(engine: str, value: str) -> None:
    from rag_ingest.core.config import StagesEnv
    from rag_ingest.core.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="OCR_TEXTRACT_TABLES"):
        StagesEnv.from_env({**_STAGE_ENV, "OCR_ENGINE": engine, "OCR_TEXTRACT_TABLES": value})
