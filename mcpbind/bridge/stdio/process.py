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
    assert server.stdin is not None and server.stdout is not None
    server_in = server.stdin
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[tuple[str, str | None]] = loop.create_future()
    heard = [loop.time()]  # when the client last sent something

    def end(side: str, why: str | None) -> None:
        """The first side to go (``"client"`` or ``"server"``) and why (None: see its exit)."""
        if not ended.done():
            ended.set_result((side, why))

    def flush() -> None:
        for line in bridge.take_log():
            log.write(f"mcpbind bridge: {line}\n")
        log.flush()
        out = bridge.to_client()
        if out:
            try:
                client_out.write(b"".join(m + b"\n" for m in out))
                client_out.flush()
            except (OSError, ValueError):  # a broken pipe, or a closed file
                end("client", "the client closed its output")
        down = bridge.to_server()
        if down and not server_in.is_closing():
            server_in.write(b"".join(m + b"\n" for m in down))
        if bridge.why is not None:  # the core ended it (a server's fault)
            end("server", bridge.why)

    bridge.wake = flush  # a core client's tasks run on this loop (stdio/tasks_core_to_extension.py)

    def too_long(line: Overlong) -> str:
        return f"a message of {line.size} bytes exceeds the limit of {max_line} bytes"

    async def from_client() -> None:
        lines = LineReader(client_in, max_line)
        while True:
            line = await lines.read()
            heard[0] = loop.time()
            if line is None:
                end("client", "the client closed its input")
                return
            if isinstance(line, Overlong):
                bridge.discarded_from_client(line.envelope, too_long(line))
            elif line and not line.isspace():
                bridge.from_client(line)
            flush()
            if not bridge.closed and not server_in.is_closing():
                with contextlib.suppress(ConnectionError):  # the server reads at its pace
                    await server_in.drain()

    async def from_server() -> None:
        assert server.stdout is not None
        lines = LineReader(server.stdout, max_line)
        while True:
            line = await lines.read()
            if line is None:
                end("server", None)
                return
            if isinstance(line, Overlong):
                bridge.discarded_from_server(line.envelope, too_long(line))
            elif line and not line.isspace():
                bridge.from_server(line)
            flush()

    async def expiring() -> None:
        """Input rounds a round-trip client never retried end after ``input_timeout``."""
        every = min(max(bridge.input_timeout / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(every)
            bridge.expire()
            flush()

    def lost(pipe: asyncio.Future[None]) -> None:
        if not pipe.cancelled():
            pipe.exception()  # a broken pipe: the server's doing, said in the reason
        end("server", "the server stopped reading its input")

    def watch(side: str, task: asyncio.Task[None]) -> None:
        """A reader that fails ends its side (the bridge's own fault, said once)."""

        def done(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is not None:
                end(side, f"internal error reading the {side} ({task.exception()!r})")

        task.add_done_callback(done)

    reading_client = asyncio.ensure_future(from_client())
    reading_server = asyncio.ensure_future(from_server())
    sweeping = asyncio.ensure_future(expiring())
    exited = asyncio.ensure_future(server.wait())
    # The pipe to the server breaks when its reader closes it, written to or not.
    input_lost = asyncio.ensure_future(server_in.wait_closed())
    watch("client", reading_client)
    watch("server", reading_server)
    exited.add_done_callback(lambda _: end("server", None))
    input_lost.add_done_callback(lost)

    side, why = await ended
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
    flush()
    if side == "server":
        while not reading_client.done() and (quiet := loop.time() - heard[0]) < linger:
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
