"""One module of types for any number of schema documents (a server's tool schemas, or one
Test Suite case): each document resolved on its own (its references are its own), all rendered
into one namespace with names unique in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..emit import render
from .ir import Inexact
from .layout import docstring as layout_docstring
from .layout import pystr
from .render import Renderer, StructView
from .resolve import Resolver

__all__ = ["Document", "TypesModule", "types_module"]

_TYPING = ("Annotated", "Any", "Literal", "TypeAlias")


@dataclass
class Document:
    """A schema document to type: ``name`` is what its root type is called."""

    name: str
    schema: Any
    dialect: str
    doc: str | None = None


@dataclass
class Root:
    """A document's root type: its name in the module, and why the type alone does not say
    the whole schema (empty when it does)."""

    name: str
    reasons: list[tuple[str, str]] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return not self.reasons


@dataclass
class TypesModule:
    source: str
    roots: dict[str, Root]  # by document name
    structs: dict[str, StructView] = field(default_factory=dict)  # by class name
    names: list[str] = field(default_factory=list)  # every class and alias it defines
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> its annotation


def types_module(
    documents: list[Document], *, header: str, doc: str, exports: bool = False
) -> TypesModule:
    """The types of ``documents`` as one module's source (not yet formatted)."""
    renderer = Renderer(set())
    roots: dict[str, Root] = {}
    for d in documents:
        inexact = Inexact()
        resolver = Resolver(d.schema, d.dialect, d.name, inexact)
        node = resolver.resolve_root()
        annotation = renderer.annotation(node, resolver, d.name, inexact)
        name = annotation
        if not annotation.isidentifier() or annotation == "Any":
            name = renderer.name(d.name)
            renderer.aliases.append(_alias(name, annotation))
            renderer.uses.add("TypeAlias")
        root = Root(name, list(inexact.reasons))
        roots[d.name] = root
        if root.reasons:
            struct = renderer.struct_named(name)
            if struct is not None:
                struct.notes = _notes(root.reasons)
    uses = renderer.uses
    typing = [n for n in _TYPING if n in uses]
    msgspec = ["Struct"] + [n for n in ("Meta",) if n in uses]
    if "UNSET" in uses:
        msgspec += ["UNSET", "UnsetType"]
    if any(f.py != f.wire for s in renderer.structs for f in s.fields):
        msgspec.append("field")
    names = [v.name for v in renderer.structs] + [a.name for a in renderer.aliases]
    blocks = [s.lines() for s in renderer.structs] + [a.lines() for a in renderer.aliases]
    source = render(
        "surface/types.py.j2",
        header=header,
        doc="\n".join(layout_docstring(doc, 0) or []),
        typing=typing,
        msgspec=sorted(msgspec, key=str.lower),
        blocks=blocks,
        exports=[pystr(n) for n in sorted(names, key=lambda n: (n.lower(), n))] if exports else [],
    )
    aliases = {a.name: a.annotation for a in renderer.aliases}
    return TypesModule(source, roots, {v.name: v for v in renderer.structs}, names, aliases)


def _alias(name: str, annotation: str) -> Any:
    from .render import AliasView

    return AliasView(name, annotation)


def _notes(reasons: list[tuple[str, str]]) -> list[str]:
    return ["Not said by the types below, checked by the fallback validator:"] + [
        f"- {where}: {why}" for where, why in reasons
    ]
