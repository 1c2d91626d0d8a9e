"""The layers' software bills of materials (tools/build_layer.py, cyclonedx-py): CycloneDX JSON beside
each layer, listing every distribution the layer holds with its version and package URL, and none it does not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tools.build_layer import MCP_SBOM_FILE, MCP_SITE_DIR, ROOT, SBOM_FILE, SITE_DIR, build_layer

pytestmark = pytest.mark.infra


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(site: Path) -> dict[str, str]:
    found = {}
    for info in site.glob("*.dist-info"):
        metadata = (info / "METADATA").read_text(encoding="utf-8", errors="replace")
        name = re.search(r"^Name: (.+)$", metadata, re.M)
        version = re.search(r"^Version: (.+)$", metadata, re.M)
        assert name and version, info
        found[_normalise(name.group(1).strip())] = version.group(1).strip()
    return found


def _components(sbom: dict[str, Any]) -> dict[str, str]:
    return {_normalise(component["name"]): component["version"] for component in sbom["components"]}


@pytest.fixture(scope="module")
def sboms() -> tuple[dict[str, Any], dict[str, Any]]:
    build_layer()
    return json.loads(SBOM_FILE.read_text()), json.loads(MCP_SBOM_FILE.read_text())


def test_the_layer_sbom_lists_exactly_the_layers_distributions_with_versions(
    sboms: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    layer, _ = sboms
    assert layer["bomFormat"] == "CycloneDX" and layer["specVersion"] == "1.6"
    assert layer["metadata"]["component"]["name"] == "rag-ingest"
    components = _components(layer)
    assert components == _installed(SITE_DIR)
    for component in layer["components"]:
        # The purl spec's PyPI names: lower case, "_" as "-" (dots stay).
        name = component["name"].lower().replace("_", "-")
        assert component["purl"] == f"pkg:pypi/{name}@{component['version']}"


def test_every_pin_of_the_layer_requirements_is_in_its_sbom(sboms: tuple[dict[str, Any], dict[str, Any]]) -> None:
    components = _components(sboms[0])
    pins = re.findall(
        r"^([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)", (ROOT / "layers/common/requirements.txt").read_text(), re.M
    )
    assert len(pins) > 15
    for name, version in pins:
        assert components.get(_normalise(name)) == version, name
    # Left out of the layer (the runtime provides them, or nothing imports them): left out of its SBOM.
    assert not {"boto3", "botocore", "huggingface-hub", "grpcio"} & set(components)


def test_the_mcp_layer_sbom_lists_its_own_distributions(sboms: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, mcp = sboms
    assert mcp["metadata"]["component"]["name"] == "rag-ingest-client"
    components = _components(mcp)
    assert components == _installed(MCP_SITE_DIR)
    assert components["mcp"] == "2.3.0"
