"""Transports over the sans-IO sessions: they frame messages and move bytes, the sessions speak.

``mcpbind.transports.stdio`` is MCP's stdio framing, bounded: it needs no extra, and the bridge
and the stdio examples read with it. Nothing in ``mcpbind`` imports the other modules, which
need the ``mcpbind[http]`` extra (starlette, uvicorn, httptools, httpx).
``mcpbind.transports.http_server`` serves ``ServerSession`` objects as
an ASGI application, ``mcpbind.transports.serving`` runs such an application under uvicorn with a
connection cap and a request-head deadline, ``mcpbind.transports.http_client`` drives a
``ClientSession`` over HTTP, through the one client stack every HTTP request of mcpbind goes
through (``http_wire``: the seam; ``http_pool``: its default, keep-alive connections read by
httptools; ``sse_events``: the one event-stream parser).
"""
