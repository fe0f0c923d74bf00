"""The client row of `make bench` (issue 36): sequential tools/call calls per second, ``mcpbind.Client``
against the official `mcp` SDK's ``Client``, the same server, at both eras.

    .venv/bin/python -m bench.client [--rounds 15] [--calls 100] [--warmup 100] [ERA ...]

The server is examples/everything_server.py (one process on a loopback port, bench/server.py's
``running``: mcpbind's sessions and HTTP transport on ``serve()``), fast enough that what a call
costs the client shows. Both clients run in this one process, on one event loop, each with its
own connection to the server: ``mcpbind.Client(url, revisions=(ERA,))`` and ``mcp.Client(url,
mode=...)`` (``"legacy"``: the initialize handshake, which the `mcp` SDK ends at 2025-11-25, its
newest handshake revision; ``"2026-07-28"``: that revision adopted, no handshake, stateless
requests). Each calls the ``test_simple_text`` tool ``--warmup`` times first (the SDK lists the
tools on its first call, to validate results against their output schemas), then ``--rounds``
rounds, each timing ``--calls`` calls of one client, one after another (each awaited before the
next is sent), then as many of the other, the order alternating from round to round, so that
whatever else the shared machine does falls on both alike. A round's calls per second are
``--calls`` over its wall time; its CPU time a call is this process's CPU time over the round
(the client's own cost: the server is another process). The row reports the median of each over
the rounds and the median of the rounds' ratios (mcpbind's calls/s over the SDK's).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import statistics
import sys
import time
from typing import Any

from . import server as whole

ERAS = whole.ERAS
TARGET = 3.0  # mcpbind.Client's sequential calls per second, at least this many times the SDK's
TOOL = "test_simple_text"


def sdk_mode(era: str) -> str:
    """The `mcp` Client's ``mode`` that speaks ``era``: its handshake for a handshake revision."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    if era in HANDSHAKE_PROTOCOL_VERSIONS:
        if era != HANDSHAKE_PROTOCOL_VERSIONS[-1]:
            raise ValueError(f"the `mcp` Client's handshake ends at its newest revision, not {era}")
        return "legacy"
    return era


async def _era(url: str, era: str, rounds: int, calls: int, warmup: int) -> dict[str, Any]:
    import mcp
    import mcp.client.session

    from mcpbind import Client

    # The SDK warns, on each tools/list, of the example server's tool whose x-mcp-header it
    # does not take (a schema position it does not follow); the listing is otherwise the same.
    logging.getLogger(mcp.client.session.logger.name).setLevel(logging.ERROR)
    async with (
        Client(url, revisions=(era,)) as ours,
        mcp.Client(url, mode=sdk_mode(era)) as theirs,
    ):
        clients: dict[str, Any] = {"mcpbind": ours, "mcp": theirs}
        if ours.revision != era:
            raise RuntimeError(f"mcpbind.Client agreed on {ours.revision}, not {era}")
        if theirs.protocol_version != era:
            raise RuntimeError(f"the `mcp` Client agreed on {theirs.protocol_version}, not {era}")
        for name, client in clients.items():
            for _ in range(warmup):
                result = await client.call_tool(TOOL, {})
            if result.content[0].text != whole.TEXT:
                raise RuntimeError(f"{name}: unexpected result {result!r}")
        rate: dict[str, list[float]] = {name: [] for name in clients}
        cpu: dict[str, list[float]] = {name: [] for name in clients}
        ratios = []
        gc.collect()
        for turn in range(rounds):
            order = list(clients) if turn % 2 == 0 else list(reversed(clients))
            for name in order:
                client = clients[name]
                wall, used = time.perf_counter(), time.process_time()
                for _ in range(calls):
                    await client.call_tool(TOOL, {})
                used, wall = time.process_time() - used, time.perf_counter() - wall
                rate[name].append(calls / wall)
                cpu[name].append(used / calls)
            ratios.append(rate["mcpbind"][-1] / rate["mcp"][-1])
    out: dict[str, Any] = {
        name: {"rps": statistics.median(rate[name]), "cpu": statistics.median(cpu[name])}
        for name in clients
    }
    out["ratio"] = statistics.median(ratios)
    out["ratios"] = ratios
    return out


def measure(
    rounds: int = 15, calls: int = 100, warmup: int = 100, eras: tuple[str, ...] = ERAS
) -> dict[str, Any]:
    """era -> {mcpbind: {rps, cpu (s a call)}, mcp: {...}, ratio (median), ratios}."""
    out: dict[str, Any] = {}
    with whole.running("mcpbind") as url:
        for era in eras:
            out[era] = asyncio.run(_era(url, era, rounds, calls, warmup))
            found = out[era]
            print(
                f"  client {era}: mcpbind {found['mcpbind']['rps']:,.0f}/s "
                f"({found['mcpbind']['cpu'] * 1e6:.0f} µs CPU a call), mcp "
                f"{found['mcp']['rps']:,.0f}/s ({found['mcp']['cpu'] * 1e6:.0f} µs), "
                f"median ratio {found['ratio']:.2f}x",
                file=sys.stderr,
            )
    out["rounds"], out["calls"] = rounds, calls
    return out


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The client target row of the report's headline table."""
    found = extra.get("client")
    if not found or any(era not in found for era in ERAS):
        return []
    worst = min(ERAS, key=lambda era: found[era]["ratio"])

    def side(t: dict[str, Any]) -> str:
        return f"{t['rps']:,.0f}/s, {t['cpu'] * 1e6:,.0f} µs CPU a call"

    where = "; ".join(
        f"{era} {found[era]['ratio']:.2f}x (mcpbind {side(found[era]['mcpbind'])}, "
        f"mcp {side(found[era]['mcp'])})"
        for era in ERAS
    )
    return [
        (
            f"client, sequential tools/call over Streamable HTTP >= {TARGET:g}x the official `mcp` "
            f"Client (calls/s, one connection each, median of {found['rounds']} interleaved "
            f"rounds of {found['calls']})",
            f"worst {found[worst]['ratio']:.2f}x",
            where,
            found[worst]["ratio"] >= TARGET,
        )
    ]


def table(found: dict[str, Any]) -> list[str]:
    """The report's table of the client row."""
    lines = [
        "| era | mcpbind calls/s | mcpbind CPU a call | mcp calls/s | mcp CPU a call "
        f"| mcpbind / mcp (>= {TARGET:g}x) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for era in ERAS:
        if era not in found:
            continue
        ours, theirs, ratio = found[era]["mcpbind"], found[era]["mcp"], found[era]["ratio"]
        mark = f"{ratio:.2f}x" if ratio >= TARGET else f"**{ratio:.2f}x**"
        lines.append(
            f"| {era} | {ours['rps']:,.0f} | {ours['cpu'] * 1e6:,.0f} µs | {theirs['rps']:,.0f} "
            f"| {theirs['cpu'] * 1e6:,.0f} µs | {mark} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eras", nargs="*", metavar="ERA", default=list(ERAS))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    found = measure(args.rounds, args.calls, args.warmup, tuple(args.eras))
    print(*table(found), sep="\n")
    for row in targets({"client": found}):
        print(*row, sep="\n  ")


if __name__ == "__main__":
    main()
