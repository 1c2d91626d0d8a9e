"""The mcp_http function's code asset (its handler module: ``app``)."""
