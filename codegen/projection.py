"""Projection: two revisions' IRs -> the view of one generated projection module.

For an ordered pair (A, B) the generated module ``mcpbind._projection.<a>__<b>`` holds one
straight-line function per object type A and B share (``_o_Tool``), one per list, map or union
shape that needs work (``_u3``), the tables the runtime looks them up in, and nothing that
inspects fields at run time. What the schemas do not say (values that moved, defaults the spec
defines) comes from the ``[[migration]]`` and ``[[default]]`` entries of ``schema/overlay.toml``.

A conversion between a type expression of A and one of B is one of

``id``    the value is valid in B as it is (shared, not copied)
``fn``    a generated or runtime function ``f(value, ctx)``; ``fails`` when it can raise
``fail``  B cannot hold any such value (a reason); raised when a value is present
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .emit import _Renderer, literal
from .ir import (
    AnyT,
    ArrayT,
    Field,
    Lit,
    MapT,
    ObjectDef,
    Prim,
    RefT,
    Revision,
    TypeExpr,
    UnionT,
)
from .overlay import Default, Migration, defaults, in_range, migrations
from .paths import package_name
from .pin import pins
from .resolve import members, resolve
from .unions import value_kind, walk

ANY = AnyT()


class ProjectionGenError(Exception):
    """The IR pair holds something projection cannot express."""


@dataclass(frozen=True)
class Conv:
    kind: str  # "id", "fn", "fail"
    fn: str = ""
    fails: bool = False
    reason: str = ""
    test: str = ""  # a fast exact test (``_F<n>``): a value it accepts is kept without a call


ID = Conv("id")


# The statement kinds ``templates/projection_object.py.j2`` lays out.
STATEMENT_KINDS = frozenset(
    {
        "keys_new", "keys_copy", "key_from", "key_convert", "key_check", "key_default",
        "key_required", "set", "declare", "convert_set", "default_unset", "required_unset", "move",
        "only_default", "return",
    }
)  # fmt: skip


@dataclass
class StatementView:
    """One statement of an object function; ``templates/projection_object.py.j2`` lays out each
    kind (``x`` is the source object, ``d`` the open target being filled, ``c`` the context).

    ``keys_new`` / ``keys_copy``  start ``d`` as the open target, empty / with the source's keys
    ``key_from``      ``d[target] = value`` when ``read`` (a source attribute) is set
    ``key_convert``   ``d[target] = value`` when ``d`` has the key
    ``key_check``     ``d[target] = value`` when ``d`` has the key and the test ``read`` rejects it
    ``key_default``   ``d[target] = value`` when ``d`` lacks the key
    ``key_required``  ``value`` (a failure) when ``d`` lacks the key
    ``set``           ``target = value``
    ``declare``       ``target: Any = value``
    ``convert_set``   ``target = value`` when ``target`` is set
    ``default_unset`` ``target = value`` when ``target`` is unset
    ``required_unset``  ``value`` (a failure) when ``target`` is unset
    ``move``          ``target = value`` when ``read`` (a migrated location) is set, as ``moved``
    ``only_default``  ``value`` (a failure) when ``read`` is set to anything but ``target``
    ``return``        ``return value`` (a failure: the rest of the body is never reached)
    """

    kind: str
    target: str = ""  # the local variable, or the key of ``d`` as a literal
    value: str = ""  # the expression written, or the failure raised
    read: str = ""  # the source expression tested first


@dataclass
class ObjectBodyView:
    """The body of an object function: its statements, then the target built from them."""

    target: str  # the target class, ``_b.Tool``
    open: bool  # an open target is built from the dict ``d``, a Struct from keyword arguments
    statements: list[StatementView] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)  # keyword arguments, each a local variable
    fails: bool = False  # whether a statement can raise a ProjectionError
    returned: bool = False  # the statements end in a ``return``: nothing is built


@dataclass
class FunctionView:
    name: str
    source: str  # annotation of the parameter
    target: str  # return annotation
    body: list[str]  # the lines of a small function
    param: str = "v"
    object: ObjectBodyView | None = None  # an object function's body, instead of ``body``


@dataclass
class PairView:
    header: str
    source: str
    target: str
    source_package: str
    target_package: str
    doc: str
    functions: list[FunctionView] = field(default_factory=list)
    tables: list[tuple[str, list[tuple[str, str]]]] = field(
        default_factory=list
    )  # (name, [(key, fn)])
    types: list[tuple[str, str]] = field(
        default_factory=list
    )  # (name, type expression over ``_b``)
    fits: list[tuple[str, str]] = field(default_factory=list)  # (name, one of ``types``)
    typing_imports: list[str] = field(default_factory=list)  # what those expressions need
    msgspec_imports: list[str] = field(default_factory=list)
    project: list[tuple[str, str]] = field(default_factory=list)  # (A class, function)
    names: list[tuple[str, str]] = field(default_factory=list)  # (A class, schema name)
    shared_from: str | None = None  # the module whose ``build`` this pair reuses

    def code_key(self) -> str:
        """Everything the ``build`` function is made of: equal keys, equal code."""
        return repr((self.functions, self.tables, self.types, self.fits, self.project, self.names))


# -- type helpers ---------------------------------------------------------------------------------


def _members(rev: Revision, t: UnionT) -> list[TypeExpr]:
    return members(rev, t, resolved=True)


def pure(rev: Revision, t: TypeExpr) -> bool:
    """Plain JSON all the way down (no Struct or open object inside)."""
    t = resolve(rev, t)
    if isinstance(t, (AnyT, Prim, Lit)):
        return True
    if isinstance(t, ArrayT):
        return pure(rev, t.item)
    if isinstance(t, MapT):
        return pure(rev, t.value)
    if isinstance(t, UnionT):
        return all(pure(rev, m) for m in _members(rev, t))
    return False


_PY = {
    "string": ["str"],
    "integer": ["int"],
    "number": ["int", "float"],
    "boolean": ["bool"],
    "null": ["type(None)"],
}


def _keys(rev: Revision, t: TypeExpr, r: _Renderer) -> list[str]:
    """The Python types a decoded value of ``t`` (resolved) can have, as source text."""
    if isinstance(t, RefT):
        return ["_a." + r.py[rev.canonical(t.name)]]  # a family's members share one class
    if isinstance(t, Prim):
        return _PY[t.json]
    if isinstance(t, Lit):
        out: list[str] = []
        for v in t.values:
            for k in _PY[value_kind(v)][:1]:
                if k not in out:
                    out.append(k)
        return out
    if isinstance(t, ArrayT):
        return ["list"]
    if isinstance(t, MapT):
        return ["dict"]
    return []


def _helpers(t: TypeExpr) -> set[str]:
    """The names of ``typing`` and ``msgspec`` that the annotation of ``t`` uses (not following
    references: those are names of the revision module)."""
    out: set[str] = set()
    for x in walk(t):
        if isinstance(x, Lit) and x.values != (None,):
            out.add("Literal")
        if isinstance(x, (Prim, ArrayT)) and x.constraints.asserting():
            out |= {"Annotated", "Meta"}
    return out


# -- the pair -------------------------------------------------------------------------------------


class Pair:
    def __init__(self, a: Revision, b: Revision) -> None:
        self.a, self.b = a, b
        self.ra, self.rb = _Renderer(a), _Renderer(b)
        self.migrations = [m for m in migrations()]
        self.defaults = [d for d in defaults() if in_range(b.revision, d.since, d.until)]
        # Types the overlay names keep their own functions, so that its rules stay per name.
        self.ruled = {m.type for m in self.migrations} | {d.type for d in defaults() if d.type}
        self.memo: dict[tuple[Any, ...], Conv] = {}
        self.functions: list[FunctionView] = []
        self.tables: list[tuple[str, list[tuple[str, str]]]] = []
        self.types: dict[str, str] = {}  # annotation -> constant name
        self.fits: dict[str, str] = {}  # type constant -> its fast test (mcpbind.projection.fits)
        self.helpers: set[str] = set()  # typing and msgspec names those annotations use
        self.counter = 0

    # -- names

    def _fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def _type_const(self, t: TypeExpr) -> str:
        annotation = self.rb.type(t, qualify="_b.")
        if annotation not in self.types:
            self.helpers |= _helpers(t)
            self.types[annotation] = f"_T{len(self.types)}"
        return self.types[annotation]

    def _bname(self, name: str) -> str:
        return "_b." + self.rb.py[name]

    # -- conversions

    def _resolve(self, rev: Revision, t: TypeExpr) -> TypeExpr:
        """``resolve``, and a member of a family of identical objects as its canonical member
        (one class, so one function: ``codegen/families.py``)."""
        r = resolve(rev, t)
        if isinstance(r, RefT) and r.name not in self.ruled:
            return RefT(rev.canonical(r.name))
        return r

    def conv(self, ta: TypeExpr, tb: TypeExpr) -> Conv:
        a, b = self._resolve(self.a, ta), self._resolve(self.b, tb)
        key = (a, b)
        if key in self.memo:
            return self.memo[key]
        result = self._conv(a, b)
        self.memo[key] = result
        return result

    def moved(self, ta: TypeExpr, tb: TypeExpr) -> Conv:
        """A migrated value: typed in one revision, plain JSON (an extension's settings) in the other."""
        a, b = self._resolve(self.a, ta), self._resolve(self.b, tb)
        if isinstance(a, RefT) and isinstance(b, (MapT, AnyT)):
            return Conv("fn", fn="builtins")
        if isinstance(a, (MapT, AnyT)) and isinstance(b, RefT):
            return self._via_builtins(b)
        return self.conv(ta, tb)

    def _conv(self, a: TypeExpr, b: TypeExpr) -> Conv:
        if isinstance(b, AnyT):
            return ID if pure(self.a, a) else Conv("fn", fn="builtins")
        if isinstance(a, AnyT):
            name = self._type_const(b)
            # The test is built once per module: a value that already fits returns without a
            # call into Ctx (most do: a tool's `properties` on every tools/list).
            test = self.fits.setdefault(name, "_F" + name.removeprefix("_T"))
            check = f"c.check(v, {name}, {literal(self._describe(b))})"
            fn = self._fresh("_v")
            self.functions.append(
                FunctionView(fn, "Any", "Any", [f"return v if {test}(v) else {check}"])
            )
            return Conv("fn", fn=fn, fails=True, test=test)
        if isinstance(a, UnionT) or isinstance(b, UnionT):
            return self._union(a, b)
        if isinstance(a, (Prim, Lit)) and isinstance(b, (Prim, Lit)):
            return self._scalar(a, b)
        if isinstance(a, ArrayT) and isinstance(b, ArrayT):
            return self._container(a.item, b.item, "list")
        if isinstance(a, MapT) and isinstance(b, MapT):
            return self._container(a.value, b.value, "dict")
        if isinstance(a, RefT) and isinstance(b, RefT):
            return self._object(a.name, b.name)
        if isinstance(a, RefT) and isinstance(b, MapT):
            oa = self.a.definitions[a.name]
            assert isinstance(oa, ObjectDef)
            if oa.extra == "kept":  # every key carries data: keep them all
                inner = self.conv(ANY, b.value)
                if inner.kind != "id":
                    return self._via_builtins(b)
                if all(pure(self.a, f.type) for f in oa.fields) and pure(self.a, oa.extra_value):
                    return Conv("fn", fn="plain")
                return Conv("fn", fn="builtins")
            return Conv("fn", fn="empty")  # the target declares none of its fields
        if isinstance(a, MapT) and isinstance(b, RefT):
            ob = self.b.definitions[b.name]
            assert isinstance(ob, ObjectDef)
            if ob.extra == "kept":
                return self._via_builtins(b)
            return self._object(None, b.name)  # presence only: the source declares no fields
        return Conv("fail", reason=f"{self._describe(b)} cannot hold a {self._describe(a, self.a)}")

    def _via_builtins(self, b: TypeExpr) -> Conv:
        name = self._type_const(b)
        fn = self._fresh("_v")
        self.functions.append(
            FunctionView(
                fn, "Any", "Any", [f"return c.convert(v, {name}, {literal(self._describe(b))})"]
            )
        )
        return Conv("fn", fn=fn, fails=True)

    def _describe(self, t: TypeExpr, rev: Revision | None = None) -> str:
        rev = rev or self.b
        if isinstance(t, RefT):
            return t.name
        if isinstance(t, Prim):
            return t.json
        if isinstance(t, Lit):
            return " | ".join(repr(v) for v in t.values)
        if isinstance(t, ArrayT):
            return "array"
        if isinstance(t, MapT):
            return "object"
        if isinstance(t, UnionT):
            return str(t.site)
        return "value"

    def _scalar(self, a: Prim | Lit, b: Prim | Lit) -> Conv:
        if isinstance(b, Prim):
            kinds = {b.json} | ({"integer"} if b.json == "number" else set())
            if isinstance(a, Prim):
                if a.json in kinds:
                    return ID
                if a.json == "number" and b.json == "integer":
                    return self._check("type(v) is int", "an integer")
                return Conv("fail", reason=f"{b.json} cannot hold a {a.json}")
            if all(value_kind(v) in kinds for v in a.values):
                return ID
            return self._check(
                f"v in {literal_tuple(v for v in a.values if value_kind(v) in kinds)}", b.json
            )
        allowed = b.values
        if isinstance(a, Lit):
            if set(a.values) <= set(allowed):
                return ID
            if not set(a.values) & set(allowed):
                return Conv("fail", reason=f"none of {list(a.values)!r} exists in the target")
        return self._check(
            f"v in {literal_tuple(allowed)}", "one of " + ", ".join(repr(x) for x in allowed)
        )

    def _check(self, condition: str, what: str) -> Conv:
        fn = self._fresh("_s")
        self.functions.append(
            FunctionView(
                fn,
                "Any",
                "Any",
                [
                    f"if {condition}:",
                    "    return v",
                    f"return c.fail(type(v).__name__, {literal(f'the target allows only {what}')} + f', not {{v!r}}')",
                ],
            )
        )
        return Conv("fn", fn=fn, fails=True)

    def _container(self, ia: TypeExpr, ib: TypeExpr, kind: str) -> Conv:
        inner = self.conv(ia, ib)
        if inner.kind == "id":
            return ID
        fn = self._fresh("_l" if kind == "list" else "_m")
        f = self._fail_fn(inner.reason) if inner.kind == "fail" else inner.fn
        fails = inner.kind == "fail" or inner.fails
        if kind == "list":
            body = [f"return c.items(v, {f})"] if fails else [f"return [{f}(i, c) for i in v]"]
        else:
            body = (
                [f"return c.values(v, {f})"]
                if fails
                else [f"return {{k: {f}(i, c) for k, i in v.items()}}"]
            )
        self.functions.append(FunctionView(fn, "Any", "Any", body))
        return Conv("fn", fn=fn, fails=fails)

    def _fail_fn(self, reason: str) -> str:
        fn = self._fresh("_x")
        self.functions.append(
            FunctionView(fn, "Any", "Any", [f"return c.fail(type(v).__name__, {literal(reason)})"])
        )
        return fn

    def _union(self, a: TypeExpr, b: TypeExpr) -> Conv:
        ams: list[TypeExpr] = _members(self.a, a) if isinstance(a, UnionT) else [a]
        bms: list[TypeExpr] = _members(self.b, b) if isinstance(b, UnionT) else [b]
        site = str(b.site) if isinstance(b, UnionT) else self._describe(b)
        if isinstance(b, UnionT) and any(isinstance(m, AnyT) for m in bms):
            return ID if pure(self.a, a) else Conv("fn", fn="builtins")
        table: list[tuple[str, str]] = []
        convs: list[Conv] = []
        for m in ams:
            target = self._match(m, bms)
            if target is None:
                continue  # no counterpart: the dispatch falls through to ctx.member
            conv = self.conv(m, target)
            if conv.kind == "fail":
                continue
            convs.append(conv)
            for k in _keys(self.a, m, self.ra):
                if k not in [t[0] for t in table]:
                    table.append((k, "ident" if conv.kind == "id" else conv.fn))
        if not isinstance(a, UnionT):
            if convs:
                return convs[0]
            return Conv(
                "fail",
                reason=f"{self._describe(a, self.a)} is not a member of {site} in the target",
            )
        complete = len(convs) == len(ams)
        if complete and all(c.kind == "id" for c in convs):
            return ID
        table_name = self._fresh("_D")
        self.tables.append((table_name, table))
        fn = self._fresh("_u")
        self.functions.append(
            FunctionView(
                fn,
                "Any",
                "Any",
                [
                    f"f = {table_name}.get(type(v))",
                    "if f is None:",
                    f"    return c.member(v, {literal(site)})",
                    "return f(v, c)",
                ],
            )
        )
        return Conv("fn", fn=fn, fails=not complete or any(c.fails for c in convs))

    def _match(self, m: TypeExpr, bms: list[TypeExpr]) -> TypeExpr | None:
        if isinstance(m, RefT):
            oa = self.a.definitions[m.name]
            for bm in bms:
                if isinstance(bm, RefT) and bm.name == m.name:
                    return bm
            for bm in bms:
                if isinstance(bm, RefT):
                    ob = self.b.definitions[bm.name]
                    if (
                        isinstance(oa, ObjectDef)
                        and isinstance(ob, ObjectDef)
                        and oa.tag
                        and oa.tag == ob.tag
                    ):
                        return bm
            return None
        if isinstance(m, (Prim, Lit)):
            kinds = {m.json} if isinstance(m, Prim) else {value_kind(v) for v in m.values}
            best: Prim | Lit | None = None
            for bm in bms:
                if isinstance(bm, Prim) and (
                    bm.json in kinds or (bm.json == "number" and kinds <= {"integer", "number"})
                ):
                    best = best or bm
                if isinstance(bm, Lit) and {value_kind(v) for v in bm.values} & kinds:
                    best = best or bm
            return best
        for bm in bms:
            if type(bm) is type(m):
                return bm
        return None

    # -- objects

    def _object(self, a_name: str | None, b_name: str) -> Conv:
        fn = (
            f"_o_{self.rb.py[b_name]}"
            if a_name == b_name
            else self._fresh(f"_o_{self.rb.py[b_name]}_")
        )
        if a_name is not None:  # a recursive reference sees the function before its body exists
            self.memo[(RefT(a_name), RefT(b_name))] = Conv("fn", fn=fn, fails=True)
        body = self._object_body(a_name, b_name)
        source = "_a." + self.ra.py[a_name] if a_name is not None else "Any"
        self.functions.append(FunctionView(fn, source, body.target, [], "x", body))
        return Conv("fn", fn=fn, fails=body.fails)

    def object_function(self, name: str) -> Conv:
        return self.conv(RefT(name), RefT(name))

    def _default(self, type_name: str, wire: str) -> Default | None:
        for d in self.defaults:
            if d.field == wire and d.type in (None, type_name):
                return d
        return None

    def _object_body(self, a_name: str | None, b_name: str) -> ObjectBodyView:
        ob = self.b.definitions[b_name]
        oa = self.a.definitions[a_name] if a_name is not None else None
        assert isinstance(ob, ObjectDef) and (oa is None or isinstance(oa, ObjectDef))
        a_kept = oa is not None and oa.extra == "kept"
        out = ObjectBodyView(target=self._bname(b_name), open=ob.extra == "kept")
        # migrations: the A location read, the B location written
        moves: list[tuple[Migration, tuple[str, ...], tuple[str, ...]]] = []
        for m in self.migrations:
            if m.type != b_name or a_name != b_name:
                continue
            la, lb = m.location(self.a.revision), m.location(self.b.revision)
            if la is not None and lb is not None and la != lb:
                moves.append((m, la, lb))

        def read(f: Field) -> str:
            if a_kept:
                return f"x[{literal(f.wire)}]" if f.required else f"x.get({literal(f.wire)}, UNSET)"
            return f"x.{self.ra_attr(oa, f)}"

        def call(conv: Conv, value: str, wire: str, required: bool) -> str:
            if conv.kind == "id":
                return value
            if conv.kind == "fail":
                out.fails = True
                return f"c.fail({literal(b_name)}, {literal(conv.reason)}, {literal(wire)})"
            if conv.fails:
                out.fails = True
                checked = f"c.{'req' if required else 'opt'}({value}, {conv.fn}, {literal(wire)})"
                # What already fits (most values) costs one test, not a call through the context.
                return f"{value} if {conv.test}({value}) else {checked}" if conv.test else checked
            return f"{conv.fn}({value}, c)"

        def convert_key(conv: Conv, key: str, wire: str, required: bool) -> None:
            if conv.test:  # what already fits stays: one test, no call through the context
                checked = call(replace(conv, test=""), f"d[{key}]", wire, required)
                add("key_check", key, checked, conv.test)
            else:
                add("key_convert", key, call(conv, f"d[{key}]", wire, required))

        def fail(reason: str, wire: str) -> str:
            out.fails = True
            return f"c.fail({literal(b_name)}, {literal(reason)}, {literal(wire)})"

        def add(kind: str, target: str = "", value: str = "", read: str = "") -> None:
            if kind not in STATEMENT_KINDS:
                raise ProjectionGenError(f"no layout for statement kind {kind!r}")
            out.statements.append(StatementView(kind, target, value, read))

        if ob.extra == "kept":
            # An open target keeps every key; declared keys are converted where the types differ.
            add("keys_copy" if a_kept else "keys_new")
            declared_a = {f.wire: f for f in oa.fields} if oa is not None else {}
            for fb in ob.fields:
                key = literal(fb.wire)
                fa = declared_a.get(fb.wire)
                if fa is not None:
                    conv = self.conv(fa.type, fb.type)
                    if not a_kept:
                        add("key_from", key, call(conv, read(fa), fb.wire, fb.required), read(fa))
                    elif conv.kind != "id":
                        convert_key(conv, key, fb.wire, fb.required)
                    if fb.required and not fa.required:
                        add("key_required", key, fail("the target requires it", fb.wire))
                    continue
                if a_kept:  # an undeclared key of the source may hold it
                    conv = self.conv(ANY, fb.type)
                    if conv.kind != "id":
                        convert_key(conv, key, fb.wire, fb.required)
                default = self._default(b_name, fb.wire)
                if default is not None:
                    add("key_default", key, _json_literal(default.value))
                elif fb.required:
                    reason = "the target requires it and the source has no value"
                    add("key_required", key, fail(reason, fb.wire))
            # keys the source declares and the target does not: the open target keeps them as plain JSON
            for fa in oa.fields if oa is not None else ():
                if ob.field(fa.wire) is not None:
                    continue
                key = literal(fa.wire)
                if a_kept:
                    if not pure(self.a, fa.type):
                        add("key_convert", key, f"builtins(d[{key}], c)")
                else:
                    conv = Conv("id") if pure(self.a, fa.type) else Conv("fn", fn="builtins")
                    add("key_from", key, call(conv, read(fa), fa.wire, False), read(fa))
            return out

        reserved = self._reserved_b()
        for fb in ob.fields:
            if ob.tag is not None and fb.wire == ob.tag[0]:
                continue
            py = _attribute(fb.py, reserved)
            fa = oa.field(fb.wire) if oa is not None else None
            if fa is None and a_kept:  # an undeclared key of the open source may hold it
                fa = Field(wire=fb.wire, py=fb.py, type=ANY, required=False)
            move = next((mv for mv in moves if mv[2][0] == fb.wire), None)
            if fa is not None and (move is None or len(move[2]) == 2):
                conv = self.conv(fa.type, fb.type)
                if fa.required:
                    add("set", py, call(conv, read(fa), fb.wire, fb.required))
                else:
                    add("set", py, read(fa))
                    if conv.kind != "id":
                        add("convert_set", py, call(conv, py, fb.wire, fb.required))
                    if fb.required:
                        default = self._default(b_name, fb.wire)
                        if default is not None:
                            add("default_unset", py, _json_literal(default.value))
                        else:
                            reason = "the target requires it and the source has no value"
                            add("required_unset", py, fail(reason, fb.wire))
            elif move is None:
                default = self._default(b_name, fb.wire)
                if default is not None:
                    add("declare", py, _json_literal(default.value))
                elif fb.required:
                    reason = "the target requires it and the source has no such field"
                    add("return", value=fail(reason, fb.wire))
                    out.returned = True
                    return out
                else:
                    continue
            else:
                add("declare", py, "UNSET")
            for _m, la, lb in moves:
                if lb[0] != fb.wire:
                    continue
                # read the moved value from A
                src = self._read_location(oa, la)
                if src is None:
                    continue
                get, a_type = src
                if len(lb) == 1:
                    conv = self.moved(a_type, fb.type)
                    value = call(conv, "moved", fb.wire, fb.required)
                else:
                    bt = resolve(self.b, fb.type)
                    value_type = bt.value if isinstance(bt, MapT) else ANY
                    conv = self.moved(a_type, value_type)
                    value = f"put({py}, {literal(lb[1])}, {call(conv, 'moved', fb.wire, False)})"
                add("move", py, value, get)
            out.arguments.append(py)
        # A field B lacks that the spec gives a default: stripping it is faithful only at that value
        if oa is not None:
            for fa in oa.fields:
                if ob.field(fa.wire) is not None:
                    continue
                d = next(
                    (
                        d
                        for d in defaults()
                        if d.field == fa.wire
                        and d.type in (None, b_name)
                        and in_range(self.a.revision, d.since, d.until)
                    ),
                    None,
                )
                if d is not None and not isinstance(d.value, (dict, list)):
                    reason = f"the target has no such field and the value is not {d.value!r}"
                    add("only_default", literal(d.value), fail(reason, fa.wire), read(fa))
        return out

    def _read_location(
        self, oa: ObjectDef | None, loc: tuple[str, ...]
    ) -> tuple[str, TypeExpr] | None:
        if oa is None:
            return None
        fa = oa.field(loc[0])
        if fa is None:
            return None
        attr = f"x.{self.ra_attr(oa, fa)}"
        if len(loc) == 1:
            return attr, fa.type
        t = resolve(self.a, fa.type)
        value_type = t.value if isinstance(t, MapT) else ANY
        return f"UNSET if {attr} is UNSET else {attr}.get({literal(loc[1])}, UNSET)", value_type

    def ra_attr(self, oa: ObjectDef | None, f: Field) -> str:
        return _attribute(f.py, self._reserved(self.ra))

    def _reserved(self, r: _Renderer) -> set[str]:
        from .emit import ANNOTATION_NAMES

        return set(ANNOTATION_NAMES) | set(r.py.values())

    def _reserved_b(self) -> set[str]:
        return self._reserved(self.rb)


def _attribute(py: str, reserved: set[str]) -> str:
    while py in reserved:
        py += "_"
    return py


def literal_tuple(values: Any) -> str:
    items = [literal(v) for v in values]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _json_literal(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {_json_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_literal(v) for v in value) + "]"
    return literal(value)


def pair_view(a: Revision, b: Revision) -> PairView:
    p = Pair(a, b)
    view = PairView(
        header=(
            f"generated by mcpbind from {a.revision} (sha256 {a.sha256}) and {b.revision} "
            f"(sha256 {b.sha256}); do not edit."
        ),
        source=a.revision,
        target=b.revision,
        source_package=package_name(a.revision),
        target_package=package_name(b.revision),
        doc=f"Projection of MCP {a.revision} values into {b.revision}.",
    )
    # One entry per class of A: a family of identical objects (codegen/families.py) is one class,
    # projected as its first member (the canonical one, then in name order) that B has too.
    common: dict[str, str] = {}  # canonical name in A -> the name it is projected as
    for n, d in a.definitions.items():
        if isinstance(d, ObjectDef) and isinstance(b.definitions.get(n), ObjectDef):
            c = a.canonical(n)
            if common.get(c) != c:
                common[c] = n if n == c else common.get(c, n)
    for c, name in sorted(common.items(), key=lambda kv: list(a.definitions).index(kv[0])):
        conv = p.object_function(name)
        view.project.append(("_a." + p.ra.py[c], conv.fn))
    view.functions = sorted(p.functions, key=lambda f: _sort_key(f.name))
    view.tables = p.tables
    view.types = [(const, annotation) for annotation, const in p.types.items()]
    view.fits = [(p.fits[const], const) for const in p.types.values() if const in p.fits]
    view.typing_imports = sorted(p.helpers & {"Annotated", "Literal"})
    view.msgspec_imports = sorted(p.helpers & {"Meta"})
    view.names = [
        ("_a." + p.ra.py[n], n)
        for n, d in a.definitions.items()
        if isinstance(d, ObjectDef) and n not in a.same
    ]
    return view


def _sort_key(name: str) -> tuple[int, str]:
    return (0 if name.startswith("_o_") else 1, name)


PACKAGE_INIT = "_projection/__init__.py"  # its header names the revisions of the run


def projection_files(irs: dict[str, Revision]) -> dict[str, str]:
    """``_projection/<a>__<b>.py`` for every ordered pair of revisions in ``irs``, by relative path."""
    from .emit import render

    files = {
        PACKAGE_INIT: render(
            "projection_init.py.j2",
            header="generated by mcpbind from "
            + ", ".join(f"{r} (sha256 {irs[r].sha256})" for r in irs)
            + "; do not edit.",
        )
    }
    built: dict[str, str] = {}  # code key -> module that defines that ``build``
    for a in irs:
        for b in irs:
            if a != b:
                view = pair_view(irs[a], irs[b])
                module = f"{package_name(a)}__{package_name(b)}"
                # Revisions with the same schema (draft and the newest release, today) give the
                # same functions: generate them once and build the other pairs from there.
                view.shared_from = built.setdefault(view.code_key(), module)
                if view.shared_from == module:
                    view.shared_from = None
                files[f"_projection/{module}.py"] = render("projection.py.j2", p=view)
    return files


def provenance_file(irs: dict[str, Revision]) -> str:
    """``_provenance.py``: per type and per field, the revisions that define it."""
    from .emit import render

    order = [p.revision for p in pins() if p.revision in irs]
    types: dict[str, list[str]] = {}
    fields: dict[str, dict[str, list[str]]] = {}
    for r in order:
        for name, d in irs[r].definitions.items():
            types.setdefault(name, []).append(r)
            if isinstance(d, ObjectDef):
                for f in d.fields:
                    fields.setdefault(name, {}).setdefault(f.wire, []).append(r)
    return render(
        "provenance.py.j2",
        header="generated by mcpbind from "
        + ", ".join(f"{r} (sha256 {irs[r].sha256})" for r in order)
        + "; do not edit.",
        types=sorted(types.items()),
        fields=[(n, sorted(fs.items())) for n, fs in sorted(fields.items())],
    )
