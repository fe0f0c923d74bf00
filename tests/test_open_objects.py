"""Open objects (``_meta``, ``Result``, a tool's ``inputSchema``): every key kept, declared keys
typed and checked when decoded, one property per declared key."""

from __future__ import annotations

import json

import msgspec
import pytest

import mcpbind
from mcpbind import Codec, OpenObject, ProtocolError

M = mcpbind.bindings("2026-07-28")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "vendor/first": [1, {"a": None}],
    "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
    "progressToken": 7,
    "vendor/last": "x",
}


def request(meta: object, method: str = "tools/list", **params: object) -> bytes:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta, **params}}
    return json.dumps(body).encode()


def test_every_key_survives_decode_and_encode_in_order_with_declared_keys_typed() -> None:
    msg = Codec("2026-07-28", "server").decode(request(META))
    meta = msg.params.meta
    assert type(meta) is M.RequestMetaObject
    assert list(meta) == list(META)
    assert type(meta.client_capabilities) is M.ClientCapabilities
    assert type(meta.client_info) is M.Implementation and meta.client_info.name == "c"
    assert meta.protocol_version == "2026-07-28" and meta.progress_token == 7
    assert meta.log_level is msgspec.UNSET and "io.modelcontextprotocol/logLevel" not in meta
    assert meta["vendor/first"] == [1, {"a": None}]
    out = json.loads(Codec("2026-07-28", "client").encode(msg))
    assert list(out["params"]["_meta"].items()) == list(META.items())


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("progressToken", 1.5, "Expected `int | str`, got `float`"),
        ("io.modelcontextprotocol/clientInfo", {"name": "c"}, "missing required field `version`"),
        ("io.modelcontextprotocol/protocolVersion", None, "Expected `str`, got `null`"),
    ],
)
def test_a_wrongly_typed_declared_key_is_refused_with_its_whole_path(
    key: str, value: object, error: str
) -> None:
    with pytest.raises(ProtocolError) as e:
        Codec("2026-07-28", "server").decode(request({**META, key: value}))
    assert error in e.value.message, e.value.message
    assert e.value.message.endswith(f" - at `$.params._meta.{key}`"), e.value.message


def test_a_missing_required_declared_key_and_a_non_object_are_refused() -> None:
    meta = {k: v for k, v in META.items() if k != "io.modelcontextprotocol/protocolVersion"}
    with pytest.raises(ProtocolError) as e:
        Codec("2026-07-28", "server").decode(request(meta))
    assert "missing required field `io.modelcontextprotocol/protocolVersion`" in e.value.message
    assert "$.params._meta" in e.value.message
    with pytest.raises(ProtocolError) as e:
        Codec("2026-07-28", "server").decode(request("meta"))
    assert "Expected `object`, got `str` - at `$.params._meta`" in e.value.message


# Declared here, decoded only by the test below: its decoder is compiled there, after the patch.
class Fields(msgspec.Struct, kw_only=True):
    name: str | msgspec.UnsetType = msgspec.field(default=msgspec.UNSET, name="x/name")
    inner: M.Implementation | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="x/inner"
    )


class Open(OpenObject):
    __slots__ = ()
    _attributes = {"name": "x/name", "inner": "x/inner"}
    _fields_type = Fields


class Holder(msgspec.Struct):
    meta: Open


def test_an_open_object_without_declared_keys_present_is_kept_without_a_convert(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Most ``_meta`` objects of results carry only vendor keys: nothing to check, no convert."""

    calls: list[object] = []
    real = msgspec.convert

    def counting(obj: object, *args: object, **kwargs: object) -> object:
        if args and args[0] is Fields:
            calls.append(obj)
        return real(obj, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(msgspec, "convert", counting)  # before the class's decoder is compiled
    plain = mcpbind.decode(b'{"meta": {"vendor/k": {"x/name": 1}}}', Holder).meta
    assert type(plain) is Open and plain == {"vendor/k": {"x/name": 1}} and calls == []
    typed = mcpbind.decode(
        b'{"meta": {"v": 1, "x/inner": {"name": "n", "version": "1"}, "x/name": "a"}}', Holder
    ).meta
    assert len(calls) == 1 and list(typed) == ["v", "x/inner", "x/name"]
    assert type(typed["x/inner"]) is M.Implementation and typed["x/name"] == "a"
    with pytest.raises(
        msgspec.ValidationError, match=r"Expected `str`, got `int` - at `\$.meta.x/name`"
    ):
        mcpbind.decode(b'{"meta": {"x/name": 1}}', Holder)
