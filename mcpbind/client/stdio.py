"""A server started as a subprocess, spoken to on its stdin and stdout (one message a line); its
stderr is the caller's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..transports.stdio import MAX_LINE, LineReader, Overlong
from .links import PipeLink

__all__ = ["StdioLink"]


class StdioLink(PipeLink):
    """``argv`` run as the server (with ``env`` and ``cwd`` when given); ``grace`` is how long it
    may take to exit once its input is closed before it is terminated."""

    def __init__(
        self,
        argv: Sequence[str],
        *args: Any,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        grace: float = 5.0,
        max_line: int = MAX_LINE,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.grace = grace
        self.max_line = max_line
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
        )
        self._reader = asyncio.ensure_future(self._read())

    def write(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        if not self.proc.stdin.is_closing():
            self.proc.stdin.write(data + b"\n")

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        lines = LineReader(self.proc.stdout, self.max_line)
        try:
            while (line := await lines.read()) is not None:
                if isinstance(line, Overlong):  # dropped unread: a response to it is lost
                    self.note(
                        "long line", f"the server sent a message of {line.size} bytes (the limit)"
                    )
                elif line and not line.isspace():
                    self.feed(line)
        finally:
            code = None
            with contextlib.suppress(TimeoutError):  # its status, when it is exiting
                code = await asyncio.wait_for(asyncio.shield(self.proc.wait()), 1.0)
            self.ended(ConnectionError(f"the server closed its output (exit status {code})"))

    async def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), self.grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
