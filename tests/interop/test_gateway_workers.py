"""Gateway processes (`mcpbind bridge --listen ... --upstream URL --redis URL`) sharing one real
Redis in front of one HTTP server (examples/everything_server.py), with the client's requests
sent to one gateway or the other on purpose: a session opened on one continues on the other, and
an event stream dropped on one resumes on the other with Last-Event-ID, nothing lost or repeated;
``--workers 2`` serves a session on one port. Every message of the session, both ways, validates
against the client's revision."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpbind.validate import validate_lines
from tests._net import free_port, started, stopped

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_http_workers import (  # noqa: E402
    Client,
    answered_elsewhere,
    call,
    one_session_on_two_workers,
    resumed_elsewhere,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

ROOT = HERE.parents[1]
MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
REVISION = "2025-11-25"


@pytest.fixture
def upstream() -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "examples/everything_server.py", "--port", str(port)]
    process = started(argv, port, cwd=ROOT)
    yield f"http://127.0.0.1:{port}/mcp"
    stopped(process)


@pytest.fixture
def gateway_redis(redis_url: str) -> str:
    """A database of the test Redis of the gateway's own, empty."""
    import redis

    url = redis_url.rsplit("/", 1)[0] + "/2"
    redis.Redis.from_url(url).flushdb()
    return url


class Gateway:
    """One `mcpbind bridge --listen` process on its own port."""

    def __init__(self, upstream: str, redis_url: str, *options: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = started(
            [
                MCPBIND,
                "bridge",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--upstream",
                upstream,
                "--redis",
                redis_url,
                *options,
            ],
            self.port,
            cwd=ROOT,
        )


@pytest.fixture
def gateways(upstream: str, gateway_redis: str) -> Iterator[tuple[Gateway, Gateway]]:
    # Held to 2025-11-25 with the server: its sampling is a request of its own there.
    pinned = ("--server-revision", REVISION)
    a, b = Gateway(upstream, gateway_redis, *pinned), Gateway(upstream, gateway_redis, *pinned)
    try:
        yield a, b
    finally:
        stopped(a.process)
        stopped(b.process)


def test_a_session_opened_on_one_gateway_continues_on_the_other(gateways: Any) -> None:
    a, b = gateways
    client = Client()
    client.open(a.url, b.url)  # initialized told to the other gateway
    listed = client.post(b.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert "test_tool_with_logging" in {t["name"] for t in listed["result"]["tools"]}
    for rid, url in ((2, a.url), (3, b.url), (4, a.url)):
        answer = client.post(url, call(rid, "test_simple_text"))
        assert answer["result"]["content"][0]["text"].startswith("This is a simple text")
    assert list(validate_lines(client.wire, REVISION, strict=True)) == []


def test_a_stream_dropped_on_one_gateway_resumes_on_the_other(gateways: Any) -> None:
    a, b = gateways
    client = Client()
    client.open(a.url, a.url)
    # The server sends three log messages 50 ms apart, then the answer; the gateway passes them
    # on the call's stream. The connection is dropped after the priming event and the first log
    # message, and the rest is asked of the other gateway.
    resumed_elsewhere(client, a.url, b.url)
    assert list(validate_lines(client.wire, REVISION, strict=True)) == []


def test_an_answer_sent_to_the_other_gateway_reaches_the_one_that_asked(gateways: Any) -> None:
    """The server's sampling request comes up on gateway a's stream; the client answers through
    gateway b, which hands the answer to a, which passes it down; the call completes."""
    a, b = gateways
    client = Client()
    client.open(a.url, b.url)
    rest = answered_elsewhere(client, a.url, b.url)
    assert rest[-1]["id"] == 7
    assert rest[-1]["result"]["content"][0]["text"] == "LLM response: hello"
    assert list(validate_lines(client.wire, REVISION, strict=True)) == []


def test_workers_on_one_port_serve_one_session(upstream: str, gateway_redis: str) -> None:
    gateway = Gateway(upstream, gateway_redis, "--workers", "2")
    one_session_on_two_workers(gateway.url, gateway.process)
