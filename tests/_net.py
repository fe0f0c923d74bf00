"""Loopback ports for the tests that start real servers: a free port, waiting until a server
listens on one, and starting and stopping a server process."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes] | None = None, seconds: float = 30) -> None:
    """Return once something accepts connections on ``port``; fail when ``proc`` (the process
    that should listen there) exits first, with what it wrote to a piped stderr, or after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                said = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise AssertionError(f"the server for port {port} exited: {said}") from None
            assert time.monotonic() < deadline, f"nothing listens on port {port}"
            time.sleep(0.1)


def started(
    argv: list[str], port: int, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``argv`` started (its stderr piped, quoted if it exits first) and listening on ``port``."""
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_port(port, process)
    except BaseException:
        stopped(process)
        raise
    return process


def stopped(process: subprocess.Popen[bytes]) -> None:
    """Terminate ``process``, killed when it does not end within 10 s."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
