"""The workloads of `make bench`: JSON-RPC messages as bytes, with who receives them.

Every workload is a list of complete messages (envelope included); decoding a workload means
decoding each of its messages once, as the receiving side would.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SESSIONS = HERE / "sessions"
ROOT = HERE.parent
SYNTHETIC_REVISION = "2025-11-25"
SESSION_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")


@dataclass(frozen=True)
class Message:
    data: bytes
    kind: str  # "request", "notification", "response", "error"
    method: str | None  # the method, or for a response the method of the request it answers
    sender: str  # "client" or "server"
    id: Any = None

    @property
    def receiver(self) -> str:
        return "server" if self.sender == "client" else "client"

    @property
    def obj(self) -> Any:
        return json.loads(self.data)


@dataclass
class Workload:
    name: str
    revision: str
    messages: list[Message]
    group: str = "synthetic"  # "synthetic", "examples", "session"
    note: str = ""
    skipped: list[str] = field(default_factory=list)  # messages left out, and why

    @property
    def size(self) -> int:
        return sum(len(m.data) for m in self.messages)


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def request(method: str, params: Any, id: Any = 1, sender: str = "client") -> Message:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    return Message(_dump(body), "request", method, sender, id)


def notification(method: str, params: Any, sender: str = "server") -> Message:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    return Message(_dump(body), "notification", method, sender)


def response(method: str, result: Any, id: Any = 1, sender: str = "server") -> Message:
    return Message(
        _dump({"jsonrpc": "2.0", "id": id, "result": result}), "response", method, sender, id
    )


# ---------------------------------------------------------------------------------------------
# Synthetic payloads (2025-11-25 unless said otherwise)


def tool(i: int) -> dict[str, Any]:
    """One tool as servers list them: schema, annotations, an icon, _meta."""
    return {
        "name": f"tool_{i}",
        "title": f"Tool {i}",
        "description": "Does a thing with its arguments and returns a result.",
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["path"],
        },
        "annotations": {"readOnlyHint": True, "title": f"Tool {i}"},
        "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}],
        "_meta": {"vendor/key": i},
    }


def list_tools_result(n: int, modern: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"tools": [tool(i) for i in range(n)]}
    if modern:
        result.update(resultType="complete", cacheScope="public", ttlMs=60000)
    return result


PNG = base64.b64encode(bytes(range(256)) * 16).decode()  # 4 KiB of "image"


def call_tool_results() -> dict[str, dict[str, Any]]:
    return {
        "text": {
            "content": [
                {"type": "text", "text": "Current weather in New York: 72F, partly cloudy."}
            ],
            "isError": False,
        },
        "image": {"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]},
        "embedded resource": {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///project/README.md",
                        "mimeType": "text/markdown",
                        "text": "# Project\n" * 50,
                    },
                }
            ]
        },
        "structured": {
            "content": [
                {
                    "type": "text",
                    "text": '{"temperature": 22.5, "conditions": "Partly cloudy", "humidity": 65}',
                }
            ],
            "structuredContent": {
                "temperature": 22.5,
                "conditions": "Partly cloudy",
                "humidity": 65,
            },
        },
    }


def call_tool_params(i: int = 0) -> dict[str, Any]:
    return {"name": "get_weather", "arguments": {"location": "New York", "units": "metric", "n": i}}


def initialize_params(revision: str) -> dict[str, Any]:
    return {
        "protocolVersion": revision,
        "capabilities": {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}},
        "clientInfo": {"name": "bench-client", "version": "1.0.0"},
    }


def initialize_result(revision: str) -> dict[str, Any]:
    return {
        "protocolVersion": revision,
        "capabilities": {
            "logging": {},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "tools": {"listChanged": True},
            "completions": {},
        },
        "serverInfo": {"name": "bench-server", "version": "1.0.0"},
        "instructions": "Use the tools wisely.",
    }


def synthetic() -> list[Workload]:
    rev = SYNTHETIC_REVISION
    out = [
        Workload(
            "tools/list result, 10 tools", rev, [response("tools/list", list_tools_result(10))]
        ),
        Workload(
            "tools/list result, 100 tools", rev, [response("tools/list", list_tools_result(100))]
        ),
        Workload(
            "tools/list result, 1,000 tools", rev, [response("tools/list", list_tools_result(1000))]
        ),
        Workload("tools/call request", rev, [request("tools/call", call_tool_params())]),
    ]
    for what, result in call_tool_results().items():
        out.append(Workload(f"tools/call result, {what}", rev, [response("tools/call", result)]))
    text = ("All work and no play makes Jack a dull boy.\n" * 24_000)[: 1 << 20]
    out += [
        Workload(
            "resources/read result, 1 MB text",
            rev,
            [
                response(
                    "resources/read",
                    {
                        "contents": [
                            {"uri": "file:///big.txt", "mimeType": "text/plain", "text": text}
                        ]
                    },
                )
            ],
        ),
        Workload(
            "progress notification",
            rev,
            [
                notification(
                    "notifications/progress",
                    {"progressToken": "tok-1", "progress": 50, "total": 100, "message": "Halfway"},
                )
            ],
        ),
        Workload("initialize request", rev, [request("initialize", initialize_params(rev))]),
        Workload("initialize result", rev, [response("initialize", initialize_result(rev))]),
    ]
    return out


def modern() -> list[Workload]:
    """2026-07-28: server/discover and the official examples."""
    rev = "2026-07-28"
    discover = {
        "resultType": "complete",
        "cacheScope": "public",
        "ttlMs": 300000,
        "supportedVersions": [rev],
        "capabilities": initialize_result(rev)["capabilities"],
        "serverInfo": {"name": "bench-server", "version": "1.0.0"},
        "instructions": "Use the tools wisely.",
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": rev,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return [
        Workload("server/discover request", rev, [request("server/discover", {"_meta": meta})]),
        Workload("server/discover result", rev, [response("server/discover", discover)]),
        examples(rev),
    ]


# ---------------------------------------------------------------------------------------------
# Official examples and recorded sessions


def schema_dir() -> Path:
    import os

    env = os.environ.get("MCPBIND_SCHEMA_DIR")
    for candidate in ([Path(env)] if env else []) + [
        ROOT.parent / "shared" / "schemas",
        ROOT / ".cache" / "schemas",
    ]:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "no schema folder with examples (../shared/schemas or MCPBIND_SCHEMA_DIR)"
    )


def examples(revision: str) -> Workload:
    """Every official example of ``revision`` that is a whole JSON-RPC message."""
    import mcpbind

    M = mcpbind.bindings(revision)
    by_message = {spec.message.__name__: spec for spec in M.METHODS.values()}
    by_result = {
        getattr(spec.result, "__name__", None): spec
        for spec in M.METHODS.values()
        if spec.kind == "request"
    }
    messages: list[Message] = []
    skipped: list[str] = []
    for path in sorted((schema_dir() / revision / "examples").glob("*/*.json")):
        folder = path.parent.name
        obj = json.loads(path.read_text())
        if folder in by_message:
            spec = by_message[folder]
            sender = "client" if spec.sender in ("client", "both") else "server"
            kind = spec.kind
            messages.append(Message(_dump(obj), kind, spec.method, sender, obj.get("id")))
        elif folder.endswith("ResultResponse") and folder[: -len("Response")] in by_result:
            spec = by_result[folder[: -len("Response")]]
            sender = "server" if spec.sender == "client" else "client"
            messages.append(Message(_dump(obj), "response", spec.method, sender, obj.get("id")))
        elif folder.endswith("Error") and "jsonrpc" in obj:
            messages.append(Message(_dump(obj), "error", None, "server", obj.get("id")))
    return Workload(
        f"official examples ({len(messages)} messages)",
        revision,
        messages,
        group="examples",
        skipped=skipped,
    )


def session(revision: str, path: Path | None = None) -> Workload:
    """A transcript written by tests/interop/driver.py: both directions of one real session."""
    path = path or SESSIONS / f"{revision}.jsonl"
    messages: list[Message] = []
    pending: dict[tuple[str, Any], str] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        sender, obj = entry["from"], entry["message"]
        id_ = obj.get("id")
        if "method" in obj:
            kind = "request" if "id" in obj else "notification"
            if kind == "request":
                pending[(sender, id_)] = obj["method"]
            messages.append(Message(_dump(obj), kind, obj["method"], sender, id_))
        else:
            other = "server" if sender == "client" else "client"
            method = pending.pop((other, id_), None)
            kind = "response" if "result" in obj else "error"
            messages.append(Message(_dump(obj), kind, method, sender, id_))
    return Workload(
        f"session {revision} ({len(messages)} messages)", revision, messages, group="session"
    )


def all_workloads() -> list[Workload]:
    return (
        synthetic()
        + modern()
        + [session(r) for r in SESSION_REVISIONS if (SESSIONS / f"{r}.jsonl").exists()]
    )


def record(out: Path = SESSIONS) -> None:
    """Record the sessions anew from the real peers (needs `make interop-setup`)."""
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, str(ROOT / "tests" / "interop" / "driver.py"), "--out", str(out)],
        check=True,
    )
