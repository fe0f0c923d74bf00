"""Drive real MCP servers over stdio with nothing but mcpbind's Codec on the client side.

Peers:
- ``@modelcontextprotocol/server-everything`` (npm, pinned in package.json / package-lock.json,
  installed by ``make interop``) for 2024-11-05, 2025-03-26, 2025-06-18 and 2025-11-25;
- ``server_2026.py``, a small server on the official ``mcp`` package (pinned in pyproject's dev
  extras), for 2026-07-28.

Every line a server writes is decoded by ``Codec.decode`` and checked to be of its precise
generated class; the transcript (both directions) is written to a JSON Lines file per revision.

    python tests/interop/driver.py [--out DIR] [REVISION ...]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

import mcpbind
from mcpbind import Codec, ErrorResponse, Request, Response

HERE = Path(__file__).resolve().parent
EVERYTHING = (
    HERE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
SERVER_2026 = HERE / "server_2026.py"
EVERYTHING_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_REVISIONS = ("2026-07-28",)

# Argument values for tools whose defaults would be slow or reach the network.
TOOL_ARGUMENTS: dict[str, dict[str, Any]] = {
    "trigger-long-running-operation": {"duration": 0.2, "steps": 2},
    "gzip-file-as-resource": {"name": "hello.txt.gz", "data": "data:text/plain;base64,aGVsbG8="},
    "simulate-research-query": {"topic": "interop", "ambiguous": False},
}


class PeerError(AssertionError):
    pass


class Session:
    """One stdio session: a server process, a client-side Codec, a transcript."""

    def __init__(self, argv: list[str], revision: str, timeout: float = 30.0) -> None:
        self.revision = revision
        self.codec = Codec(revision, "client")
        self.M = self.codec.module
        self.timeout = timeout
        self.ids = itertools.count(1)
        self.transcript: list[dict[str, Any]] = []
        self.received: list[Any] = []  # every decoded message from the server
        self.server_requests: list[str] = []
        self.notifications: list[str] = []
        self.capabilities: dict[str, Any] = {}
        self.violations: list[mcpbind.ProtocolError] = []
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=HERE,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self._lines.put(line.rstrip(b"\r\n"))
        self._lines.put(None)

    def close(self) -> None:
        if self.proc.stdin:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    # -- messages -------------------------------------------------------------------------------

    def message(self, method: str, params: Any = None, id: int | None = None) -> Any:
        """The generated message of ``method`` (built from plain params), ready to encode."""
        spec = self.M.METHODS[method]
        fields = msgspec.structs.fields(spec.message)
        names = {f.encode_name for f in fields}
        obj: dict[str, Any] = {"method": method}
        if params is not None:
            obj["params"] = params
        if "jsonrpc" in names:
            obj["jsonrpc"] = "2.0"
            if spec.kind == "request":
                obj["id"] = id
        msg = mcpbind.convert(obj, spec.message)
        if spec.kind == "request" and "jsonrpc" not in names:
            return Request(id=id, message=msg)
        return msg

    def send(self, msg: Any) -> None:
        data = self.codec.encode(msg)
        self.transcript.append({"from": "client", "message": json.loads(data)})
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def params(self, params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Request params; 2026-07-28 and later carry the revision and capabilities in _meta."""
        if self.codec.facts.request_meta is not None:
            out = dict(params or {})
            out["_meta"] = self.codec.meta(
                self.client_capabilities(),
                **{
                    "io.modelcontextprotocol/clientInfo": {
                        "name": "mcpbind-interop",
                        "version": "0",
                    }
                },
            )
            return out
        return params

    def request(
        self, method: str, params: dict[str, Any] | None = None
    ) -> Response[Any] | ErrorResponse:
        id = next(self.ids)
        self.send(self.message(method, self.params(params), id))
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self.receive(deadline)
            if isinstance(msg, (Response, ErrorResponse, mcpbind.ProtocolError)) and msg.id == id:
                return msg

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send(self.message(method, params))

    def receive(self, deadline: float) -> Any:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise PeerError(f"{self.revision}: no answer from the server in time") from None
        if line is None:
            raise PeerError(f"{self.revision}: the server closed stdout")
        self.transcript.append({"from": "server", "message": json.loads(line)})
        try:
            msg = self.codec.decode(line)
        except mcpbind.ProtocolError as err:
            # The peer sent something its revision's schema does not allow: recorded, and the
            # test checks it against the known deviations of that peer.
            self.violations.append(err)
            self.transcript[-1]["violation"] = err.message
            raw = self.transcript[-1]["message"]
            if isinstance(raw, dict) and "method" in raw and err.id is not None:
                # A request we cannot accept: answer it with the codec's error response.
                self._write(self.codec.error_response(err))
            return err
        self.check_precise(msg)
        self.received.append(msg)
        self.transcript[-1]["decoded"] = describe(msg)
        self.dispatch(msg)
        return msg

    def drain(self, seconds: float) -> None:
        """Decode whatever the server sends in the next ``seconds`` (notifications, requests)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.receive(deadline)
            except PeerError:
                return

    def check_precise(self, msg: Any) -> None:
        M = self.M
        if isinstance(msg, Response):
            # The result must be of the precise class of the method; the generic Result only
            # where that method's result is the empty result.
            last = self.transcript[-1]
            answered = self._sent_method(msg.id)
            assert answered is not None, f"response to unknown id {msg.id}"
            spec = M.METHODS[answered]
            expected = mcpbind._support._runtime_classes([spec.result])
            assert isinstance(msg.result, tuple(expected)), (
                answered,
                type(msg.result),
                spec.result,
            )
            last["method"] = answered
            return
        if isinstance(msg, ErrorResponse):
            return
        inner = msg.message if isinstance(msg, Request) else msg
        spec = M.METHODS[inner.method]
        assert type(inner) is spec.message, (type(inner), spec.message)

    def _sent_method(self, id: Any) -> str | None:
        for entry in reversed(self.transcript):
            m = entry["message"]
            if entry["from"] == "client" and m.get("id") == id and "method" in m:
                return str(m["method"])
        return None

    # -- answering the server's own requests ----------------------------------------------------

    def client_capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {"roots": {"listChanged": True}, "sampling": {}}
        if "elicitation/create" in self.M.METHODS:
            caps["elicitation"] = {}
        if self.codec.facts.request_meta is not None:
            caps = {}
        return caps

    def dispatch(self, msg: Any) -> None:
        inner = msg.message if isinstance(msg, Request) else msg
        if isinstance(msg, (Response, ErrorResponse)):
            return
        spec = self.M.METHODS[inner.method]
        if spec.kind == "notification":
            self.notifications.append(inner.method)
            return
        self.server_requests.append(inner.method)
        id = msg.id
        answer = SERVER_REQUEST_ANSWERS.get(inner.method)
        if answer is None:
            err = mcpbind.ProtocolError(-32601, f"client does not handle {inner.method}", id=id)
            data = self.codec.error_response(err)
        else:
            result = mcpbind.convert(answer(inner), spec.result)
            data = self.codec.respond(id, result)
        self._write(data)

    def _write(self, data: bytes) -> None:
        self.transcript.append({"from": "client", "message": json.loads(data)})
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()


SERVER_REQUEST_ANSWERS: dict[str, Any] = {
    "ping": lambda req: {},
    "roots/list": lambda req: {"roots": [{"uri": "file:///tmp/mcpbind", "name": "tmp"}]},
    "sampling/createMessage": lambda req: {
        "role": "assistant",
        "content": {"type": "text", "text": "sampled by mcpbind"},
        "model": "mcpbind-test",
        "stopReason": "endTurn",
    },
    "elicitation/create": lambda req: {"action": "decline"},
}


def describe(msg: Any) -> str:
    if isinstance(msg, Response):
        return f"Response[{type(msg.result).__name__}]"
    if isinstance(msg, Request):
        return f"Request[{type(msg.message).__name__}]"
    return type(msg).__name__


def arguments(tool: Any) -> dict[str, Any]:
    """Arguments for a tool from its input schema: required properties, simple values."""
    if tool.name in TOOL_ARGUMENTS:
        return TOOL_ARGUMENTS[tool.name]
    schema = msgspec.to_builtins(tool.input_schema)
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name in schema.get("required") or []:
        prop = props.get(name, {})
        kind = prop.get("type")
        if "enum" in prop:
            out[name] = prop["enum"][0]
        elif kind in ("number", "integer"):
            out[name] = prop.get("minimum", 1)
        elif kind == "boolean":
            out[name] = False
        elif kind == "array":
            out[name] = []
        elif kind == "object":
            out[name] = {}
        else:
            out[name] = "mcpbind"
    return out


def ok(resp: Any, what: str) -> Any:
    if not isinstance(resp, Response):
        raise PeerError(f"{what}: {resp}")
    return resp.result


def everything_session(revision: str) -> Session:
    s = Session(["node", str(EVERYTHING), "stdio"], revision)
    try:
        init = ok(
            s.request(
                "initialize",
                {
                    "protocolVersion": revision,
                    "capabilities": s.client_capabilities(),
                    "clientInfo": {"name": "mcpbind-interop", "version": mcpbind.__name__},
                },
            ),
            "initialize",
        )
        assert init.protocol_version == revision, (init.protocol_version, revision)
        assert mcpbind.negotiate(init.protocol_version, supported=[revision]) == revision
        s.capabilities = msgspec.to_builtins(init.capabilities)
        s.notify("notifications/initialized")
        s.drain(0.3)
        ok(s.request("ping"), "ping")

        tools = ok(s.request("tools/list"), "tools/list").tools
        assert tools
        for tool in tools:
            s.request("tools/call", {"name": tool.name, "arguments": arguments(tool)})

        prompts = ok(s.request("prompts/list"), "prompts/list").prompts
        for prompt in prompts:
            args = {a.name: "mcpbind" for a in (prompt.arguments or []) if a.required}
            s.request("prompts/get", {"name": prompt.name, "arguments": args})
        for prompt in prompts:
            if prompt.arguments:
                s.request(
                    "completion/complete",
                    {
                        "ref": {"type": "ref/prompt", "name": prompt.name},
                        "argument": {"name": prompt.arguments[0].name, "value": ""},
                    },
                )
                break

        resources = ok(s.request("resources/list"), "resources/list").resources
        s.request("resources/templates/list")
        for resource in resources[:4]:
            ok(s.request("resources/read", {"uri": resource.uri}), f"read {resource.uri}")
        if resources and mcpbind.supports(s.capabilities, "resources.subscribe"):
            ok(s.request("resources/subscribe", {"uri": resources[0].uri}), "subscribe")
            ok(s.request("resources/unsubscribe", {"uri": resources[0].uri}), "unsubscribe")
        if mcpbind.supports(s.capabilities, "logging"):
            ok(s.request("logging/setLevel", {"level": "debug"}), "logging/setLevel")
        s.drain(0.3)
    finally:
        s.close()
    return s


def modern_session(revision: str) -> Session:
    s = Session([sys.executable, str(SERVER_2026)], revision)
    try:
        found = ok(s.request("server/discover"), "server/discover")
        assert revision in found.supported_versions, found.supported_versions
        s.capabilities = msgspec.to_builtins(found.capabilities)
        tools = ok(s.request("tools/list"), "tools/list").tools
        for tool in tools:
            ok(
                s.request("tools/call", {"name": tool.name, "arguments": arguments(tool)}),
                tool.name,
            )
        prompts = ok(s.request("prompts/list"), "prompts/list").prompts
        for prompt in prompts:
            args = {a.name: "mcpbind" for a in (prompt.arguments or []) if a.required}
            ok(s.request("prompts/get", {"name": prompt.name, "arguments": args}), prompt.name)
        resources = ok(s.request("resources/list"), "resources/list").resources
        templates = ok(s.request("resources/templates/list"), "templates").resource_templates
        for resource in resources:
            ok(s.request("resources/read", {"uri": resource.uri}), resource.uri)
        if templates:
            ok(s.request("resources/read", {"uri": "mcpbind://items/42"}), "templated read")
        # Only what the server advertised: the codec refuses a request the peer has no capability for.
        if prompts and prompts[0].arguments and mcpbind.supports(found.capabilities, "completions"):
            s.request(
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": prompts[0].name},
                    "argument": {"name": prompts[0].arguments[0].name, "value": ""},
                },
            )
        # A request for a revision the server does not speak gets its own error back.
        bad = s.message(
            "tools/list",
            {
                "_meta": {
                    **s.codec.meta({}),
                    "io.modelcontextprotocol/protocolVersion": "2099-01-01",
                }
            },
            9999,
        )
        s.send(bad)
        deadline = time.monotonic() + s.timeout
        while True:
            msg = s.receive(deadline)
            if isinstance(msg, (Response, ErrorResponse)) and msg.id == 9999:
                break
        assert isinstance(msg, ErrorResponse), msg
        s.unsupported_version_error = msg  # type: ignore[attr-defined]
    finally:
        s.close()
    return s


def run(revision: str) -> Session:
    if revision in EVERYTHING_REVISIONS:
        return everything_session(revision)
    return modern_session(revision)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.environ.get("MCPBIND_TRANSCRIPTS", ".cache/interop"))
    parser.add_argument("revisions", nargs="*", default=[*EVERYTHING_REVISIONS, *MODERN_REVISIONS])
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for revision in args.revisions:
        start = time.perf_counter()
        s = run(revision)
        path = out / f"{revision}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in s.transcript))
        print(
            f"{revision}: {len(s.received)} messages decoded, server requests {sorted(set(s.server_requests))}, "
            f"{time.perf_counter() - start:.1f}s -> {path}"
        )
        for v in s.violations:
            print(f"  peer deviation: {v.message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
