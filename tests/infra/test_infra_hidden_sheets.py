"""parsing.indexHiddenSheets: whether a workbook's hidden sheets are indexed (off by default).

cdk.json's switch is validated with the rest of the configuration and reaches every stage
function as ``INDEX_HIDDEN_SHEETS`` (Parse reads it at cold start: ``StagesEnv``).
"""

from __future__ import annotations

import pytest

from infra.config import ConfigError, parse_config
from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra

PARSE_FUNCTIONS = ("Workflow/ParseFunction", "Workflow/ParseBulkFunction")


def test_off_by_default_and_the_parse_functions_are_told(synth: SynthResult) -> None:
    assert synth.config.parsing.index_hidden_sheets is False
    for path in PARSE_FUNCTIONS:
        assert synth.resource(path)["Properties"]["Environment"]["Variables"]["INDEX_HIDDEN_SHEETS"] == "false"


def test_the_switch_is_read_from_cdk_json() -> None:
    assert parse_config({"parsing": {"indexHiddenSheets": True}}).parsing.index_hidden_sheets is True


@pytest.mark.parametrize("value", ["sometimes", 2, None])
def test_the_switch_is_validated(value: object) -> None:
    with pytest.raises(ConfigError, match=r"parsing\.index_hidden_sheets|parsing\.indexHiddenSheets"):
        parse_config({"parsing": {"indexHiddenSheets": value}})
