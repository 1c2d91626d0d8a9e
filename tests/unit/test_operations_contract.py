"""Names shared between the functions and the alarms/dashboard, kept in step."""

from __future__ import annotations

import pytest
from rag_ingest.adapters.documents_table import STATUS_INDEX
from rag_ingest.core.errors import ErrorCode
from rag_ingest.operations.reaper import ReapAction
from rag_ingest.operations.redrive import parse_operator_request
from rag_ingest.operations.replay import SYSTEM_ERROR_CODES

from infra.constructs import monitoring, storage

pytestmark = pytest.mark.unit


def test_the_alarm_sums_exactly_the_codes_replay_treats_as_system_failures() -> None:
    assert tuple(code.value for code in SYSTEM_ERROR_CODES) == monitoring.SYSTEM_ERROR_CODES
    assert all(code in ErrorCode.__members__ for code in monitoring.SYSTEM_ERROR_CODES)
    # User-caused codes never page.
    assert not {"ENCRYPTED_PDF", "CORRUPT_PDF", "UNSUPPORTED_TYPE", "NO_TEXT_LAYER"} & set(
        monitoring.SYSTEM_ERROR_CODES
    )


def test_reaper_actions_and_status_index() -> None:
    assert {action.value for action in ReapAction} == {"Redriven", "MarkedFailed"}
    assert STATUS_INDEX == storage.STATUS_INDEX


def test_operation_payloads() -> None:
    assert parse_operator_request({}).action == "redrive"
    assert parse_operator_request({"action": "replay", "document_ids": ["d"]}).action == "replay"
    replay = parse_operator_request({"action": "replay", "error_codes": ["STUCK"], "dry_run": True})
    assert replay.error_codes == [ErrorCode.STUCK]
    with pytest.raises(ValueError, match="max_messages"):
        parse_operator_request({"action": "replay", "max_messages": 3})
    with pytest.raises(ValueError):
        parse_operator_request({"action": "redrive", "error_codes": ["NOT_A_CODE"]})
