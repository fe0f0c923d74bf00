"""Helpers for the session tests: an in-memory client <-> server pair."""

from __future__ import annotations

from typing import Any

import mcpbind
from mcpbind import events as ev

CLIENT_INFO = {"name": "test-client", "version": "1.0"}
SERVER_INFO = {"name": "test-server", "version": "1.0"}
RELEASED = mcpbind.REVISIONS[: mcpbind.REVISIONS.index(mcpbind.LATEST) + 1]


def pair(
    client_revisions: Any = RELEASED,
    server_revisions: Any = RELEASED,
    client_caps: Any = None,
    server_caps: Any = None,
) -> tuple[mcpbind.ClientSession, mcpbind.ServerSession]:
    client = mcpbind.ClientSession(
        revisions=client_revisions, capabilities=client_caps or {}, info=CLIENT_INFO
    )
    server = mcpbind.ServerSession(
        revisions=server_revisions,
        capabilities=server_caps if server_caps is not None else {"tools": {}},
        info=SERVER_INFO,
    )
    return client, server


def pump(
    client: mcpbind.ClientSession, server: mcpbind.ServerSession
) -> tuple[list[Any], list[Any]]:
    """Deliver queued messages both ways until both are quiet: (client events, server events)."""
    client_events: list[Any] = []
    server_events: list[Any] = []
    for _ in range(20):
        to_server = client.data_to_send()
        for raw in to_server:
            server_events += server.receive(raw)
        to_client = server.data_to_send()
        for raw in to_client:
            client_events += client.receive(raw)
        if not to_server and not to_client:
            return client_events, server_events
    raise AssertionError("the sessions kept talking")


def connected(
    client_revisions: Any = RELEASED, server_revisions: Any = RELEASED, **caps: Any
) -> tuple[mcpbind.ClientSession, mcpbind.ServerSession]:
    client, server = pair(client_revisions, server_revisions, **caps)
    client.connect()
    pump(client, server)
    assert client.state == "ready", client
    return client, server


def of(events: list[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def answer_requests(server: mcpbind.ServerSession, events: list[Any], result: Any) -> list[Any]:
    received = of(events, ev.RequestReceived)
    for e in received:
        server.respond(e.id, result)
    return received
