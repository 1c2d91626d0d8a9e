"""The client's extras (client/pyproject.toml), the dev requirements and the peers' benchmark venv pin
the same LangChain and LlamaIndex versions, the client's other pins are the repository's, and
installing the client into the project's venv changes no pinned version."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

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


def _pinned(requirements: list[str]) -> dict[str, str]:
    return {_name(match.group(1)): match.group(2) for match in map(PIN.match, requirements) if match is not None}


def client_project() -> dict[str, Any]:
    return dict(tomllib.loads((REPO / "client" / "pyproject.toml").read_text())["project"])


def extras() -> dict[str, dict[str, str]]:
    return {extra: _pinned(requirements) for extra, requirements in client_project()["optional-dependencies"].items()}


def test_the_extras_pin_the_peers_versions_as_the_dev_requirements_do() -> None:
    peers = pins(REPO / "bench" / "requirements-peers.txt")
    dev = pins(REPO / "requirements-dev.txt")
    retrievers = {extra: pinned for extra, pinned in extras().items() if extra not in ("aws", "mcp")}
    assert extras()["mcp"] == {"mcp": dev["mcp"]}
    assert retrievers == {"langchain": {"langchain-core": "1.8.1"}, "llamaindex": {"llama-index-core": "0.14.25"}}
    for pinned in retrievers.values():
        for name, version in pinned.items():
            assert peers[name] == version == dev[name], (name, peers.get(name), version, dev.get(name))
    # --stack's boto3 and the client's own PyJWT are the versions the domain package runs with.
    runtime = pins(REPO / "requirements.txt")
    assert extras()["aws"] == {"boto3": runtime["boto3"]}
    assert _pinned(client_project()["dependencies"])["pyjwt"] == runtime["pyjwt"]


def test_the_venv_holds_every_pinned_version() -> None:
    """What make install put in .venv is what the requirements and the client say, the retrievers'
    libraries included."""
    wanted = {**pins(REPO / "requirements.txt"), **pins(REPO / "requirements-dev.txt")}
    assert {"langchain-core", "llama-index-core", "pydantic", "numpy"} <= set(wanted)
    client = _pinned(client_project()["dependencies"])
    for pinned in extras().values():
        client.update(pinned)
    assert {"httpx", "pyjwt", "boto3", "langchain-core", "llama-index-core"} <= set(client)
    assert all(wanted.get(name, version) == version for name, version in client.items()), client
    wanted.update(client)
    installed = {name: metadata.version(name) for name in wanted}
    assert installed == wanted


def test_the_root_project_declares_the_layers_pins_and_boto3() -> None:
    """`pip install .` gives the domain package what it imports: the Lambda layer's pins (the layer's
    source stays layers/common/requirements.txt) and boto3, which Lambda provides; the versions are
    requirements.txt's, which make install installs."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    layer = [
        line.strip()
        for line in (REPO / "layers" / "common" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert declared == [*layer, f"boto3=={pins(REPO / 'requirements.txt')['boto3']}"]
    runtime = pins(REPO / "requirements.txt")
    assert all(runtime[name] == version for name, version in _pinned(declared).items()), _pinned(declared)
