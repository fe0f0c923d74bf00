"""The codec's guard against non-finite numbers (msgspec writes NaN and infinities as null): each
way a message is searched, by its length and what it is made of, refuses one and lets a float-free
message through, nulls included."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest

import mcpbind
from mcpbind import Codec, Response

BAD = [math.nan, math.inf, -math.inf]
IDS = ["nan", "inf", "-inf"]


def _tool(i: int, minimum: Any = 1) -> dict[str, Any]:
    return {
        "name": f"tool_{i}",
        "description": "Does a thing with its arguments and returns a result.",
        "inputSchema": {
            "type": "object",
            "properties": {"limit": {"type": "integer", "minimum": minimum}},
        },
    }


def _tools(server: Codec, count: int, at: int, minimum: Any) -> Response[Any]:
    """A tools/list response of ``count`` tools (dense structure), ``minimum`` in the input
    schema of the tool at ``at`` (an open object, deep in the message)."""
    tools = [_tool(i, minimum if i == at else 1) for i in range(count)]
    result = mcpbind.convert({"tools": tools}, server.module.ListToolsResult)
    return Response(id=1, result=result)


@pytest.mark.parametrize("number", BAD, ids=IDS)
@pytest.mark.parametrize("count", [3, 5, 200], ids=["600B", "1KB", "40KB"])
def test_a_non_finite_number_deep_in_an_open_object_is_refused(count: int, number: float) -> None:
    server = Codec("2025-11-25", "server")
    for at in (0, count // 2, count - 1):
        msg = _tools(server, count, at, number)
        assert len(msgspec.json.encode(msg)) > 512
        with pytest.raises(ValueError, match="non-finite"):
            server.encode(msg)


@pytest.mark.parametrize("count", [1, 3, 5, 200], ids=["short", "600B", "1KB", "40KB"])
def test_a_float_free_message_with_nulls_is_sent(count: int) -> None:
    server = Codec("2025-11-25", "server")
    msg = _tools(server, count, count // 2, None)  # a JSON null where a number could be
    out = server.encode(msg)
    assert b"null" in out
    assert msgspec.json.decode(out)["result"]["tools"][count // 2]["inputSchema"] == {
        "type": "object",
        "properties": {"limit": {"type": "integer", "minimum": None}},
    }
    finite = _tools(server, count, count // 2, 2.5)  # and finite floats beside a null
    finite.result.tools[0].input_schema["properties"]["limit"]["maximum"] = None
    assert b"2.5" in server.encode(finite)


@pytest.mark.parametrize("number", BAD, ids=IDS)
def test_one_long_string_and_a_non_finite_number_is_refused(number: float) -> None:
    # Its middle is text, not structure: it is searched in its MessagePack form.
    server = Codec("2025-11-25", "server")
    text = {"type": "text", "text": "lorem ipsum " * 5000}
    for meta in ({"x": number}, {"x": [1.5, {"y": number}]}):
        bad = mcpbind.convert({"content": [text], "_meta": meta}, server.module.CallToolResult)
        with pytest.raises(ValueError, match="non-finite"):
            server.encode(Response(id=1, result=bad))
    good = {"content": [text], "_meta": {"x": [1.5, None]}}
    out = server.encode(Response(id=1, result=mcpbind.convert(good, server.module.CallToolResult)))
    assert msgspec.json.decode(out)["result"]["_meta"] == {"x": [1.5, None]}


@pytest.mark.parametrize("number", BAD, ids=IDS)
def test_a_long_request_with_a_non_finite_argument_is_refused_and_not_remembered(
    number: float,
) -> None:
    client = Codec("2025-11-25", "client")
    arguments = {f"key_{i}": {"a": i, "b": [i, "x"]} for i in range(300)}
    arguments["key_150"]["b"].append(number)
    params = mcpbind.convert(
        {"name": "t", "arguments": arguments}, client.module.CallToolRequestParams
    )
    with pytest.raises(ValueError, match="non-finite"):
        client.encode(client.module.CallToolRequest(id=7, jsonrpc="2.0", params=params))
    assert client.pending == {}


def test_a_long_string_is_not_searched_as_text_where_its_class_was_structure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcpbind import _nonfinite as codec_module  # the NaN guard codec.encode calls

    monkeypatch.setattr(codec_module, "_STRUCTURED", {})  # nothing learned by other tests
    server = Codec("2025-11-25", "server")
    structured = {"content": [{"type": "text", "text": f"t{i}"} for i in range(100)]}
    server.encode(Response(id=1, result=mcpbind.convert(structured, server.module.CallToolResult)))
    long_text = {"content": [{"type": "text", "text": "lorem ipsum " * 100_000}]}
    server.encode(Response(id=2, result=mcpbind.convert(long_text, server.module.CallToolResult)))
    cls = server.module.CallToolResult
    verdicts = [
        dense
        for kind, dense in codec_module._STRUCTURED.items()
        if kind is cls or (type(kind) is tuple and kind[0] is cls)
    ]
    assert True in verdicts and False in verdicts


def test_what_the_guard_keeps_is_bounded() -> None:
    from mcpbind import _nonfinite as codec_module  # the NaN guard codec.encode calls

    server = Codec("2025-11-25", "server")
    # The (class, size) -> "made of structure" verdicts: any result class may be encoded, so they
    # are bounded by a count, not by the generated classes.
    for i in range(codec_module._KINDS_MAX + 100):
        cls = msgspec.defstruct(f"Result{i}", [("text", str), ("n", float)])
        server.encode(Response(id=i, result=cls(text="x" * 1100, n=1.5)))
        assert len(codec_module._STRUCTURED) <= codec_module._KINDS_MAX
    # The MessagePack buffer of a thread: kept for the next long message, not past 4 MiB.
    text = {"type": "text", "text": "y" * 100_000}
    long = mcpbind.convert({"content": [text]}, server.module.CallToolResult)
    server.encode(Response(id=1, result=long))
    kept = codec_module._scratch.buffer
    assert 100_000 < len(kept) < 101_000
    server.encode(Response(id=2, result=long))
    assert codec_module._scratch.buffer is kept
    huge = {"content": [{"type": "text", "text": "z" * (5 << 20)}]}
    server.encode(Response(id=3, result=mcpbind.convert(huge, server.module.CallToolResult)))
    assert codec_module._scratch.buffer is not kept and len(codec_module._scratch.buffer) == 0
