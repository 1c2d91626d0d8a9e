"""Progress rendering: bars, sizes, document states, and the board on a terminal and in a log."""

from __future__ import annotations

import io

import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest_client.cli.progress import ProgressBoard, bar, human_bytes, percent, status_text
from rag_ingest_client.sentences import ERROR_SENTENCES as SENTENCES
from rag_ingest_client.sentences import sentence

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("done", "total", "expected"),
    [(0, 100, "[----------]"), (50, 100, "[#####-----]"), (99, 100, "[#########-]"), (100, 100, "[##########]"),
     (150, 100, "[##########]"), (0, 0, "[##########]")],
)  # fmt: skip
def test_bar(done: int, total: int, expected: str) -> None:
    assert bar(done, total, width=10) == expected


def test_percent_and_sizes() -> None:
    assert [percent(0, 10), percent(5, 10), percent(10, 10), percent(3, 0)] == [0, 50, 100, 100]
    assert [human_bytes(512), human_bytes(2048), human_bytes(5 * 1024**2), human_bytes(3 * 1024**3)] == [
        "512 B", "2.0 KB", "5.0 MB", "3.0 GB"
    ]  # fmt: skip


def test_document_states() -> None:
    assert status_text({"status": "QUEUED"}) == "QUEUED"
    processing = {"status": "PROCESSING", "stage": "EMBED", "progress": {"done": 12, "total": 40}}
    assert status_text(processing) == "PROCESSING EMBED 12/40"
    waiting = {**processing, "waiting_for": "EMBEDDING_CAPACITY"}
    assert status_text(waiting) == "PROCESSING EMBED 12/40 (waiting for embedding capacity)"
    assert status_text({"status": "READY", "page_count": 5, "chunk_count": 14}) == "READY 5 pages 14 chunks"
    assert status_text({"status": "FAILED", "error_code": "ENCRYPTED_PDF"}) == "FAILED ENCRYPTED_PDF"


def test_pages_parsed_while_parse_runs_then_chunks_embedded() -> None:
    parsing = {"status": "PROCESSING", "stage": "PARSE", "pages_parsed": 150, "page_count": 2000, "progress": None}
    assert status_text(parsing) == "PROCESSING PARSE 150/2000 pages"
    embedding = {**parsing, "stage": "EMBED", "pages_parsed": 2000, "progress": {"done": 256, "total": 8953}}
    assert status_text(embedding) == "PROCESSING EMBED 256/8953"
    assert status_text({**embedding, "lane": "bulk"}) == "PROCESSING EMBED 256/8953 (bulk lane)"
    assert status_text({**embedding, "lane": "standard"}) == "PROCESSING EMBED 256/8953"


def test_every_error_code_has_a_sentence() -> None:
    assert set(SENTENCES) == set(ErrorCode)
    assert sentence("ENCRYPTED_PDF") == "This PDF is password-protected."
    assert sentence("SOMETHING_NEW") == "The document failed (SOMETHING_NEW)."


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_board_in_a_log_prints_quarters_and_state_changes_only() -> None:
    log = io.StringIO()
    board = ProgressBoard.for_files(log, [("a.pdf", 1000), ("b.pdf", 10)])
    assert not board.interactive
    for _ in range(100):
        board.sent(0, 10)
    board.state(0, "QUEUED")
    board.state(0, "QUEUED")  # unchanged: nothing printed
    lines = log.getvalue().splitlines()
    assert lines == [
        "a.pdf: 1% of 1000 B sent, uploading",  # first bytes: quarter 0
        "a.pdf: 25% of 1000 B sent, uploading",
        "a.pdf: 50% of 1000 B sent, uploading",
        "a.pdf: 75% of 1000 B sent, uploading",
        "a.pdf: 100% of 1000 B sent, uploading",
        "a.pdf: 100% of 1000 B sent, QUEUED",
    ]


def test_board_on_a_terminal_redraws_in_place_with_an_overall_line() -> None:
    terminal = Terminal()
    board = ProgressBoard.for_files(terminal, [("a.pdf", 1000), ("b.pdf", 3000)])
    board.sent(0, 1000)
    board.state(1, "uploading")
    lines = board.lines()
    assert lines[0] == "a.pdf       [####################] 100% 1000 B / 1000 B"  # the bytes while sending
    assert lines[1] == "b.pdf       [--------------------]   0% 0 B / 2.9 KB"
    assert lines[2] == "all 2 files [#####---------------]  25% 1000 B / 3.9 KB"  # 1000 of 4000 bytes
    board.state(0, "PROCESSING EMBED 3/8")
    assert board.lines()[0] == "a.pdf       [####################] 100% PROCESSING EMBED 3/8"  # then the state
    output = terminal.getvalue()
    assert output.count("\x1b[3F") == 2  # each later drawing moved up over the previous one's 3 lines
    assert output.endswith("\x1b[K\n")
