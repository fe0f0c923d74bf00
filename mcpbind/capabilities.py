"""Capability checks: does a capabilities object advertise a dotted path, and what is missing.

Both functions take a generated ``ClientCapabilities`` / ``ServerCapabilities`` Struct of any
revision or the plain JSON object (dict) a peer sent (read with the rules of ``revision``, by
default the newest released one). Rules:

- a path is advertised when every key on it is present with a value that is not ``null`` or
  ``false`` (``{"resources": {"subscribe": true}}`` advertises ``resources.subscribe``), so a
  sub-capability implies its parent;
- a bare capability object declares what the revision's ``FACTS.capability_implied`` says
  (``elicitation: {}`` is form mode only);
- the capabilities in ``FACTS.capability_names`` (``experimental``, ``extensions``) are maps of
  names to settings: ``experimental.<name>`` is advertised by the presence of the key ``<name>``,
  whatever its value, and names keep their dots (``extensions.io.modelcontextprotocol/tasks``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import msgspec
from msgspec import UNSET

from ._support import Gate, dec_hook
from .errors import METHOD_NOT_FOUND, ProtocolError

__all__ = ["missing_capabilities", "supports"]

T = TypeVar("T")


def _facts(caps: Any, revision: str | None) -> Any:
    """The facts record of the revision whose rules read ``caps``."""
    from ._revisions import LATEST, PACKAGES
    from .packages import bindings

    if revision is None:
        package = type(caps).__module__.split(".")[1:2]
        by_package = {p: r for r, p in PACKAGES.items()}
        revision = by_package.get(package[0], LATEST) if package else LATEST
    return bindings(revision).FACTS


def _plain(caps: Any) -> Any:
    if caps is None or isinstance(caps, dict):
        return caps
    return msgspec.to_builtins(caps)


def _split(path: str | Sequence[str], names: tuple[str, ...]) -> list[str]:
    if not isinstance(path, str):
        return list(path)
    parts = path.split(".")
    if parts[0] in names and len(parts) > 2:
        return [parts[0], ".".join(parts[1:])]
    return parts


def _present(value: Any) -> bool:
    return value is not None and value is not False


def _with_implied(node: Any, implied: Any) -> Any:
    """``node`` as read: an object with none of its sub-capabilities declares what its revision
    says such an object implies."""
    if isinstance(node, dict) and implied and not any(k in node for k in implied[0]):
        return {**node, **implied[1]}
    return node


def supports(caps: Any, path: str | Sequence[str], revision: str | None = None) -> bool:
    """Whether ``caps`` advertises the dotted capability ``path`` (``"sampling.tools"``)."""
    facts = _facts(caps, revision)
    node = _plain(caps)
    keys = _split(path, facts.capability_names)
    for i, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node or not _present(node[key]):
            return False
        node = _with_implied(node[key], facts.capability_implied.get(key) if i == 0 else None)
    return True


def _missing(required: Any, declared: Any, parent: str | None, facts: Any) -> Any:
    if not isinstance(required, dict):
        # A leaf requirement (`true`, a setting): met by any advertised value.
        return None if _present(declared) else required
    if not isinstance(declared, dict):
        return required if _present(required) or not _present(declared) else None
    out: dict[str, Any] = {}
    for key, want in required.items():
        if want is None or want is False:
            continue  # nothing required
        if parent in facts.capability_names:
            if key not in declared:
                out[key] = want
            continue
        if key not in declared or not _present(declared[key]):
            out[key] = want
            continue
        have = _with_implied(
            declared[key], facts.capability_implied.get(key) if parent is None else None
        )
        sub = _missing(want, have, key, facts)
        if sub is not None:
            out[key] = sub
    return out or None


def missing_capabilities(required: T, declared: Any, revision: str | None = None) -> T | None:
    """The capabilities object holding exactly the requirements ``declared`` does not meet.

    ``None`` when every requirement is met. The result has the type of ``required`` (a generated
    capabilities Struct, or a dict): it is the ``requiredCapabilities`` payload of the
    missing-required-client-capability error.
    """
    want = _plain(required)
    have = _plain(declared) or {}
    if not isinstance(want, Mapping):
        raise TypeError(f"required capabilities must be an object, not {type(required).__name__}")
    out = _missing(dict(want), have, None, _facts(required, revision))
    if out is None:
        return None
    if isinstance(required, dict) or required is None:
        return out  # type: ignore[no-any-return]
    return msgspec.convert(out, type(required), dec_hook=dec_hook)


class Advertised:
    """What each side of one codec's session advertised, as far as the codec knows, and the
    checks that follow from it: the capability gates of ``MethodSpec.gates`` in both directions,
    and (a server of a revision with the per-request ``_meta`` envelope) the protocol version and
    client capabilities each request carries.

    ``caps`` and ``passed`` are changed in place, never replaced: the codec reads them on its hot
    paths. A method in ``passed`` (by direction: sent, received) has no gate known to be
    unadvertised, so nothing to check until a capabilities object changes. A method whose only
    unadvertised gates are conditional ones (``Gate.when``: a task, a sampling tool) is in
    ``conditional`` with those gates: each message of it is looked at for just their params.
    """

    def __init__(self, tables: Any, revision: str, role: str, requires: Any) -> None:
        self.tables, self.revision, self.role = tables, revision, role
        self.peer = "server" if role == "client" else "client"
        self.caps: dict[str, Any] = {}  # side -> its capabilities object
        self.passed: tuple[set[str], set[str]] = (set(), set())
        # by direction: method -> its conditional gates whose capability is not advertised
        # (with the params class seen first, and the attribute its one key is read by there)
        self.conditional: tuple[dict[str, list[Any]], dict[str, list[Any]]] = ({}, {})
        # the usual conditional case, read by the codec in place: method -> (params class,
        # attribute) of its one such gate, refusing only params of that class holding a value
        self.light: tuple[dict[str, tuple[Any, str]], dict[str, tuple[Any, str]]] = ({}, {})
        self._verdicts: dict[tuple[str, str], bool] = {}  # (side, path) -> advertised
        # by direction: method -> the methods with the same gates (read only, shared)
        self._alike = _alike(tables, revision, role)
        self._settled = False  # whether ``passed`` or ``conditional`` holds anything
        self._sides = tables.sides
        facts = tables.facts
        self._envelope, self._versions = facts.request_meta, facts.versions
        self.meta_checked = facts.request_meta is not None and role == "server"
        if requires and not self.meta_checked:
            raise ValueError("requires= is for a server codec of a revision with per-request _meta")
        # method -> the client capabilities its requests' _meta must declare
        self._requires: Mapping[str, Any] = {}
        if self.meta_checked:
            # Shared by every codec of the revision and role (read only), copied only to add to.
            self._requires = _gated_requests(tables, revision, role)
            if requires:
                self._requires = {
                    **self._requires,
                    **{k: msgspec.to_builtins(v) for k, v in requires.items()},
                }
        self.requires = self._requires  # read by the codec's fast path of check_meta

    def learn(self, carrier: Any) -> None:
        """Remember the capabilities a message's params or result carries (its sender's)."""
        caps = getattr(carrier, "capabilities", None)
        side = self._sides.get(type(caps))
        if side is None:
            return
        if self._verdicts or self._settled:
            self.set(side, caps)
        else:  # a handshake's, with nothing to forget: ``set`` without its call
            self.caps[side] = caps

    def set(self, side: str, caps: Any) -> None:
        if self.caps.get(side) is not caps:
            if caps is None:
                del self.caps[side]
            else:
                self.caps[side] = caps
            # A handshake's capabilities arrive before anything is settled: nothing to forget.
            if self._verdicts:
                self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] != side}
            if self._settled:
                self._settled = False
                for settled in self.passed + self.conditional + self.light:
                    if settled:  # (a truth test is cheaper than the call on an empty one)
                        settled.clear()

    def check(self, m: Any, params: Any, msg: Any, incoming: bool) -> None:
        """Refuse (-32601) a message ``msg`` (its id, if any, is the error's) of method ``m``
        that needs a capability the side that must have it did not advertise."""
        receiver = self.role if incoming else self.peer
        conditional = self.conditional[incoming]
        # (an empty dict's truth before its get: a method's first message of a session meets
        # no conditional gates yet)
        residual = conditional.get(m.name) if conditional else None
        if residual is not None:  # settled but for gates that depend on the params
            for gate, cls, attr in residual:
                if (
                    getattr(params, attr, UNSET) is not UNSET
                    if type(params) is cls and attr is not None and gate.equals is None
                    else _applies(gate, params)
                ):
                    self._refuse(m, gate, receiver, msg)
            return
        residual = None
        verdicts = self._verdicts
        for gate in m.spec.gates:
            side = receiver if gate.side == "receiver" else gate.side
            verdict = verdicts.get((side, gate.path))
            if verdict is None and side in self.caps:
                plain = msgspec.to_builtins(self.caps[side])
                verdict = verdicts[side, gate.path] = supports(plain, gate.path, self.revision)
            if verdict is False:  # None: that side's are not known yet, and pass until they are
                if _applies(gate, params):
                    self._refuse(m, gate, receiver, msg)
                if residual is None:
                    residual = []
                residual.append((gate, type(params), _attribute(params, gate.when)))
        # Settled until a capabilities object changes: no gate can refuse it, or only those
        # conditional ones, on the params that have their value.
        if residual:
            conditional[m.name] = residual
            if len(residual) == 1:
                gate, cls, attr = residual[0]
                if attr is not None and gate.equals is None:
                    self.light[incoming][m.name] = (cls, attr)
        else:  # and so do the methods with the same gates, on the same verdicts
            alike = self._alike[incoming].get(m.name)
            if alike is None:
                self.passed[incoming].add(m.name)
            else:
                self.passed[incoming].update(alike)
        self._settled = True

    def _refuse(self, m: Any, gate: Gate, receiver: str, msg: Any) -> NoReturn:
        id_ = getattr(msg, "id", None)
        side = receiver if gate.side == "receiver" else gate.side
        whom = f"this {side}" if side == self.role else f"the {side}"
        condition = f" (its params have {'.'.join(gate.when)})" if gate.when else ""
        raise ProtocolError(
            METHOD_NOT_FOUND,
            f"Method not found: {m.spec.method!r}{condition} needs the {side} capability "
            f"{gate.path!r}, which {whom} did not advertise (MCP {self.revision})",
            {"method": m.spec.method, "capability": gate.path, "side": side},
            id_,
        )

    def check_meta(self, m: Any, params: Any, id_: Any) -> None:
        """The protocol version and client capabilities in a request's ``params._meta``."""
        meta = getattr(params, "meta", UNSET)
        if not isinstance(meta, dict):
            return  # the schema decides whether _meta is required; it already passed
        envelope = self._envelope
        version = meta.get(envelope.version_key, UNSET)
        if version is not UNSET and version not in self._versions:
            supported = {"supported": list(self._versions), "requested": version}
            raise ProtocolError(
                envelope.unsupported_version_code, "Unsupported protocol version", supported, id_
            )
        required = self._requires.get(m.name)
        missing = required and missing_capabilities(
            required, meta.get(envelope.capabilities_key) or {}
        )
        if missing:
            raise ProtocolError(
                envelope.missing_capability_code,
                "Missing required client capability",
                {"requiredCapabilities": missing},
                id_,
            )


def _applies(gate: Gate, params: Any) -> bool:
    """Whether a conditional gate's params value is there (and has the value it names)."""
    node = params
    for key in gate.when:  # wire keys, through Structs and dicts alike
        keys = getattr(type(node), "__struct_encode_fields__", None)
        if keys is not None:
            if key not in keys:
                return False
            node = getattr(node, node.__struct_fields__[keys.index(key)])
        elif isinstance(node, dict):
            node = node.get(key, UNSET)
        else:
            return False
        if node is UNSET:
            return False
    return gate.equals is None or msgspec.to_builtins(node) == gate.equals


def _attribute(params: Any, when: tuple[str, ...]) -> str | None:
    """The attribute by which ``params`` (a Struct) holds the one wire key ``when`` names; None
    when it is no Struct with that key, or the path is longer (``_applies`` then reads it)."""
    keys = getattr(type(params), "__struct_encode_fields__", ())
    if len(when) != 1 or when[0] not in keys:
        return None
    return str(params.__struct_fields__[keys.index(when[0])])


# (revision, role) -> method -> the client capabilities its requests' _meta must declare: read
# from the gates once, as a stateless HTTP server builds a codec (and so this table) per request.
# Two entries per pinned revision at most; two threads racing build the same table.
_GATED_REQUESTS: dict[tuple[str, str], dict[str, Any]] = {}


def _gated_requests(tables: Any, revision: str, role: str) -> dict[str, Any]:
    found = _GATED_REQUESTS.get((revision, role))
    if found is None:
        found = {
            name: _path_object(g.path)
            for name, m in tables.receive.items()
            if m.spec.kind == "request"
            for g in m.spec.gates
            if g.side == "client" and not g.when
        }
        _GATED_REQUESTS[revision, role] = found
    return found


# (revision, role) -> by direction (sent, received): method -> the methods whose gates are the
# same (each its side, "receiver" read as the side receiving it, path, and condition), itself
# among them: a method let through its gates lets them through (``Advertised.check``). Worked
# out once per codec's first use of a revision and role, as _GATED_REQUESTS is: two entries per
# pinned revision at most, read only once stored; two threads racing build the same table.
_Alike = dict[str, frozenset[str]]  # (only methods that have others alike)
_ALIKE: dict[tuple[str, str], tuple[_Alike, _Alike]] = {}


def _alike(tables: Any, revision: str, role: str) -> tuple[_Alike, _Alike]:
    found = _ALIKE.get((revision, role))
    if found is None:
        peer = "server" if role == "client" else "client"
        sent: _Alike = {}
        received: _Alike = {}
        for receiver, out in ((peer, sent), (role, received)):
            by_gates: dict[Any, list[str]] = {}
            for name, m in tables.methods.items():
                key = tuple(
                    (receiver if g.side == "receiver" else g.side, g.path, g.when, repr(g.equals))
                    for g in m.spec.gates
                )
                by_gates.setdefault(key, []).append(name)
            for names in by_gates.values():
                if len(names) > 1:
                    out.update(dict.fromkeys(names, frozenset(names)))
        found = _ALIKE[revision, role] = (sent, received)
    return found


def _path_object(path: str) -> dict[str, Any]:
    """``"a.b"`` as the capabilities object ``{"a": {"b": {}}}``."""
    out: dict[str, Any] = {}
    node = out
    for key in path.split("."):
        node[key] = {}
        node = node[key]
    return out
