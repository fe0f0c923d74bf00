"""``Codec.expect_request``: a request the codec did not encode, told with its params, is answered
as the codec would have learned from encoding it: a task-augmented request (2025-11-25
``params.task``) by the task's creation result, a task's payload by the result of the method that
created the task; on both sides. ``Codec.requested_task`` says who asked for a task."""

from __future__ import annotations

import json
from typing import Any

import pytest

import mcpbind
from mcpbind import Codec, ProtocolError, Request, Response

R = "2025-11-25"
M = mcpbind.bindings(R)
TASK = {
    "taskId": "t-1",
    "status": "working",
    "createdAt": "2025-11-25T00:00:00Z",
    "lastUpdatedAt": "2025-11-25T00:00:00Z",
    "ttl": 60000,
}
CALL = {"name": "echo", "arguments": {"text": "hi"}}
SAMPLE = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
    "maxTokens": 8,
}
ELICIT = {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}
CALL_RESULT = {"content": [{"type": "text", "text": "hi"}]}
SAMPLE_RESULT = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}
ELICIT_RESULT = {"action": "accept", "content": {"name": "x"}}


def request(id_: Any, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def response(id_: Any, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}).encode()


def answered(codec: Codec, req: Any, result: Any) -> Any:
    """The result class ``codec`` decodes the response to ``req`` (told with expect_request) as."""
    codec.expect_request(req)
    out = codec.decode(response(req["id"] if isinstance(req, dict) else req.id, result))
    assert isinstance(out, Response)
    return type(out.result)


# -- the requester's side: what answers a request told with its params ------------------------


@pytest.mark.parametrize(
    ("role", "method", "params", "result", "own"),
    [
        ("client", "tools/call", CALL, CALL_RESULT, M.CallToolResult),
        ("server", "sampling/createMessage", SAMPLE, SAMPLE_RESULT, M.CreateMessageResult),
        ("server", "elicitation/create", ELICIT, ELICIT_RESULT, M.ElicitResult),
    ],
)
def test_a_plain_request_is_answered_by_its_own_result(
    role: str, method: str, params: Any, result: Any, own: Any
) -> None:
    assert answered(Codec(R, role), request(1, method, params), result) is own


@pytest.mark.parametrize(
    ("role", "method", "params", "result", "own"),
    [
        ("client", "tools/call", CALL, CALL_RESULT, M.CallToolResult),
        ("server", "sampling/createMessage", SAMPLE, SAMPLE_RESULT, M.CreateMessageResult),
        ("server", "elicitation/create", ELICIT, ELICIT_RESULT, M.ElicitResult),
    ],
)
def test_a_task_augmented_request_is_answered_by_the_task_then_its_payload(
    role: str, method: str, params: Any, result: Any, own: Any
) -> None:
    told_less = Codec(R, role)
    told_less.expect(1, method)  # the method alone: a task reply is not its own result
    with pytest.raises(ProtocolError, match=f"the result of '{method}' .*missing required field"):
        told_less.decode(response(1, {"task": TASK}))
    codec = Codec(R, role)
    tasked = request(1, method, {**params, "task": {"ttl": 60000}})
    assert answered(codec, tasked, {"task": TASK}) is M.CreateTaskResult
    assert codec.requested_task(request(2, "tasks/get", {"taskId": "t-1"})) == method
    assert answered(codec, request(2, "tasks/result", {"taskId": "t-1"}), result) is own
    # the payload ended the task: another tasks/result for it is the generic payload result
    assert codec.requested_task(request(3, "tasks/get", {"taskId": "t-1"})) is None
    assert answered(codec, request(3, "tasks/result", {"taskId": "t-1"}), {}) is (
        M.GetTaskPayloadResult
    )


def test_a_failing_task_result_says_what_the_task_made_of_it() -> None:
    codec = Codec(R, "server")
    codec.expect_request(request(1, "sampling/createMessage", {**SAMPLE, "task": {}}))
    with pytest.raises(ProtocolError) as err:
        codec.decode(response(1, {"task": {"taskId": "t-1"}}))
    assert "the result of 'sampling/createMessage' asking for a task" in err.value.message
    codec.expect_request(request(2, "sampling/createMessage", {**SAMPLE, "task": {}}))
    codec.decode(response(2, {"task": TASK}))
    codec.expect_request(request(3, "tasks/result", {"taskId": "t-1"}))
    with pytest.raises(ProtocolError) as err:
        codec.decode(response(3, {"role": "assistant", "content": {"type": "text", "text": ""}}))
    assert err.value.code == -32602
    assert "the result of 'tasks/result' for a 'sampling/createMessage' task" in err.value.message
    assert "missing required field `model`" in err.value.message


# -- the request in every form decode returns, and its params as a Struct ----------------------


def test_a_decoded_request_is_told_as_it_is_a_proxy_forwarding_it() -> None:
    upstream = Codec(R, "server")  # the proxy faces the client as a server ...
    downstream = Codec(R, "client")  # ... and the server as a client
    data = json.dumps(request(7, "tools/call", {**CALL, "task": {"ttl": 1}})).encode()
    decoded = upstream.decode(data)
    assert type(decoded) is M.CallToolRequest
    downstream.expect_request(decoded)
    assert type(downstream.decode(response(7, {"task": TASK})).result) is M.CreateTaskResult


def test_params_may_be_the_generated_struct() -> None:
    codec = Codec(R, "server")
    params = mcpbind.convert({**ELICIT, "task": {"ttl": 5}}, M.ElicitRequestFormParams)
    codec.expect_request({"id": "e", "method": "elicitation/create", "params": params})
    assert type(codec.decode(response("e", {"task": TASK})).result) is M.CreateTaskResult
    payload = mcpbind.convert({"taskId": "t-1"}, M.GetTaskPayloadRequestParams)
    codec.expect_request({"id": "p", "method": "tasks/result", "params": payload})
    assert type(codec.decode(response("p", ELICIT_RESULT)).result) is M.ElicitResult


def test_a_revision_without_tasks_takes_a_wrapped_request_and_ignores_a_task_key() -> None:
    codec = Codec("2024-11-05", "client")
    M1 = codec.module
    call = M1.CallToolRequest(params=M1.CallToolRequestParams(name="echo"))
    codec.expect_request(Request(id=1, message=call))
    assert type(codec.decode(response(1, CALL_RESULT)).result) is M1.CallToolResult
    codec.expect_request(request(2, "tools/call", {**CALL, "task": {"ttl": 1}}))
    assert type(codec.decode(response(2, CALL_RESULT)).result) is M1.CallToolResult
    assert codec.requested_task(request(3, "tools/call", CALL)) is None


def test_what_expect_request_refuses() -> None:
    codec = Codec(R, "client")
    with pytest.raises(TypeError, match="expect_request takes a request of MCP 2025-11-25"):
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        codec.expect_request(mcpbind.convert(note, M.InitializedNotification))
    with pytest.raises(ValueError, match="string 'method'"):
        codec.expect_request({"id": 1})
    with pytest.raises(ValueError, match="string or an integer"):
        codec.expect_request({"id": True, "method": "tools/call"})
    wrapped = Codec("2024-11-05", "client")
    bare = wrapped.module.PingRequest()
    with pytest.raises(TypeError, match="with its id"):
        wrapped.expect_request(bare)  # a request of that revision carries its id in a Request
    # a peer's list where the task id belongs neither fails nor finds a task
    codec.expect_request(request(1, "tools/call", {**CALL, "task": {}}))
    codec.decode(response(1, {"task": TASK}))
    codec.expect_request(request(2, "tasks/result", {"taskId": ["t-1"]}))
    assert codec.requested_task(request(2, "tasks/get", {"taskId": {}})) is None
    assert codec.pending == {2: "tasks/result"}


def test_encode_and_expect_request_learn_alike() -> None:
    sender, told = Codec(R, "client"), Codec(R, "client")
    for id_, params in ((1, CALL), (2, {**CALL, "task": {"ttl": 9}})):
        req = request(id_, "tools/call", params)
        sender.encode(mcpbind.convert(req, M.CallToolRequest))
        told.expect_request(req)
    for codec in (sender, told):
        assert type(codec.decode(response(1, CALL_RESULT)).result) is M.CallToolResult
        assert type(codec.decode(response(2, {"task": TASK})).result) is M.CreateTaskResult
        assert codec.requested_task(request(3, "tasks/get", {"taskId": "t-1"})) == "tools/call"
