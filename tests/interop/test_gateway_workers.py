"""Gateway processes (`mcpbind bridge --listen ... --upstream URL --redis URL`) sharing one real
Redis in front of one HTTP server (examples/everything_server.py), with the client's requests
sent to one gateway or the other on purpose: a session opened on one continues on the other, and
an event stream dropped on one resumes on the other with Last-Event-ID, nothing lost or repeated;
``--workers 2`` serves a session on one port. Every message of the session, both ways, validates
against the client's revision."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpbind.validate import validate_lines
from tests._net import free_port
from tests._net import started as start_process

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_http_workers import Client, call, messages, resumed_elsewhere, workers_of  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

ROOT = HERE.parents[1]
MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
REVISION = "2025-11-25"


def started(argv: list[str], port: int) -> subprocess.Popen[bytes]:
    return start_process(argv, port, cwd=ROOT)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
def upstream() -> Iterator[str]:
    port = free_port()
    process = started([sys.executable, "examples/everything_server.py", "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(process)


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
        )


@pytest.fixture
def gateways(upstream: str, gateway_redis: str) -> Iterator[tuple[Gateway, Gateway]]:
    # Held to 2025-11-25 with the server: its sampling is a request of its own there.
    pinned = ("--server-revision", REVISION)
    a, b = Gateway(upstream, gateway_redis, *pinned), Gateway(upstream, gateway_redis, *pinned)
    try:
        yield a, b
    finally:
        stop(a.process)
        stop(b.process)


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
    first = client.post(a.url, call(7, "test_sampling", prompt="hi"), keep=2)
    (asked,) = messages(first)
    assert asked["method"] == "sampling/createMessage"
    result = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}
    assert client.post(b.url, {"jsonrpc": "2.0", "id": asked["id"], "result": result}) is None
    rest = messages(client.get(b.url, first[-1]["id"]))
    assert rest[-1]["id"] == 7
    assert rest[-1]["result"]["content"][0]["text"] == "LLM response: hello"
    assert list(validate_lines(client.wire, REVISION, strict=True)) == []


def test_workers_on_one_port_serve_one_session(upstream: str, gateway_redis: str) -> None:
    gateway = Gateway(upstream, gateway_redis, "--workers", "2")
    workers = workers_of(gateway.process.pid)
    try:
        assert len(workers) == 2
        client = Client()
        client.http = httpx.Client(timeout=20, headers={"connection": "close"})  # new each time
        client.open(gateway.url, gateway.url)
        for rid in range(1, 21):
            answer = client.post(gateway.url, call(rid, "test_simple_text"))
            assert answer["id"] == rid and "result" in answer, json.dumps(answer)
        assert list(validate_lines(client.wire, REVISION, strict=True)) == []
    finally:
        stop(gateway.process)
    assert not [w for w in workers if Path(f"/proc/{w}").exists()]  # stopped with it
