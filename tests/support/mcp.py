"""What the MCP end-to-end suites share: one tool call as the work of an SDK client session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import Client


def tool(name: str, arguments: dict[str, Any]) -> Callable[[Client], Awaitable[Any]]:
    """``client.call_tool(name, arguments)``, to run in a session."""

    async def call(client: Client) -> Any:
        return await client.call_tool(name, arguments)

    return call
