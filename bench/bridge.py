"""The bridge's CPU cost per message against the codec alone, and its memory over 100,000
messages (process plumbing aside: the sans-IO ``Bridge`` is driven in memory).

    .venv/bin/python -m bench.bridge [--messages N]      (also part of `make bench`)
    .venv/bin/python -m bench.bridge --instructions [--runs 200] [--keep DIR]

Each case is a round trip through the bridge: a request from the client (decoded, projected,
encoded for the server) and the server's result (decoded, projected, encoded for the client).
The floor does the same two messages with ``Codec`` and ``mcpbind.project`` alone. The issue's
target: bridge / floor <= 2. A benchmark, not a test.

``--instructions``: instead of timing, count both runners of each case under callgrind, as
``bench.instructions`` counts the codec (load-independent: the times move by a third on the
shared machine): instructions per round trip, and their ratio.
"""

from __future__ import annotations

import argparse
import gc
import json
import timeit
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgspec

import mcpbind
from mcpbind import events as ev
from mcpbind.bridge import Bridge

from .workloads import list_tools_result

TARGET = 2.0

# (name, client revision, server revision, method, params, result)
CASES: list[tuple[str, str, str, str, dict[str, Any] | None, dict[str, Any]]] = [
    (
        "tools/call, 2025-11-25 client, 2025-06-18 server",
        "2025-11-25",
        "2025-06-18",
        "tools/call",
        {"name": "weather", "arguments": {"city": "Paris"}},
        {"content": [{"type": "text", "text": "Sunny, 21C."}], "isError": False},
    ),
    (
        "tools/list (100 tools), 2024-11-05 client, 2026-07-28 server",
        "2024-11-05",
        "2026-07-28",
        "tools/list",
        None,
        list_tools_result(100, modern=True),
    ),
]


def _connected(client_rev: str, server_rev: str) -> tuple[Any, Bridge, Any]:
    client = mcpbind.ClientSession(client_rev, info={"name": "bench", "version": "1"})
    server = mcpbind.ServerSession(
        server_rev, capabilities={"tools": {}}, info={"name": "s", "version": "1"}
    )
    bridge = Bridge()
    client.connect()
    for _ in range(10):
        for raw in client.data_to_send():
            bridge.from_client(raw)
        for raw in bridge.to_server():
            server.receive(raw)
        for raw in server.data_to_send():
            bridge.from_server(raw)
        for raw in bridge.to_client():
            client.receive(raw)
    assert client.state == "ready" and server.state == "ready"
    return client, bridge, server


class Case:
    """One round trip, through the bridge and through the codec alone."""

    def __init__(self, client_rev: str, server_rev: str, method: str, params: Any, result: Any):
        self.client, self.bridge, self.server = _connected(client_rev, server_rev)
        self.method = method
        # The client's request (id 7, reused: each round trip answers it before the next).
        self.client.request(method, params, id=7)
        self.request = self.client.data_to_send()[0]
        # What the server answers, with the id the bridge gives the request in its place.
        self.bridge.from_client(self.request)
        down = self.bridge.to_server()[0]
        (got,) = [e for e in self.server.receive(down) if isinstance(e, ev.RequestReceived)]
        self.server.respond(got.id, result)
        answer = self.server.data_to_send()[0]
        key = b'"id":' + msgspec.json.encode(got.id)
        head, _, tail = answer.partition(key)
        self.head, self.tail = head + b'"id":', tail  # the result with its id left open
        self.bridge.from_server(answer)
        self.bridge.to_client()
        self.next = int(got.id) + 1
        # The floor: the same two messages with the codec and projection alone.
        self.front = mcpbind.Codec(client_rev, "server")
        self.back = mcpbind.Codec(server_rev, "client")
        self.down_message = mcpbind.Codec(server_rev, "server").decode(down)
        self.server_rev, self.client_rev = server_rev, client_rev
        self.floor_id = 1_000_000

    def through_bridge(self) -> None:
        b = self.bridge
        b.from_client(self.request)
        b.to_server()
        b.from_server(self.head + str(self.next).encode() + self.tail)
        self.next += 1
        b.to_client()

    def codec_alone(self) -> None:
        msg = self.front.decode(self.request)
        inner = msg.message if isinstance(msg, mcpbind.Request) else msg
        params = inner.params
        if params is not msgspec.UNSET:
            mcpbind.project(params, self.server_rev)
        self.floor_id += 1
        down = self.down_message
        if isinstance(down, mcpbind.Request):
            down = mcpbind.Request(id=self.floor_id, message=down.message)
        else:
            down = msgspec.structs.replace(down, id=self.floor_id)
        self.back.encode(down)
        response = self.back.decode(self.head + str(self.floor_id).encode() + self.tail)
        result = mcpbind.project(response.result, self.client_rev)
        self.front.encode(mcpbind.Response(id=7, result=result))


def _best(fn: Callable[[], Any], number: int) -> float:
    gc.collect()
    return min(timeit.repeat(fn, number=number, repeat=7)) / number


def measure(timer: Callable[[Callable[[], Any]], float] | None = None) -> dict[str, Any]:
    """Seconds per round trip through the bridge and with the codec alone, per case."""
    out: dict[str, Any] = {}
    for name, client_rev, server_rev, method, params, result in CASES:
        case = Case(client_rev, server_rev, method, params, result)
        case.through_bridge()
        case.codec_alone()
        number = 2000 if method == "tools/call" else 100
        time = timer or (lambda fn, n=number: _best(fn, n))  # type: ignore[misc]
        bridge = time(case.through_bridge)
        floor = time(case.codec_alone)
        out[name] = {"bridge": bridge, "floor": floor, "ratio": bridge / floor}
    return out


def memory(messages: int = 100_000) -> dict[str, float]:
    """Traced memory after 10,000 warm-up round trips and after ``messages`` more (two
    messages each, the small case): a bridge that keeps nothing per message does not grow."""
    name, client_rev, server_rev, method, params, result = CASES[0]
    case = Case(client_rev, server_rev, method, params, result)
    for _ in range(10_000):
        case.through_bridge()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(messages // 2):
        case.through_bridge()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {"messages": messages, "before": before, "after": after, "growth": after - before}


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The bridge's target row of the report's headline table (``extra["bridge"]``)."""
    found = extra.get("bridge")
    if not found:
        return []
    worst = max(found, key=lambda name: found[name]["ratio"])
    where = ", ".join(
        f"{name} {t['ratio']:.2f}x ({t['bridge'] * 1e6:.1f} vs {t['floor'] * 1e6:.1f} µs)"
        for name, t in found.items()
    )
    return [
        (
            f"bridge round trip <= {TARGET:g}x codec decode + project + encode",
            f"worst {found[worst]['ratio']:.2f}x",
            where,
            found[worst]["ratio"] <= TARGET,
        )
    ]


def _count_child(shim: str, runs: int) -> None:
    """Under callgrind: each case's two runners counted (``bench.instructions.count_each``)."""
    from .instructions import count_each

    jobs = []
    for name, client_rev, server_rev, method, params, result in CASES:
        case = Case(client_rev, server_rev, method, params, result)
        jobs += [(f"{name}\tbridge", case.through_bridge), (f"{name}\tfloor", case.codec_alone)]
    count_each(shim, runs, jobs)


def instructions(runs: int, keep: Any = None) -> dict[str, dict[str, int]]:
    """case -> {bridge, floor}: instructions of one round trip (callgrind)."""
    from .instructions import count_module

    return count_module("bench.bridge", runs, keep)


def main() -> None:
    import sys
    from pathlib import Path

    if sys.argv[1:2] == ["--child"]:
        _count_child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--instructions", action="store_true", help="count under callgrind")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None, help="keep callgrind's files here")
    args = parser.parse_args()
    if args.instructions:
        for name, c in instructions(args.runs, args.keep).items():
            print(
                f"{name}: bridge {c['bridge']:,} instructions, codec alone {c['floor']:,}; "
                f"ratio {c['bridge'] / c['floor']:.2f}"
            )
        return
    for name, m in measure().items():
        verdict = "ok" if m["ratio"] <= TARGET else "MISSED"
        print(
            f"{name}: bridge {m['bridge'] * 1e6:8.1f} us, codec alone {m['floor'] * 1e6:8.1f} us"
            f" per round trip; ratio {m['ratio']:.2f} (target <= {TARGET}: {verdict})"
        )
    mem = memory(args.messages)
    print(json.dumps(mem))


if __name__ == "__main__":
    main()
