"""The stateless path of the Streamable HTTP server (``StatelessPath``, a layer of
``StreamableHTTPServer``): a POST without a session, of a revision with the per-request ``_meta``
envelope, whose ``Mcp-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*``
headers must agree with its body, and whose tasks requests the tasks layer may answer itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.responses import JSONResponse, Response

from ..auth.resource import AuthInfo, principal
from ..errors import ProtocolError
from ..packages import bindings
from . import header_check
from ._http_answers import NO_CACHE, EventStream, as_events, error_status, too_deep
from ._http_calls import Call
from .header_check import METHOD_HEADER, NAME_HEADER, OWS, param_mismatch, standard_mismatch
from .http_client import designations
from .http_limits import MAX_DESIGNATED, RETRY_AFTER

if TYPE_CHECKING:
    from ..events import Event
    from ..session import ServerSession
    from ..tasks import Tasks

__all__ = ["HEADER_MISMATCH", "VERSION_HEADER", "StatelessPath"]

VERSION_HEADER = "mcp-protocol-version"

# The header-mismatch error of the per-request envelope revisions' HTTP transport: the MCP
# schema defines no such error, so the facts record does not carry it (see the report).
HEADER_MISMATCH = -32020

# The headers the check reads, as _Headers.raw has them
_VERSION, _METHOD, _NAME = VERSION_HEADER.encode(), METHOD_HEADER.encode(), NAME_HEADER.encode()

# The Mcp-Method and Mcp-Name headers of a request as read (None: absent).
Mirror = tuple[str | None, str | None]


class StatelessPath:
    """The checks and answers of a POST without a session (module docstring)."""

    tasks: Tasks | None
    _version_keys: tuple[str, ...]
    _by_version: dict[str, str]
    _mirrored: dict[str, tuple[frozenset[str], str | None]]
    _designated: dict[str, dict[str, str]]
    _versions_of: dict[str, frozenset[str]]
    _lists: dict[str, str | None]
    _peek: msgspec.json.Decoder[Any] | None

    def _read_revisions(self, revisions: tuple[str, ...]) -> None:
        """Work out once, from the facts of the revisions served, what the checks of each request
        read."""
        # The _meta keys naming a request's protocol version, from the facts of the revisions
        # served that carry the per-request envelope.
        self._version_keys = tuple(
            dict.fromkeys(
                meta.version_key
                for r in revisions
                if (meta := bindings(r).FACTS.request_meta) is not None
            )
        )
        # The versions whose requests carry the envelope, each with its revision; and the
        # x-mcp-header designations of the tools this server listed, by tool name.
        self._by_version = {
            v: r
            for r in revisions
            if bindings(r).FACTS.request_meta is not None
            for v in bindings(r).FACTS.versions
        }
        # By version, the methods of its revision (whose Mcp-Name is checked) and the method of
        # a tool call (whose Mcp-Param-* are): read per request, worked out here once.
        self._mirrored = {
            v: (frozenset(bindings(r).FACTS.wires), bindings(r).FACTS.features.get("call_tool"))
            for v, r in self._by_version.items()
        }
        # With one such key, the peek reads the version as the generated peek's _meta Struct
        # (reading that key only) does; else each _meta value raw, the version found after.
        self._peek = _peek_decoder(revisions, self._version_keys)
        self._designated: dict[str, dict[str, str]] = {}
        # By revision served, its protocol versions (a session's Mcp-Protocol-Version must be one)
        self._versions_of = {r: frozenset(bindings(r).FACTS.versions) for r in revisions}
        # By revision, its tool list method, whose results are learned from while some revision
        # served checks Mcp-Param-* headers (has the envelope).
        self._lists = (
            {r: bindings(r).FACTS.features.get("list_tools") for r in revisions}
            if self._by_version
            else {}
        )

    def _agreed(
        self, raw: Mapping[bytes, bytes], session: ServerSession, body: bytes
    ) -> list[Event] | None:
        """The events of a stateless POST whose headers agree with its body as ``session`` decodes
        it in the revision its ``Mcp-Protocol-Version`` names (``ServerSession.read``), the body
        decoded once; None when that does not tell: the body does not decode so, its request
        names no target by ``name``, a tool's ``Mcp-Param-*`` or the tasks layer are to be
        checked, or anything disagrees. Then ``_header_mismatch`` reads the body and the session
        receives it, as if this had not been tried (the session has done nothing: it decoded
        only). What agrees here is what ``_header_mismatch`` would find agreeing: the ``_meta``
        version (one key), method and name the headers mirror."""
        named = raw.get(_VERSION)
        if named is None or self._peek is None:
            return None
        version = named.decode("latin-1")
        mirrored = self._mirrored.get(version)
        got_method = raw.get(_METHOD)
        got_name = raw.get(_NAME)
        if mirrored is None or got_method is None or got_name is None:
            return None
        read = session.read(body, version)
        if read is None:
            return None
        message = read[0]
        try:  # (a request of the revision: each there, name and meta maybe unset)
            method, params = message.method, message.params
            name, meta = params.name, params.meta
        except AttributeError:
            return None
        if (
            type(name) is not str  # (the first of NAME_KEYS: when a string, the target)
            or type(method) is not str
            or method not in mirrored[0]
            or not isinstance(meta, dict)
            or meta.get(self._version_keys[0]) != version
        ):
            return None
        mirror = got_method.decode("latin-1"), got_name.decode("latin-1")
        if (
            mirror[0].strip(OWS) != method
            or mirror[1].strip(OWS) != name
            or (self._designated and method == mirrored[1] and name in self._designated)
            or (self.tasks is not None and self.tasks.owns(*mirror))
        ):
            return None
        return session.receive_read(read)

    def _header_mismatch(
        self, raw: Mapping[bytes, bytes], body: bytes
    ) -> tuple[Response | None, str | None, Mirror | None]:
        """A stateless POST's protocol version header must name the version the request's
        ``_meta`` names (absent counts as a mismatch), and its ``Mcp-Method``, ``Mcp-Name`` and
        ``Mcp-Param-*`` headers must agree with the body (``header_check``); a request that
        disagrees is refused with the header-mismatch error before the session reads it (``raw``:
        the request's raw headers, ``_Headers.raw``). With the response refusing it (or None),
        the version its ``_meta`` names when it is a string (for the session, which need not
        read it again), and the ``Mcp-Method`` and ``Mcp-Name`` headers when it read both (for
        the tasks layer's check, which need not read them again; None when it did not)."""
        if not self._version_keys:
            return None, None, None  # no revision served has the envelope: nothing to mirror
        try:
            peek = header_check.decode(body) if self._peek is None else self._peek.decode(body)
        except RecursionError:
            return too_deep(stateful=False), None, None
        except (msgspec.DecodeError, ValueError):
            return None, None, None  # the session answers what cannot be read
        params = peek.params
        if params is None or params.meta is None:
            return None, None, None
        meta: Any = params.meta
        version = (
            header_check.version(meta, self._version_keys) if self._peek is None else meta.version
        )
        if version is None:  # (absent or null: one key, the same either way)
            return None, None, None
        named = raw.get(_VERSION)
        header = None if named is None else named.decode("latin-1")
        if header == version:  # a string, then
            # Mcp-Name is checked for the methods of the revision only: one it does not know is
            # answered method-not-found by the session, whatever its headers say.
            method = peek.method
            name = params.name  # (params has a _meta: it is there)
            if type(name) is not str:
                name = header_check.target_name(params)
            mirrored = self._mirrored.get(version)
            known = (
                name is not None
                and type(method) is str
                and (
                    (mirrored is not None and method in mirrored[0])
                    or (self.tasks is not None and method in self.tasks.methods)
                )
            )  # (whether Mcp-Name is checked: only a name it would check matters)
            # Mcp-Name is read when it is checked, or when the tasks layer reads it after
            got_method = raw.get(_METHOD)
            got_name = raw.get(_NAME) if known or self.tasks is not None else None
            mirror = (
                None if got_method is None else got_method.decode("latin-1"),
                None if got_name is None else got_name.decode("latin-1"),
            )
            wrong = standard_mismatch(*mirror, method, name, named=known)
            if (
                wrong is None
                and self._designated
                and mirrored is not None
                and method == mirrored[1]
            ):
                wrong = self._param_mismatch(raw, params.name, params)
            if wrong is None:
                return None, version, mirror if self.tasks is not None else None
            message = f"Header mismatch: {wrong}"
        else:
            message = (
                f"Header mismatch: {VERSION_HEADER} is {header!r} but the request's _meta names "
                f"{version!r}"
            )
        rid = peek.id if type(peek.id) in (str, int) else None  # (for a mismatch only)
        return (
            JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": HEADER_MISMATCH, "message": message},
                },
                status_code=400,
            ),
            None,
            None,
        )

    async def _tasks_answer(self, body: bytes, auth: AuthInfo | None) -> Response | None:
        """The tasks layer's answer to a stateless request it owns, or None for the session to
        read it (not a request of the revision the extension extends, or a tool call the
        layer leaves to the handler). A task belongs to the token's principal (docs/auth.md)."""
        assert self.tasks is not None
        from ..tasks import error_object, read_request

        read = read_request(body, self.tasks.speaks)
        if read is None:
            return None
        rid, method, params = read
        try:
            owner = principal(auth)
            stream = self.tasks.listen(rid, params, owner)  # task status notifications
            if stream is not None:
                return EventStream(
                    as_events(stream), media_type="text/event-stream", headers=NO_CACHE
                )
            result = await self.tasks.respond(method, params, owner)
        except ProtocolError as error:
            status = error_status(error.code, error.message, stateful=False)
            failure = error_object(error)
            return JSONResponse(
                {"jsonrpc": "2.0", "id": rid, "error": failure},
                status_code=status,
                headers={"retry-after": RETRY_AFTER} if status == 503 else None,
            )
        if result is None:
            return None
        return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result})

    def _param_mismatch(self, raw: Mapping[bytes, bytes], name: Any, params: Any) -> str | None:
        """What is wrong with the ``Mcp-Param-*`` headers (``raw``: ``_Headers.raw``) of a call
        of the tool ``name``, by the designations of the tool as this server last listed it (a
        tool it has not listed is not checked)."""
        designated = self._designated.get(name) if type(name) is str else None
        if not designated:
            return None
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw.items()}
        return param_mismatch(headers, designated, header_check.arguments(params))

    def _learn_tools(self, call: Call, result: Any) -> None:
        """Remember the ``x-mcp-header`` designations of the tools a tool list result names (at
        most ``MAX_DESIGNATED`` tools, the least recently listed forgotten first); a tool whose
        designations are invalid is not checked."""
        tools = msgspec.to_builtins(result).get("tools") if result is not None else None
        for tool in tools if isinstance(tools, list) else ():
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            designated, problem = designations(tool.get("inputSchema"))
            self._designated.pop(tool["name"], None)
            if problem is None and designated:
                self._designated[tool["name"]] = designated
                while len(self._designated) > MAX_DESIGNATED:
                    del self._designated[next(iter(self._designated))]


def _peek_decoder(
    revisions: tuple[str, ...], keys: tuple[str, ...]
) -> msgspec.json.Decoder[Any] | None:
    """The decoder of the header check's peek when the revisions served name a request's version
    with one ``_meta`` key (``keys``): its ``_meta`` as the generated peek of such a revision
    reads it (a Struct whose one field, ``version``, is that key's value); None otherwise."""
    if len(keys) != 1:
        return None
    for r in revisions:
        meta = bindings(r).FACTS.request_meta
        if meta is None:
            continue
        found = _peek_meta(meta.peek)
        if found is not None and [
            (f.name, f.encode_name) for f in msgspec.structs.fields(found)
        ] == [("version", keys[0])]:
            return header_check.decoder(found)
    return None


def _peek_meta(peek: Any) -> Any:
    """The Struct class of ``params._meta`` in a generated peek Struct, or None."""
    import msgspec.inspect as mi

    found: Any = peek
    for name in ("params", "meta"):
        info = mi.type_info(found)
        field = next((f for f in getattr(info, "fields", ()) if f.name == name), None)
        if field is None:
            return None
        kinds = field.type.types if isinstance(field.type, mi.UnionType) else (field.type,)
        structs = [k.cls for k in kinds if isinstance(k, mi.StructType)]
        if len(structs) != 1:
            return None
        found = structs[0]
    return found
