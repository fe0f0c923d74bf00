"""An App on stdio: one JSON-RPC message a line on stdin, answers a line each on stdout. A line
longer than ``max_line`` bytes is skipped and answered with a parse error (id null), never read
into memory whole."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any, BinaryIO

import msgspec

from ..errors import PARSE_ERROR, ProtocolError
from .connection import Connection

__all__ = ["MAX_LINE", "serve_lines"]

MAX_LINE = 16 * 1024 * 1024  # bytes in one message line, by default


async def _pipes(
    stdin: BinaryIO, stdout: BinaryIO, limit: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def read_line(reader: asyncio.StreamReader, limit: int) -> bytes | None:
    """The next line (with its newline, or without at the end of input), None at the end; an
    overlong line is discarded and raises ``ProtocolError`` (parse error)."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as end:
        return end.partial or None
    except asyncio.LimitOverrunError as long:
        skipped = long.consumed
        await reader.readexactly(long.consumed)
        while True:  # drop the rest of the line, a buffer at a time
            try:
                rest = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as more:
                await reader.readexactly(more.consumed)
                skipped += more.consumed
                continue
            except asyncio.IncompleteReadError as end:
                rest = end.partial
            skipped += len(rest)
            break
        raise ProtocolError(
            PARSE_ERROR,
            f"Parse error: a message line of at least {skipped} bytes is longer than the "
            f"{limit} bytes allowed",
        ) from None


async def serve_lines(
    connect: Any,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    max_line: int = MAX_LINE,
) -> None:
    """Serve one connection on ``stdin``/``stdout`` (the process's own by default) until the
    input ends; ``connect(write)`` makes the ``Connection``."""
    reader, writer = await _pipes(stdin or sys.stdin.buffer, stdout or sys.stdout.buffer, max_line)

    def write(data: bytes) -> None:
        writer.write(data + b"\n")

    connection: Connection = connect(write)
    try:
        while True:
            try:
                line = await read_line(reader, max_line)
            except ProtocolError as error:
                write(msgspec.json.encode(error.to_dict()))
                continue
            if line is None:
                break
            if line.strip():
                connection.receive(line)
            await writer.drain()
    finally:
        await connection.close()
        with contextlib.suppress(ConnectionError):
            await writer.drain()
