"""An App on stdio: one JSON-RPC message a line on stdin, answers a line each on stdout, framed by
``mcpbind.transports.stdio.LineReader``. A line longer than ``max_line`` bytes is dropped unread
and, when it was a request (or cannot be told), answered with -32600 (its id when readable)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from ..errors import INVALID_REQUEST
from ..transports.stdio import MAX_LINE, LineReader, Overlong
from .connection import Connection

__all__ = ["MAX_LINE", "serve_lines"]


async def _pipes(
    stdin: BinaryIO, stdout: BinaryIO
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve_lines(
    connect: Callable[[Callable[[bytes], Any]], Connection],
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    max_line: int = MAX_LINE,
) -> None:
    """Serve one connection on ``stdin``/``stdout`` (the process's own by default) until the
    input ends; ``connect(write)`` makes the ``Connection``."""
    reader, writer = await _pipes(stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)

    def write(data: bytes) -> None:
        writer.write(data + b"\n")

    connection = connect(write)
    lines = LineReader(reader, max_line)
    try:
        while (line := await lines.read()) is not None:
            if isinstance(line, Overlong):
                why = f"Invalid Request: a message of {line.size} bytes exceeds the limit of "
                answer = line.envelope.answer(INVALID_REQUEST, f"{why}{max_line} bytes")
                if answer is not None:
                    write(answer)
            elif line and not line.isspace():
                connection.receive(line)
            await writer.drain()
    finally:
        await connection.close()
        with contextlib.suppress(ConnectionError):
            await writer.drain()
