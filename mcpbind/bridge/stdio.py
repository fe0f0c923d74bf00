"""The bridge as a process: the client on this process's stdin/stdout, the server a child
process on its own stdin/stdout, one JSON-RPC message per line both ways (MCP's stdio
transport). All protocol work is the sans-IO ``Bridge``; this is only the plumbing."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import IO

from .core import Bridge

__all__ = ["run", "serve"]

_LINE_LIMIT = 64 * 1024 * 1024  # one message per line; MCP results may be large
_GRACE = 2.0  # seconds a server gets to exit after its input closes, before it is terminated


async def _stdin_reader() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def serve(
    argv: Sequence[str],
    bridge: Bridge,
    client_in: asyncio.StreamReader,
    client_out: IO[bytes],
    log: IO[str],
) -> int:
    """Run ``bridge`` between ``client_in``/``client_out`` and the server ``argv`` until either
    side is gone; every request still pending then gets an error. Returns the exit status."""
    server = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=_LINE_LIMIT,
    )
    assert server.stdin is not None and server.stdout is not None
    server_in = server.stdin

    def flush() -> None:
        for line in bridge.take_log():
            log.write(f"mcpbind bridge: {line}\n")
        log.flush()
        out = bridge.to_client()
        if out:
            with contextlib.suppress(BrokenPipeError, ValueError):
                client_out.write(b"".join(m + b"\n" for m in out))
                client_out.flush()
        down = bridge.to_server()
        if down and not server_in.is_closing():
            server_in.write(b"".join(m + b"\n" for m in down))

    async def from_client() -> str:
        while True:
            line = await client_in.readline()
            if not line:
                return "the client closed its input"
            if line.strip():
                _safely(bridge.from_client, line.rstrip(b"\r\n"), log)
                flush()
                with contextlib.suppress(ConnectionError):
                    await server_in.drain()

    async def from_server() -> str:
        assert server.stdout is not None
        while True:
            line = await server.stdout.readline()
            if not line:
                status = await server.wait()
                return f"the server exited (status {status})"
            if line.strip():
                _safely(bridge.from_server, line.rstrip(b"\r\n"), log)
                flush()

    tasks = [asyncio.ensure_future(from_client()), asyncio.ensure_future(from_server())]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    why = next(iter(done)).result()
    for task in pending:
        task.cancel()
    pending_count = bridge.pending()
    bridge.close(why)
    flush()
    log.write(f"mcpbind bridge: {why}; {pending_count} pending requests answered with an error\n")
    log.flush()
    with contextlib.suppress(ConnectionError):
        server_in.close()
    try:
        status = await asyncio.wait_for(server.wait(), _GRACE)
    except TimeoutError:
        server.terminate()
        try:
            status = await asyncio.wait_for(server.wait(), _GRACE)
        except TimeoutError:
            server.kill()
            status = await server.wait()
    return 0 if why.startswith("the client") else (status or 0)


def _safely(step: Callable[[bytes], None], line: bytes, log: IO[str]) -> None:
    """One message through the core; a fault of the bridge's own is one line on stderr and
    that message is lost, rather than the whole connection."""
    try:
        step(line)
    except Exception as exc:  # noqa: BLE001 - the process must outlive one bad message
        log.write(
            f"mcpbind bridge: internal error on a message ({type(exc).__name__}: {exc}); "
            "the message was not passed on\n"
        )


def run(
    argv: Sequence[str],
    client_revisions: Iterable[str] | str,
    server_revisions: Iterable[str] | str,
    strict: bool = False,
) -> int:
    """``mcpbind bridge``: this process's stdin/stdout are the client, ``argv`` the server."""
    bridge = Bridge(client_revisions, server_revisions, strict=strict)

    async def main() -> int:
        reader = await _stdin_reader()
        return await serve(argv, bridge, reader, sys.stdout.buffer, sys.stderr)

    try:
        return asyncio.run(main())
    except FileNotFoundError as exc:
        sys.stderr.write(f"mcpbind bridge: cannot start the server {argv[0]!r}: {exc.strerror}\n")
        return 127
    except PermissionError as exc:
        sys.stderr.write(f"mcpbind bridge: cannot start the server {argv[0]!r}: {exc.strerror}\n")
        return 126
