"""Transports over the sans-IO sessions: they frame messages and move bytes, the sessions speak.

Nothing in ``mcpbind`` imports this package; it needs the ``mcpbind[http]`` extra (starlette,
uvicorn, httpx, httpx-sse). ``mcpbind.transports.http_server`` serves ``ServerSession`` objects as
an ASGI application, ``mcpbind.transports.serving`` runs such an application under uvicorn with a
connection cap and a request-head deadline, ``mcpbind.transports.http_client`` drives a
``ClientSession`` over httpx.
"""
