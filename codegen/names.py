"""Python names for schema names: attributes, classes and inline objects.

Every name that reaches generated code passes through here, so nothing a schema says can
become code: the result is always a plain ASCII identifier that is not a keyword.
"""

from __future__ import annotations

import builtins
import keyword
import re

# What a revision package binds besides its definitions: its modules and tables. A definition
# with one of these names could not be an attribute of the package under its schema name.
PACKAGE_NAMES = frozenset(
    {"types", "methods", "facts", "METHODS", "REVISION", "SHA256", "DEFINITIONS"}
)

# Names the generated modules use themselves (imports, helpers, tables); a definition with one
# of these names is bound under ``<name>_`` in the code and exported under its schema name.
RESERVED = frozenset(
    {
        "annotations",
        "Annotated",
        "Any",
        "ClassVar",
        "Literal",
        "Mapping",
        "TYPE_CHECKING",
        "TypeAlias",
        "Union",
        "Struct",
        "Meta",
        "UNSET",
        "UnsetType",
        "field",
        "msgspec",
        "Member",
        "OpenObject",
        "Untagged",
        "register",
        "MethodSpec",
    }
    | PACKAGE_NAMES
    | set(dir(builtins))
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _ascii(text: str) -> str:
    """Letters, digits and underscores; every other character becomes a separator or ``u<hex>``."""
    out = []
    for ch in text:
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        elif ch.isascii():
            out.append("_")
        else:
            out.append(f"_u{ord(ch):x}_")
    return "".join(out)


def snake(wire: str) -> str:
    """The attribute name of a wire key: ``inputSchema`` -> ``input_schema``, ``_meta`` -> ``meta``,
    ``io.modelcontextprotocol/protocolVersion`` -> ``protocol_version``."""
    base = wire.rsplit("/", 1)[-1] if "/" in wire.rstrip("/") else wire
    words = _ascii(_CAMEL.sub("_", base))
    name = re.sub(r"_+", "_", words).strip("_").lower()
    if not name:
        name = "value"
    if name[0].isdigit():
        name = "f_" + name
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) and name == "_":
        name += "_"
    return name


def pascal(py_name: str) -> str:
    """``input_schema`` -> ``InputSchema`` (for naming inline objects after their field)."""
    return "".join(part[:1].upper() + part[1:] for part in py_name.split("_") if part)


def class_name(schema_name: str, taken: set[str]) -> str:
    """The identifier a definition is bound to in generated code: its schema name when possible.

    The one rule (docs/design.md, "Names"): other characters than ASCII letters, digits and
    ``_`` become ``_`` or ``u<hex>``; a name that does not start with a letter gets a leading
    ``T`` (``__init__`` -> ``T__init__``: names starting with ``_`` are the generated code's
    own); then ``_`` is appended while the name is a keyword, a builtin, a name the generated
    package or module uses (``RESERVED``) or one another definition is bound to.
    """
    name = schema_name
    if not (name.isascii() and name.isidentifier()):
        name = re.sub(r"_+", "_", _ascii(name))
    if not name[:1].isalpha():
        name = "T" + name
    while keyword.iskeyword(name) or name in RESERVED or name in taken:
        name += "_"
    return name


def is_package_attribute(schema_name: str) -> bool:
    """Whether a schema name is taken by the package or by every module object (``types``,
    ``METHODS``, ``__init__``, ``__name__``): such a definition is reachable only through the
    package's ``DEFINITIONS``, never as an attribute under that name."""
    return schema_name in PACKAGE_NAMES or (
        schema_name.startswith("__") and schema_name.endswith("__")
    )


def unique_attributes(wires: list[str]) -> dict[str, str]:
    """Attribute names for the keys of one object, unique within it and deterministic.

    A key that already is its own snake_case name keeps it; the others get their snake_case
    name, with ``_`` appended while it is taken.
    """
    result: dict[str, str] = {}
    taken: set[str] = set()
    natural = [w for w in wires if snake(w) == w]
    for wire in natural + [w for w in wires if w not in natural]:
        name = snake(wire)
        while name in taken:
            name += "_"
        taken.add(name)
        result[wire] = name
    return {w: result[w] for w in wires}
