"""What `make bench` measures mcpbind against, all in the same process.

Each anchor turns a workload into a decode callable (bytes of every message -> typed values) and,
given what that returned, an encode callable (values -> bytes). ``None`` with a reason when the
anchor cannot handle the workload at all.

- ``mcpbind``: ``Codec(revision, role).decode`` per message (``expect(id, method)`` before a
  response, as the sending side's bookkeeping would), ``Codec.encode`` back.
- ``mcp-types``: the official bindings: ``jsonrpc_message_adapter.validate_json`` for the envelope,
  then ``mcp_types.methods.parse_*`` for the typed params or result (the SDK's own two steps);
  ``model_dump_json(by_alias=True, exclude_none=True)`` of the typed model back.
- ``dmcg``: datamodel-code-generator's plain msgspec output for the same schema, generated into a
  temporary folder; one ``msgspec.json.Decoder`` per message for an envelope Struct around the
  generated params / result type (it is told the method: it has no way to find it).
- ``orjson`` / ``json``: ``loads`` / ``dumps`` of the same bytes / the equivalent dicts: untyped.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union, get_args

import msgspec
import orjson

from .workloads import SESSIONS, Message, Workload

Fn = Callable[[], Any]


class Anchor:
    name = ""

    def decoder(self, w: Workload) -> tuple[Fn | None, str]:
        raise NotImplementedError

    def encoder(self, w: Workload, decoded: list[Any]) -> tuple[Fn | None, str]:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------


class Mcpbind(Anchor):
    name = "mcpbind"

    def decoder(self, w: Workload) -> tuple[Fn | None, str]:
        from mcpbind import Codec

        codecs = {r: Codec(w.revision, r) for r in ("client", "server")}
        items = [
            (
                codecs[m.receiver],
                m.kind == "response" and m.method is not None,
                m.id,
                m.method,
                m.data,
            )
            for m in w.messages
        ]

        def run() -> list[Any]:
            out = []
            for codec, expect, id_, method, data in items:
                if expect:
                    codec.expect(id_, method)
                out.append(codec.decode(data))
            return out

        return run, ""

    def encoder(self, w: Workload, decoded: list[Any]) -> tuple[Fn | None, str]:
        from mcpbind import Codec

        codecs = {r: Codec(w.revision, r) for r in ("client", "server")}
        items = [
            (codecs[m.sender].encode, value) for m, value in zip(w.messages, decoded, strict=True)
        ]
        for (encode, value), m in zip(items, w.messages, strict=True):
            try:
                encode(value)
            except Exception as exc:  # noqa: BLE001 - reported in the table, not raised
                return None, f"cannot encode {m.method}: {type(exc).__name__}: {exc}"

        def run() -> list[bytes]:
            return [encode(value) for encode, value in items]

        return run, ""


def accepted_by_mcpbind(w: Workload) -> Workload:
    """``w`` without the messages mcpbind rejects (the peer deviations of the interop sessions)."""
    from mcpbind import Codec, ProtocolError

    codecs = {r: Codec(w.revision, r) for r in ("client", "server")}
    keep = []
    for m in w.messages:
        codec = codecs[m.receiver]
        if m.kind == "response" and m.method is not None:
            codec.expect(m.id, m.method)
        try:
            codec.decode(m.data)
        except ProtocolError as exc:
            w.skipped.append(f"{m.method}: {exc.message}")
            continue
        keep.append(m)
    w.messages = keep
    return w


# ---------------------------------------------------------------------------------------------


class McpTypes(Anchor):
    name = "mcp-types"

    def __init__(self) -> None:
        from mcp_types import jsonrpc, methods

        self.adapter = jsonrpc.jsonrpc_message_adapter
        self.parse = {
            ("request", "client"): methods.parse_client_request,
            ("request", "server"): methods.parse_server_request,
            ("notification", "client"): methods.parse_client_notification,
            ("notification", "server"): methods.parse_server_notification,
            ("response", "server"): methods.parse_server_result,  # a result the server sent
            ("response", "client"): methods.parse_client_result,
        }

    def _one(self, m: Message, version: str) -> Callable[[], Any]:
        validate = self.adapter.validate_json
        data = m.data
        parse = self.parse.get((m.kind, m.sender)) if m.method else None
        if parse is None:
            return lambda: validate(data)
        method = m.method
        if m.kind == "response":
            return lambda: parse(method, version, validate(data).result)
        return lambda: parse(method, version, validate(data).params)

    def decoder(self, w: Workload) -> tuple[Fn | None, str]:
        if w.revision == "draft":
            return None, "no draft"
        steps = [self._one(m, w.revision) for m in w.messages]
        rejected = []
        for step, m in zip(steps, w.messages, strict=True):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - what the official bindings raise varies
                rejected.append(f"{m.method}: {type(exc).__name__}")
        if not steps:
            return None, "no messages"
        if len(rejected) == len(steps):
            return None, f"rejects all: {rejected[0]}"

        def run() -> list[Any]:
            out = []
            for step in steps:
                try:
                    out.append(step())
                except Exception:  # noqa: BLE001
                    out.append(None)
            return out

        note = (
            f"rejects {len(rejected)}/{len(steps)} ({', '.join(sorted(set(rejected)))})"
            if rejected
            else ""
        )
        return run, note

    def encoder(self, w: Workload, decoded: list[Any]) -> tuple[Fn | None, str]:
        values = [v for v in decoded if v is not None]

        def run() -> list[str]:
            return [v.model_dump_json(by_alias=True, exclude_none=True) for v in values]

        return run, ""


# ---------------------------------------------------------------------------------------------


def generate_dmcg(revisions: list[str], schemas: Path, out: Path) -> dict[str, float]:
    """Run datamodel-code-generator (plain msgspec output) on each revision's schema, in parallel."""
    exe = Path(sys.executable).with_name("datamodel-codegen")
    procs = {}
    start = time.perf_counter()
    for rev in revisions:
        target = out / f"dmcg_{rev.replace('-', '_')}.py"
        argv = [
            str(exe), "--input", str(schemas / rev / "schema.json"), "--input-file-type", "jsonschema",
            "--output-model-type", "msgspec.Struct", "--output", str(target),
        ]  # fmt: skip
        procs[rev] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    warnings: dict[str, str] = {}
    for rev, proc in procs.items():
        _, err = proc.communicate()
        warnings[rev] = err.decode(errors="replace")
    return {"seconds": time.perf_counter() - start, "warnings": warnings}  # type: ignore[dict-item]


class Dmcg(Anchor):
    name = "dmcg"

    def __init__(self, revisions: list[str], schemas: Path) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="bench-dmcg-")
        self.generation = generate_dmcg(revisions, schemas, Path(self.tmp.name))
        self.modules: dict[str, Any] = {}
        for rev in revisions:
            path = Path(self.tmp.name) / f"dmcg_{rev.replace('-', '_')}.py"
            if not path.exists():
                continue
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
            self.modules[rev] = module

    def _decoder(self, D: Any, M: Any, m: Message) -> msgspec.json.Decoder[Any]:
        """The Decoder for one message, or TypeError naming what msgspec refuses."""
        rid = Union[int, str]  # noqa: UP007
        if m.kind == "error":
            name = "JSONRPCErrorResponse" if hasattr(D, "JSONRPCErrorResponse") else "JSONRPCError"
            return msgspec.json.Decoder(getattr(D, name))
        spec = M.METHODS[m.method]
        if m.kind == "response":
            result = spec.result
            name = getattr(result, "__name__", None) or get_args(result)[0].__name__
            env = msgspec.defstruct(
                "Env", [("jsonrpc", str), ("id", rid), ("result", getattr(D, name))]
            )
            return msgspec.json.Decoder(env)
        cls = getattr(D, spec.message.__name__)
        fields = {f.name: f for f in msgspec.structs.fields(cls)}
        if "jsonrpc" in fields:
            return msgspec.json.Decoder(cls)
        head: list[Any] = (
            [("jsonrpc", str)] + ([("id", rid)] if m.kind == "request" else []) + [("method", str)]
        )
        params = fields.get("params")
        if params is not None:
            default = (
                params.default if params.default is not msgspec.NODEFAULT else msgspec.NODEFAULT
            )
            head.append(
                ("params", params.type)
                if default is msgspec.NODEFAULT
                else ("params", params.type, default)
            )
        return msgspec.json.Decoder(msgspec.defstruct("Env", head))

    def decoder(self, w: Workload) -> tuple[Fn | None, str]:
        import mcpbind

        D = self.modules.get(w.revision)
        if D is None:
            return None, "not generated"
        M = mcpbind.bindings(w.revision)
        decoders = []
        refused: list[str] = []
        rejected: list[str] = []
        for m in w.messages:
            try:
                dec = self._decoder(D, M, m)
            except (TypeError, AttributeError, KeyError) as exc:
                refused.append(f"{m.method}: {str(exc).splitlines()[0][:120]}")
                continue
            try:
                dec.decode(m.data)
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                rejected.append(f"{m.method}: {str(exc)[:80]}")
                continue
            decoders.append((dec.decode, m.data))
        if not decoders:
            return None, "cannot decode: " + (refused or rejected)[0]
        if refused or rejected:
            # A partial run would not be comparable: say what fails, time nothing.
            what = refused or rejected
            verb = "cannot build a decoder" if refused else "rejects"
            return None, f"{verb} for {len(what)}/{len(w.messages)}: {what[0]}"

        def run() -> list[Any]:
            return [decode(data) for decode, data in decoders]

        return run, ""

    def encoder(self, w: Workload, decoded: list[Any]) -> tuple[Fn | None, str]:
        encode = msgspec.json.encode

        def run() -> list[bytes]:
            return [encode(v) for v in decoded]

        return run, ""


# ---------------------------------------------------------------------------------------------
# The floors: what the codec is measured against (docs/benchmarks.md, "What is measured")


class _Floor:
    """The least a codec written in Python does to send one message: a method call, msgspec's
    encode of the exact wire value, and the message's id remembered in a dict. No checks."""

    def __init__(self) -> None:
        self.sent: dict[Any, bool] = {}

    def encode(self, wire: Any, encode: Any = msgspec.json.encode) -> bytes:
        out = encode(wire)
        self.sent[getattr(wire, "id", None)] = True
        return out


def _wires(w: Workload, decoded: list[Any]) -> list[Any]:
    """The wire value the sending codec encodes for each of ``w``'s messages (made by that
    codec's own tables, outside the timing)."""
    import mcpbind

    codecs = {r: mcpbind.Codec(w.revision, r) for r in ("client", "server")}
    wires = []
    for m, value in zip(w.messages, decoded, strict=True):
        t = type(value)
        method = codecs[m.sender]._send.get(type(value.message) if t is mcpbind.Request else t)
        wires.append(value if method is None else method.unbuild(value))
    return wires


def encode_floor(w: Workload, decoded: list[Any]) -> Any:
    """The floor's runner over the wire values of ``w``'s messages (each made outside the timing
    by the sending codec's own tables: the very Struct that codec encodes)."""
    wires = _wires(w, decoded)
    floor = _Floor()
    return lambda wires=wires, encode=floor.encode: [encode(v) for v in wires]


def _floor_decoders(w: Workload) -> list[tuple[Any, bytes]]:
    """For each message of ``w``, the msgspec decoder the receiving codec uses for it, and its
    bytes (the floors' and the least codec's choice, made outside the timing)."""
    import mcpbind
    from mcpbind import codec

    tables = {r: mcpbind.Codec(w.revision, r)._t for r in ("client", "server")}
    steps = []
    for m in w.messages:
        t = tables[m.receiver]
        method = t.methods.get(m.method or "")
        tried = [t.fast.decode, t.generic.decode, codec._ERROR.decode]  # request, result, error
        if m.kind == "response" and method is not None and method.response is not None:
            tried.insert(0, method.response.decode)
        for decode in tried:  # the first that reads it, as the codec's paths would
            try:
                decode(m.data)
            except msgspec.ValidationError:
                continue
            steps.append((decode, m.data))
            break
    return steps


def decode_floor(w: Workload) -> Any:
    """The decode floor's runner: for each message, one Python call running the msgspec decoder
    the receiving codec uses for it (the union of what that side receives, or the response
    decoder of the request's method), hooks for open objects and untagged unions included, and
    nothing of the codec's own (no dispatch, no bookkeeping, no wrapper)."""
    steps = _floor_decoders(w)

    def run(steps: list[tuple[Any, bytes]] = steps) -> list[Any]:
        return [decode(data) for decode, data in steps]

    return run


class _Least:
    """The least a codec written in Python does to receive one message, the way `make bench`
    calls the codec: ``expect`` stores a pending request's method by its id, ``decode`` is a
    method call that runs the decoder it is given (the floor's, chosen outside the timing) and
    takes a response's id out again. No check, no dispatch: a reference, not a codec."""

    def __init__(self) -> None:
        self.pending: dict[Any, str] = {}

    def expect(self, id_: Any, method: str) -> None:
        self.pending[id_] = method

    def decode(self, decode: Any, data: bytes, response: bool) -> Any:
        out = decode(data)
        if response:
            del self.pending[out.id]
        return out


def least_decode(w: Workload) -> Any:
    """The least Python codec's decode runner over ``w``: the loop of the mcpbind anchor's
    runner, each message one ``_Least.decode`` (an ``expect`` before each response)."""
    least = _Least()
    items = [
        (m.kind == "response" and m.method is not None, m.id, m.method, decode, data)
        for m, (decode, data) in zip(w.messages, _floor_decoders(w), strict=True)
    ]

    def run() -> list[Any]:
        out = []
        for response, id_, method, decode, data in items:
            if response:
                least.expect(id_, method)
            out.append(least.decode(decode, data, response))
        return out

    return run


def guarded_encode_floor(w: Workload, decoded: list[Any]) -> Any:
    """``encode_floor``'s runner with the one check no codec may drop: the guard against a
    non-finite float, which msgspec writes as ``null`` (Codec.encode's own: a short message's
    JSON searched for a null; a long one, or one with a null, handed to
    ``_nonfinite.refuse_nonfinite``). A reference, not a codec: what is left between it and the
    codec is dispatch and bookkeeping."""
    from mcpbind._nonfinite import SCAN_MAX, refuse_nonfinite

    class Guarded(_Floor):
        def encode(
            self,
            wire: Any,
            encode: Any = msgspec.json.encode,
            scan_max: int = SCAN_MAX,
            finite: Any = refuse_nonfinite,
        ) -> bytes:
            out = encode(wire)
            if len(out) > scan_max or out.partition(b"null")[1]:
                finite(wire, out)
            self.sent[getattr(wire, "id", None)] = True
            return out  # type: ignore[no-any-return]

    wires = _wires(w, decoded)
    floor = Guarded()
    return lambda wires=wires, encode=floor.encode: [encode(v) for v in wires]


# ---------------------------------------------------------------------------------------------


class Orjson(Anchor):
    name = "orjson"

    def decoder(self, w: Workload) -> tuple[Fn | None, str]:
        datas = [m.data for m in w.messages]
        loads = orjson.loads
        return (lambda: [loads(d) for d in datas]), ""

    def encoder(self, w: Workload, decoded: list[Any]) -> tuple[Fn | None, str]:
        dumps = orjson.dumps
        return (lambda: [dumps(v) for v in decoded]), ""


class Json(Anchor):
    name = "json"

    def decoder(self, w: Workload) -> tuple[Fn | None, str]:
        datas = [m.data for m in w.messages]
        loads = json.loads
        return (lambda: [loads(d) for d in datas]), ""

    def encoder(self, w: Workload, decoded: list[Any]) -> tuple[Fn | None, str]:
        dumps = json.dumps
        return (lambda: [dumps(v) for v in decoded]), ""


__all__ = [
    "Anchor",
    "Dmcg",
    "Json",
    "McpTypes",
    "Mcpbind",
    "Orjson",
    "SESSIONS",
    "accepted_by_mcpbind",
    "decode_floor",
    "encode_floor",
    "guarded_encode_floor",
    "least_decode",
]
