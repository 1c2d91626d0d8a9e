"""The MCP server over streamable HTTP in one Lambda invocation: ``asgi`` runs one API Gateway
request through the SDK's Starlette app, ``auth`` verifies the caller's ID token for the SDK, and
``tools_api`` is the tools' ``Api`` in process (the domain services as the caller).

Modules here import each other relatively, as ``functions/api/routes`` does, so they work both as
``functions.mcp_http.serving`` (tests, mypy) and as the top-level ``serving`` package in /var/task.
"""
