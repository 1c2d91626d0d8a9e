"""The retrievers' extras, the dev requirements and the peers' benchmark venv pin the same LangChain
and LlamaIndex versions, and installing them into the project's venv changes no pinned version
(pip resolves requirements.txt and requirements-dev.txt in one run: a conflict would fail make install)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;#]+)")


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line.strip())
        if match:
            found[_name(match.group(1))] = match.group(2)
    return found


def extras() -> dict[str, dict[str, str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {
        extra: dict(
            (_name(match.group(1)), match.group(2)) for match in map(PIN.match, requirements) if match is not None
        )
        for extra, requirements in project["optional-dependencies"].items()
    }


def test_the_extras_pin_the_peers_versions_as_the_dev_requirements_do() -> None:
    peers = pins(REPO / "bench" / "requirements-peers.txt")
    dev = pins(REPO / "requirements-dev.txt")
    assert extras() == {"langchain": {"langchain-core": "1.8.1"}, "llamaindex": {"llama-index-core": "0.14.25"}}
    for pinned in extras().values():
        for name, version in pinned.items():
            assert peers[name] == version == dev[name], (name, peers.get(name), version, dev.get(name))


def test_the_venv_holds_every_pinned_version() -> None:
    """What make install put in .venv is what the requirements say, the retrievers' libraries included."""
    wanted = {**pins(REPO / "requirements.txt"), **pins(REPO / "requirements-dev.txt")}
    assert {"langchain-core", "llama-index-core", "pydantic", "numpy"} <= set(wanted)
    installed = {name: metadata.version(name) for name in wanted}
    assert installed == wanted
