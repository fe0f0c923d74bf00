"""A 2026-07-28 client's input round across gateway processes (`mcpbind bridge --listen ...
--upstream URL --redis URL`, two of them sharing one real Redis, in front of
examples/everything_server.py held to 2025-11-25): the server's elicitation comes up on one
gateway as an input-required result, the client's retry goes to the other, which carries it to
the one holding the round and brings back the answer; when the holder is gone, the retry fails at
once with an error naming why; when Redis stops while the holder works on a carried retry, the
retry fails with an error naming the store long before relay_timeout."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpbind.validate import validate_lines
from tests._net import free_port, started
from tests._net import stopped as stop
from tests.test_gateway_relay import own_redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_gateway_workers import (  # noqa: E402,F401 - fixtures
    REVISION,
    Gateway,
    gateway_redis,
    upstream,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

CLIENT = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": CLIENT,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": CLIENT,
    "mcp-method": "tools/call",
    "mcp-name": "test_elicitation",
}
ANSWER = {"action": "accept", "content": {"response": "yes"}}


class Client:
    """A session-less 2026-07-28 client calling ``tool``; ``wire`` is what it sent and
    received."""

    def __init__(self, tool: str = "test_elicitation") -> None:
        self.tool = tool
        self.wire: list[str] = []
        self.ids = iter(range(1, 1000))
        self.headers = {**HEADERS, "mcp-name": tool}

    def message(self, **extra: Any) -> dict[str, Any]:
        params = {"name": self.tool, "arguments": {"message": "ok?"}, "_meta": META} | extra
        if self.tool != "test_elicitation":
            params["arguments"] = {}
        return {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call", "params": params}

    def call(self, url: str, **extra: Any) -> dict[str, Any]:
        response = httpx.post(url, json=self.message(**extra), headers=self.headers, timeout=30)
        self.wire += [response.request.content.decode(), response.text]
        answer: dict[str, Any] = response.json()
        return answer

    def asked(self, url: str, message: str = "ok?", **extra: Any) -> dict[str, Any]:
        """The first try: the server's elicitation as an input-required result."""
        answer = self.call(url, **extra)
        assert "result" in answer, answer
        result = answer["result"]
        assert result["resultType"] == "input_required", result
        ((name, request),) = result["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == message
        return {"name": name, "state": result["requestState"]}

    def retry(self, url: str, asked: dict[str, Any]) -> dict[str, Any]:
        return self.call(url, inputResponses={asked["name"]: ANSWER}, requestState=asked["state"])

    def retry_events(self, url: str, asked: dict[str, Any], answer: Any) -> list[Any]:
        """The retry with a progress token, its answer read as an event stream."""
        meta = META | {"progressToken": "t1"}
        retry = self.message(
            inputResponses={asked["name"]: answer}, requestState=asked["state"], _meta=meta
        )
        response = httpx.post(url, json=retry, headers=self.headers, timeout=30)
        self.wire.append(json.dumps(retry))
        assert response.headers["content-type"].startswith("text/event-stream"), response.text
        events = [
            json.loads(line[5:])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
        self.wire += [json.dumps(e) for e in events]
        return events


@pytest.fixture
def two(upstream: str, gateway_redis: str) -> Any:  # noqa: F811
    pinned = ("--server-revision", REVISION)
    a, b = Gateway(upstream, gateway_redis, *pinned), Gateway(upstream, gateway_redis, *pinned)
    yield a, b
    for gateway in (a, b):
        if gateway.process.poll() is None:
            stop(gateway.process)


def test_a_round_asked_on_one_gateway_is_answered_through_the_other(two: Any) -> None:
    a, b = two
    client = Client()
    done = client.retry(b.url, client.asked(a.url))
    text = done["result"]["content"][0]["text"]
    assert text == 'Elicitation completed: action=accept, content={"response": "yes"}'
    # Both ways, and a round whose next question comes back through the other gateway too.
    again = client.retry(a.url, client.asked(b.url))
    assert again["result"]["content"][0]["text"] == text
    assert list(validate_lines(client.wire, CLIENT, strict=True)) == []


def test_a_retry_whose_holder_is_gone_fails_at_once_naming_why(two: Any) -> None:
    a, b = two
    client = Client()
    asked = client.asked(a.url)
    a.process.send_signal(signal.SIGKILL)  # dies holding the round
    a.process.wait()
    error = client.retry(b.url, asked)["error"]
    assert error["code"] == -32000
    assert "gateway process holding this input round" in error["message"]
    assert "is gone" in error["message"]
    assert error["data"]["reason"] == "holder gone"
    # A state forged with another worker's name and a guessed token is refused as unknown.
    worker = asked["state"].split(":", 1)[1].split(".", 1)[0]
    forged = dict(asked, state=f"mcpbind-gateway:{worker}.guessed")
    error = client.retry(b.url, forged)["error"]
    assert error["code"] == -32000 and error["data"]["reason"] == "holder gone"


def test_rounds_through_workers_on_one_port_all_complete(
    upstream: str, gateway_redis: str  # noqa: F811
) -> None:
    """``--workers 2``: the kernel spreads the client's connections over both processes, so
    about half the retries reach the other one; every round completes."""
    gateway = Gateway(upstream, gateway_redis, "--server-revision", REVISION, "--workers", "2")
    try:
        client = Client()
        for _ in range(12):
            done = client.retry(gateway.url, client.asked(gateway.url))
            assert done["result"]["content"][0]["text"].startswith("Elicitation completed")
        assert list(validate_lines(client.wire, CLIENT, strict=True)) == []
    finally:
        stop(gateway.process)


@pytest.fixture
def slow_pair(gateway_redis: str) -> Any:  # noqa: F811
    """Two gateways in front of tests/interop/gateway_upstream.py, whose tools work on after the
    client's answer."""
    port = free_port()
    server = started([sys.executable, str(HERE / "gateway_upstream.py"), "--port", str(port)], port)
    url = f"http://127.0.0.1:{port}/mcp"
    pinned = ("--server-revision", REVISION)
    a, b = Gateway(url, gateway_redis, *pinned), Gateway(url, gateway_redis, *pinned)
    yield a, b
    for process in (a.process, b.process, server):
        if process.poll() is None:
            stop(process)


def test_progress_after_the_answer_reaches_the_retry_on_the_other_gateway(slow_pair: Any) -> None:
    a, b = slow_pair
    client = Client(tool="ask_then_report")
    asked = client.asked(a.url, message="say something", _meta=META | {"progressToken": "t1"})
    events = client.retry_events(b.url, asked, {"action": "accept", "content": {"response": "hi"}})
    progress = [e["params"] for e in events if e.get("method") == "notifications/progress"]
    assert [(p["progress"], p["message"]) for p in progress] == [
        (1, "step 1 of 2"),
        (2, "step 2 of 2"),
    ]
    assert all(p["progressToken"] == "t1" for p in progress)
    assert events[-1]["result"]["content"][0]["text"] == "answered: hi"
    assert list(validate_lines(client.wire, CLIENT, strict=True)) == []


def test_a_holder_gone_while_the_retry_waits_fails_it_naming_why(slow_pair: Any) -> None:
    a, b = slow_pair
    client = Client(tool="ask_then_wait")
    asked = client.asked(a.url, message="say something")
    # a dies once the retry has reached it through b (it then waits for the server's answer).
    killer = threading.Timer(1.0, a.process.send_signal, (signal.SIGKILL,))
    killer.start()
    try:
        answer = client.retry(b.url, asked)
    finally:
        killer.join()
    error = answer["error"]
    assert error["code"] == -32000 and error["data"]["reason"] == "holder gone"
    assert "while the retry waited for its answer" in error["message"]


def test_redis_stopped_while_the_holder_works_on_a_retry_fails_it_soon() -> None:
    """The retry reaches the other gateway, which carries it to the holder; the holder takes it
    (the server frozen: its answer does not come), and Redis stops. The client gets -32603
    naming the store long before relay_timeout (300 s), not a wait for it."""
    port = free_port()
    argv = [sys.executable, "examples/everything_server.py", "--port", str(port)]
    server = started(argv, port, cwd=HERE.parents[1])
    upstream_url = f"http://127.0.0.1:{port}/mcp"
    with own_redis() as (url, redis_process):
        pinned = ("--server-revision", REVISION)
        a, b = Gateway(upstream_url, url, *pinned), Gateway(upstream_url, url, *pinned)
        said: list[bytes] = []
        for gateway in (a, b):  # read: Redis gone, each says so again and again
            stderr = gateway.process.stderr
            assert stderr is not None
            threading.Thread(target=lambda e=stderr: said.extend(iter(e.readline, b""))).start()
        try:
            client = Client()
            Client().asked(b.url)  # b has learnt the server before it freezes
            asked = client.asked(a.url)
            server.send_signal(signal.SIGSTOP)  # the holder's resumed round waits for it
            answers: list[dict[str, Any]] = []
            retry = threading.Thread(target=lambda: answers.append(client.retry(b.url, asked)))
            retry.start()
            time.sleep(2)  # carried to the holder, acknowledged, worked on
            assert retry.is_alive()
            redis_process.terminate()
            redis_process.wait()
            retry.join(60)  # a hang guard (the bound it must beat is relay_timeout, 300 s)
            assert not retry.is_alive(), "the retry waited on"
        finally:
            server.send_signal(signal.SIGCONT)
            stop(server)
            for gateway in (a, b):
                stop(gateway.process)
    error = answers[0]["error"]
    assert error["code"] == -32603 and error["data"]["reason"] == "store failed", error
    assert "the shared store (--redis) failed" in error["message"]
    assert "without requestState" in error["message"]
