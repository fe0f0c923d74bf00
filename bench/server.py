"""The whole-server row of `make bench`: tools/call over Streamable HTTP, mcpbind's server against
one on the official `mcp` SDK, at both eras.

    .venv/bin/python -m bench.server [--duration 10] [--connections 16]   (also part of `make bench`)
        [--era ERA] [--server mcpbind|mcp]   (a part of the row only, for an A/B run)

Each server is one process on a loopback port: examples/everything_server.py (mcpbind's sessions
and HTTP transport) and bench/sdk_server.py (`mcp` 2.3.0, the same one-text tool). The load
generator is autocannon, from npm at the version bench/package-lock.json pins (`make bench-setup`
installs it into bench/node_modules; Node runs it in a process of its own, so it never waits on
the server's interpreter). For each era:

- 2025-11-25: one session (``initialize``, then ``notifications/initialized``), then ``tools/call``
  requests carrying its ``Mcp-Session-Id``;
- 2026-07-28: stateless ``tools/call`` requests, each with the per-request ``_meta`` (protocol
  version, client capabilities and info) and the ``Mcp-Method`` / ``Mcp-Name`` headers;

the same request body for both servers, a fresh JSON-RPC id per request (autocannon's
``[<id>]``). One request of each is checked first (200, and the tool's text in the result, as
JSON or as an event stream); then ``--warmup`` seconds of load are thrown away and
``--duration`` seconds measured with ``--connections`` connections. The row reports requests per
second (autocannon's mean of its one-second samples) and the 99th percentile of latency; a
non-2xx answer, an error or a timeout during the run is reported beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from .processes import free_port, listening

ROOT = Path(__file__).resolve().parent.parent
AUTOCANNON = ROOT / "bench" / "node_modules" / ".bin" / "autocannon"
SERVERS = {
    "mcpbind": [sys.executable, str(ROOT / "examples" / "everything_server.py")],
    "mcp": [sys.executable, str(ROOT / "bench" / "sdk_server.py")],
}
ERAS = ("2025-11-25", "2026-07-28")
TARGET = 5.0  # mcpbind's requests per second, at least this many times the SDK's, at each era
TEXT = "This is a simple text response for testing."
INFO = {"name": "bench", "version": "1"}
ACCEPT = "application/json, text/event-stream"


@contextlib.contextmanager
def running(name: str) -> Iterator[str]:
    """One server process on a free loopback port, for as long as the block runs: its URL."""
    port = free_port()
    with listening([*SERVERS[name], "--port", str(port)], port, f"{name} server"):
        yield f"http://127.0.0.1:{port}/mcp"


def _result(response: httpx.Response) -> Any:
    """The JSON-RPC message of a POST's answer, as JSON or as the event stream's data."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        raise ValueError(f"no message in the event stream: {response.text[:200]!r}")
    return response.json()


def request(
    url: str, era: str, timeout: float = 5.0, session: str | None = None
) -> tuple[dict[str, str], dict[str, Any]]:
    """The headers and body of the era's tools/call (a session opened for 2025-11-25, each
    request of the handshake answered within ``timeout`` seconds; ``session``: the session id
    to name instead, none opened)."""
    headers = {"Content-Type": "application/json", "Accept": ACCEPT, "MCP-Protocol-Version": era}
    params: dict[str, Any] = {"name": "test_simple_text", "arguments": {}}
    if era == "2025-11-25" and session is not None:
        headers["Mcp-Session-Id"] = session
    elif era == "2025-11-25":
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": era, "capabilities": {}, "clientInfo": INFO},
        }
        opened = httpx.post(
            url,
            json=init,
            headers={k: v for k, v in headers.items() if k != "MCP-Protocol-Version"},
            timeout=timeout,
        )
        opened.raise_for_status()
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        httpx.post(url, json=done, headers=headers, timeout=timeout).raise_for_status()
    else:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": INFO,
        }
    headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "test_simple_text"}
    body = {"jsonrpc": "2.0", "id": "[<id>]", "method": "tools/call", "params": params}
    return headers, body


def check(url: str, headers: dict[str, str], body: dict[str, Any]) -> None:
    """One request as the load sends it: a 200 whose result is the tool's text."""
    one = dict(body, id="check-1")
    answer = httpx.post(url, json=one, headers=headers)
    message = _result(answer)
    text = (message.get("result") or {}).get("content", [{}])[0].get("text")
    if answer.status_code != 200 or text != TEXT:
        raise RuntimeError(f"{url}: unexpected answer {answer.status_code}: {answer.text[:300]}")


def autocannon(
    url: str, headers: dict[str, str], body: dict[str, Any], seconds: float, connections: int
) -> dict[str, Any]:
    argv = [str(AUTOCANNON), "-c", str(connections), "-d", str(seconds), "-m", "POST", "-I", "-j"]
    for k, v in headers.items():
        argv += ["-H", f"{k}={v}"]
    argv += ["-b", json.dumps(body, separators=(",", ":")), url]
    proc = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def measure(
    duration: float = 10,
    connections: int = 16,
    warmup: float = 2,
    eras: tuple[str, ...] = ERAS,
    servers: tuple[str, ...] = tuple(SERVERS),
) -> dict[str, Any]:
    """era -> server -> {rps, p99 (ms), requests, failed}; {} when autocannon is not installed.
    ``eras`` and ``servers``: a part of the row only (an A/B run of one side)."""
    if not AUTOCANNON.exists():
        print("bench/server.py: no autocannon (make bench-setup); skipped", file=sys.stderr)
        return {}
    out: dict[str, Any] = {era: {} for era in eras}
    for name in servers:
        with running(name) as url:
            for era in eras:
                headers, body = request(url, era)
                check(url, headers, body)
                autocannon(url, headers, body, warmup, connections)
                found = autocannon(url, headers, body, duration, connections)
                out[era][name] = {
                    "rps": found["requests"]["average"],
                    "p99": found["latency"]["p99"],
                    "requests": found["2xx"],
                    "failed": found["non2xx"] + found["errors"] + found["timeouts"],
                }
                print(f"  server {name} {era}: {out[era][name]}", file=sys.stderr)
    out["connections"], out["duration"] = connections, duration
    return out


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The whole-server target row of the report's headline table."""
    found = extra.get("server")
    if not found:
        return []
    ratios = {era: found[era]["mcpbind"]["rps"] / found[era]["mcp"]["rps"] for era in ERAS}
    worst = min(ratios, key=ratios.__getitem__)

    def side(t: dict[str, Any]) -> str:
        failed = f", {t['failed']} failed" if t["failed"] else ""
        return f"{t['rps']:,.0f}/s p99 {t['p99']:.0f} ms{failed}"

    where = "; ".join(
        f"{era} {ratios[era]:.2f}x (mcpbind {side(found[era]['mcpbind'])}, "
        f"mcp {side(found[era]['mcp'])})"
        for era in ERAS
    )
    failed = any(found[era][n]["failed"] for era in ERAS for n in SERVERS)
    return [
        (
            f"whole server, tools/call over Streamable HTTP >= {TARGET:g}x the official `mcp` SDK "
            f"(requests/s, {found['connections']} connections, autocannon)",
            f"worst {ratios[worst]:.2f}x",
            where,
            ratios[worst] >= TARGET and not failed,
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--era", choices=ERAS, action="append", help="only this era (repeatable)")
    parser.add_argument(
        "--server", choices=tuple(SERVERS), action="append", help="only this server (repeatable)"
    )
    args = parser.parse_args()
    eras, servers = tuple(args.era or ERAS), tuple(args.server or SERVERS)
    found = measure(args.duration, args.connections, args.warmup, eras, servers)
    if eras == ERAS and servers == tuple(SERVERS):
        for row in targets({"server": found}):
            print(*row, sep="\n  ")


if __name__ == "__main__":
    main()
