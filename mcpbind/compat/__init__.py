"""Bridges between mcpbind's generated types and other MCP libraries.

Each bridge is a submodule that imports its library when it is itself imported
(``mcpbind.compat.mcp_types`` needs ``mcp-types``); importing ``mcpbind`` or this package
loads none of them.
"""
