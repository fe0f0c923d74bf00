"""The bridge's task translation (mcpbind/bridge/tasks_extension_to_core.py and its ports), sans-IO: a 2026-07-28 client of the
tasks extension (raw JSON lines: its session has no task methods) in front of mcpbind's own
2025-11-25 ServerSession with tasks; and the field mapping read from the generated facts."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev
from mcpbind._extensions import TASKS
from mcpbind.bridge import Bridge
from mcpbind.bridge.task_facts import core_task, extension_task

FACTS = TASKS["2026-07-28"]
EXT = FACTS.extension
META_2026 = mcpbind.bindings("2026-07-28").FACTS.request_meta
assert META_2026 is not None
RELATED = FACTS.related_task_key
assert RELATED is not None

CORE_TASK = {
    "taskId": "t-1",
    "status": "working",
    "statusMessage": "on it",
    "createdAt": "2026-11-25T00:00:00Z",
    "lastUpdatedAt": "2026-11-25T00:00:01Z",
    "ttl": 60000,
    "pollInterval": 250,
}
TOOLS = {
    "tools": [
        {
            "name": "slow",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required"},
        },
        {"name": "fast", "inputSchema": {"type": "object"}},
    ]
}
ELICIT = {
    "message": "Which one?",
    "requestedSchema": {"type": "object", "properties": {"pick": {"type": "string"}}},
    "_meta": {RELATED: {"taskId": "t-1"}},
}


def meta(extension: bool = True) -> dict[str, Any]:
    caps: dict[str, Any] = {"elicitation": {"form": {}}}
    if extension:
        caps["extensions"] = {EXT: {}}
    return {
        META_2026.version_key: "2026-07-28",
        META_2026.capabilities_key: caps,
        META_2026.info_key: {"name": "raw-client", "version": "1"},
    }


class Pair:
    """Raw 2026-07-28 client lines <-> Bridge <-> mcpbind's 2025-11-25 ServerSession."""

    def __init__(self) -> None:
        self.server = mcpbind.ServerSession(
            "2025-11-25",
            capabilities={
                "tools": {},
                "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}},
            },
            info={"name": "tasks-server", "version": "1"},
        )
        self.bridge = Bridge()
        self.at_server: list[Any] = []
        self.at_client: list[dict[str, Any]] = []
        self.log: list[str] = []
        self.ids = 0
        self.send("server/discover", {})
        assert self.server.state == "ready"

    def pump(self) -> None:
        for _ in range(50):
            moved = False
            for raw in self.bridge.to_server():
                moved = True
                self.at_server += self.server.receive(raw)
            for raw in self.server.data_to_send():
                moved = True
                self.bridge.from_server(raw)
            for raw in self.bridge.to_client():
                moved = True
                self.at_client.append(msgspec.json.decode(raw))
            self.log += self.bridge.take_log()
            if not moved:
                return
        raise AssertionError("the bridge kept talking")

    def send(self, method: str, params: dict[str, Any], extension: bool = True) -> int:
        self.ids += 1
        params = {**params, "_meta": meta(extension)}
        message = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        self.bridge.from_client(msgspec.json.encode(message))
        self.pump()
        return self.ids

    def answer_of(self, id: int) -> dict[str, Any]:
        found = [m for m in self.at_client if m.get("id") == id and "method" not in m]
        assert found, (id, self.at_client, self.log)
        return found[-1]

    def at(self, method: str) -> Any:
        found = [e for e in self.at_server if isinstance(e, ev.RequestReceived)]
        found = [e for e in found if e.method == method]
        assert found, (method, self.at_server)
        return found[-1]

    def respond(self, request: Any, result: Any) -> None:
        self.server.respond(request.id, result)
        self.pump()


def created() -> tuple[Pair, int]:
    """A pair whose client listed the tools and called ``slow``, answered with a task."""
    p = Pair()
    p.send("tools/list", {})
    p.respond(p.at("tools/list"), TOOLS)
    call = p.send("tools/call", {"name": "slow", "arguments": {}})
    p.respond(p.at("tools/call"), {"task": CORE_TASK})
    return p, call


def test_the_task_fields_map_by_the_generated_facts() -> None:
    assert dict(FACTS.core_renamed) == {"ttl": "ttlMs", "pollInterval": "pollIntervalMs"}
    ext = extension_task(CORE_TASK, FACTS)
    assert ext == {
        "taskId": "t-1",
        "status": "working",
        "statusMessage": "on it",
        "createdAt": "2026-11-25T00:00:00Z",
        "lastUpdatedAt": "2026-11-25T00:00:01Z",
        "ttlMs": 60000,
        "pollIntervalMs": 250,
    }
    assert core_task({**ext, "resultType": "task"}, FACTS) == CORE_TASK
    assert extension_task({**CORE_TASK, "ttl": None}, FACTS)["ttlMs"] is None  # unlimited


def test_a_call_of_a_task_tool_becomes_a_task_the_client_polls() -> None:
    p, call = created()
    assert msgspec.to_builtins(p.at("tools/call").params)["task"] == {}
    answer = p.answer_of(call)["result"]
    assert answer == {**extension_task(CORE_TASK, FACTS), "resultType": "task"}
    # the bridge asked for the payload at once (it carries the task's input requests)
    assert p.at("tasks/result").params.task_id == "t-1"
    get = p.send("tasks/get", {"taskId": "t-1"})
    p.respond(p.at("tasks/get"), {**CORE_TASK, "statusMessage": "still"})
    got = p.answer_of(get)["result"]
    assert got["status"] == "working" and got["statusMessage"] == "still"
    assert got["resultType"] == "complete" and "result" not in got


def test_input_the_server_asks_for_the_task_is_carried_by_get_and_answered_by_update() -> None:
    p, _ = created()
    payload = p.at("tasks/result")
    asked = p.server.request("elicitation/create", ELICIT)
    p.pump()
    get = p.send("tasks/get", {"taskId": "t-1"})
    p.respond(p.at("tasks/get"), {**CORE_TASK, "status": "input_required"})
    got = p.answer_of(get)["result"]
    assert got["status"] == "input_required"
    [(name, request)] = got["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Which one?" and "_meta" not in request["params"]
    update = p.send(
        "tasks/update",
        {"taskId": "t-1", "inputResponses": {name: {"action": "accept", "content": {"pick": "a"}}}},
    )
    assert p.answer_of(update)["result"] == {"resultType": "complete"}
    answer = [e for e in p.at_server if isinstance(e, ev.ResultReceived) and e.id == asked]
    assert answer and answer[0].result.content == {"pick": "a"}
    # the payload ends the task: the next get carries the tool's result
    p.respond(payload, {"content": [{"type": "text", "text": "done"}]})
    get = p.send("tasks/get", {"taskId": "t-1"})
    p.respond(p.at("tasks/get"), {**CORE_TASK, "status": "completed"})
    done = p.answer_of(get)["result"]
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "done"}]


def test_a_get_that_finds_the_task_finished_waits_for_its_payload() -> None:
    p, _ = created()
    get = p.send("tasks/get", {"taskId": "t-1"})
    p.respond(p.at("tasks/get"), {**CORE_TASK, "status": "completed"})
    assert not [m for m in p.at_client if m.get("id") == get]  # held: the payload is coming
    p.respond(p.at("tasks/result"), {"content": [{"type": "text", "text": "late"}]})
    assert p.answer_of(get)["result"]["result"]["content"][0]["text"] == "late"


def test_a_failed_payload_is_the_tasks_error() -> None:
    p, _ = created()
    p.server.respond_error(p.at("tasks/result").id, -32000, "the tool broke", {"why": "disk"})
    p.pump()
    get = p.send("tasks/get", {"taskId": "t-1"})
    p.respond(p.at("tasks/get"), {**CORE_TASK, "status": "failed"})
    got = p.answer_of(get)["result"]
    assert got["status"] == "failed"
    assert got["error"] == {"code": -32000, "message": "the tool broke", "data": {"why": "disk"}}


def test_cancel_goes_to_the_server() -> None:
    p, _ = created()
    cancel = p.send("tasks/cancel", {"taskId": "t-1"})
    p.respond(p.at("tasks/cancel"), {**CORE_TASK, "status": "cancelled"})
    assert p.at("tasks/cancel").params.task_id == "t-1"
    assert p.answer_of(cancel)["result"] == {"resultType": "complete"}


def test_calls_that_do_not_become_tasks() -> None:
    p = Pair()
    p.send("tools/list", {})
    p.respond(p.at("tools/list"), TOOLS)
    p.send("tools/call", {"name": "fast", "arguments": {}})  # the server forbids it tasks
    assert "task" not in msgspec.to_builtins(p.at("tools/call").params)
    p.respond(p.at("tools/call"), {"content": []})
    p.send("tools/call", {"name": "slow", "arguments": {}}, extension=False)  # not declared
    assert "task" not in msgspec.to_builtins(p.at("tools/call").params)


@pytest.mark.parametrize(
    ("params", "extension", "code", "says"),
    [
        ({"taskId": "nope"}, True, -32602, "no task 'nope'"),
        ({"taskId": 7}, True, -32602, "string taskId"),
        ({"taskId": "t-1"}, False, -32021, EXT),
        ({"taskId": "t-1", "inputResponses": []}, True, -32602, "inputResponses"),
    ],
)
def test_bad_task_requests_get_errors(
    params: dict[str, Any], extension: bool, code: int, says: str
) -> None:
    p, _ = created()
    method = "tasks/update" if "inputResponses" in params else "tasks/get"
    error = p.answer_of(p.send(method, params, extension=extension))["error"]
    assert error["code"] == code and says in error["message"]


def test_an_update_answer_that_does_not_fit_is_refused_whole() -> None:
    p, _ = created()
    p.server.request("elicitation/create", ELICIT)
    p.pump()
    get = p.send("tasks/get", {"taskId": "t-1"})
    p.respond(p.at("tasks/get"), {**CORE_TASK, "status": "input_required"})
    [name] = p.answer_of(get)["result"]["inputRequests"]
    bad = p.send("tasks/update", {"taskId": "t-1", "inputResponses": {name: {"action": 3}}})
    error = p.answer_of(bad)["error"]
    assert error["code"] == -32602 and f"inputResponses.{name}" in error["message"]
    assert not [e for e in p.at_server if isinstance(e, ev.ResultReceived)]


def test_the_servers_status_notifications_are_not_forwarded_and_said_once() -> None:
    p, _ = created()
    for _ in range(3):
        p.server.notify("notifications/tasks/status", CORE_TASK)
    p.pump()
    assert not [m for m in p.at_client if m.get("method") == "notifications/tasks/status"]
    said = [line for line in p.log if "of task 't-1'" in line]
    assert len(said) == 1 and said[0].startswith("loss: ")


def test_a_held_get_is_answered_when_the_bridge_closes() -> None:
    p, _ = created()
    get = p.send("tasks/get", {"taskId": "t-1"})
    p.respond(p.at("tasks/get"), {**CORE_TASK, "status": "completed"})
    assert p.bridge.pending() == 1  # the held get (the payload request is owed to no client)
    p.bridge.close("the server exited (status 1)")
    p.pump()
    assert p.answer_of(get)["error"]["code"] == -32000


def test_a_core_client_is_not_told_of_tasks_it_cannot_use_through_the_bridge() -> None:
    client = mcpbind.ClientSession(
        "2025-11-25", capabilities={}, info={"name": "c", "version": "1"}
    )
    server = mcpbind.ServerSession(
        "2026-07-28",
        capabilities={"tools": {}, "extensions": {EXT: {}}},
        info={"name": "s", "version": "1"},
    )
    bridge = Bridge()
    client.connect()
    log: list[str] = []
    seen: list[Any] = []
    for _ in range(10):
        for raw in client.data_to_send():
            bridge.from_client(raw)
        for raw in bridge.to_server():
            server.receive(raw)
        for raw in server.data_to_send():
            bridge.from_server(raw)
        for raw in bridge.to_client():
            seen += client.receive(raw)
        log += bridge.take_log()
    [negotiated] = [e for e in seen if isinstance(e, ev.Negotiated)]
    assert msgspec.to_builtins(negotiated.capabilities) == {"tools": {}}
    assert any("$.tasks dropped" in line and EXT in line for line in log)


def test_a_core_clients_tasks_capability_does_not_declare_the_extension_downstream() -> None:
    client = mcpbind.ClientSession(
        "2025-11-25",
        capabilities={"roots": {}, "tasks": {"list": {}, "cancel": {}}},
        info={"name": "c", "version": "1"},
    )
    server = mcpbind.ServerSession(
        "2026-07-28",
        capabilities={"tools": {}, "extensions": {EXT: {}}},
        info={"name": "s", "version": "1"},
    )
    bridge = Bridge()
    client.connect()
    log: list[str] = []
    at_server: list[Any] = []

    def pump() -> None:
        for _ in range(10):
            for raw in client.data_to_send():
                bridge.from_client(raw)
            for raw in bridge.to_server():
                at_server.extend(server.receive(raw))
            for raw in server.data_to_send():
                bridge.from_server(raw)
            for raw in bridge.to_client():
                client.receive(raw)
            log.extend(bridge.take_log())

    pump()
    client.request("tools/list")
    pump()
    [request] = [e for e in at_server if isinstance(e, ev.RequestReceived)]
    caps = msgspec.to_builtins(request.params.meta[META_2026.capabilities_key])
    assert caps == {"roots": {}}  # a server of the extension would make its calls tasks
    assert any(f"$.extensions.{EXT} dropped" in line for line in log)


def test_the_gateway_offers_a_core_client_the_tasks_it_translates() -> None:
    from mcpbind.bridge.task_facts import untranslated_tasks

    caps = {"tools": {}, "tasks": {}}
    log: list[str] = []
    offered = untranslated_tasks(caps, "2026-07-28", "2025-11-25", log, translated=True)
    assert offered["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert log == []
    assert "tasks" not in untranslated_tasks(caps, "2026-07-28", "2025-11-25", log)
    assert untranslated_tasks(caps, "2025-11-25", "2025-11-25", log) == caps  # no extension


def test_the_gateways_answer_is_found_in_json_or_an_event_stream() -> None:
    from mcpbind.bridge.gateway.tasks_core_to_extension import _answer

    mine = {"jsonrpc": "2.0", "id": "mcpbind-task-1", "result": {"resultType": "complete"}}
    stream = (
        b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n'
        b"event: message\ndata: " + msgspec.json.encode(mine) + b"\n\n"
    )
    assert _answer(stream, "text/event-stream", "mcpbind-task-1") == mine
    assert _answer(msgspec.json.encode(mine), "application/json", "mcpbind-task-1") == mine
    assert _answer(msgspec.json.encode(mine), "application/json", "other") is None
    assert _answer(b"not json", "application/json", "mcpbind-task-1") is None


# -- the HTTP gateway's layer for clients of the extension (GatewayTasks, LinkTasks) -------------


def _declared(task_id: str, declared: bool = True) -> dict[str, Any]:
    caps = {"extensions": {EXT: {}}} if declared else {}
    return {"taskId": task_id, "_meta": {META_2026.capabilities_key: caps}}


def test_the_gateways_tasks_layer_owns_the_extensions_methods_only_once_on() -> None:
    from mcpbind.bridge.gateway.tasks_extension_to_core import GatewayTasks

    assert GatewayTasks.of(["2025-11-25"]) is None  # no client of the extension
    layer = GatewayTasks.of(["2025-11-25", "2026-07-28"])
    assert layer is not None
    assert not layer.owns(FACTS.get, "t-1")  # off: the front's session answers -32601
    assert (
        layer.between(ev.Negotiated(revision="2026-07-28", capabilities=None, info=None)) is False
    )
    assert layer.between(ev.Negotiated(revision=FACTS.core, capabilities=None, info=None)) is True
    assert layer.owns(FACTS.get, "t-1") and layer.owns(FACTS.update, None)
    assert not layer.owns(FACTS.eligible, "slow")  # calls go down a link, as any request
    version = {META_2026.version_key: "2026-07-28"}
    assert layer.speaks({"_meta": version}) and not layer.speaks({"_meta": {}})


def test_the_gateway_finds_a_task_on_the_link_of_its_maker_only() -> None:
    import asyncio

    from mcpbind.bridge.gateway import Gateway, Link
    from mcpbind.bridge.gateway.tasks_extension_to_core import LinkTasks
    from mcpbind.bridge.tasks_extension_to_core import TranslatedTask

    async def run() -> list[Any]:
        gateway = Gateway(command=["true"])  # never started: the link is not opened
        layer = gateway._task_front
        assert layer is not None
        link = Link(gateway, "identity", None, None)
        translator = link.tasks = LinkTasks(link, FACTS, layer)
        translator.tasks["t-1"] = TranslatedTask("t-1", "2026-07-28", FACTS.eligible)
        translator.owners["t-1"] = "alice"
        layer.where["t-1"] = translator
        out: list[Any] = []
        update = {**_declared("t-1"), FACTS.input_responses: {}}
        out.append(await layer.respond(FACTS.update, update, "alice"))
        for params, owner in (
            (update, "bob"),  # another owner's task is unknown to it
            (_declared("t-2"), "alice"),  # no link holds it
            (_declared("t-1", declared=False), "alice"),  # the extension not declared
        ):
            try:
                await layer.respond(FACTS.update, params, owner)
            except mcpbind.ProtocolError as error:
                out.append(error.code)
        # the link ends: its tasks are forgotten by the gateway
        translator.close(mcpbind.ProtocolError(-32000, "Connection closed: gone"))
        out.append("t-1" in layer.where)
        return out

    assert asyncio.run(run()) == [
        {"resultType": FACTS.complete_result},
        -32602,
        -32602,
        -32021,
        False,
    ]
