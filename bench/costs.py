"""Where the time goes: single values and messages that the targets' misses come down to.

    .venv/bin/python -m bench.costs      (also a table of `make bench`)

Each row does the same work two ways in interleaved rounds: mcpbind (or msgspec alone) and
orjson, the untyped floor; the remarks of the report quote these rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

import mcpbind

from .workloads import list_tools_result, session

Timer = Callable[[dict[str, Callable[[], Any]]], dict[str, float]]

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "client", "version": "1"},
}
CALL = {
    "jsonrpc": "2.0",
    "id": 4,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"message": "hi"}},
}


def _dump(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def cases() -> list[tuple[str, int, Callable[[], Any], Callable[[], Any]]]:
    """(what, bytes, ours, orjson's): decodes against ``orjson.loads`` of the same bytes;
    the encoder rows put msgspec itself, no mcpbind, against ``orjson.dumps`` of the same dict."""
    new = mcpbind.bindings("2025-11-25")
    modern = mcpbind.bindings("2026-07-28")

    def decode(
        what: str, data: bytes, f: Callable[[bytes], Any]
    ) -> tuple[str, int, Callable[[], Any], Callable[[], Any]]:
        return what, len(data), lambda: f(data), lambda: orjson.loads(data)

    def encode(what: str, obj: Any) -> tuple[str, int, Callable[[], Any], Callable[[], Any]]:
        return (
            what,
            len(orjson.dumps(obj)),
            lambda: msgspec.json.encode(obj),
            lambda: orjson.dumps(obj),
        )

    def server(capabilities: bool) -> Callable[[bytes], Any]:
        c = mcpbind.Codec("2025-11-25", "server")
        if capabilities:
            c.capabilities = {"tools": {}}
            c.peer_capabilities = {"roots": {}}
        return c.decode

    client = mcpbind.Codec("2025-11-25", "client")

    def error_response(data: bytes) -> Any:
        client.expect(4, "tools/call")
        return client.decode(data)

    resource = {"uri": "file:///a.md", "mimeType": "text/markdown", "text": "# A\n"}
    # The biggest resources/read result the real peer sent (10 KB of markdown, some non-ASCII)
    reads = [
        m
        for m in session("2025-11-25").messages
        if m.kind == "response" and m.method == "resources/read"
    ]
    markdown = orjson.loads(max(reads, key=lambda m: len(m.data)).data)["result"]
    return [
        decode(
            "decode: a 2026-07-28 request `_meta` (open object)",
            _dump(META),
            lambda b: mcpbind.decode(b, modern.RequestMetaObject),
        ),
        # EmbeddedResource.resource: the marker of its TextResourceContents | BlobResourceContents
        decode(
            "decode: text-or-blob resource contents (untagged union)",
            _dump(resource),
            lambda b: mcpbind.decode(b, new.types._EmbeddedResourceResource),
        ),
        decode(
            "decode: an elicitation `StringSchema` (untagged union)",
            _dump({"type": "string", "title": "Name"}),
            lambda b: mcpbind.decode(b, new.PrimitiveSchemaDefinition),
        ),
        decode("decode: tools/call request, capabilities unknown", _dump(CALL), server(False)),
        decode(
            "decode: tools/call request, both sides' capabilities known", _dump(CALL), server(True)
        ),
        decode(
            "decode: error response to a pending request",
            _dump({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "no"}}),
            error_response,
        ),
        encode(
            "encode, msgspec alone: a 100-tool tools/list result as plain dicts",
            list_tools_result(100),
        ),
        encode(
            "encode, msgspec alone: the peer's biggest resources/read result (markdown)", markdown
        ),
    ]


def measure(timer: Timer) -> list[dict[str, Any]]:
    rows = []
    for what, size, ours, floor in cases():
        ours()
        times = timer({"mcpbind": ours, "orjson": floor})
        rows.append({"what": what, "bytes": size, **times})
    return rows


def main() -> None:
    import timeit

    def timer(fns: dict[str, Callable[[], Any]]) -> dict[str, float]:
        return {k: min(timeit.repeat(f, number=20000, repeat=7)) / 20000 for k, f in fns.items()}

    for r in measure(timer):
        print(
            f"{r['what']:70s} {r['mcpbind'] * 1e6:6.2f} µs  orjson {r['orjson'] * 1e6:5.2f} µs  {r['mcpbind'] / r['orjson']:4.1f}x"
        )


if __name__ == "__main__":
    main()
