"""The runtime codec: precise decoding, envelopes, batches, per-request _meta, hostile input."""

from __future__ import annotations

import json
from collections.abc import Callable

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mcpbind
from mcpbind import Codec, ErrorResponse, ProtocolError, Request, Response

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def raw(obj: object) -> bytes:
    return json.dumps(obj).encode()


def call(rev: str, **params: object) -> bytes:
    p = {"name": "t", **params}
    return raw({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": p})


@pytest.mark.parametrize("rev", ["2024-11-05", "2025-03-26", "2025-06-18"])
def test_old_revisions_wrap_requests(rev: str) -> None:
    c = Codec(rev, "server")
    M = c.module
    msg = c.decode(call(rev))
    assert type(msg) is Request and msg.id == 1 and type(msg.message) is M.CallToolRequest
    assert json.loads(c.encode(Response(id=1, result=M.CallToolResult(content=[])))) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": []},
    }


@pytest.mark.parametrize("rev", ["2025-11-25"])
def test_new_revisions_decode_generated_class(rev: str) -> None:
    c = Codec(rev, "server")
    msg = c.decode(call(rev))
    assert type(msg) is c.module.CallToolRequest and msg.id == 1


@pytest.mark.parametrize("rev", ["2024-11-05", "2025-11-25"])
def test_response_precise_from_encode_and_expect(rev: str) -> None:
    c = Codec(rev, "client")
    M = c.module
    params = mcpbind.convert({"name": "t"}, M.CallToolRequestParams)
    msg = c.request(
        M.CallToolRequest(
            params=params, **({"id": 0, "jsonrpc": "2.0"} if rev >= "2025-11-25" else {})
        ),
        5,
    )
    c.encode(msg)
    resp = c.decode(
        raw({"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "x"}]}})
    )
    assert type(resp.result) is M.CallToolResult
    c.expect("a", "tools/list")
    resp = c.decode(raw({"jsonrpc": "2.0", "id": "a", "result": {"tools": []}}))
    assert type(resp.result) is M.ListToolsResult
    generic = c.decode(raw({"jsonrpc": "2.0", "id": 99, "result": {"x": 1}}))
    assert type(generic.result) is M.Result and generic.result["x"] == 1
    err = c.decode(
        raw({"jsonrpc": "2.0", "id": 6, "error": {"code": -1, "message": "m", "data": [1]}})
    )
    assert type(err) is ErrorResponse and err.error.code == -1 and err.error.data == [1]


@pytest.mark.parametrize("rev", ["2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28"])
def test_a_message_in_its_wire_class_encodes_as_the_class_callers_hold(rev: str) -> None:
    """What a session sends: the same bytes, the same checks, the request remembered."""
    c, wrapped = Codec(rev, "client"), Codec(rev, "client")
    M = c.module
    meta = {"_meta": c.meta()} if M.FACTS.request_meta is not None else {}
    params = mcpbind.convert({"name": "t", **meta}, M.CallToolRequestParams)
    wire = M.FACTS.wires["tools/call"].wire(id=5, jsonrpc="2.0", params=params)
    envelope = {"id": 0, "jsonrpc": "2.0"} if M.FACTS.enveloped else {}
    held = c.request(M.CallToolRequest(params=params, **envelope), 5)
    assert c.encode(wire) == wrapped.encode(held)
    answer = raw({"jsonrpc": "2.0", "id": 5, "result": {"content": [], "resultType": "complete"}})
    assert type(c.decode(answer).result) is M.CallToolResult
    with pytest.raises(ValueError, match="string or an integer"):
        c.encode(M.FACTS.wires["tools/call"].wire(id=1.5, jsonrpc="2.0", params=params))
    assert c.pending == {}
    cancelled = M.METHODS["notifications/cancelled"]
    gone = mcpbind.convert({"requestId": 5, **meta}, cancelled.params)
    notification = M.FACTS.wires[cancelled.method].wire(jsonrpc="2.0", params=gone)
    assert json.loads(c.encode(notification)) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 5, **msgspec.to_builtins(meta)},
    }
    with pytest.raises(ProtocolError) as info:  # a server does not send tools/call
        Codec(rev, "server").encode(wire)
    assert info.value.code == -32601 and "sent by the client" in info.value.message


def test_batches_2025_03_26() -> None:
    c = Codec("2025-03-26", "server")
    out = c.decode(b"[" + call("x") + b',{"jsonrpc":"2.0","method":"notifications/initialized"}]')
    assert [type(m).__name__ for m in out] == ["Request", "InitializedNotification"]
    with pytest.raises(ProtocolError) as e:
        c.decode(b"[]")
    assert e.value.code == -32600
    body = c.encode([Response(id=1, result={}), Response(id=2, result={})])
    assert len(json.loads(body)) == 2
    with pytest.raises(ProtocolError):
        Codec("2025-11-25", "server").decode(b"[" + call("x") + b"]")


def test_encoding_a_batch_says_which_rule_it_breaks() -> None:
    with pytest.raises(ProtocolError, match="empty batch") as e:
        Codec("2025-03-26", "server").encode([])
    assert e.value.code == -32600
    newer = Codec("2025-11-25", "server")
    for batch in ([], [Response(id=1, result=newer.module.EmptyResult())]):
        with pytest.raises(ProtocolError, match="batches are not part of MCP 2025-11-25"):
            newer.encode(batch)


def test_2026_meta_checks() -> None:
    c = Codec("2026-07-28", "server", requires={"tools/call": {"sampling": {"tools": {}}}})
    ok = c.decode(
        raw({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
    )
    assert type(ok) is c.module.ListToolsRequest
    with pytest.raises(ProtocolError) as e:
        c.decode(
            raw(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/list",
                    "params": {
                        "_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}
                    },
                }
            )
        )
    assert e.value.code == -32022 and e.value.data == {
        "supported": ["2026-07-28"],
        "requested": "2025-11-25",
    }
    assert e.value.id == 2
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}
    with pytest.raises(ProtocolError) as e:
        c.decode(
            raw(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "x", "_meta": meta},
                }
            )
        )
    assert e.value.code == -32021 and e.value.data == {
        "requiredCapabilities": {"sampling": {"tools": {}}}
    }
    body = json.loads(c.error_response(e.value))
    assert body == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": -32021,
            "message": "Missing required client capability",
            "data": {"requiredCapabilities": {"sampling": {"tools": {}}}},
        },
    }


HOSTILE = [
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"', -32700),  # truncated
    (b"", -32700),
    (b"\xff\xfe", -32700),
    (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\xff"}}',
        -32700,
    ),  # invalid UTF-8
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}', -32602),  # wrong type
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"no/such"}', -32601),
    (
        b'{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}',
        -32601,
    ),  # wrong role
    (b'{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}', -32601),  # other revision
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', -32600),  # huge number
    (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":1e999}}}',
        -32602,
    ),
    (
        b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}',
        -32600,
    ),  # request without id
    (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600),
    (b'{"id":1,"method":"ping"}', -32600),
    (
        b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"no/such"}',
        -32601,
    ),  # duplicate keys: last wins
    (b'{"jsonrpc":"2.0","id":1,"method":5}', -32600),
    (b"42", -32600),
    (b'"str"', -32600),
    (b"null", -32600),
    (b"{}", -32600),
    (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"x"}}', -32600),
    (b"[" * 10000 + b"]" * 10000, -32700),  # 10,000-deep nesting
    (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":'
        + b"[" * 10000
        + b"]" * 10000
        + b"}}}",
        -32700,
    ),
    (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":'
        + b'"'
        + b"a" * 50_000_000
        + b"}}",
        -32700,
    ),
]


@pytest.mark.timeout(30)  # a hang fails the test instead of the suite
@pytest.mark.parametrize("rev", ["2024-11-05", "2025-11-25"])
@pytest.mark.parametrize(("data", "code"), HOSTILE, ids=range(len(HOSTILE)))
def test_hostile(rev: str, data: bytes, code: int) -> None:
    c = Codec(rev, "server")
    with pytest.raises(ProtocolError) as e:
        c.decode(data)
    assert e.value.code == code, e.value
    json.loads(c.error_response(e.value))


def test_invalid_params_message_names_path_and_revision() -> None:
    c = Codec("2025-11-25", "server")
    with pytest.raises(ProtocolError) as e:
        c.decode(call("x", arguments=3))
    assert (
        "$.params.arguments" in e.value.message
        and "2025-11-25" in e.value.message
        and e.value.id == 1
    )


def test_method_not_found_says_where() -> None:
    with pytest.raises(ProtocolError) as e:
        Codec("2026-07-28", "server").decode(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
        )
    assert e.value.code == -32601 and "2025-11-25" in e.value.message
    with pytest.raises(ProtocolError) as e:
        Codec("2025-11-25", "client").decode(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    assert e.value.code == -32601 and "client" in e.value.message


VALID = [
    call("x"),
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","id":"p","method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///x"}}',
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_bytes(data: bytes) -> None:
    for rev in ("2025-03-26", "2025-11-25"):
        try:
            Codec(rev, "server").decode(data)
        except ProtocolError as e:
            assert e.code in (-32700, -32600, -32601, -32602)


def _mutate(base: bytes, data: st.DataObject, pieces: list[bytes] | None = None) -> bytes:
    buf = bytearray(base)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        i = data.draw(st.integers(0, max(0, len(buf) - 1)))
        if op == "flip" and buf:
            buf[i] = data.draw(st.integers(0, 255))
        elif op == "insert":
            default = [b"{", b"[", b'"', b",", b"null", b"1e999", b"\xff", b'"id":']
            buf[i:i] = data.draw(st.sampled_from(default + (pieces or [])))
        elif op == "delete" and buf:
            del buf[i]
        else:
            del buf[i:]
    return bytes(buf)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID), st.data())
def test_fuzz_mutations(base: bytes, data: st.DataObject) -> None:
    buf = _mutate(base, data)
    for rev in ("2024-11-05", "2025-03-26", "2025-11-25", "2026-07-28"):
        for role in ("client", "server"):
            try:
                Codec(rev, role).decode(buf)
            except ProtocolError as e:
                assert e.code in (-32700, -32600, -32601, -32602, -32021, -32022)


SERVER_META = {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}
RESPONSES = [
    (
        "2025-11-25",
        "tools/call",
        raw({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}]}}),
    ),
    (
        "2025-11-25",
        "resources/read",
        raw({"jsonrpc": "2.0", "id": 1, "result": {"contents": [{"uri": "u", "blob": "AA=="}]}}),
    ),
    ("2025-11-25", "ping", raw({"jsonrpc": "2.0", "id": 1, "result": {}})),
    (
        "2025-11-25",
        "tools/call",
        raw({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "no"}}),
    ),
    ("2024-11-05", "prompts/get", raw({"jsonrpc": "2.0", "id": 1, "result": {"messages": []}})),
    *(
        ("2026-07-28", "tools/call", raw({"jsonrpc": "2.0", "id": 1, "result": result}))
        for result in (
            {
                "resultType": "complete",
                "content": [{"type": "text", "text": "hi"}],
                "_meta": SERVER_META,
            },
            {"resultType": "input_required", "requestState": "s", "inputRequests": {}},
        )
    ),
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(RESPONSES), st.data())
def test_the_fast_paths_agree_with_the_general_path(
    case: tuple[str, str, bytes], data: st.DataObject
) -> None:
    """Responses to a pending request take shortcuts (one closed pass, a union's preferred
    member, an error envelope); whatever the bytes, the answer must be the general path's."""
    rev, method, base = case
    pieces = [
        b'"requestState":"x",',
        b'"inputRequests":{},',
        b'"error":',
        b'"result":',
        b"\\u0041",
        b'"method":"x",',
    ]
    ids = [b'"id": 1', b'"id": 2', b'"id": "1"', b'"id": null', b'"id": 1.0', b'"id": true']
    base = base.replace(b'"id": 1', data.draw(st.sampled_from(ids)), 1)
    buf = _mutate(base, data, pieces) if data.draw(st.booleans()) else base

    def outcome(decode: Callable[[bytes], object]) -> object:
        try:
            return decode(buf)
        except ProtocolError as e:
            return ("error", e.code)

    fast, general = Codec(rev, "client"), Codec(rev, "client")
    wired = Codec(rev, "client", wire_results=True)  # as sessions read: the same, unwrapped
    if data.draw(st.booleans()):  # (an error response is read closed whether awaited or not)
        fast.expect(1, method)
        general.expect(1, method)
        wired.expect(1, method)
    general._fast_response = lambda data: None  # type: ignore[method-assign]
    general._fast_error = lambda data: None  # type: ignore[method-assign]
    expected = outcome(general.decode)
    assert outcome(fast.decode) == expected
    assert fast.pending == general.pending

    def unwrapped(data: bytes) -> object:
        got = wired.decode(data)
        answers = {w.response for w in wired.facts.wires.values()}
        return Response(id=got.id, result=got.result) if type(got) in answers else got

    assert outcome(unwrapped) == expected
    assert wired.pending == general.pending


def test_fast_path_is_one_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid request and a result response to a pending request each take one decode: the
    general path (raw envelope, then the body) is not reached."""
    c = Codec("2025-11-25", "server")
    reached: list[bytes] = []
    monkeypatch.setattr(c, "_classify", lambda data, batch: reached.append(data))
    assert type(c.decode(call("x", arguments={"a": 1}))) is c.module.CallToolRequest
    client = Codec("2025-11-25", "client")
    monkeypatch.setattr(client, "_classify", lambda data, batch: reached.append(data))
    client.expect(7, "tools/call")
    got = client.decode(raw({"jsonrpc": "2.0", "id": 7, "result": {"content": []}}))
    assert type(got) is Response and type(got.result) is client.module.CallToolResult
    assert reached == []


@pytest.mark.parametrize("rev", ["2024-11-05", "2025-11-25", "2026-07-28"])
def test_wire_results_give_a_result_read_in_one_pass_as_it_decoded(rev: str) -> None:
    """``wire_results=True`` (what sessions use): a result response read in one pass comes back
    in its method's response class of ``FACTS.wires``, the same id and result a ``Response``
    would carry; the request is answered all the same. What that pass does not read (an error,
    a result to an id nobody awaits) decodes as without the option."""
    wired, plain = Codec(rev, "client", wire_results=True), Codec(rev, "client")
    result: dict[str, object] = {"content": [{"type": "text", "text": "hi"}]}
    if rev >= "2026":
        result["resultType"] = "complete"
    body = raw({"jsonrpc": "2.0", "id": "a", "result": result})
    for c in (wired, plain):
        c.expect("a", "tools/call")
    got, expected = wired.decode(body), plain.decode(body)
    assert type(got) is wired.facts.wires["tools/call"].response
    assert type(expected) is Response and type(expected.result) is wired.module.CallToolResult
    assert (got.id, got.result) == (expected.id, expected.result)
    assert wired.pending == plain.pending == {}
    assert type(wired.decode(body)) is Response  # answered: nobody awaits it now
    wired.expect(2, "tools/call")
    error = wired.decode(raw({"jsonrpc": "2.0", "id": 2, "error": {"code": 1, "message": "no"}}))
    assert type(error) is ErrorResponse and wired.pending == {}


def test_a_result_answering_an_earlier_request_than_the_last_is_read_in_one_pass() -> None:
    """With two requests pending, the later one answered first: the earlier one's result is then
    the one pending, and still read in one pass (``wire_results`` shows which pass read it)."""
    c = Codec("2025-11-25", "client", wire_results=True)
    M, wires = c.module, c.facts.wires
    c.expect(1, "tools/call")
    c.expect(2, "resources/read")
    read = c.decode(raw({"jsonrpc": "2.0", "id": 2, "result": {"contents": []}}))
    assert type(read) is wires["resources/read"].response
    assert type(read.result) is M.ReadResourceResult
    called = c.decode(raw({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}))
    assert type(called) is wires["tools/call"].response
    assert type(called.result) is M.CallToolResult and c.pending == {}


RESULT_KIND_CASES = [
    # resultType "complete" or absent: the method's own result, or -32602 with the path
    ({"resultType": "complete", "content": [{"type": "text", "text": "x"}]}, "CallToolResult"),
    ({"content": [{"type": "text", "text": "x"}]}, "CallToolResult"),  # absent: complete
    (
        {"resultType": "complete", "content": [], "requestState": "s", "inputRequests": {}},
        "CallToolResult",
    ),
    (
        {"resultType": "complete", "content": [{"type": "text", "text": "x" * 5000}]},
        "CallToolResult",
    ),
    ({"resultType": "complete", "content": [], "isError": "yes"}, -32602),
    ({"resultType": "complete"}, -32602),
    # "input_required": InputRequiredResult, whatever else is there
    ({"resultType": "input_required", "requestState": "s"}, "InputRequiredResult"),
    ({"resultType": "input_required", "inputRequests": {}}, "InputRequiredResult"),
    ({"resultType": "input_required", "content": [], "requestState": "s"}, "InputRequiredResult"),
    # any other value: an extension's result, every key kept, never the method's own class
    ({"resultType": "task", "task": {"taskId": "t"}, "content": []}, "Result"),
]


@pytest.mark.parametrize(("result", "expected"), RESULT_KIND_CASES)
@pytest.mark.parametrize("escape", [False, True])
def test_results_are_told_apart_by_their_result_type(
    result: dict[str, object], expected: object, escape: bool
) -> None:
    """2026-07-28 results carry ``resultType`` (FACTS.result_kinds): it alone picks the class."""
    body = raw(result)
    if escape:  # a key spelled with an escape is the same key for JSON
        body = body.replace(b'"resultType"', b'"result\\u0054ype"')
    c = Codec("2026-07-28", "client")
    c.expect(1, "tools/call")
    message = b'{"jsonrpc": "2.0", "id": 1, "result": ' + body + b"}"
    if isinstance(expected, int):
        with pytest.raises(ProtocolError) as info:
            c.decode(message)
        assert (
            info.value.code == expected
            and "$.result" in info.value.message
            and "2026-07-28" in info.value.message
        )
        return
    got = c.decode(message)
    assert type(got) is Response and type(got.result).__name__ == expected
    back = msgspec.json.decode(Codec("2026-07-28", "server").encode(got))["result"]
    # Re-encoded: the same JSON, an absent resultType written out; keys the class does not
    # declare (requestState on a complete result) are accepted and not kept.
    expected_back = {"resultType": "complete", **result}
    assert back.items() <= expected_back.items()
    assert set(expected_back) - set(back) <= {"requestState", "inputRequests", "content"} - set(
        back
    )


@pytest.mark.parametrize("data", [123, None, ["{}"], {"jsonrpc": "2.0"}])
def test_decode_takes_bytes_or_str(data: object) -> None:
    """A Python object that is not the message's bytes is the caller's mistake, not the peer's."""
    with pytest.raises(TypeError, match="bytes or str"):
        Codec("2025-11-25", "server").decode(data)  # type: ignore[arg-type]


def test_decode_takes_bytearray_and_memoryview_with_pending_requests() -> None:
    c = Codec("2025-11-25", "client")
    body = raw({"jsonrpc": "2.0", "id": 3, "result": {"content": []}})
    for data in (bytearray(body), memoryview(body)):
        c.expect(3, "tools/call")
        assert type(c.decode(data).result) is c.module.CallToolResult


def test_a_result_response_that_cannot_be_read_is_no_longer_pending() -> None:
    codec = Codec("2025-11-25", "client")
    M = codec.module
    codec.encode(M.CallToolRequest(id=4, jsonrpc="2.0", params=M.CallToolRequestParams(name="x")))
    with pytest.raises(ProtocolError) as info:
        codec.decode(b'{"jsonrpc":"2.0","id":4,"result":{"content":3}}')
    assert info.value.id == 4 and "$.result.content" in info.value.message
    assert codec.pending == {}  # answered, if badly: the id is free and nothing waits on it


@pytest.mark.parametrize("told", [1, True, 1.0, "1"])
def test_a_result_is_matched_to_the_one_pending_id_as_the_pending_dict_matches_it(
    told: object,
) -> None:
    """The one-pass read of a result and the classifier agree on which pending request it
    answers, whatever the type of the id ``expect`` was told: an equal id answers it (the
    response carries the id decoded), a string and an integer are never equal."""
    body = raw({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})
    fast, general = Codec("2025-11-25", "client"), Codec("2025-11-25", "client")
    general._fast_response = lambda data: None  # type: ignore[method-assign]
    for c in (fast, general):
        c.expect(told, "tools/call")  # type: ignore[arg-type]
        c.expect(9, "tools/list")
        del c._pending[9]  # (the one pending left is the first told: not the last added)
    one = Codec("2025-11-25", "client")
    one.expect(told, "tools/call")  # type: ignore[arg-type]
    got = [c.decode(body) for c in (fast, general, one)]
    for r in got:
        assert type(r) is Response and type(r.id) is int and r.id == 1
    answered = told == 1
    assert [type(r.result) is fast.module.CallToolResult for r in got] == [answered] * 3
    assert [c.pending for c in (fast, general, one)] == [
        {} if answered else {told: "tools/call"}
    ] * 3
