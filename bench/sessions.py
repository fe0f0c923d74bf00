"""A session's round trip against the bare codec's: what ``ClientSession`` adds per message.

    .venv/bin/python -m bench.sessions      (also a target row of `make bench`)
    .venv/bin/python -m bench.sessions --instructions [RUNS]   (counted under valgrind)

For ``tools/call`` in 2024-11-05, 2025-11-25 and 2026-07-28: the session builds the request
(``request`` with the revision's generated params Struct, the fast path; ``data_to_send``) and
decodes its response into an event (``receive``), against ``Codec.encode`` of the same request
plus ``Codec.decode`` of the same response. Target: the session costs at most 1.3x the codec.

What the session adds has a floor its API sets (counted under callgrind, Python 3.11, 2026-11-25,
bench/remarks.md "Sessions against the codec"): three calls (``request`` with ``id=`` by keyword,
``data_to_send``, ``receive``: some 1,880 instructions), the request's wire Struct (650; the bare
codec encodes one built beforehand), the ``ResultReceived`` and its list (940), the request
awaiting its response in a dict (980), the queue of bytes to send (260): some 4,700, a quarter of
the codec's 17,700-21,100 on its own. The bare codec is a ``Codec`` of its own: a session's codecs
give the results they read in one pass in their wire class (``wire_results``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import msgspec

import mcpbind
from mcpbind import events

REVISIONS = ("2024-11-05", "2025-11-25", "2026-07-28")
SESSION_VS_CODEC = 1.3  # at most this many times the bare codec's encode + decode

Many = Callable[[dict[str, Callable[[], Any]]], dict[str, float]]
INFO = {"name": "bench", "version": "1"}
RESULT = {"content": [{"type": "text", "text": "hi"}], "isError": False}


def pair(revision: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(session round trip, codec round trip) for one tools/call in ``revision``."""
    client = mcpbind.ClientSession(revisions=(revision,), capabilities={}, info=INFO)
    server = mcpbind.ServerSession(revisions=(revision,), capabilities={"tools": {}}, info=INFO)
    client.connect()
    for _ in range(4):  # the handshake, in memory
        for raw in client.data_to_send():
            server.receive(raw)
        for raw in server.data_to_send():
            client.receive(raw)
    assert client.state == "ready", client
    M = mcpbind.bindings(revision)
    learned = client._codec  # (it reads results in their wire class: the bare codec is a new one)
    assert learned is not None
    codec = mcpbind.Codec(
        revision,
        "client",
        capabilities=learned.capabilities,
        peer_capabilities=learned.peer_capabilities,
    )
    plain: dict[str, Any] = {"name": "echo", "arguments": {"message": "hi"}}
    if M.FACTS.request_meta is not None:
        plain["_meta"] = codec.meta({}, **{M.FACTS.request_meta.info_key: INFO})
    params = mcpbind.convert(plain, M.METHODS["tools/call"].params)
    result = dict(RESULT, resultType="complete") if M.FACTS.result_kinds is not None else RESULT
    response = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "result": result})
    cls = M.METHODS["tools/call"].message
    message: Any = (
        cls(id=1, jsonrpc="2.0", params=params)
        if "id" in cls.__struct_fields__
        else mcpbind.Request(id=1, message=cls(params=params))
    )

    def session() -> Any:
        client.request("tools/call", params, id=1)
        client.data_to_send()
        return client.receive(response)

    def bare() -> Any:
        codec.encode(message)
        return codec.decode(response)

    (event,) = session()
    assert type(event) is events.ResultReceived and type(event.result) is M.CallToolResult
    assert type(bare().result) is M.CallToolResult
    return session, bare


def measure(timer: Any) -> dict[str, dict[str, float]]:
    """revision -> {"session": seconds, "codec": seconds} per round trip."""
    out = {}
    for revision in REVISIONS:
        session, bare = pair(revision)
        out[revision] = timer.many({"session": session, "codec": bare})
    return out


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The target row of the report's headline table."""
    found = extra.get("sessions")
    if not found:
        return []
    ratios = {r: t["session"] / t["codec"] for r, t in found.items()}
    worst = max(ratios, key=ratios.__getitem__)
    where = ", ".join(
        f"{r} {x:.2f}x ({found[r]['session'] * 1e6:.1f} vs {found[r]['codec'] * 1e6:.1f} µs)"
        for r, x in ratios.items()
    )
    return [
        (
            f"session request + response <= {SESSION_VS_CODEC}x codec encode + decode (tools/call)",
            f"worst {ratios[worst]:.2f}x",
            where,
            ratios[worst] <= SESSION_VS_CODEC,
        )
    ]


def instructions(runs: int) -> dict[str, dict[str, int]]:
    """revision -> instructions of one round trip through each path (``session``, ``codec``),
    counted by valgrind's callgrind (bench.instructions), which the machine's load does not
    move."""
    from .instructions import callgrind

    out: dict[str, dict[str, int]] = {}
    found = callgrind(lambda shim: ["-m", "bench.sessions", "--child", shim, str(runs)], runs)
    for label, count in found.items():
        revision, path = label.split()
        out.setdefault(revision, {})[path] = count
    return out


if __name__ == "__main__" and "--child" in sys.argv:
    from .instructions import count_each

    jobs = []
    for revision in REVISIONS:
        session, bare = pair(revision)
        jobs += [(f"{revision} session", session), (f"{revision} codec", bare)]
    count_each(sys.argv[-2], int(sys.argv[-1]), jobs)
elif __name__ == "__main__" and "--instructions" in sys.argv:
    runs = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 200
    for revision, n in sorted(instructions(runs).items()):
        ratio = n["session"] / n["codec"]
        print(f"{revision}: session {n['session']:,} / codec {n['codec']:,} = {ratio:.2f}x")
elif __name__ == "__main__":
    from .__main__ import Timer

    quick = "--quick" in sys.argv
    for row in targets({"sessions": measure(Timer(quick))}):
        print(*row, sep="\n  ")
