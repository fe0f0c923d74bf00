"""Open objects (``_meta``, ``Result``, a tool's ``inputSchema``): every key kept, declared keys
typed and checked when decoded, one property per declared key."""

from __future__ import annotations

import json
from collections.abc import Callable

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


# The same _meta with the declared keys only, in another order than the generated fields':
# the codec reads it in the message's one pass (a closed twin of the wire Struct, _tables._closed).
DECLARED = {k: v for k, v in reversed(META.items()) if not k.startswith("vendor/")}


def fresh() -> Codec:
    return Codec("2026-07-28", "server")


def latched() -> Codec:
    """A codec that has read a _meta with undeclared keys: it reads with the wire Structs since."""
    codec = fresh()
    codec.decode(request(META, "tools/call", name="t"))
    return codec


CODECS = pytest.mark.parametrize("codec", [fresh, latched], ids=["fresh", "latched"])


@CODECS
@pytest.mark.parametrize("meta", [META, DECLARED], ids=["other keys", "declared only"])
@pytest.mark.parametrize(
    ("method", "cls", "params"),
    [("tools/list", "ListToolsRequest", {}), ("tools/call", "CallToolRequest", {"name": "t"})],
)
def test_a_request_decodes_as_through_the_open_objects_hook(
    codec: Callable[[], Codec],
    meta: dict[str, object],
    method: str,
    cls: str,
    params: dict[str, object],
) -> None:
    data = request(meta, method, **params)
    msg = codec().decode(data)
    ref = mcpbind.decode(data, getattr(M, cls))  # the wire Struct itself, _meta by its hook
    assert type(msg) is type(ref) and type(msg.params) is type(ref.params)
    assert msg == ref and type(msg.params.meta) is M.RequestMetaObject
    assert {k: type(v) for k, v in msg.params.meta.items()} == {
        k: type(v) for k, v in ref.params.meta.items()
    }
    out = json.loads(Codec("2026-07-28", "client").encode(msg))
    assert out == json.loads(data)


def test_a_codec_that_reads_an_undeclared_meta_key_stops_trying_the_twins() -> None:
    """The twins refuse a _meta with a key they do not declare, and the message is read again
    with the wire Structs: once a codec has seen that, it reads with those from the first (the
    cost of a message before the twins, not that and a refusal). Only that codec."""
    codec, other = fresh(), fresh()
    twins, wires = codec._t.fast, codec._t.open
    assert wires is not None and codec._fast is twins
    declared = codec.decode(request(DECLARED, "tools/call", name="t"))
    assert codec._fast is twins  # (a _meta of declared keys: read by the twin)
    with pytest.raises(ProtocolError):  # refused by both: nothing learned of the peer
        codec.decode(request({**META, "progressToken": 1.5}, "tools/call", name="t"))
    assert codec._fast is twins
    msg = codec.decode(request(META, "tools/call", name="t"))
    assert codec._fast is wires and other._fast is twins
    assert type(msg.params.meta) is M.RequestMetaObject and list(msg.params.meta) == list(META)
    assert msg.params.meta["vendor/first"] == [1, {"a": None}]
    assert type(msg.params.meta.client_info) is M.Implementation
    again = codec.decode(request(DECLARED, "tools/call", name="t"))
    assert codec._fast is wires
    # the same value and classes; its keys in the order they came, as a _meta with other keys
    assert again == declared and type(again) is type(declared)
    assert type(again.params) is type(declared.params)
    assert type(again.params.meta) is type(declared.params.meta) is M.RequestMetaObject
    assert list(again.params.meta) == list(DECLARED)
    assert other.decode(request(DECLARED, "tools/call", name="t")) == declared


class Counting:
    """A decoder's stand-in counting the messages it is given."""

    def __init__(self, decoder: msgspec.json.Decoder[object]) -> None:
        self.decoder, self.calls = decoder, 0

    def decode(self, data: bytes) -> object:
        self.calls += 1
        return self.decoder.decode(data)


def test_only_a_refusal_at_the_twins_meta_is_read_again_with_the_wire_structs() -> None:
    """A message the twins refuse elsewhere (or for a declared key) is refused by the wire
    Structs too: it goes to the classifier at once, with the errors a latched codec gives."""
    codec = fresh()
    counting = Counting(codec._open)
    codec._open = counting  # type: ignore[assignment]
    refused = [
        request({**DECLARED, "progressToken": 1.5}, "tools/call", name="t"),
        request(DECLARED, "tools/call", name=5),
        request(DECLARED, "no/such"),
        request(DECLARED, "tools/call"),
    ]
    for data in refused:
        with pytest.raises(ProtocolError) as e:
            codec.decode(data)
        with pytest.raises(ProtocolError) as want:
            latched().decode(data)
        assert (e.value.code, e.value.message, e.value.id) == (
            want.value.code,
            want.value.message,
            want.value.id,
        )
    assert counting.calls == 0 and codec._fast is codec._t.fast
    with pytest.raises(ProtocolError) as e:  # refused at _meta, then by the wire Struct
        codec.decode(request(META, "tools/call", name=5))
    assert "Expected `str`, got `int` - at `$.params.name`" in e.value.message
    assert counting.calls == 1 and codec._fast is codec._t.fast
    codec.decode(request(META, "tools/call", name="t"))
    assert counting.calls == 2 and codec._fast is counting


def test_from_fields_written_out_is_the_generic_one() -> None:
    values = msgspec.convert(DECLARED, M.RequestMetaObject._fields_type)
    generic = OpenObject._from_fields.__func__(M.RequestMetaObject, values)  # type: ignore[attr-defined]
    written = M.RequestMetaObject._from_fields(values)
    assert type(written) is type(generic) is M.RequestMetaObject
    assert list(written.items()) == list(generic.items())
    assert written == DECLARED | {
        "io.modelcontextprotocol/clientCapabilities": values.client_capabilities,
        "io.modelcontextprotocol/clientInfo": values.client_info,
    }


@CODECS
@pytest.mark.parametrize("meta", [META, DECLARED], ids=["other keys", "declared only"])
@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("progressToken", 1.5, "Expected `int | str`, got `float`"),
        ("io.modelcontextprotocol/clientInfo", {"name": "c"}, "missing required field `version`"),
        ("io.modelcontextprotocol/protocolVersion", None, "Expected `str`, got `null`"),
    ],
)
def test_a_wrongly_typed_declared_key_is_refused_with_its_whole_path(
    codec: Callable[[], Codec], meta: dict[str, object], key: str, value: object, error: str
) -> None:
    with pytest.raises(ProtocolError) as e:
        codec().decode(request({**meta, key: value}))
    assert e.value.code == -32602 and error in e.value.message, e.value.message
    assert e.value.message.endswith(f" - at `$.params._meta.{key}`"), e.value.message


@CODECS
@pytest.mark.parametrize("full", [META, DECLARED], ids=["other keys", "declared only"])
def test_a_missing_required_declared_key_and_a_non_object_are_refused(
    codec: Callable[[], Codec], full: dict[str, object]
) -> None:
    meta = {k: v for k, v in full.items() if k != "io.modelcontextprotocol/protocolVersion"}
    with pytest.raises(ProtocolError) as e:
        codec().decode(request(meta))
    assert "missing required field `io.modelcontextprotocol/protocolVersion`" in e.value.message
    assert "$.params._meta" in e.value.message
    with pytest.raises(ProtocolError) as e:
        codec().decode(request("meta"))
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
