"""The codec defects of issue 11, each as the behaviour that replaces it.

Every test here speaks wire JSON and the public API only (``Codec``, ``Request``, ``Response``,
``ErrorResponse``, ``mcpbind.decode`` / ``convert``), so that it runs unchanged against older
code, where it fails. Valid messages are built from the revision's own schema (the patched one
the bindings follow) and checked against it with ``jsonschema`` before use.
"""

from __future__ import annotations

import gc
import json
import math
import tracemalloc
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

import mcpbind
from codegen.model import patched_schema
from codegen.pin import schema_dir
from mcpbind import Codec, ErrorResponse, ProtocolError, Request, Response

INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR = -32602, -32600, -32700
SESSIONS = Path(__file__).resolve().parent.parent / "bench" / "sessions"
HANDSHAKE_REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
ID_OPTIONAL = ["2025-11-25", "2026-07-28", "draft"]  # an error response may leave out "id"
ID_REQUIRED = ["2024-11-05", "2025-03-26", "2025-06-18"]
META = {"x.example/trace": [1, {"deep": None}], "note": "kept"}


# -- the revision's schema -----------------------------------------------------------------------


@cache
def _schema(revision: str) -> tuple[str, dict[str, Any]]:
    schema = patched_schema(revision)
    key = "$defs" if "$defs" in schema else "definitions"
    return key, schema


def _defs(revision: str) -> dict[str, Any]:
    key, schema = _schema(revision)
    return schema[key]  # type: ignore[no-any-return]


@cache
def _validator(revision: str, name: str) -> Any:
    key, schema = _schema(revision)
    cls = jsonschema.validators.validator_for(schema)
    return cls({"$ref": f"#/{key}/{name}", key: schema[key]})


def schema_errors(revision: str, message: Any, name: str = "JSONRPCMessage") -> list[str]:
    """What the revision's schema says is wrong with ``message`` (as definition ``name``)."""
    return [
        f"{list(e.absolute_path)}: {e.message}"
        for e in _validator(revision, name).iter_errors(message)
    ]


def _resolve(revision: str, node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = _defs(revision)[node["$ref"].rsplit("/", 1)[1]]
    return node


def minimal(revision: str, node: Any) -> Any:
    """The smallest instance of a schema node: required keys only, first alternatives."""
    node = _resolve(revision, node)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return node["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in node:
            return minimal(revision, node[key][0])
    if "allOf" in node:
        out: dict[str, Any] = {}
        for part in node["allOf"]:
            out.update(minimal(revision, part))
        return out
    kind = node.get("type", "object")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if kind == "object":
        props = node.get("properties", {})
        return {k: minimal(revision, props.get(k, {})) for k in node.get("required", [])}
    if kind == "array":
        return [minimal(revision, node.get("items", {}))] * node.get("minItems", 0)
    return {"string": "x", "integer": 0, "number": 0, "boolean": False, "null": None}[kind]


def _definition(revision: str, method: str) -> str:
    """The schema definition of ``method``'s request or notification (its generated class)."""
    name: str = mcpbind.bindings(revision).METHODS[method].message.__name__
    assert _defs(revision)[name]["properties"]["method"]["const"] == method
    return name


def message_of(revision: str, method: str, id: Any = 1) -> dict[str, Any]:
    """A minimal valid request or notification of ``method``, checked against the schema."""
    spec = mcpbind.bindings(revision).METHODS[method]
    name = _definition(revision, method)
    node = _defs(revision)[name]
    message = minimal(revision, node)
    if "params" in node.get("properties", {}):
        message.setdefault("params", minimal(revision, node["properties"]["params"]))
    message.update(jsonrpc="2.0", method=method)
    if spec.kind == "request":
        message["id"] = id
    else:
        message.pop("id", None)
    assert not schema_errors(revision, message, name), (method, schema_errors(revision, message))
    return message


def _has_params(revision: str, method: str) -> bool:
    return "params" in _defs(revision)[_definition(revision, method)].get("properties", {})


# -- codecs on both sides ------------------------------------------------------------------------


def receiver_of(revision: str, method: str) -> Codec:
    """A codec of the side that receives ``method`` (the server for either-way methods)."""
    sender = mcpbind.bindings(revision).METHODS[method].sender
    return Codec(revision, "client" if sender == "server" else "server")


def sender_of(revision: str, method: str) -> Codec:
    sender = mcpbind.bindings(revision).METHODS[method].sender
    return Codec(revision, "server" if sender == "server" else "client")


def raw(message: Any) -> bytes:
    return json.dumps(message).encode()


def through(receiver: Codec, sender: Codec, message: Any) -> Any:
    """``message`` decoded by ``receiver`` and encoded again by ``sender``, as JSON."""
    return json.loads(sender.encode(receiver.decode(raw(message))))


def refusal(codec: Codec, data: bytes | str) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        codec.decode(data)
    return info.value


def _request_object(codec: Codec, method: str, id: Any, params: dict[str, Any]) -> Any:
    """The generated request ``method`` with ``id``, built without ``Codec.request``'s checks."""
    spec = codec.module.METHODS[method]
    p = mcpbind.convert(params, spec.params)
    if "id" in spec.message.__struct_fields__:  # revisions whose requests carry their id
        return spec.message(id=id, jsonrpc="2.0", params=p)
    return Request(id=id, message=spec.message(params=p))


# -- a. task-augmented requests ------------------------------------------------------------------

TASK = {
    "taskId": "task-1",
    "status": "working",
    "createdAt": "2025-11-25T10:00:00Z",
    "lastUpdatedAt": "2025-11-25T10:00:00Z",
    "ttl": 60000,
    "pollInterval": 1000,
}
TASK_REQUESTS = [
    pytest.param(
        "tools/call",
        {"name": "simulate-research-query", "arguments": {"topic": "x"}},
        {"content": [{"type": "text", "text": "done"}]},
        "CallToolResult",
        id="tools/call",
    ),
    pytest.param(
        "sampling/createMessage",
        {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 9},
        {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"},
        "CreateMessageResult",
        id="sampling/createMessage",
    ),
    pytest.param(
        "elicitation/create",
        {
            "mode": "form",
            "message": "name?",
            "requestedSchema": {"type": "object", "properties": {}},
        },
        {"action": "accept", "content": {}},
        "ElicitResult",
        id="elicitation/create",
    ),
]


def _create_task(
    sender: Codec, receiver: Codec, method: str, params: Any, id: int, task: str
) -> Any:
    request = {
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": {**params, "task": {"ttl": 60000}},
    }
    through(receiver, sender, request)
    return sender.decode(
        raw({"jsonrpc": "2.0", "id": id, "result": {"task": {**TASK, "taskId": task}}})
    )


def _task_result(sender: Codec, receiver: Codec, id: int, task: str, result: Any) -> Any:
    request = {"jsonrpc": "2.0", "id": id, "method": "tasks/result", "params": {"taskId": task}}
    through(receiver, sender, request)
    return sender.decode(raw({"jsonrpc": "2.0", "id": id, "result": result}))


@pytest.mark.parametrize("method, params, result, result_class", TASK_REQUESTS)
def test_task_augmented_request_is_answered_by_create_task_result_then_by_its_own_result(
    method: str, params: Any, result: Any, result_class: str
) -> None:
    sender, receiver = sender_of("2025-11-25", method), receiver_of("2025-11-25", method)
    M = sender.module
    created = _create_task(sender, receiver, method, params, 1, "task-1")
    assert type(created) is Response and type(created.result) is M.CreateTaskResult
    assert json.loads(receiver.encode(created))["result"]["task"] == TASK

    payload = _task_result(sender, receiver, 2, "task-1", result)
    assert type(payload.result) is getattr(M, result_class)
    assert json.loads(receiver.encode(payload))["result"] == result
    assert sender.pending == {}

    # The task ended with its payload: a second payload request is no longer typed by it.
    again = _task_result(sender, receiver, 3, "task-1", result)
    assert type(again.result) is not getattr(M, result_class)


def test_the_tasks_a_codec_remembers_are_bounded() -> None:
    method, params, result, _ = TASK_REQUESTS[0].values
    sender, receiver = sender_of("2025-11-25", method), receiver_of("2025-11-25", method)
    M = sender.module
    count = 3000
    for i in range(count):
        _create_task(sender, receiver, method, params, i, f"t{i}")
    newest = _task_result(sender, receiver, count, f"t{count - 1}", result)
    assert type(newest.result) is M.CallToolResult
    oldest = _task_result(sender, receiver, count + 1, "t0", result)
    assert type(oldest.result) is not M.CallToolResult  # forgotten: the map has a size cap


# -- b. _meta in every request's and notification's params ---------------------------------------


def _methods_with_params(revisions: list[str]) -> list[Any]:
    return [
        pytest.param(revision, method, id=f"{revision}-{method}")
        for revision in revisions
        for method in sorted(mcpbind.bindings(revision).METHODS)
        if _has_params(revision, method)
    ]


@pytest.mark.parametrize("revision, method", _methods_with_params(HANDSHAKE_REVISIONS))
def test_params_meta_is_kept_through_decode_and_encode(revision: str, method: str) -> None:
    message = message_of(revision, method)
    message["params"] = {**message["params"], "_meta": META}
    assert not schema_errors(revision, message)
    again = through(receiver_of(revision, method), sender_of(revision, method), message)
    assert again == message


@pytest.mark.parametrize("revision, method", _methods_with_params(HANDSHAKE_REVISIONS))
def test_params_meta_that_is_not_an_object_is_invalid_params(revision: str, method: str) -> None:
    message = message_of(revision, method)
    message["params"] = {**message["params"], "_meta": [1]}
    err = refusal(receiver_of(revision, method), raw(message))
    assert err.code == INVALID_PARAMS
    assert "`$.params._meta`" in err.message and revision in err.message


# -- c. progressToken ----------------------------------------------------------------------------


@pytest.mark.parametrize("revision", HANDSHAKE_REVISIONS + ["2026-07-28", "draft"])
@pytest.mark.parametrize("token", [[1], 1.5, None, {"a": 1}])
def test_bad_progress_token_is_invalid_params_at_its_path(revision: str, token: Any) -> None:
    message = message_of(revision, "tools/call")
    message["params"]["_meta"] = {**message["params"].get("_meta", {}), "progressToken": token}
    err = refusal(receiver_of(revision, "tools/call"), raw(message))
    assert err.code == INVALID_PARAMS
    assert err.message.endswith("at `$.params._meta.progressToken`"), err.message


# -- d. notifications carry no id ----------------------------------------------------------------


def _notifications() -> list[Any]:
    return [
        pytest.param(revision, method, id=f"{revision}-{method}")
        for revision in HANDSHAKE_REVISIONS + ["2026-07-28", "draft"]
        for method, spec in sorted(mcpbind.bindings(revision).METHODS.items())
        if spec.kind == "notification"
    ]


@pytest.mark.parametrize("revision, method", _notifications())
@pytest.mark.parametrize("id", [7, "a", None])
def test_notification_with_an_id_is_an_invalid_request(revision: str, method: str, id: Any) -> None:
    message = {**message_of(revision, method), "id": id}
    assert refusal(receiver_of(revision, method), raw(message)).code == INVALID_REQUEST


@pytest.mark.parametrize("revision, method", _notifications())
def test_notification_is_sent_as_it_is_without_an_id(revision: str, method: str) -> None:
    message = message_of(revision, method)
    assert through(receiver_of(revision, method), sender_of(revision, method), message) == message


# -- e. the official draft examples --------------------------------------------------------------


def _example_messages(revisions: list[str], kinds: tuple[str, ...]) -> list[Any]:
    out = []
    for revision in revisions:
        for path in sorted(schema_dir().glob(f"{revision}/examples/*/*.json")):
            message = json.loads(path.read_bytes())
            if not isinstance(message, dict) or "jsonrpc" not in message:
                continue  # a bare value of its type, not a whole message
            kind = (
                "response"
                if "method" not in message
                else "request" if "id" in message else "notification"
            )
            if kind in kinds:
                out.append(
                    pytest.param(revision, path, id=f"{revision}/{path.parent.name}/{path.name}")
                )
    return out


DRAFT_MESSAGES = _example_messages(["draft"], ("request", "notification"))


def test_the_draft_has_18_whole_request_and_notification_examples() -> None:
    assert len(DRAFT_MESSAGES) == 18


@pytest.mark.parametrize("revision, path", DRAFT_MESSAGES)
def test_draft_codec_accepts_every_official_request_and_notification(
    revision: str, path: Path
) -> None:
    message = json.loads(path.read_bytes())
    decoded = receiver_of(revision, message["method"]).decode(path.read_bytes())
    assert type(decoded).__name__ in (path.parent.name, "Request")


# -- f. resultType selects the result class ------------------------------------------------------

RESULT_TYPES = [
    pytest.param({"content": [{"type": "text", "text": "x"}]}, "CallToolResult", id="absent"),
    pytest.param({"resultType": "complete", "content": []}, "CallToolResult", id="complete"),
    pytest.param(
        {"resultType": "input_required", "requestState": "s"}, "InputRequiredResult", id="input"
    ),
    pytest.param({"resultType": "task", "content": [], "task": {"id": 1}}, "Result", id="other"),
    pytest.param({"resultType": "", "content": []}, "Result", id="empty-string"),
]


def _client_waiting(revision: str, pending: int) -> Codec:
    codec = Codec(revision, "client")
    for i in range(pending):
        codec.expect(i + 1, "tools/call")
    return codec


@pytest.mark.parametrize("revision", ["2026-07-28", "draft"])
@pytest.mark.parametrize("pending", [1, 2], ids=["one-pending", "two-pending"])
@pytest.mark.parametrize("result, class_name", RESULT_TYPES)
def test_result_type_selects_the_result_class(
    revision: str, pending: int, result: Any, class_name: str
) -> None:
    codec = _client_waiting(revision, pending)
    response = codec.decode(raw({"jsonrpc": "2.0", "id": 1, "result": result}))
    assert type(response.result) is getattr(codec.module, class_name)
    again = json.loads(Codec(revision, "server").encode(response))["result"]
    assert again == {"resultType": "complete", **result}  # an absent resultType means complete


@pytest.mark.parametrize("revision", ["2026-07-28", "draft"])
@pytest.mark.parametrize("pending", [1, 2], ids=["one-pending", "two-pending"])
@pytest.mark.parametrize(
    "result_type", [{"resultType": "complete"}, {}], ids=["complete", "absent"]
)
def test_complete_result_that_its_class_refuses_is_invalid_params(
    revision: str, pending: int, result_type: dict[str, str]
) -> None:
    codec = _client_waiting(revision, pending)
    result = {**result_type, "content": [], "isError": "yes"}
    err = refusal(codec, raw({"jsonrpc": "2.0", "id": 1, "result": result}))
    assert err.code == INVALID_PARAMS and "`$.result.isError`" in err.message


# -- g. error responses round-trip -------------------------------------------------------------

ERRORS = [
    pytest.param({"code": -32000, "message": "m", "data": None}, id="data-null"),
    pytest.param({"code": -32000, "message": "m", "data": {"k": [1, None]}}, id="data"),
    pytest.param({"code": -32000, "message": "m"}, id="no-data"),
]


@pytest.mark.parametrize("revision", HANDSHAKE_REVISIONS + ["2026-07-28", "draft"])
@pytest.mark.parametrize("error", ERRORS)
def test_error_response_with_an_id_round_trips(revision: str, error: Any) -> None:
    message = {"jsonrpc": "2.0", "id": 3, "error": error}
    again = json.loads(
        Codec(revision, "server").encode(Codec(revision, "client").decode(raw(message)))
    )
    assert again == message and not schema_errors(revision, again)


@pytest.mark.parametrize("revision", ID_OPTIONAL)
@pytest.mark.parametrize("error", ERRORS)
def test_error_response_without_an_id_round_trips_without_one(revision: str, error: Any) -> None:
    message = {"jsonrpc": "2.0", "error": {**error, "code": -32700}}
    decoded = Codec(revision, "client").decode(raw(message))
    assert type(decoded) is ErrorResponse
    again = json.loads(Codec(revision, "server").encode(decoded))
    assert again == message and not schema_errors(revision, again)


@pytest.mark.parametrize("revision", ID_REQUIRED)
@pytest.mark.parametrize("sent", [{"id": None}, {}], ids=["null", "absent"])
def test_error_response_of_unknown_id_is_sent_with_null_id_where_the_schema_requires_one(
    revision: str, sent: dict[str, Any]
) -> None:
    message = {"jsonrpc": "2.0", **sent, "error": {"code": -32700, "message": "Parse error"}}
    again = json.loads(
        Codec(revision, "server").encode(Codec(revision, "client").decode(raw(message)))
    )
    assert again == {"jsonrpc": "2.0", "id": None, "error": message["error"]}  # JSON-RPC 2.0


# -- h. invalid UTF-8 anywhere -------------------------------------------------------------------

BAD_UTF8 = [
    pytest.param(
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"\xff":1}}}', id="meta-key"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":"\xc3"}}}', id="meta-value"
    ),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\xff":1}}', id="params-key"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping","\xfe":1}', id="message-key"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x\xed\xa0\x80":1}}',
        id="surrogate",
    ),
]


@pytest.mark.parametrize("revision", HANDSHAKE_REVISIONS)
@pytest.mark.parametrize("data", BAD_UTF8)
def test_invalid_utf8_in_keys_not_kept_is_a_parse_error(revision: str, data: bytes) -> None:
    assert refusal(Codec(revision, "server"), data).code == PARSE_ERROR


@pytest.mark.parametrize("revision", HANDSHAKE_REVISIONS + ["2026-07-28", "draft"])
def test_invalid_utf8_in_a_response_key_not_kept_is_a_parse_error(revision: str) -> None:
    codec = Codec(revision, "client")
    codec.expect(1, "tools/list")
    data = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[],"resultType":"complete","\xff":1}}'
    assert refusal(codec, data).code == PARSE_ERROR


# -- i. encode refuses what JSON-RPC cannot carry, before remembering anything -------------------


@pytest.mark.parametrize("revision", HANDSHAKE_REVISIONS)
@pytest.mark.parametrize("id", [1.5, None, True, [1]], ids=["float", "null", "bool", "list"])
def test_encode_refuses_a_request_id_that_is_not_a_string_or_integer(
    revision: str, id: Any
) -> None:
    codec = Codec(revision, "client")
    with pytest.raises((ValueError, TypeError), match="id"):
        codec.encode(_request_object(codec, "tools/call", id, {"name": "t"}))
    assert codec.pending == {}


@pytest.mark.parametrize("revision", HANDSHAKE_REVISIONS + ["2026-07-28", "draft"])
@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_encode_refuses_non_finite_numbers_and_remembers_nothing(
    revision: str, number: float
) -> None:
    codec = Codec(revision, "client")
    params: dict[str, Any] = {"name": "t", "arguments": {"x": [number]}}
    if revision in ("2026-07-28", "draft"):
        params["_meta"] = codec.meta()
    with pytest.raises(ValueError, match="NaN|Infinity|finite"):
        codec.encode(_request_object(codec, "tools/call", 1, params))
    assert codec.pending == {}
    server = Codec(revision, "server")
    result: dict[str, Any] = {"content": [], "_meta": {"x": number}}
    if revision in ("2026-07-28", "draft"):
        result["resultType"] = "complete"
    with pytest.raises(ValueError, match="NaN|Infinity|finite"):
        server.encode(Response(id=1, result=mcpbind.convert(result, server.module.CallToolResult)))


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_a_long_message_is_searched_for_non_finite_numbers_too(number: float) -> None:
    # Past a few hundred bytes the guard looks for NaN in the MessagePack form, not for a null.
    server = Codec("2025-11-25", "server")
    text = {"type": "text", "text": "x" * 5000}
    bad = {"content": [text], "_meta": {"x": [1, 2.5, number]}}
    with pytest.raises(ValueError, match="NaN|Infinity|finite"):
        server.encode(Response(id=1, result=mcpbind.convert(bad, server.module.CallToolResult)))
    # Finite floats, and an integer whose MessagePack bytes look like a float's marker followed
    # by a non-finite exponent (0xcb 0x7f 0xf0), are sent.
    lookalike = int.from_bytes(b"\x00\xcb\x7f\xf0\x00\x00\x00\x00", "big")
    good = {"content": [text], "_meta": {"x": [1.5, 1e308, -0.0, lookalike]}}
    out = server.encode(Response(id=1, result=mcpbind.convert(good, server.module.CallToolResult)))
    assert msgspec.json.decode(out)["result"]["_meta"]["x"] == [1.5, 1e308, -0.0, lookalike]
    # An integer past 64 bits, which JSON holds and MessagePack does not, is sent too, and a
    # non-finite number beside it is still found.
    big = {"content": [text], "_meta": {"x": [2**70]}}
    out = server.encode(Response(id=1, result=mcpbind.convert(big, server.module.CallToolResult)))
    assert msgspec.json.decode(out)["result"]["_meta"]["x"] == [2**70]
    both = {"content": [text], "_meta": {"x": [2**70, number]}}
    with pytest.raises(ValueError, match="NaN|Infinity|finite"):
        server.encode(Response(id=1, result=mcpbind.convert(both, server.module.CallToolResult)))


@pytest.mark.parametrize("revision", HANDSHAKE_REVISIONS)
def test_encode_refuses_a_response_id_that_is_not_a_string_or_integer(revision: str) -> None:
    codec = Codec(revision, "server")
    with pytest.raises((ValueError, TypeError), match="id"):
        codec.encode(Response(id=1.5, result=mcpbind.convert({}, codec.module.EmptyResult)))


# -- j. unknown methods cost bounded memory and bounded text -------------------------------------


def test_unknown_method_names_are_not_remembered() -> None:
    codec = Codec("2025-06-18", "server")

    def unknown(i: int) -> None:
        name = f"x-vendor/unknown-method-number-{i:06d}"
        refusal(codec, b'{"jsonrpc":"2.0","id":1,"method":"%s"}' % name.encode())

    growth = _growth(unknown)
    assert growth < 256 * 1024, f"20,000 unknown methods kept {growth} bytes"


def _growth(step: Any) -> int:
    """Bytes still held after ``step(i)`` for 20,000 values of ``i``, once the first 200 have
    built whatever is built once."""
    for i in range(200):
        step(i)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for i in range(200, 20200):
            step(i)
        gc.collect()
        return sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()


def test_untagged_union_candidates_are_remembered_in_bounded_memory() -> None:
    """The union decoder remembers candidates by key set: 20,000 objects, each with a key of its
    own or in an order of its own, keep no more than a bounded table."""
    from mcpbind import v2025_11_25 as v4

    union = v4.PrimitiveSchemaDefinition
    keys = ["type", "title", "description", "format", "default", "minLength", "maxLength"]

    def one(i: int) -> None:
        own = {"type": "string", f"x-{i}": "y" * 200}  # an undeclared key: never remembered
        assert type(mcpbind.convert(own, union)) is v4.StringSchema
        values = {"type": "string", "title": "t", "description": "d", "format": "email"}
        values |= {"default": "a", "minLength": 1, "maxLength": 9}
        order = keys[i % 7 :] + keys[: i % 7]  # the same keys in another order: a new key set
        shuffled = {k: values[k] for k in (order if i % 2 else reversed(order))}
        assert type(mcpbind.convert(shuffled, union)) is v4.StringSchema
        enum = {k: v for k, v in shuffled.items() if k in ("type", "title", "default")}
        enum = {"enum": ["a", "b"], **enum} if i % 3 else {**enum, "enum": ["a", "b"]}
        assert type(mcpbind.convert(enum, union)) is v4.UntitledSingleSelectEnumSchema

    growth = _growth(one)
    assert growth < 256 * 1024, f"20,000 union values kept {growth} bytes"


@pytest.mark.parametrize("revision", HANDSHAKE_REVISIONS + ["2026-07-28", "draft"])
def test_unknown_method_error_quotes_the_name_cut(revision: str) -> None:
    name = "n" * 100_000
    err = refusal(
        Codec(revision, "server"), b'{"jsonrpc":"2.0","id":1,"method":"%s"}' % name.encode()
    )
    assert len(err.message) < 500 and len(json.dumps(err.data)) < 500
    assert len(Codec(revision, "server").error_response(err)) < 1000


# -- k. mcpbind.decode raises only msgspec.DecodeError -------------------------------------------

HOSTILE = [
    pytest.param(
        '{"content":[],"_meta":{"x":' + "[" * 100_000 + "]" * 100_000 + "}}", id="deep-array"
    ),
    pytest.param(
        '{"content":[{"type":"text","text":"x","_meta":'
        + '{"a":' * 20_000
        + "1"
        + "}" * 20_001
        + "]}",
        id="deep-object",
    ),
    pytest.param('{"content":[{"type":"text","text":"\ud800"}]}', id="lone-surrogate-value"),
    pytest.param('{"content":[],"_meta":{"\udfff":1}}', id="lone-surrogate-key"),
]


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("name", ["CallToolResult", "Result", "ServerResult"])
@pytest.mark.parametrize("data", HOSTILE)
def test_decode_raises_only_decode_errors_on_hostile_input(
    revision: str, name: str, data: str
) -> None:
    with pytest.raises(msgspec.DecodeError):
        mcpbind.decode(data, getattr(mcpbind.bindings(revision), name))
    with pytest.raises(msgspec.DecodeError):
        mcpbind.decode(
            data.encode("utf-8", "surrogatepass"), getattr(mcpbind.bindings(revision), name)
        )


# -- the general property: decode then encode is the identity on schema-valid messages -----------


def _response_method(revision: str, path: Path) -> str | None:
    """The method a result response example answers, from its folder (``XResultResponse``)."""
    result = path.parent.name.removesuffix("Response")
    found = [
        method
        for method, spec in mcpbind.bindings(revision).METHODS.items()
        if result
        in [m.type.__name__ for m in getattr(spec.result, "members", ())]
        + [getattr(spec.result, "__name__", None)]
    ]
    return found[0] if len(found) == 1 else None


def _round_trip_example(revision: str, path: Path) -> Any:
    message = json.loads(path.read_bytes())
    if "method" in message:
        method = message["method"]
        return through(receiver_of(revision, method), sender_of(revision, method), message)
    if "error" in message:
        decoded = Codec(revision, "client").decode(path.read_bytes())
        assert type(decoded) is ErrorResponse
        return json.loads(Codec(revision, "server").encode(decoded))
    method = _response_method(revision, path)
    assert method is not None, path
    asked, answers = sender_of(revision, method), receiver_of(revision, method)
    asked.expect(message["id"], method)
    decoded = asked.decode(path.read_bytes())
    assert type(decoded.result).__name__ == path.parent.name.removesuffix("Response")
    return json.loads(answers.encode(decoded))


@pytest.mark.parametrize(
    "revision, path",
    _example_messages(["2026-07-28", "draft"], ("request", "notification", "response")),
)
def test_official_example_message_round_trips_schema_valid(revision: str, path: Path) -> None:
    message = json.loads(path.read_bytes())
    own = path.parent.name.removesuffix("Response")
    if "result" in message and schema_errors(revision, message["result"], own):
        # "complete", but not a valid result of its method (tests/disagreements.py: it fits
        # the schema only as an InputRequiredResult): the resultType rule refuses it.
        with pytest.raises(ProtocolError) as info:
            _round_trip_example(revision, path)
        assert info.value.code == INVALID_PARAMS
        return
    again = _round_trip_example(revision, path)
    assert again == message
    assert not schema_errors(revision, again)
    assert not schema_errors(revision, again, path.parent.name)


NATIVE_SESSIONS = ("2025-11-25", "2026-07-28")  # the everything server speaks these exactly


@pytest.mark.parametrize("path", sorted(SESSIONS.glob("*.jsonl")), ids=lambda p: p.stem)
def test_recorded_session_round_trips_schema_valid(path: Path) -> None:
    """Every message of the sessions in the revision the server speaks, and every client message
    of the others, decodes and encodes to itself. (In an older session the everything server
    sends keys of 2025-11-25 that the older schema does not declare, which are dropped by
    design, and values it forbids, which are refused.)"""
    revision = path.stem
    codecs = {"client": Codec(revision, "client"), "server": Codec(revision, "server")}
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    checked = 0
    for number, entry in enumerate(lines, 1):
        sender, message = entry["from"], entry["message"]
        receiver = "server" if sender == "client" else "client"
        mine = revision in NATIVE_SESSIONS or sender == "client"
        try:
            again = through(codecs[receiver], codecs[sender], message)
        except ProtocolError as err:
            # Refused as the recorded peer refused it: it answers with that very error.
            answer = next((e["message"] for e in lines[number:] if e["from"] == receiver), {})
            assert not mine or answer.get("error", {}).get("code") == err.code, (number, err)
            continue
        if mine:
            checked += 1
            assert again == message, f"{path.name}:{number}"
            assert not schema_errors(revision, again), f"{path.name}:{number}"
    assert checked >= 10


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25", "2026-07-28", "draft"])
def test_an_elicitation_answer_may_hold_a_number_where_schema_ts_allows_it(revision: str) -> None:
    """ElicitResult.content: every schema.ts with elicitation says number where the JSON rendering
    says integer (overlay [[patch]]es restore number): a form's 95.5 is read and written as is,
    and the patched schema agrees."""
    types = mcpbind.bindings(revision)
    result = mcpbind.decode(b'{"action":"accept","content":{"score":95.5}}', types.ElicitResult)
    assert result.content == {"score": 95.5}
    assert msgspec.json.decode(msgspec.json.encode(result)) == {
        "action": "accept",
        "content": {"score": 95.5},
    }
    schema = patched_schema(revision)
    defs = schema.get("$defs") or schema["definitions"]
    validator = jsonschema.Draft202012Validator(
        defs["ElicitResult"] | {"$defs": defs, "definitions": defs}
    )
    assert validator.is_valid({"action": "accept", "content": {"score": 95.5}})
