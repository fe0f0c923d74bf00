"""Stage 4, emit: render one revision's IR into Python source with the jinja2 templates.

This module turns the IR into plain view objects (every string the templates print is
built and escaped here); the templates only lay them out. ``black`` formats the result.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any, TypeVar

import jinja2

from .ir import (
    AliasDef,
    AnyT,
    ArrayT,
    Constraints,
    Field,
    Lit,
    MapT,
    Method,
    ObjectDef,
    Prim,
    RefT,
    Revision,
    Site,
    TypeExpr,
    UnionInfo,
    UnionT,
)
from .names import class_name, is_package_attribute, pascal, snake
from .paths import TEMPLATES_DIR

# Names that appear inside annotations; an attribute with one of them would shadow it for
# the annotation resolver (which also looks in the class body), so it gets a trailing ``_``.
ANNOTATION_NAMES = frozenset(
    {
        "str",
        "int",
        "float",
        "bool",
        "list",
        "dict",
        "None",
        "Any",
        "Annotated",
        "ClassVar",
        "Literal",
        "Meta",
        "UnsetType",
        "Union",
    }
)


class EmitError(Exception):
    """The IR holds something the templates cannot express."""


# -- escaping ----------------------------------------------------------------------------------


def docstring(text: str | None) -> str | None:
    """A triple-quoted docstring literal for ``text``: nothing in it can end the string."""
    if not text or not text.strip():
        return None
    text = text.strip()
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"' and (i + 1 == len(text) or text[i + 1] == '"'):
            out.append('\\"')  # no run of three quotes, and none right before the closing ones
        elif ch == "\t":
            out.append("    ")
        elif ch != "\n" and not ch.isprintable():
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    body = "".join(out)
    return '"""' + body + '"""'


def literal(value: Any) -> str:
    """A Python literal for a JSON constant (or a tuple of them)."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + "".join(f"{literal(v)}, " for v in value) + ")"
    raise EmitError(f"unsupported constant {value!r}")


# -- views -------------------------------------------------------------------------------------


@dataclass
class FieldView:
    py: str
    annotation: str
    default: str | None  # right-hand side, or None for a required field
    doc: str | None


@dataclass
class StructView:
    name: str
    bases: str
    doc: str | None
    fields: list[FieldView]
    tag: tuple[str, str] | None = None  # (attribute, literal)
    private: bool = False


@dataclass
class PropertyView:
    py: str
    wire: str
    annotation: str
    required: bool
    doc: str | None


@dataclass
class OpenView:
    name: str
    doc: str | None
    fields_struct: str
    properties: list[PropertyView]
    init_params: list[str]


@dataclass
class MarkerView:
    name: str
    doc: str | None
    union: str  # the union as the type checker sees it


@dataclass
class AliasView:
    name: str
    doc: str | None
    value: str


@dataclass
class MemberView:
    type: str
    kind: str | None
    required: list[str]
    known: list[str]
    consts: list[tuple[str, list[str]]]


@dataclass
class RegistrationView:
    marker: str
    members: list[MemberView]


@dataclass
class ExtraView:
    name: str
    type: str


@dataclass
class MethodView:
    method: str
    kind: str
    sender: str
    message: str
    params: str
    params_required: bool
    result: str
    capability: str
    capability_side: str
    gates: list[str]


@dataclass
class ModuleView:
    revision: str
    sha256: str
    header: str
    markers: list[MarkerView] = field(default_factory=list)
    structs: list[StructView] = field(default_factory=list)
    opens: list[OpenView] = field(default_factory=list)
    aliases: list[AliasView] = field(default_factory=list)
    registrations: list[RegistrationView] = field(default_factory=list)
    extras: list[ExtraView] = field(default_factory=list)
    same: list[tuple[str, str]] = field(default_factory=list)  # (name, the class it is bound to)
    exports: list[tuple[str, str]] = field(default_factory=list)  # (schema name, py name) differing
    definitions: list[tuple[str, str]] = field(default_factory=list)  # (schema name, py name), all
    public: list[str] = field(default_factory=list)  # schema names that are package attributes
    bound: list[str] = field(default_factory=list)  # the names they are bound to in types.py
    methods: list[MethodView] = field(default_factory=list)
    method_imports: list[str] = field(default_factory=list)
    facts: Any = None  # codegen.facts.FactsView


def python_names(rev: Revision) -> dict[str, str]:
    """Every definition's schema name -> the name it is bound to in the revision's ``types``."""
    taken: set[str] = set()
    py: dict[str, str] = {}
    for name in rev.definitions:
        py[name] = class_name(name, taken)
        taken.add(py[name])
    return py


class _Renderer:
    def __init__(self, rev: Revision) -> None:
        self.rev = rev
        self.py: dict[str, str] = python_names(rev)
        taken = set(self.py.values())
        self.markers: dict[Site, str] = {}  # untagged union site -> marker class name
        for site, info in rev.unions.items():
            if info.strategy == "untagged":
                if not site.steps:  # the union is the definition itself
                    self.markers[site] = self.py[site.owner]
                else:
                    self.markers[site] = "_" + class_name(site_name(site), taken)
                    taken.add(self.markers[site])
        self.emitted_aliases: set[str] | None = None  # while rendering aliases: those already bound

    # -- type expressions

    def type(
        self,
        t: TypeExpr,
        *,
        checking: bool = False,
        qualify: str = "",
        names: set[str] | None = None,
    ) -> str:
        """The annotation for ``t`` (``checking``: as the type checker sees untagged unions;
        ``qualify``: prefix of the generated names, ``"_b."`` where a module holds the classes;
        ``names``: collects the generated names the annotation refers to)."""
        if isinstance(t, AnyT):
            return "Any"
        if isinstance(t, Prim):
            return _prim(t)
        if isinstance(t, Lit):
            if t.values == (None,):
                return "None"
            values = [v for v in t.values if v is not None]
            lit = f"Literal[{', '.join(literal(v) for v in values)}]"
            return lit + (" | None" if None in t.values else "")
        if isinstance(t, ArrayT):
            inner = f"list[{self.type(t.item, checking=checking, qualify=qualify, names=names)}]"
            return _annotated(inner, t.constraints, length=True)
        if isinstance(t, MapT):
            value = self.type(t.value, checking=checking, qualify=qualify, names=names)
            return f"dict[str, {value}]"
        if isinstance(t, RefT):
            if self.emitted_aliases is not None and self._alias_pending(t.name):
                return "Any"  # a back edge of an alias cycle (see docs/design.md)
            bound = self.py[self.rev.canonical(t.name)]  # a family's members name its one class
            if names is not None:
                names.add(bound)
            return qualify + bound
        if isinstance(t, UnionT):
            info = self.rev.unions[t.site]
            if info.strategy == "untagged" and not checking:
                if names is not None:
                    names.add(self.markers[t.site])
                return qualify + self.markers[t.site]  # bound before any alias refers to it
            parts = [
                self.type(m, checking=checking, qualify=qualify, names=names) for m in t.members
            ]
            parts.sort(key=lambda p: p == "None")
            return " | ".join(dict.fromkeys(parts))
        raise EmitError(f"unknown type expression {t!r}")

    def _alias_pending(self, name: str) -> bool:
        d = self.rev.definitions[name]
        return (
            isinstance(d, AliasDef)
            and self.emitted_aliases is not None
            and name not in self.emitted_aliases
            and Site(name) not in self.markers
        )

    # -- definitions

    def struct(self, o: ObjectDef, *, name: str | None = None, private: bool = False) -> StructView:
        fields = []
        reserved = ANNOTATION_NAMES | set(self.py.values())
        tag = None
        for f in o.fields:
            py = _attribute(f.py, reserved)
            if o.tag is not None and f.wire == o.tag[0]:
                tag = (py, literal(o.tag[1]))
                continue
            fields.append(self._field(f, py))
        options = ["kw_only=True", "gc=False"]
        if o.extra == "forbidden":
            options.append("forbid_unknown_fields=True")
        if o.tag is not None:
            options += [f"tag_field={literal(o.tag[0])}", f"tag={literal(o.tag[1])}"]
        return StructView(
            name=name or self.py[o.name],
            bases="Struct, " + ", ".join(options),
            doc=docstring(o.description),
            fields=fields,
            tag=tag,
            private=private,
        )

    def _field(self, f: Field, py: str) -> FieldView:
        annotation = self.type(f.type)
        doc = f.description
        if f.has_default:
            doc = (doc + "\n\n" if doc else "") + f"Default when absent: ``{f.default!r}``."
        if f.required:
            default = None if py == f.wire else f"field(name={literal(f.wire)})"
        else:
            annotation += " | UnsetType"
            default = "UNSET" if py == f.wire else f"field(name={literal(f.wire)}, default=UNSET)"
        return FieldView(py=py, annotation=annotation, default=default, doc=docstring(doc))

    def open_object(self, o: ObjectDef) -> tuple[OpenView, StructView]:
        fields_struct = self.struct(o, name=f"_{self.py[o.name]}Fields", private=True)
        fields_struct.doc = None
        props, params = [], []
        reserved = ANNOTATION_NAMES | set(self.py.values())
        for f in o.fields:
            py = _attribute(f.py, reserved)
            checking = self.type(f.type, checking=True)
            annotation = checking if f.required else f"{checking} | UnsetType"
            props.append(
                PropertyView(py, literal(f.wire), annotation, f.required, docstring(f.description))
            )
            params.append(f"{py}: {annotation}" + ("" if f.required else " = UNSET"))
        return (
            OpenView(
                name=self.py[o.name],
                doc=docstring(o.description),
                fields_struct=fields_struct.name,
                properties=props,
                init_params=params,
            ),
            fields_struct,
        )

    def registration(self, site: Site, info: UnionInfo) -> RegistrationView:
        members = []
        for m in info.members:
            members.append(
                MemberView(
                    type=self.type(m.type),
                    kind=literal(m.kind),
                    required=[literal(k) for k in m.required],
                    known=[literal(k) for k in m.known],
                    consts=[(literal(k), [literal(v) for v in vs]) for k, vs in m.consts],
                )
            )
        return RegistrationView(self.markers[site], members)


def site_name(site: Site) -> str:
    """The name of what stands at ``site``, as inline objects are named:
    ``ReadResourceResult.contents[]`` -> ``ReadResourceResultContentsItem``;
    ``JSONRPCMessage|5[]`` (member 5 of a union) -> ``JSONRPCMessageMember5Item``."""
    words = {"item": "Item", "value": "Value"}
    out = site.owner
    for step in site.steps:
        if step.kind == "field":
            out += pascal(snake(str(step.key)))
        elif step.kind == "member":
            out += f"Member{step.key}"
        else:
            out += words[step.kind]
    return out


def _attribute(py: str, reserved: frozenset[str] | set[str]) -> str:
    while py in reserved:
        py += "_"
    return py


def _meta_args(c: Constraints, *, length: bool) -> list[str]:
    args = []
    pairs = [
        ("ge", c.minimum),
        ("le", c.maximum),
        ("gt", c.exclusive_minimum),
        ("lt", c.exclusive_maximum),
        ("min_length", c.min_items if length else c.min_length),
        ("max_length", c.max_items if length else c.max_length),
        ("pattern", None if length else c.pattern),
    ]
    for key, value in pairs:
        if value is not None:
            args.append(f"{key}={value!r}")
    return args


def _annotated(inner: str, c: Constraints, *, length: bool = False) -> str:
    args = _meta_args(c, length=length)
    return f"Annotated[{inner}, Meta({', '.join(args)})]" if args else inner


def _prim(t: Prim) -> str:
    if t.json == "string":
        return _annotated("str", t.constraints)
    if t.json == "integer":
        return _annotated("int", t.constraints)
    if t.json == "number":
        return f"{_annotated('int', t.constraints)} | {_annotated('float', t.constraints)}"
    if t.json == "boolean":
        return "bool"
    return "None"


def _alias_order(rev: Revision) -> list[str]:
    """Alias definitions in an order where each comes after the aliases it refers to."""
    aliases = {n for n, d in rev.definitions.items() if isinstance(d, AliasDef)}
    order: list[str] = []
    state: dict[str, int] = {}

    def refs(t: TypeExpr) -> list[str]:
        from .unions import walk

        return [x.name for x in walk(t) if isinstance(x, RefT) and x.name in aliases]

    def visit(name: str) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            return  # cycle: the back edge renders as Any
        state[name] = 1
        d = rev.definitions[name]
        assert isinstance(d, AliasDef)
        for r in refs(d.type):
            visit(r)
        state[name] = 2
        order.append(name)

    for name in sorted(aliases):
        visit(name)
    return order


def module_view(rev: Revision) -> ModuleView:
    """Everything the templates of one revision package print."""
    r = _Renderer(rev)
    view = ModuleView(
        revision=rev.revision,
        sha256=rev.sha256,
        header=f"generated by mcpbind from {rev.revision} (sha256 {rev.sha256}); do not edit.",
    )
    _add_markers(view, r)
    _add_objects(view, r)
    _add_aliases(view, r)
    view.registrations = [
        r.registration(site, info)
        for site, info in sorted(rev.unions.items())
        if info.strategy == "untagged"
    ]
    view.definitions = [(literal(n), r.py[n]) for n in sorted(rev.definitions)]
    view.public = [n for n in sorted(rev.definitions) if not is_package_attribute(n)]
    view.exports = [(n, r.py[n]) for n in view.public if r.py[n] != n]
    view.bound = sorted(r.py[n] for n in rev.definitions)
    _add_methods(view, r)
    from .facts import facts_view

    view.facts = facts_view(rev, r.py, r.type) if rev.methods else None  # a protocol has methods
    return view


def _add_markers(view: ModuleView, r: _Renderer) -> None:
    for site, marker in sorted(r.markers.items(), key=lambda kv: kv[1]):
        d = None if site.steps else r.rev.definitions[site.owner]
        view.markers.append(
            MarkerView(
                name=marker,
                doc=docstring(d.description if d is not None else None),
                union=r.type(_union_at(r.rev, site), checking=True),
            )
        )


def _add_objects(view: ModuleView, r: _Renderer) -> None:
    for o in r.rev.objects():
        if o.name in r.rev.same:  # bound to its family's class (codegen/families.py)
            view.same.append((r.py[o.name], r.py[r.rev.same[o.name]]))
            continue
        if o.extra != "kept":
            view.structs.append(r.struct(o))
            continue
        open_view, fields_struct = r.open_object(o)
        view.structs.append(fields_struct)
        view.opens.append(open_view)
        if not isinstance(o.extra_value, AnyT):
            view.extras.append(ExtraView(r.py[o.name], f"dict[str, {r.type(o.extra_value)}]"))


def _add_aliases(view: ModuleView, r: _Renderer) -> None:
    r.emitted_aliases = set()
    for name in _alias_order(r.rev):
        d = r.rev.definitions[name]
        assert isinstance(d, AliasDef)
        if Site(name) not in r.markers:  # its marker class is the binding
            view.aliases.append(AliasView(r.py[name], docstring(d.description), r.type(d.type)))
        r.emitted_aliases.add(name)
    r.emitted_aliases = None


def _add_methods(view: ModuleView, r: _Renderer) -> None:
    used: set[str] = set()  # the generated names the table refers to: what it imports
    for m in r.rev.methods.values():
        used.add(r.py[m.message])
        view.methods.append(
            MethodView(
                method=literal(m.method),
                kind=literal(m.kind),
                sender=literal(m.sender),
                message=r.py[m.message],
                params=r.type(m.params, names=used) if m.params is not None else "None",
                params_required=m.params_required,
                result=r.type(m.result, names=used) if m.result is not None else "None",
                capability=literal(m.capability),
                capability_side=literal(m.capability_side),
                gates=_gates(m),
            )
        )
    view.method_imports = sorted(used)


def _gates(m: Method) -> list[str]:
    """``Gate(...)`` records of a method: its capability, then the conditional ones."""
    out = []
    if m.capability and m.capability_side:
        out.append(f"Gate(side={literal(m.capability_side)}, path={literal(m.capability)})")
    for c in m.conditions:
        when = tuple(c.when.split("."))
        out.append(
            f"Gate(side={literal(c.side)}, path={literal(c.path)}, when={literal(when)}, equals={literal(c.equals)})"
        )
    return out


def _union_at(rev: Revision, site: Site) -> UnionT:
    d = None if site.steps else rev.definitions[site.owner]
    if isinstance(d, AliasDef) and isinstance(d.type, UnionT):
        return d.type
    from .unions import all_unions

    for u in all_unions(rev):
        if u.site == site:
            return u
    raise EmitError(f"no union at {site}")


# -- rendering ---------------------------------------------------------------------------------


@cache
def environment() -> jinja2.Environment:
    """The one jinja2 environment of the generator (templates/; logic stays in Python)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


K = TypeVar("K")

BLACK_LINE_LENGTH = 100


def render(template: str, **context: Any) -> str:
    """Render a template (``format_python`` formats the result)."""
    return environment().get_template(template).render(**context)


class FormatError(Exception):
    """black's first pass over a generated file did not settle: a second pass changes it."""


def _black(source: str, settle: bool) -> tuple[str, bool]:
    """One black pass over ``source``, and whether it settled (checked only with ``settle``).

    ``black.format_str`` formats a second time whenever the first pass changed anything (a
    trailing comma the first pass adds can change what the second chooses); that doubles
    generation's largest cost for output the second pass leaves alone. One pass gives
    exactly what ``format_str`` gives when the second pass changes nothing, which ``settle``
    proves (``mcpbind generate --check``, so ``make check``, runs it).
    """
    import black  # loaded by the renderer only, so that `mcpbind diff` starts fast

    mode = black.Mode(
        line_length=BLACK_LINE_LENGTH, target_versions={black.mode.TargetVersion.PY311}
    )
    once = getattr(black, "_format_str_once", None)  # black's own single pass (pinned version)
    if once is None:
        return black.format_str(source, mode=mode), True
    formatted: str = once(source, mode=mode)
    settled = not settle or formatted == source or once(formatted, mode=mode) == formatted
    return formatted, settled


A = TypeVar("A")
R = TypeVar("R")


def on_all_cores(fn: Callable[[A], R], items: list[A]) -> list[R]:
    """``[fn(i) for i in items]``, spread over the machine's cores (``fn`` must be picklable);
    items are handed out one at a time, so put the largest first."""
    workers = min(len(items), os.cpu_count() or 1)
    if workers <= 1:
        return [fn(i) for i in items]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items, chunksize=1))


def format_python(sources: dict[K, str], *, settle: bool = False) -> dict[K, str]:
    """Format every source with black (one pass, see ``_black``), on all cores (black is most
    of generation's time). With ``settle``, raise FormatError naming every source that a
    second pass would change."""
    keys = sorted(sources, key=lambda k: -len(sources[k]))  # largest first balances the workers
    done = on_all_cores(partial(_black, settle=settle), [sources[k] for k in keys])
    unsettled = [str(k) for k, (_, settled) in zip(keys, done, strict=True) if not settled]
    if unsettled:
        raise FormatError(
            "black formats these generated files differently the second time (change the "
            "template so that one pass settles them): " + ", ".join(sorted(unsettled))
        )
    return {k: text for k, (text, _) in zip(keys, done, strict=True)}


def revision_files(rev: Revision) -> dict[str, str]:
    """The generated files of one revision package, by path relative to the package."""
    view = module_view(rev)
    return {
        "__init__.py": render("package.py.j2", m=view),
        "types.py": render("types.py.j2", m=view),
        "methods.py": render("methods.py.j2", m=view),
    } | ({"facts.py": render("facts.py.j2", m=view)} if view.facts is not None else {})
