"""`mcpbind bridge` between a client and a server that fail: killed mid-flight, answers that do
not fit their revision, messages that cannot be read, lines over the limit, more requests than
the bound, pipes closed. Every request either side sent gets an answer; nothing crashes or
waits forever (docs/bridge.md, "Limits and failures").

The bridge runs as the `mcpbind bridge` process; behind it a real child process:
``tests/fixtures/failing_server.py`` (a JSON Lines server that fails as told) or the example
server ``examples/stdio_server.py``. The client is a ``ClientSession`` writing to the bridge's
stdin, or raw lines where the client itself is the one at fault.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev
from mcpbind.errors import INTERNAL_ERROR, INVALID_REQUEST

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
FAILING = [sys.executable, str(ROOT / "tests" / "fixtures" / "failing_server.py")]
EXAMPLE = [sys.executable, str(ROOT / "examples" / "stdio_server.py")]
OVER_64_MIB = 64 * 1024 * 1024 + 1024  # what killed the bridge's readline
# The documented codes and defaults (docs/bridge.md, "Limits and failures").
CONNECTION_CLOSED = -32000
MAX_IN_FLIGHT = 1024
MAX_LINE = 16 * 1024 * 1024
WAIT = 60.0  # seconds before a test gives up on an answer (a hang guard, not a timing check)


class Process:
    """A child process spoken to in lines: its stdout lines in a queue, its stderr kept."""

    def __init__(self, argv: list[str], *, reader: bool = True) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.errors: list[bytes] = []
        self._reading = reader
        if reader:  # else its output is read by line() (and may be closed by the test)
            threading.Thread(target=self._read, daemon=True).start()
        self._stderr = threading.Thread(target=self._read_errors, daemon=True)
        self._stderr.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errors.append(line)

    @property
    def stderr(self) -> str:
        return b"".join(self.errors).decode(errors="replace")

    def write(self, *lines: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(line + b"\n" for line in lines))
        self.proc.stdin.flush()

    def line(self) -> bytes:
        """The next line it writes (b"" once it closed its output)."""
        if self.lines.empty() and not self._reading:
            assert self.proc.stdout is not None
            return self.proc.stdout.readline()
        try:
            return self.lines.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"no answer; its stderr:\n{self.stderr[-3000:]}") from None

    def close(self) -> int:
        """Close its input; its exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.wait()

    def wait(self) -> int:
        """Its exit status, once it exits by itself."""
        try:
            status = self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"it did not exit; its stderr:\n{self.stderr}") from None
        self._stderr.join(WAIT)
        return status


class Client:
    """A ``ClientSession`` (2025-11-25, with roots) in front of ``mcpbind bridge OPTIONS --
    SERVER``; ``answers`` collects the answers to its requests by id."""

    def __init__(
        self,
        *server: str,
        options: tuple[str, ...] = (),
        revision: str = "2025-11-25",
        reader: bool = True,
    ) -> None:
        self.bridge = Process([MCPBIND, "bridge", *options, "--", *server], reader=reader)
        self.session = mcpbind.ClientSession(
            revision, capabilities={"roots": {}}, info={"name": "hostile", "version": "1"}
        )
        self.answers: dict[Any, Any] = {}
        self.requests: list[ev.RequestReceived] = []
        self.session.connect()
        self.send()
        self.until(lambda: self.session.state == "ready")

    def send(self) -> None:
        self.bridge.write(*self.session.data_to_send())

    def call(self, name: str, **arguments: Any) -> Any:
        return self.session.request("tools/call", {"name": name, "arguments": arguments})

    def until(self, done: Any) -> None:
        """Read the bridge's output into the session until ``done()``."""
        while not done():
            line = self.bridge.line()
            assert line, f"the bridge closed its output; its stderr:\n{self.bridge.stderr}"
            self.take(line)

    def take(self, line: bytes) -> None:
        for e in self.session.receive(line):
            if isinstance(e, (ev.ResultReceived, ev.ErrorReceived)):
                self.answers[e.id] = e
            elif isinstance(e, ev.RequestReceived):
                self.requests.append(e)
            elif isinstance(e, ev.NegotiationFailed):
                raise AssertionError(e.error.message)

    def answer(self, id: Any) -> Any:
        self.until(lambda: id in self.answers)
        return self.answers[id]

    def rest(self) -> None:
        """Read everything the bridge still writes, until it closes its output."""
        while line := self.bridge.line():
            self.take(line)


def raw(message: dict[str, Any]) -> bytes:
    return msgspec.json.encode(message)


def text_of(answer: Any) -> str:
    assert isinstance(answer, ev.ResultReceived), answer
    return str(answer.result.content[0].text)


# -- 10: the server dies with requests in flight ------------------------------------------------


def test_server_killed_with_1000_requests_in_flight_answers_every_one() -> None:
    client = Client(*FAILING, "die", "10")
    ids = [client.call("echo", n=n) for n in range(1000)]
    client.send()  # the server exits at the 10th, with the rest in its pipe or not yet read
    client.until(lambda: all(i in client.answers for i in ids))
    errors = [client.answers[i] for i in ids]
    assert all(isinstance(e, ev.ErrorReceived) for e in errors), errors[:3]
    assert {e.code for e in errors} == {CONNECTION_CLOSED}
    assert {e.message for e in errors} == {"Connection closed: the server exited (status 3)"}
    assert client.bridge.close() == 3
    assert "the server exited (status 3)" in client.bridge.stderr


def test_a_server_that_closes_its_input_fails_the_requests_sent_to_it() -> None:
    client = Client(*FAILING, "close-input")
    first = client.call("echo")
    client.send()
    second = client.call("echo")  # written to a pipe nobody reads any more
    client.send()
    client.until(lambda: second in client.answers)
    assert client.answers[second].code == CONNECTION_CLOSED
    assert "the server stopped reading its input" in client.answers[second].message
    assert client.answers[first].code == CONNECTION_CLOSED
    client.bridge.close()  # the bridge stops the server (still alive) and exits


def test_a_server_that_closes_its_output_fails_its_pending_requests() -> None:
    client = Client(*FAILING, "close-output")
    request = client.call("echo")
    client.send()
    assert client.answer(request).message == "Connection closed: the server closed its output"
    client.bridge.close()


def test_a_client_that_stops_reading_ends_the_server_requests_it_was_sent() -> None:
    client = Client(*FAILING, "ask", "1", reader=False)
    assert client.bridge.proc.stdout is not None
    client.call("asks")
    client.send()
    client.until(lambda: client.requests)  # the server's roots/list reached the client...
    client.bridge.proc.stdout.close()  # ... which stops reading without answering it
    client.session.request("ping")  # the bridge's answer to this one finds the client gone
    client.send()
    assert client.bridge.wait() == 0  # it ends by itself, the client's input still open
    assert (
        'got: {"jsonrpc":"2.0","id":"r0","error":{"code":-32000,'
        '"message":"Connection closed: the client closed its output"}}'
    ) in client.bridge.stderr


# -- 11: answers that do not fit their revision -------------------------------------------------


def test_an_invalid_result_from_the_server_is_answered_with_an_error_at_once() -> None:
    client = Client(*FAILING, "bad-result")
    request = client.call("echo")
    client.send()
    error = client.answer(request)  # at once: the connection stays open
    assert isinstance(error, ev.ErrorReceived) and error.code == INTERNAL_ERROR
    assert "the server's answer to 'tools/call' cannot be passed on" in error.message
    assert "(MCP 2025-06-18)" in error.message and "`$.result.content`" in error.message
    ping = client.session.request("ping")
    client.send()
    assert isinstance(client.answer(ping), ev.ResultReceived)  # the bridge goes on
    client.bridge.close()


def test_an_invalid_roots_answer_from_the_client_is_answered_with_an_error_at_once() -> None:
    client = Client(*FAILING, "ask", "1")
    request = client.call("asks")
    client.send()
    client.until(lambda: client.requests)
    (roots,) = client.requests
    assert roots.method == "roots/list"
    client.bridge.write(raw({"jsonrpc": "2.0", "id": roots.id, "result": {"roots": 5}}))
    (got,) = json.loads(text_of(client.answer(request)))  # what the server was answered
    assert got["id"] == "r0" and got["error"]["code"] == INTERNAL_ERROR
    message = got["error"]["message"]
    assert "the client's answer to 'roots/list' cannot be passed on" in message
    assert "(MCP 2025-11-25)" in message and "`$.result.roots`" in message
    client.bridge.close()


# -- 12: a request the bridge cannot read ------------------------------------------------------


@pytest.mark.parametrize("first", [True, False], ids=["before-discover", "after-discover"])
def test_a_request_whose_method_is_not_a_string_is_answered_with_32600(first: bool) -> None:
    bridge = Process([MCPBIND, "bridge", "--", *EXAMPLE])
    session = mcpbind.ClientSession("2026-07-28", info={"name": "hostile", "version": "1"})
    if not first:
        session.connect()
        bridge.write(*session.data_to_send())
        session.receive(bridge.line())
        assert session.state == "ready"
    bridge.write(raw({"jsonrpc": "2.0", "id": 77, "method": {}}))
    answer = msgspec.json.decode(bridge.line())
    assert answer["id"] == 77 and answer["error"]["code"] == INVALID_REQUEST
    # ... and the connection goes on
    if first:
        session.connect()
        bridge.write(*session.data_to_send())
        session.receive(bridge.line())
    request = session.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    bridge.write(*session.data_to_send())
    (result,) = session.receive(bridge.line())
    assert isinstance(result, ev.ResultReceived) and result.id == request
    assert bridge.close() == 0
    assert "Traceback" not in bridge.stderr


# -- 13: lines over the limit ------------------------------------------------------------------


def test_a_client_line_over_the_limit_is_answered_and_the_bridge_goes_on() -> None:
    client = Client(*EXAMPLE)
    big = raw({"jsonrpc": "2.0", "id": "big", "method": "tools/call", "params": {"name": "echo"}})
    big = big[:-2] + b', "arguments": {"message": "' + b"x" * OVER_64_MIB + b'"}}}'
    client.bridge.write(big)
    answer = msgspec.json.decode(client.bridge.line())
    assert answer["id"] == "big" and answer["error"]["code"] == INVALID_REQUEST
    assert answer["error"]["message"] == (
        f"Invalid Request: a message of {len(big)} bytes exceeds the limit of " f"{MAX_LINE} bytes"
    )
    request = client.call("echo", message="after")
    client.send()
    assert text_of(client.answer(request)) == "after"
    assert client.bridge.close() == 0
    assert "Traceback" not in client.bridge.stderr


def test_a_server_answer_over_the_limit_fails_only_its_request() -> None:
    client = Client(*FAILING, "long-answer", str(OVER_64_MIB))
    first = client.call("echo")
    client.send()
    error = client.answer(first)
    assert isinstance(error, ev.ErrorReceived) and error.code == INTERNAL_ERROR
    assert "the server's answer to 'tools/call' cannot be passed on: a message of" in error.message
    assert f"exceeds the limit of {MAX_LINE} bytes" in error.message
    ping = client.session.request("ping")
    client.send()
    assert isinstance(client.answer(ping), ev.ResultReceived)
    client.bridge.close()
    assert "Traceback" not in client.bridge.stderr


def test_a_server_answer_over_the_limit_with_its_id_last_fails_only_its_request() -> None:
    client = Client(*FAILING, "long-answer-last", "2000", options=("--max-line-bytes", "1000"))
    first = client.call("echo")
    client.send()
    error = client.answer(first)
    assert error.code == INTERNAL_ERROR
    assert re.fullmatch(
        r"Internal error: the server's answer to 'tools/call' cannot be passed on: "
        r"a message of 20\d\d bytes exceeds the limit of 1000 bytes",
        error.message,
    )
    client.bridge.close()
    cancelled = [line for line in client.bridge.errors if b"notifications/cancelled" in line]
    assert len(cancelled) == 1  # the server is told its answer was dropped


def test_a_server_line_over_the_limit_that_is_no_message_ends_the_connection() -> None:
    client = Client(*FAILING, "long-garbage", "2000", options=("--max-line-bytes", "1000"))
    first = client.call("echo")
    client.send()
    error = client.answer(first)
    assert error.code == CONNECTION_CLOSED
    assert error.message == (
        "Connection closed: the server sent a message that could not be read: "
        "a message of 2002 bytes exceeds the limit of 1000 bytes"
    )
    client.bridge.close()


def test_a_server_request_over_the_limit_is_answered_with_32600() -> None:
    client = Client(*FAILING, "long-request", "2000", options=("--max-line-bytes", "1000"))
    request = client.call("echo")
    client.send()
    got = json.loads(text_of(client.answer(request)))
    assert got["id"] == "big" and got["error"]["code"] == INVALID_REQUEST
    assert "exceeds the limit of 1000 bytes" in got["error"]["message"]
    assert not client.requests  # it never reached the client
    client.bridge.close()


def test_a_flood_of_lines_over_the_limit_is_logged_once_and_then_counted() -> None:
    """2,000 notifications over the limit from the client: the first drop is said, the others
    counted in one line at the end (the stderr had a line each)."""
    client = Client(*EXAMPLE, options=("--max-line-bytes", "4096"))
    big = raw({"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {}})
    big = big[:-2] + b'"_meta": {"x": "' + b"x" * 5000 + b'"}}}'
    for _ in range(4):
        client.bridge.write(*[big] * 500)
    request = client.call("echo", message="after")
    client.send()
    assert text_of(client.answer(request)) == "after"
    assert client.bridge.close() == 0
    said = [line for line in client.bridge.stderr.splitlines() if "was dropped" in line]
    first = (
        f"mcpbind bridge: client: a notification was dropped: a message of {len(big)} bytes "
        "exceeds the limit of 4096 bytes"
    )
    assert said[0] == first
    assert len(said) == 2 and said[1].startswith(f"{first} (and 1,999 more like it in the last ")


def test_the_example_server_answers_a_line_over_its_limit_and_goes_on() -> None:
    server = Process(EXAMPLE)
    client = mcpbind.ClientSession("2025-11-25", info={"name": "hostile", "version": "1"})
    client.connect()
    server.write(*client.data_to_send())
    client.receive(server.line())
    server.write(*client.data_to_send())
    big = b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"x": "'
    server.write(big + b"y" * (50 * 1024 * 1024) + b'"}}')
    answer = msgspec.json.decode(server.line())
    assert answer["id"] == 9 and answer["error"]["code"] == INVALID_REQUEST
    assert "exceeds the limit of" in answer["error"]["message"]
    server.write(raw({"jsonrpc": "2.0", "id": 10, "method": {}}))
    answer = msgspec.json.decode(server.line())
    assert answer["id"] == 10 and answer["error"]["code"] == INVALID_REQUEST
    request = client.request("tools/call", {"name": "echo", "arguments": {"message": "ok"}})
    server.write(*client.data_to_send())
    (result,) = client.receive(server.line())
    assert isinstance(result, ev.ResultReceived) and result.id == request
    assert result.result.content[0].text == "ok"
    assert server.close() == 0
    assert "Traceback" not in server.stderr


# -- the bound on requests in flight -----------------------------------------------------------


def test_client_requests_past_the_bound_are_answered_at_once() -> None:
    client = Client(*FAILING, "silent")
    ids = [client.call("echo", n=n) for n in range(MAX_IN_FLIGHT + 10)]
    client.send()
    over = ids[MAX_IN_FLIGHT:]
    client.until(lambda: all(i in client.answers for i in over))
    assert {client.answers[i].code for i in over} == {INTERNAL_ERROR}
    assert client.answers[over[0]].message == (
        f"Server busy: {MAX_IN_FLIGHT} requests from the client already await an answer from "
        "the server (the bridge's max_in_flight)"
    )
    assert not any(i in client.answers for i in ids[:MAX_IN_FLIGHT])
    assert client.bridge.close() == 0
    client.rest()
    assert {client.answers[i].code for i in ids[:MAX_IN_FLIGHT]} == {CONNECTION_CLOSED}


def test_server_requests_past_the_bound_are_answered_at_once() -> None:
    client = Client(*FAILING, "ask", str(MAX_IN_FLIGHT + 5))
    request = client.call("asks")
    client.send()
    client.until(lambda: len(client.requests) == MAX_IN_FLIGHT)
    client.session.respond(client.requests[0].id, {"roots": []})  # the server's r0
    client.send()
    got = json.loads(text_of(client.answer(request)))
    refused = [m for m in got if "error" in m]
    assert len(refused) == 5 and {m["error"]["code"] for m in refused} == {INTERNAL_ERROR}
    assert got[-1] == {"jsonrpc": "2.0", "id": "r0", "result": {"roots": []}}
    client.bridge.close()


def test_the_command_line_takes_the_limits() -> None:
    client = Client(*FAILING, "silent", options=("--max-in-flight", "2"))
    ids = [client.call("echo") for _ in range(3)]
    client.send()
    assert client.answer(ids[2]).code == INTERNAL_ERROR
    assert client.bridge.close() == 0


# -- the bounded line reader (mcpbind.transports.stdio) -----------------------------------------


def read_all(chunks: list[bytes], max_line: int, limit: int = 64) -> list[Any]:
    """Every item ``LineReader`` gives for ``chunks`` (a reader reading ``limit`` at once)."""
    from mcpbind.transports.stdio import LineReader

    async def main() -> list[Any]:
        reader = asyncio.StreamReader(limit=limit)
        for chunk in chunks:
            reader.feed_data(chunk)
        reader.feed_eof()
        lines = LineReader(reader, max_line)
        out = []
        while (line := await lines.read()) is not None:
            out.append(line)
        return out

    return asyncio.run(main())


def test_lines_up_to_the_limit_come_whole_and_longer_ones_are_dropped() -> None:
    from mcpbind.transports.stdio import Envelope, Overlong

    at_limit = b'{"id":1,"method":"a","params":"' + b"x" * 267 + b'"}'
    assert len(at_limit) == 300
    over = b'{"jsonrpc":"2.0","id":"k","method":"b","params":{"v":"' + b"y" * 500 + b'"}}'
    answer = b'{"result":{"v":"' + b"z" * 500 + b'"},"jsonrpc":"2.0","id":7}'
    data = at_limit + b"\r\n\n" + over + b"\n" + answer + b"\n" + b"x" * 301 + b"\nlast"
    for chunk in (len(data), 7):  # at once, and a few bytes at a time
        got = read_all([data[i : i + chunk] for i in range(0, len(data), chunk)], 300)
        assert got == [
            at_limit,
            b"",
            Overlong(len(over), Envelope("request", "k")),
            Overlong(len(answer), Envelope("response", 7)),
            Overlong(301, Envelope("invalid", None)),
            b"last",
        ]


def test_a_dropped_line_is_never_held_whole() -> None:
    import tracemalloc

    from mcpbind.transports.stdio import LineReader, Overlong

    async def main() -> tuple[Any, bytes | Overlong | None, int]:
        reader = asyncio.StreamReader(limit=1 << 20)
        lines = LineReader(reader, 1 << 20)
        chunk = b"x" * (1 << 20)

        async def feed() -> None:
            for _ in range(64):
                reader.feed_data(chunk)
                await asyncio.sleep(0)
            reader.feed_data(b'\n{"id":2}\n')
            reader.feed_eof()

        tracemalloc.start()
        feeding = asyncio.ensure_future(feed())
        dropped = await lines.read()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        await feeding
        return dropped, await lines.read(), peak

    dropped, after, peak = asyncio.run(main())
    assert dropped is not None and not isinstance(dropped, bytes) and dropped.size == 64 << 20
    assert after == b'{"id":2}'
    assert peak < 8 << 20  # 64 MiB went through; a few MiB at most were held at once


def test_the_envelope_of_a_message_says_how_to_answer_it() -> None:
    from mcpbind.transports.stdio import Envelope, envelope

    assert envelope(b'{"jsonrpc":"2.0","id":77,"method":{}}') == Envelope("invalid", 77)
    assert envelope(b'{"id":[1],"method":"x"}') == Envelope("invalid", None)
    assert envelope(b'{"id":"a","result":{}}') == Envelope("response", "a")
    assert envelope(b'{"method":"notifications/x"}') == Envelope("notification", None)
    assert envelope(b"[1, 2]") == Envelope("invalid", None)
    assert envelope(b"{not json") == Envelope("invalid", None)
    answer = Envelope("invalid", 77).answer(INVALID_REQUEST, "Invalid Request")
    assert msgspec.json.decode(answer or b"") == {
        "jsonrpc": "2.0",
        "id": 77,
        "error": {"code": INVALID_REQUEST, "message": "Invalid Request"},
    }
    assert Envelope("notification", None).answer(INVALID_REQUEST, "x") is None
    assert Envelope("response", 3).answer(INVALID_REQUEST, "x") is None
