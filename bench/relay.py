"""A byte relay: the least a process between a client and a server can do, the reference of the
gateway rows (bench/gateway.py).

    .venv/bin/python -m bench.relay --listen PORT --upstream HOST:PORT

Each connection accepted on ``--listen`` gets one connection of its own to ``--upstream``; the
bytes each side sends are written to the other as they come, nothing parsed, buffered or
checked (asyncio protocols on uvloop, as the gateway's own loop is). Whatever requests/s the load
keeps through it is the most any proxy process could keep on the same machine: the gateway does
this and everything a gateway must (HTTP, sessions, the codec both ways, its checks). Not a
proxy for use: no flow control, no limits, no timeouts.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import cast

import uvloop


class _Side(asyncio.Protocol):
    """One connection: what it receives goes to its peer's transport once there is one."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: asyncio.Transport | None = None
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not subclasses of asyncio.Transport, only alike)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self.early.append(data)
        else:
            self.peer.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.peer.close()

    def join(self, peer: asyncio.Transport) -> None:
        self.peer = peer
        for data in self.early:
            peer.write(data)
        self.early.clear()


class _Accepted(_Side):
    """A client's connection: it opens its own connection upstream."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__()
        self.host, self.port = host, port
        self.connecting: asyncio.Task[None] | None = None  # (held: the loop keeps no task alive)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        assert self.transport is not None
        try:
            upstream, side = await asyncio.get_running_loop().create_connection(
                _Side, self.host, self.port
            )
        except OSError:
            self.transport.close()
            return
        if self.transport.is_closing():  # the client left meanwhile
            upstream.close()
            return
        side.join(self.transport)
        self.join(upstream)


async def _serve(port: int, host: str, upstream_port: int) -> None:
    server = await asyncio.get_running_loop().create_server(
        lambda: _Accepted(host, upstream_port), "127.0.0.1", port
    )
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True, help="the port to listen on")
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the server")
    args = parser.parse_args()
    host, _, port = args.upstream.rpartition(":")
    uvloop.run(_serve(args.listen, host, int(port)))


if __name__ == "__main__":
    main()
