"""Every error code has one sentence in the client (rag_ingest_client.sentences), and the page says the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest_client.sentences import ERROR_SENTENCES

pytestmark = pytest.mark.unit

WEB_ERRORS = Path(__file__).resolve().parents[2] / "web" / "errors.js"


def _web_sentences() -> dict[str, str]:
    source = WEB_ERRORS.read_text()
    block = source.split("ERROR_SENTENCES = Object.freeze({", 1)[1].split("});", 1)[0]
    return {code: json.loads(text) for code, text in re.findall(r'^\s*([A-Z_]+): ("(?:[^"\\]|\\.)*"),$', block, re.M)}


def test_every_code_has_a_sentence() -> None:
    assert set(ERROR_SENTENCES) == set(ErrorCode)
    assert all(text.endswith(".") for text in ERROR_SENTENCES.values())


def test_the_page_and_the_client_say_the_same() -> None:
    assert _web_sentences() == dict(ERROR_SENTENCES)
