"""Filesystem locations the stack packages as assets (absolute, so synth works from any cwd)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYER_DIR = ROOT / ".build" / "layer"
# The MCP function's own layer (tools/build_layer.py): the MCP SDK and the client's tool definitions.
MCP_LAYER_DIR = ROOT / ".build" / "mcp-layer"
FUNCTIONS_DIR = ROOT / "functions"


def relative(path: Path) -> str:
    """``path`` relative to the repository root (as recorded in template metadata), else as is."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
