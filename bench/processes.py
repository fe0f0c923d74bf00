"""The processes the benchmarks start: a free loopback port, and a process listening on it for as
long as a block runs (a server, the gateway, redis-server, or one of them under valgrind)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Listening:
    """A process started by ``listening``: ``check`` raises when it has exited."""

    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    what: str

    def check(self) -> None:
        """``RuntimeError`` quoting the end of the process's stderr when it has exited."""
        if self.proc.poll() is not None:
            self.log.seek(0)
            said = self.log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{self.what} exited with status {self.proc.returncode}: {said}")


@contextlib.contextmanager
def listening(
    argv: list[str], port: int, what: str, *, seconds: float = 60, stop_seconds: float = 15
) -> Iterator[Listening]:
    """``argv`` (run in the repository, in a process group of its own) once something accepts
    connections on ``port``, for as long as the block runs; then the group is terminated, and
    killed when it has not ended within ``stop_seconds``. Its stderr goes to a file (a pipe
    nobody reads would stall it once full), quoted in the ``RuntimeError`` raised when it exits
    before listening or does not listen within ``seconds``."""
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
        )
        started = Listening(proc, log, what)
        try:
            deadline = time.monotonic() + seconds
            while True:
                started.check()
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} did not listen on port {port} within {seconds} s")
                time.sleep(0.1)
            yield started
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # its own process group, started above
            try:
                proc.wait(stop_seconds)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """Every live process descended from this one: pid -> (its command line, the CPU seconds it
    has used so far, user and system, its threads included). Read from ``/proc`` (Linux)."""
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # (ended since the listing)
            continue
        # pid (comm) state ppid ... utime stime: comm may hold spaces and parentheses
        fields = stat[stat.rindex(b")") + 2 :].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        used[pid] = (int(fields[11]) + int(fields[12])) / tick
    own = os.getpid()
    out: dict[int, tuple[str, float]] = {}
    for pid in used:
        up = parents.get(pid)
        while up is not None and up != own:
            up = parents.get(up)
        if up is None or pid == own:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out[pid] = (argv, used[pid])
    return out
