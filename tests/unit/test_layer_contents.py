"""What tools/build_layer.py leaves out of the Lambda layer is never imported by a function.

The layer drops distributions the requirements drag in (``UNIMPORTED_DISTRIBUTIONS``: tokenizers'
Hugging Face Hub client, opensearch-py's gRPC transport). A fresh interpreter imports every module of
the domain package the functions load, every module the handlers import, and runs the code paths
that could import lazily (the tokenizer, an OpenSearch client, a PDF page rendered for OCR); then none
of the dropped distributions' modules may be loaded. The venv has them all installed, so an import
of one would succeed here and show up, where in Lambda it would fail.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tools.build_layer import PACKAGE_SRC, UNIMPORTED_DISTRIBUTIONS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
# The CLI runs on people's machines, the retrievers in applications, not in a function (they are not
# the layer's to load).
NOT_LOADED_BY_FUNCTIONS = ("rag_ingest_client.cli", "rag_ingest.integrations")
# The MCP function loads the SDK (and anyio, httpx2, which the shared layer drops) from a layer of its
# own (tools/build_layer.py, MCP layer; tests/infra/test_infra_mcp.py checks what it holds).
OWN_LAYER_FUNCTIONS = ("mcp_http",)


def _dropped_top_level_modules() -> set[str]:
    names: set[str] = set()
    for distribution in UNIMPORTED_DISTRIBUTIONS:
        files = metadata.distribution(distribution).files or []
        for file in files:
            top = file.parts[0]
            if top.endswith((".dist-info", ".data")) or top in ("..", "bin", "share"):
                continue
            module = top.removesuffix(".py").split(".")[0]
            # A namespace folder (google/) is named by its first two parts: google.protobuf.
            names.add(f"{module}.{file.parts[1]}" if module == "google" and len(file.parts) > 2 else module)
    return names


def _handler_imports() -> set[str]:
    modules: set[str] = set()
    for handler in sorted((REPO / "functions").glob("*/**/*.py")):  # app.py and its siblings (routes/)
        if handler.relative_to(REPO / "functions").parts[0] in OWN_LAYER_FUNCTIONS:
            continue
        for node in ast.walk(ast.parse(handler.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module)
    return modules


_PROBE = r"""
import importlib, json, pkgutil, sys
import rag_ingest
skip, wanted = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for info in pkgutil.walk_packages(rag_ingest.__path__, "rag_ingest."):
    if not info.name.startswith(tuple(skip)):
        importlib.import_module(info.name)
for name in wanted:
    try:
        importlib.import_module(name)
    except ImportError:
        pass  # a sibling module of a handler's folder (e.g. 'models'): not a distribution
from rag_ingest.core.tokens import load_tokenizer
load_tokenizer().encode("a sentence to count")
from rag_ingest.adapters.vector_store import connect
connect("http://127.0.0.1:9")  # builds the client; nothing is sent
from rag_ingest.parsing.ocr.engine import render_page_png
import pypdf, io
writer = pypdf.PdfWriter(); writer.add_blank_page(72, 72); buffer = io.BytesIO(); writer.write(buffer)
render_page_png(buffer.getvalue(), 0, dpi=36)
print(json.dumps(sorted(sys.modules)))
"""


def test_no_function_loads_a_distribution_the_layer_drops() -> None:
    dropped = _dropped_top_level_modules()
    assert {"huggingface_hub", "grpc", "google.protobuf"} <= dropped, dropped
    assert PACKAGE_SRC.is_dir()
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(NOT_LOADED_BY_FUNCTIONS), json.dumps(sorted(_handler_imports()))],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={"PYTHONPATH": f"{REPO}:{REPO / 'layers/common/python'}", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = set(json.loads(result.stdout.splitlines()[-1]))
    assert "tokenizers" in loaded and "opensearchpy" in loaded and "pypdfium2" in loaded  # the probe ran
    assert sorted(name for name in dropped if name in loaded) == []
