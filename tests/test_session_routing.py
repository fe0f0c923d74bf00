"""ServerSession.receive(data, version=...): the version a caller read from the request's _meta
routes it without the session reading it again, to the same events and answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpbind import ServerSession
from mcpbind.events import RequestReceived

REVISIONS = ("2025-06-18", "2025-11-25", "2026-07-28")
INFO = {"name": "c", "version": "1"}


def request(version: Any) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": INFO,
    }
    params = {"name": "echo", "arguments": {}, "_meta": meta}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params}
    ).encode()


def session() -> ServerSession:
    return ServerSession(REVISIONS, capabilities={"tools": {}}, info={"name": "s", "version": "1"})


def test_a_known_version_routes_the_request_as_the_peek_would() -> None:
    hinted, plain = session(), session()
    (event,) = hinted.receive(request("2026-07-28"), version="2026-07-28")
    (again,) = plain.receive(request("2026-07-28"))
    assert isinstance(event, RequestReceived) and event.revision == "2026-07-28"
    assert event.message == again.message and hinted.revision == plain.revision == "2026-07-28"


@pytest.mark.parametrize("version", ["1999-01-01", "2025-11-25"])
def test_a_version_no_discover_revision_has_is_read_again(version: str) -> None:
    # Not a version of the per-request envelope: the session peeks as without it, and answers
    # the same (the unsupported-version error names what the body says).
    hinted, plain = session(), session()
    events = hinted.receive(request("1999-01-01"), version=version)
    assert repr(events) == repr(plain.receive(request("1999-01-01")))  # errors compare by repr
    answered, expected = hinted.data_to_send(), plain.data_to_send()
    assert answered == expected and b"1999-01-01" in answered[0]
