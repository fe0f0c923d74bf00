"""`mcpbind bridge` between real peers (`make interop`): each pair runs the bridge as a process
(`mcpbind bridge ... -- CMD`) with a real server behind it and a real client in front.

The client in front of server-everything is the example client (examples/stdio_client.py,
``example_client``); ``session_client`` drives a bare ``ClientSession`` the same way, a check that
what the example adds (its asyncio plumbing) changes nothing.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from stdio_client import StdioClient  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
EVERYTHING_NEWEST = "2025-11-25"  # the newest revision server-everything speaks


def bridge_argv(*options: str, server: list[str]) -> list[str]:
    return [MCPBIND, "bridge", *options, "--", *server]


def need_everything() -> None:
    if shutil.which("node") is None or not driver.EVERYTHING.exists():
        pytest.fail(
            "server-everything is not installed: run `make interop` (npm ci in tests/interop)"
        )


class Seen(msgspec.Struct):
    """What a client in front of the bridge saw."""

    revision: str | None = None
    server_revision_hint: str | None = None
    results: dict[str, Any] = {}
    errors: dict[str, Any] = {}
    rejected: list[str] = []
    server_requests: list[str] = []
    stderr: str = ""
    returncode: int | None = None


class _Pipe:
    """The bridge process and a thread reading its stdout lines."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send(self, data: list[bytes]) -> None:
        assert self.proc.stdin is not None
        for one in data:
            self.proc.stdin.write(one + b"\n")
        self.proc.stdin.flush()

    def close(self) -> tuple[int, str]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the bridge did not exit after its input closed") from None
        time.sleep(0.1)
        return code, b"".join(self.stderr).decode(errors="replace")


ANSWERS = {
    "roots/list": {"roots": [{"uri": "file:///tmp/mcpbind", "name": "tmp"}]},
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "sampled through the bridge"},
        "model": "mcpbind-test",
    },
    "elicitation/create": {"action": "decline"},
}


def session_client(revision: str, argv: list[str]) -> Seen:
    """A ClientSession at ``revision`` talking to the bridge ``argv`` over stdio: handshake,
    tools (each called), prompts, resources; answers the server's requests."""
    seen = Seen()
    caps: dict[str, Any] = {"roots": {"listChanged": True}, "sampling": {}}
    if "elicitation/create" in mcpbind.bindings(revision).METHODS:
        caps["elicitation"] = {}
    client = mcpbind.ClientSession(
        revision, capabilities=caps, info={"name": "bridge-test", "version": "1"}
    )
    pipe = _Pipe(argv)
    waiting: dict[Any, str] = {}

    def pump(until: Any, seconds: float = 20.0) -> None:
        deadline = time.monotonic() + seconds
        pipe.send(client.data_to_send())
        while not until():
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; stderr: {b''.join(pipe.stderr).decode()}"
            try:
                line = pipe.lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line, f"the bridge closed its output; stderr: {b''.join(pipe.stderr).decode()}"
            for e in client.receive(line):
                if isinstance(e, ev.Negotiated):
                    seen.revision = e.revision
                elif isinstance(e, ev.NegotiationFailed):
                    raise AssertionError(e.error.message)
                elif isinstance(e, ev.ResultReceived):
                    seen.results[waiting.pop(e.id)] = e.result
                elif isinstance(e, ev.ErrorReceived) and e.id in waiting:
                    seen.errors[waiting.pop(e.id)] = (e.code, e.message)
                elif isinstance(e, ev.MessageRejected):
                    seen.rejected.append(e.error.message)
                elif isinstance(e, ev.RequestReceived):
                    seen.server_requests.append(e.method)
                    client.respond(e.id, ANSWERS[e.method])
            pipe.send(client.data_to_send())

    def call(name: str, method: str, params: Any = None) -> None:
        waiting[client.request(method, params)] = name
        pump(lambda: name in seen.results or name in seen.errors)

    try:
        client.connect()
        pump(lambda: client.state != "negotiating")
        assert client.state == "ready"
        call("tools/list", "tools/list")
        for tool in seen.results["tools/list"].tools:
            call(
                f"tool {tool.name}",
                "tools/call",
                {"name": tool.name, "arguments": driver.arguments(tool)},
            )
        call("prompts/list", "prompts/list")
        for prompt in seen.results["prompts/list"].prompts:
            args = {a.name: "mcpbind" for a in (prompt.arguments or []) if a.required}
            call(f"prompt {prompt.name}", "prompts/get", {"name": prompt.name, "arguments": args})
        call("resources/list", "resources/list")
        for resource in seen.results["resources/list"].resources[:3]:
            call(f"read {resource.uri}", "resources/read", {"uri": resource.uri})
    finally:
        seen.returncode, seen.stderr = pipe.close()
    return seen


def example_client(revision: str, argv: list[str]) -> Seen:
    """The example client at ``revision`` in front of the bridge ``argv``: the same calls as
    ``session_client``; the bridge's stderr goes to a file for the loss lines."""
    seen = Seen()
    caps: dict[str, Any] = {"roots": {"listChanged": True}, "sampling": {}}
    if "elicitation/create" in mcpbind.bindings(revision).METHODS:
        caps["elicitation"] = {}
    session = mcpbind.ClientSession(
        revision, capabilities=caps, info={"name": "bridge-example", "version": "1"}
    )

    def on_request(request: ev.RequestReceived) -> Any:
        seen.server_requests.append(request.method)
        return ANSWERS[request.method]

    async def run(errors: Path) -> None:
        client = StdioClient(session, on_request)
        wrapped = ["sh", "-c", 'exec "$@" 2>"$0"', str(errors), *argv]
        opened = await client.start(*wrapped)
        assert isinstance(opened, ev.Negotiated), opened
        seen.revision = opened.revision

        async def call(name: str, method: str, params: Any = None) -> None:
            event = await client.request(method, params)
            # A request of the server's (roots/list, ...) reaching a 2026-07-28 client while
            # this call is in flight comes back as the call's input round: answered, retried.
            for _ in range(4):
                if not isinstance(event, ev.InputRequired):
                    break
                asked = event.asked(seen.revision or "")
                event = await client.answer(event, {k: on_request(a) for k, a in asked.items()})
            if isinstance(event, ev.ResultReceived):
                seen.results[name] = event.result
            elif isinstance(event, ev.ErrorReceived):
                seen.errors[name] = (event.code, event.message)
            else:
                raise AssertionError(f"{name}: {event!r}")

        try:
            await call("tools/list", "tools/list")
            for tool in seen.results["tools/list"].tools:
                args = {"name": tool.name, "arguments": driver.arguments(tool)}
                await call(f"tool {tool.name}", "tools/call", args)
            await call("prompts/list", "prompts/list")
            for prompt in seen.results["prompts/list"].prompts:
                args = {a.name: "mcpbind" for a in (prompt.arguments or []) if a.required}
                await call(
                    f"prompt {prompt.name}", "prompts/get", {"name": prompt.name, "arguments": args}
                )
            await call("resources/list", "resources/list")
            for resource in seen.results["resources/list"].resources[:3]:
                await call(f"read {resource.uri}", "resources/read", {"uri": resource.uri})
        finally:
            await client.close()
            seen.returncode = client.proc.returncode
        seen.rejected = [
            e.error.message for e in client.events if isinstance(e, ev.MessageRejected)
        ]

    import asyncio
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        errors = Path(tmp) / "bridge.err"
        try:
            asyncio.run(run(errors))
        finally:
            seen.stderr = errors.read_text() if errors.exists() else ""
    return seen


# The client in front of server-everything: the example client of the sessions.
CLIENTS = {"example": example_client, "session": session_client}


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-06-18"])
def test_older_client_in_front_of_server_everything(revision: str) -> None:
    need_everything()
    seen = CLIENTS["example"](
        revision,
        bridge_argv(
            "--client-revision", revision, server=["node", str(driver.EVERYTHING), "stdio"]
        ),
    )
    assert seen.revision == revision
    assert seen.returncode == 0, seen.stderr
    assert not seen.rejected, seen.rejected  # every message reached the client in its revision
    assert len(seen.results) >= 10, sorted(seen.errors)
    assert "roots/list" in seen.server_requests
    links = [line for line in seen.stderr.splitlines() if "ResourceLink replaced" in line]
    blocks = [
        c
        for name, r in seen.results.items()
        if name.startswith("tool ")
        for c in getattr(r, "content", [])
    ]
    if "ResourceLink" in mcpbind.bindings(revision).DEFINITIONS:
        assert not links, links
        assert any(type(c).__name__ == "ResourceLink" for c in blocks)
    else:  # the resource_link case: a text block holding the URI, logged with its JSON path
        assert links and all("$.content[" in line for line in links), seen.stderr
        uris = [c.text for c in blocks if type(c).__name__ == "TextContent" and "://" in c.text]
        assert uris, "no resource link arrived as a text block holding its URI"


def test_2026_client_in_front_of_server_everything() -> None:
    need_everything()
    seen = CLIENTS["example"](
        "2026-07-28",
        bridge_argv(
            "--client-revision", "2026-07-28", server=["node", str(driver.EVERYTHING), "stdio"]
        ),
    )
    assert seen.revision == "2026-07-28"
    assert seen.returncode == 0, seen.stderr
    assert not seen.rejected, seen.rejected
    assert len(seen.results) >= 10, sorted(seen.errors)


def test_official_client_in_front_of_a_2026_server() -> None:
    pytest.importorskip(
        "mcp.client.stdio", reason="the pinned `mcp` package (dev extras) is needed"
    )
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    argv = bridge_argv(
        "--server-revision", "2026-07-28", server=[sys.executable, str(driver.SERVER_2026)]
    )
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"mcpbind-bridge-{os.getpid()}.log"

    async def main() -> dict[str, Any]:
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        with log.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                init = await s.initialize()
                tools = await s.list_tools()
                added = await s.call_tool("add", {"a": 2, "b": 3})
                prompt = await s.get_prompt("greet", {"name": "bridge"})
                read = await s.read_resource("mcpbind://static/readme")
                return {"init": init, "tools": tools, "add": added, "prompt": prompt, "read": read}

    got = anyio.run(main)
    assert got["init"].protocol_version == "2025-11-25"  # the client's own revision
    assert got["init"].server_info.name == "mcpbind-interop-2026"
    assert {t.name for t in got["tools"].tools} >= {"add", "echo"}
    assert got["add"].content[0].text == "5" and not got["add"].is_error
    assert got["prompt"].messages[0].content.text == "Hello, bridge!"
    assert got["read"].contents[0].text == "mcpbind interop resource"
    stderr = log.read_text()
    assert "cacheScope" in stderr and "$.cacheScope" in stderr  # 2026-07-28's hints, logged
    log.unlink()


def test_official_2026_client_answers_server_everythings_requests_through_retries(
    tmp_path: Path,
) -> None:
    """server-everything (2025-11-25) asks for sampling and elicitation with requests of its own;
    a 2026-07-28 client has no such methods: over stdio it gets each as an input-required result
    of its tools/call and answers through its retry, as through the HTTP front. Every line the
    client receives validates against 2026-07-28."""
    need_everything()
    pytest.importorskip("mcp.client", reason="the pinned `mcp` package (dev extras) is needed")
    import anyio
    from mcp import Client, types
    from mcp.client.stdio import StdioServerParameters

    from mcpbind.validate import validate_lines

    seen = tmp_path / "session.jsonl"
    # The session is written down on its way (bridge_tap.py), to be validated; stderr kept.
    argv = [
        "sh",
        "-c",
        'exec "$@" 2>"$0.err"',
        str(seen),
        sys.executable,
        str(Path(__file__).resolve().parent / "bridge_tap.py"),
        str(seen),
        *bridge_argv(
            "--client-revision", "2026-07-28", server=["node", str(driver.EVERYTHING), "stdio"]
        ),
    ]
    asked: list[str] = []

    async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
        asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled through the bridge"),
            model="test-model",
        )

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        asked.append("elicitation")
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    async def main() -> dict[str, Any]:
        async with Client(
            StdioServerParameters(command=argv[0], args=argv[1:]),
            mode="2026-07-28",
            cache=None,
            sampling_callback=sampling,
            elicitation_callback=elicitation,
        ) as client:
            return {
                "version": client.protocol_version,
                "sampled": await client.call_tool(
                    "trigger-sampling-request", {"prompt": "hello", "maxTokens": 5}
                ),
                "elicited": await client.call_tool("trigger-elicitation-request", {}),
                "echo": await client.call_tool("echo", {"message": "after the rounds"}),
            }

    found = anyio.run(main)
    err = Path(f"{seen}.err")
    stderr = err.read_text() if err.exists() else ""
    assert found["version"] == "2026-07-28"
    assert not found["sampled"].is_error, (found["sampled"], stderr)
    assert "sampled through the bridge" in found["sampled"].content[0].text
    assert not found["elicited"].is_error and "Ada" in str(found["elicited"].content), stderr
    assert found["echo"].content[0].text == "Echo: after the rounds"
    assert asked == ["sampling", "elicitation"]
    lines = [line for line in seen.read_text().splitlines() if line.strip()]
    assert sum('"resultType":"input_required"' in line for line in lines) == 2
    assert [str(f) for f in validate_lines(lines, "2026-07-28", strict=True)] == []


def test_an_input_round_the_2026_client_never_retries_ends_after_input_timeout() -> None:
    """`--input-timeout` bounds the stdio front's input rounds: server-everything's elicitation,
    asked of a 2026-07-28 client that never retries, is answered with an error after it, and
    the tool call is cancelled on the server (said on stderr)."""
    need_everything()
    client = mcpbind.ClientSession(
        "2026-07-28", capabilities={"elicitation": {}}, info={"name": "t", "version": "1"}
    )
    argv = bridge_argv(
        "--client-revision",
        "2026-07-28",
        "--input-timeout",
        "0.2",
        server=["node", str(driver.EVERYTHING), "stdio"],
    )
    pipe = _Pipe(argv)
    asked: list[Any] = []
    try:
        deadline = time.monotonic() + 30
        client.connect()
        pipe.send(client.data_to_send())
        while client.state != "ready":
            assert time.monotonic() < deadline and client.state != "failed"
            client.receive(pipe.lines.get(timeout=30))
        rid = client.request("tools/call", {"name": "trigger-elicitation-request", "arguments": {}})
        pipe.send(client.data_to_send())
        while not asked:
            assert time.monotonic() < deadline, b"".join(pipe.stderr).decode()
            line = pipe.lines.get(timeout=30)
            assert line, b"".join(pipe.stderr).decode()
            asked += [e for e in client.receive(line) if isinstance(e, ev.InputRequired)]
        assert asked[0].id == rid
        while "input_timeout (0.2 s)" not in b"".join(pipe.stderr).decode():
            assert time.monotonic() < deadline, b"".join(pipe.stderr).decode()
            time.sleep(0.05)
    finally:
        code, stderr = pipe.close()
    assert code == 0, stderr
    assert "'tools/call' cancelled: the client did not retry within input_timeout (0.2 s)" in stderr
