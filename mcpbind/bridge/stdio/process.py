"""The bridge as a process: the client on this process's stdin/stdout, the server a child
process on its own stdin/stdout, one JSON-RPC message per line both ways (MCP's stdio
transport), each line at most ``max_line`` bytes. All protocol work is the sans-IO ``Bridge``;
this is only the plumbing, and the order in which the end comes (docs/bridge.md, "Limits and
failures")."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterable, Sequence
from typing import IO

from ...transports.stdio import MAX_LINE, LineReader, Overlong
from ..limits import INPUT_TIMEOUT, MAX_IN_FLIGHT_PER_SIDE
from .bridge import Bridge

__all__ = ["GRACE", "LINGER", "run", "serve"]

_CHUNK = 1 << 20  # bytes a reader takes from a pipe at once (longer lines are put together)
GRACE = 2.0  # seconds a server gets to exit after its input closes, before it is terminated
LINGER = 2.0  # seconds of silence from the client after which a bridge whose server is gone exits


async def serve(
    argv: Sequence[str],
    bridge: Bridge,
    client_in: asyncio.StreamReader,
    client_out: IO[bytes],
    log: IO[str],
    *,
    max_line: int = MAX_LINE,
    linger: float = LINGER,
) -> int:
    """Run ``bridge`` between ``client_in``/``client_out`` and the server ``argv`` until either
    side is gone; every request still pending then gets an error. When the server is gone
    first, the client's requests that follow are answered with that error too, until the client
    closes its input or sends nothing for ``linger`` seconds. Returns the exit status."""
    server = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=min(max_line, _CHUNK),
    )
    pipes = _Pipes(bridge, server, client_in, client_out, log, max_line)
    bridge.wake = pipes.flush  # a core client's tasks run on this loop (tasks_core_to_extension.py)
    return await pipes.run(linger)


class _Pipes:
    """One run of ``serve``: the bridge between the client's pipes and the server's, and which
    side ended first (``ended``)."""

    def __init__(
        self,
        bridge: Bridge,
        server: asyncio.subprocess.Process,
        client_in: asyncio.StreamReader,
        client_out: IO[bytes],
        log: IO[str],
        max_line: int,
    ) -> None:
        assert server.stdin is not None and server.stdout is not None
        self.bridge = bridge
        self.server = server
        self.server_in = server.stdin
        self.server_out = server.stdout
        self.client_in = client_in
        self.client_out = client_out
        self.log = log
        self.max_line = max_line
        self.loop = asyncio.get_running_loop()
        self.ended: asyncio.Future[tuple[str, str | None]] = self.loop.create_future()
        self.heard = self.loop.time()  # when the client last sent something

    def end(self, side: str, why: str | None) -> None:
        """The first side to go (``"client"`` or ``"server"``) and why (None: see its exit)."""
        if not self.ended.done():
            self.ended.set_result((side, why))

    def flush(self) -> None:
        bridge, log = self.bridge, self.log
        for line in bridge.take_log():
            log.write(f"mcpbind bridge: {line}\n")
        log.flush()
        out = bridge.to_client()
        if out:
            try:
                self.client_out.write(b"".join(m + b"\n" for m in out))
                self.client_out.flush()
            except (OSError, ValueError):  # a broken pipe, or a closed file
                self.end("client", "the client closed its output")
        down = bridge.to_server()
        if down and not self.server_in.is_closing():
            self.server_in.write(b"".join(m + b"\n" for m in down))
        if bridge.why is not None:  # the core ended it (a server's fault)
            self.end("server", bridge.why)

    def too_long(self, line: Overlong) -> str:
        return f"a message of {line.size} bytes exceeds the limit of {self.max_line} bytes"

    async def from_client(self) -> None:
        bridge, server_in = self.bridge, self.server_in
        lines = LineReader(self.client_in, self.max_line)
        while True:
            line = await lines.read()
            self.heard = self.loop.time()
            if line is None:
                self.end("client", "the client closed its input")
                return
            if isinstance(line, Overlong):
                bridge.discarded_from_client(line.envelope, self.too_long(line))
            elif line and not line.isspace():
                bridge.from_client(line)
            self.flush()
            if not bridge.closed and not server_in.is_closing():
                with contextlib.suppress(ConnectionError):  # the server reads at its pace
                    await server_in.drain()

    async def from_server(self) -> None:
        bridge = self.bridge
        lines = LineReader(self.server_out, self.max_line)
        while True:
            line = await lines.read()
            if line is None:
                self.end("server", None)
                return
            if isinstance(line, Overlong):
                bridge.discarded_from_server(line.envelope, self.too_long(line))
            elif line and not line.isspace():
                bridge.from_server(line)
            self.flush()

    async def expiring(self) -> None:
        """Input rounds a round-trip client never retried end after ``input_timeout``."""
        every = min(max(self.bridge.input_timeout / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(every)
            self.bridge.expire()
            self.flush()

    def lost(self, pipe: asyncio.Future[None]) -> None:
        if not pipe.cancelled():
            pipe.exception()  # a broken pipe: the server's doing, said in the reason
        self.end("server", "the server stopped reading its input")

    def watch(self, side: str, task: asyncio.Task[None]) -> None:
        """A reader that fails ends its side (the bridge's own fault, said once)."""

        def done(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is not None:
                self.end(side, f"internal error reading the {side} ({task.exception()!r})")

        task.add_done_callback(done)

    async def run(self, linger: float) -> int:
        """Until either side is gone, then the end in its order; the exit status."""
        bridge, server, server_in = self.bridge, self.server, self.server_in
        reading_client = asyncio.ensure_future(self.from_client())
        reading_server = asyncio.ensure_future(self.from_server())
        sweeping = asyncio.ensure_future(self.expiring())
        exited = asyncio.ensure_future(server.wait())
        # The pipe to the server breaks when its reader closes it, written to or not.
        input_lost = asyncio.ensure_future(server_in.wait_closed())
        self.watch("client", reading_client)
        self.watch("server", reading_server)
        exited.add_done_callback(lambda _: self.end("server", None))
        input_lost.add_done_callback(self.lost)

        side, why = await self.ended
        sweeping.cancel()
        if side == "server" and bridge.why is None:
            # The server's last answers are in its output when it exits, its status comes after
            # the end of its output: the one follows the other at once, unless it hangs.
            await asyncio.wait({reading_server, exited}, timeout=GRACE)
            if exited.done():
                why = f"the server exited (status {exited.result()})"
            elif why is None:
                why = "the server closed its output"
        assert why is not None
        bridge.close(why)
        self.flush()
        if side == "server":
            while not reading_client.done() and (quiet := self.loop.time() - self.heard) < linger:
                await asyncio.wait({reading_client}, timeout=linger - quiet)
        reading_client.cancel()
        with contextlib.suppress(ConnectionError):
            server_in.close()
        status = await _stop(server, exited)
        reading_server.cancel()
        input_lost.cancel()
        if side == "client":
            return 0
        return 128 - status if status < 0 else status  # a signal N: 128 + N, as shells say it


async def _stop(server: asyncio.subprocess.Process, exited: asyncio.Future[int]) -> int:
    """The server's status, once it has exited: by itself within ``GRACE`` seconds, else
    terminated (and killed after as long again)."""
    await asyncio.wait({exited}, timeout=GRACE)
    if not exited.done():
        server.terminate()
        await asyncio.wait({exited}, timeout=GRACE)
        if not exited.done():
            server.kill()
    return await exited


async def _stdin_reader(max_line: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=min(max_line, _CHUNK))
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


def run(
    argv: Sequence[str],
    client_revisions: Iterable[str] | str,
    server_revisions: Iterable[str] | str,
    strict: bool = False,
    *,
    max_line: int = MAX_LINE,
    max_in_flight: int = MAX_IN_FLIGHT_PER_SIDE,
    input_timeout: float = INPUT_TIMEOUT,
) -> int:
    """``mcpbind bridge``: this process's stdin/stdout are the client, ``argv`` the server."""
    bridge = Bridge(
        client_revisions,
        server_revisions,
        strict=strict,
        max_in_flight=max_in_flight,
        input_timeout=input_timeout,
    )

    async def main() -> int:
        reader = await _stdin_reader(max_line)
        return await serve(argv, bridge, reader, sys.stdout.buffer, sys.stderr, max_line=max_line)

    try:
        return asyncio.run(main())
    except FileNotFoundError as exc:
        sys.stderr.write(f"mcpbind bridge: cannot start the server {argv[0]!r}: {exc.strerror}\n")
        return 127
    except PermissionError as exc:
        sys.stderr.write(f"mcpbind bridge: cannot start the server {argv[0]!r}: {exc.strerror}\n")
        return 126
