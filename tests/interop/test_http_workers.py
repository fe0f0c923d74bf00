"""Two worker processes of examples/everything_server.py sharing one real Redis (`--redis URL`),
each on its own port, with the client's requests sent to one or the other on purpose: a session
opened on one continues on the other, a stream dropped on one resumes on the other with
Last-Event-ID (nothing lost, nothing repeated), the client's answer to a request one worker sent
reaches it through the other, and DELETE on one ends the session on both. Every message of the
session, both ways, validates against its revision."""

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
from tests._net import free_port, started, stopped

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
REVISION = "2025-11-25"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


class Worker:
    """One everything_server process on its own port, sharing the Redis."""

    def __init__(self, redis_url: str, *options: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        argv = [sys.executable, "examples/everything_server.py", "--port", str(self.port)]
        try:
            self.process = started([*argv, "--redis", redis_url, *options], self.port, cwd=ROOT)
        except AssertionError as error:  # what it said, as test_example_replicas expects it
            raise RuntimeError(f"the worker did not start: {error}") from None

    def stop(self) -> None:
        stopped(self.process)


@pytest.fixture(name="workers")
def two_workers(example_redis: str) -> Iterator[tuple[Worker, Worker]]:
    """The fixture ``workers``: two workers sharing the test Redis, stopped after."""
    a, b = Worker(example_redis), Worker(example_redis)
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


class Client:
    """A 2025-11-25 client speaking raw Streamable HTTP, to either worker; ``wire`` is the
    transcript of the session, both ways."""

    def __init__(self) -> None:
        self.http = httpx.Client(timeout=20)
        self.sid: str | None = None
        self.wire: list[str] = []

    def headers(self, **extra: str) -> dict[str, str]:
        out = dict(ACCEPT)
        if self.sid is not None:
            out["mcp-session-id"] = self.sid
            out["mcp-protocol-version"] = REVISION
        return {**out, **extra}

    def post(self, url: str, message: dict[str, Any], keep: int | None = None) -> Any:
        """POST ``message``; its JSON answer, or the events of its stream (all of them, or the
        first ``keep`` before the connection is dropped)."""
        self.wire.append(json.dumps(message))
        body = json.dumps(message).encode()
        with self.http.stream("POST", url, content=body, headers=self.headers()) as response:
            if "mcp-session-id" in response.headers:
                self.sid = response.headers["mcp-session-id"]
            kind = response.headers.get("content-type", "")
            if response.status_code == 202:
                return None
            if kind.startswith("application/json"):
                answer = json.loads(response.read())
                self.wire.append(json.dumps(answer))
                return answer
            assert kind.startswith("text/event-stream"), (response.status_code, kind)
            return self.events(response, keep)

    def get(self, url: str, last: str, keep: int | None = None) -> list[dict[str, Any]]:
        headers = self.headers(accept="text/event-stream")
        headers["last-event-id"] = last
        with self.http.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200, response.read()
            return self.events(response, keep)

    def events(self, response: httpx.Response, keep: int | None) -> list[dict[str, Any]]:
        """The events of a stream (id, data and retry of each), up to ``keep`` of them."""
        out: list[dict[str, Any]] = []
        event: dict[str, Any] = {}
        for line in response.iter_lines():
            if line:
                name, _, value = line.partition(":")
                event[name] = value.removeprefix(" ")
                continue
            if "id" in event or "data" in event:
                if event.get("data"):
                    self.wire.append(event["data"])
                out.append(event)
                if keep is not None and len(out) >= keep:
                    break  # the connection is dropped here
            event = {}
        return out

    def open(self, url: str, notify_url: str) -> None:
        answer = self.post(
            url,
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": REVISION,
                    "capabilities": {"sampling": {}},
                    "clientInfo": {"name": "two-workers", "version": "1"},
                },
            },
        )
        assert answer["result"]["protocolVersion"] == REVISION and self.sid
        assert (
            self.post(notify_url, {"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
        )


def call(rid: int, name: str, **arguments: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(e["data"]) for e in events if e.get("data")]


def resumed_elsewhere(client: Client, first: str, other: str) -> list[str]:
    """Call server-everything's logging tool (three log messages 50 ms apart, then the answer)
    through ``first``, drop the connection after the priming event and the first log message,
    and ask ``other`` for the rest with ``Last-Event-ID``: every message arrives once, in order.
    The event ids seen."""
    got_first = client.post(first, call(5, "test_tool_with_logging"), keep=2)
    assert got_first[0]["data"] == "" and "retry" in got_first[0]  # the priming event
    assert messages(got_first)[0]["params"]["data"] == "Tool execution started"
    rest = client.get(other, got_first[-1]["id"])
    got = messages(got_first) + messages(rest)
    assert [m.get("params", {}).get("data") for m in got[:3]] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert len(got) == 4 and got[3]["id"] == 5 and "result" in got[3]
    ids = [e["id"] for e in got_first + rest]
    assert len(set(ids)) == len(ids)  # nothing repeated
    return ids


def answered_elsewhere(client: Client, first: str, other: str) -> list[dict[str, Any]]:
    """Call server-everything's sampling tool through ``first``: the client reads the server's
    request on the call's stream, drops the stream, answers through ``other`` and resumes the
    stream there. The messages of the rest of the stream."""
    got_first = client.post(first, call(7, "test_sampling", prompt="hi"), keep=2)
    (asked,) = messages(got_first)
    assert asked["method"] == "sampling/createMessage"
    result = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}
    assert client.post(other, {"jsonrpc": "2.0", "id": asked["id"], "result": result}) is None
    return messages(client.get(other, got_first[-1]["id"]))


def one_session_on_two_workers(url: str, process: subprocess.Popen[bytes]) -> None:
    """Twenty calls of one session at ``url``, served by the two workers ``process`` spawned on
    one port, each on a new connection (and so any worker): every one answered, the transcript
    valid; ``process`` is stopped after, and its workers with it."""
    workers = workers_of(process.pid)
    try:
        assert len(workers) == 2
        client = Client()
        client.http = httpx.Client(timeout=20, headers={"connection": "close"})  # new each time
        client.open(url, url)
        for rid in range(1, 21):
            answer = client.post(url, call(rid, "test_simple_text"))
            assert answer["id"] == rid and "result" in answer, json.dumps(answer)
        assert list(validate_lines(client.wire, REVISION, strict=True)) == []
    finally:
        stopped(process)
    assert not [w for w in workers if Path(f"/proc/{w}").exists()]  # stopped with it


def test_a_session_opened_on_one_worker_continues_on_the_other(workers: Any) -> None:
    a, b = workers
    client = Client()
    client.open(a.url, b.url)  # initialized told to the other worker
    listed = client.post(b.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert "test_reconnection" in {t["name"] for t in listed["result"]["tools"]}
    for rid, url in ((2, a.url), (3, b.url)):
        answer = client.post(url, call(rid, "test_simple_text"))
        assert answer["result"]["content"][0]["text"].startswith("This is a simple text")
    assert list(validate_lines(client.wire, REVISION, strict=True)) == []


def test_a_stream_dropped_on_one_worker_resumes_on_the_other(workers: Any) -> None:
    a, b = workers
    client = Client()
    client.open(a.url, a.url)
    # Three log messages 50 ms apart, then the answer: the connection is dropped after the
    # priming event and the first log message, and the rest is asked of the other worker.
    ids = resumed_elsewhere(client, a.url, b.url)
    assert all(i.split(":")[0] == ids[0].split(":")[0] for i in ids)  # ids name their stream

    # The server closes a stream for polling on one worker; the answer comes from the other.
    polled = client.post(a.url, call(6, "test_reconnection"))
    assert [e.get("data") for e in polled] == [""] and polled[-1].get("retry") == "1000"
    answer = messages(client.get(b.url, polled[0]["id"]))
    assert answer[-1]["id"] == 6 and "after the stream was closed" in json.dumps(answer[-1])
    assert list(validate_lines(client.wire, REVISION, strict=True)) == []


def test_an_answer_sent_to_the_other_worker_reaches_the_one_that_asked(workers: Any) -> None:
    a, b = workers
    client = Client()
    client.open(a.url, b.url)
    # Worker a asks the client for a sampling on the call's stream; the client reads the request,
    # drops the stream, answers through worker b, and resumes the stream on b.
    rest = answered_elsewhere(client, a.url, b.url)
    assert rest == [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"content": [{"type": "text", "text": "LLM response: hello"}]},
        }
    ]
    assert list(validate_lines(client.wire, REVISION, strict=True)) == []


def test_delete_on_one_worker_ends_the_session_on_the_other(workers: Any) -> None:
    a, b = workers
    client = Client()
    client.open(a.url, b.url)
    assert client.post(a.url, {"jsonrpc": "2.0", "id": 1, "method": "ping"})["result"] == {}
    gone = client.http.delete(b.url, headers=client.headers())
    assert gone.status_code == 200
    for url in (a.url, b.url):
        after = client.http.post(
            url,
            content=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
            headers=client.headers(),
        )
        assert after.status_code == 404, after.text
        stream = client.http.get(url, headers=client.headers(accept="text/event-stream"))
        assert stream.status_code == 404
    assert client.http.delete(a.url, headers=client.headers()).status_code == 404


def workers_of(pid: int) -> list[int]:
    """The worker processes ``pid`` spawned (Linux /proc: children running spawn_main)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in command:
                found.append(int(entry.name))
    return found


def test_workers_on_one_port_serve_one_session(example_redis: str) -> None:
    server = Worker(example_redis, "--workers", "2")
    one_session_on_two_workers(server.url, server.process)


def test_workers_on_one_port_take_each_others_request_states(example_redis: str) -> None:
    """A 2026-07-28 input round answered on whichever worker the retry reaches: the workers of
    one run sign request states with one key."""
    server = Worker(example_redis, "--workers", "2")
    name = "test_input_required_result_elicitation"
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    headers = {
        **ACCEPT,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
        "connection": "close",  # a new connection, and so any worker, for each request
    }

    def post(params: dict[str, Any]) -> Any:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        response = httpx.post(server.url, json=message, headers=headers, timeout=20)
        return response.json()["result"]

    try:
        for _ in range(8):
            asked = post({"name": name, "arguments": {}, "_meta": meta})
            assert asked["resultType"] == "input_required"
            answers = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
            retry = {"inputResponses": answers, "requestState": asked["requestState"]}
            done = post({"name": name, "arguments": {}, "_meta": meta, **retry})
            assert done["content"][0]["text"] == "Hello, Ada!"
    finally:
        server.stop()
