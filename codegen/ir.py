"""The intermediate representation of one protocol revision.

Every stage after ``model`` reads this, never the raw schema: the emitter renders it,
``diff`` compares two of them. It is plain, frozen data so that it can be compared,
hashed and printed.

Type expressions
----------------
``AnyT``      any JSON value
``Prim``      a JSON primitive (``string``, ``integer``, ``number``, ``boolean``, ``null``) with constraints
``Lit``       one or more constant values (``const`` / ``enum``)
``ArrayT``    a JSON array of one item type
``MapT``      a JSON object used as a map from string keys to one value type
``RefT``      a named definition of the same revision
``UnionT``    ``anyOf`` / ``oneOf`` / ``type: [...]``; how it is decoded is in ``Revision.unions``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

JsonKind = Literal["object", "array", "string", "integer", "number", "boolean", "null"]


@dataclass(frozen=True)
class Constraints:
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: int | float | None = None
    exclusive_maximum: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None
    format: str | None = None  # informative only: JSON Schema does not assert formats by default

    def asserting(self) -> dict[str, Any]:
        """The constraints a validator enforces (everything but ``format``), by name."""
        return {k: v for k, v in self.__dict__.items() if v is not None and k != "format"}


NO_CONSTRAINTS = Constraints()


@dataclass(frozen=True)
class AnyT:
    pass


@dataclass(frozen=True)
class Prim:
    json: Literal["string", "integer", "number", "boolean", "null"]
    constraints: Constraints = NO_CONSTRAINTS


@dataclass(frozen=True)
class Lit:
    values: tuple[str | int | bool | None, ...]


@dataclass(frozen=True)
class ArrayT:
    item: TypeExpr
    constraints: Constraints = NO_CONSTRAINTS


@dataclass(frozen=True)
class MapT:
    value: TypeExpr


@dataclass(frozen=True)
class RefT:
    name: str


@dataclass(frozen=True)
class Step:
    """One step from a definition into the type expression it holds."""

    kind: Literal["field", "item", "value", "member"]  # a property, array items, map values,
    # or one member of an ``anyOf`` (numbered only where two members would share a site)
    key: str | int = ""  # the property's wire name, or the member's index


@dataclass(frozen=True)
class Site:
    """Where a type expression stands: a definition and the steps from it (none for the
    definition's own type). Names the decoder of a union there and the inline objects hoisted
    from there; ``str`` gives the reading form, ``ReadResourceResult.contents[]``."""

    owner: str
    steps: tuple[Step, ...] = ()

    def field(self, wire: str) -> Site:
        return Site(self.owner, (*self.steps, Step("field", wire)))

    def item(self) -> Site:
        return Site(self.owner, (*self.steps, Step("item")))

    def value(self) -> Site:
        return Site(self.owner, (*self.steps, Step("value")))

    def member(self, index: int) -> Site:
        return Site(self.owner, (*self.steps, Step("member", index)))

    def __str__(self) -> str:
        marks = {"item": "[]", "value": ".*", "member": "|{}", "field": ".{}"}
        return self.owner + "".join(marks[s.kind].format(s.key) for s in self.steps)

    def __lt__(self, other: Site) -> bool:
        # Report order is the order of the reading form (the steps break a tie between sites
        # that read alike, a property named ``a[]`` and the items of ``a``).
        return (str(self), repr(self.steps)) < (str(other), repr(other.steps))


@dataclass(frozen=True)
class UnionT:
    members: tuple[TypeExpr, ...]
    site: Site  # where it stands: names its decoder when it needs one


TypeExpr = AnyT | Prim | Lit | ArrayT | MapT | RefT | UnionT

ANY = AnyT()

Extra = Literal["ignored", "forbidden", "kept"]
"""What an object does with keys it does not declare.

``ignored``   the schema allows them (no ``additionalProperties``): accepted, not kept
``forbidden`` ``additionalProperties: false``: rejected
``kept``      the schema declares them (``additionalProperties: {...}``) or the overlay marks the
              object open (``_meta``): accepted and kept, so re-encoding loses nothing
"""


@dataclass(frozen=True)
class Field:
    wire: str  # the key on the wire, exactly as in the schema
    py: str  # the Python attribute name
    type: TypeExpr
    required: bool
    description: str | None = None
    default: Any = None  # the schema's ``default`` (informative; absent stays absent on the wire)
    has_default: bool = False


@dataclass(frozen=True)
class ObjectDef:
    """A JSON object with declared properties: a Struct (or, when ``extra == "kept"``, an open object)."""

    name: str  # schema name, or parent + field for inline objects
    description: str | None
    fields: tuple[Field, ...]
    extra: Extra = "ignored"
    extra_value: TypeExpr = ANY  # the type of undeclared keys when ``extra == "kept"``
    inline: bool = False  # defined inside another definition
    site: Site | None = None  # where an inline object was defined (``CallToolRequestParams._meta``)
    tag: tuple[str, str] | None = None  # (wire field, value) when decoded as a tagged union member

    def field(self, wire: str) -> Field | None:
        for f in self.fields:
            if f.wire == wire:
                return f
        return None


@dataclass(frozen=True)
class AliasDef:
    """A named non-object definition: a union, enum, primitive, map or reference."""

    name: str
    description: str | None
    type: TypeExpr


Definition = ObjectDef | AliasDef

UnionStrategy = Literal["native", "tagged", "untagged"]


@dataclass(frozen=True)
class UnionMember:
    """One member of an untagged union and what tells it apart before it is decoded."""

    type: TypeExpr
    kind: JsonKind | None  # JSON kind it accepts; None: any kind
    required: tuple[str, ...] = ()  # keys it requires (objects)
    known: tuple[str, ...] = ()  # keys it declares (objects)
    consts: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # (key, allowed values) it requires


@dataclass(frozen=True)
class UnionInfo:
    site: Site
    strategy: UnionStrategy
    members: tuple[UnionMember, ...]
    tag_field: str | None = None  # wire name of the tag when ``strategy == "tagged"``


@dataclass(frozen=True)
class CapabilityCondition:
    """A capability a request needs only when its params say so (``sampling.tools`` when
    ``params.tools`` is present, ``elicitation.url`` when ``params.mode`` is ``"url"``)."""

    when: str  # dotted path into the message's ``params``
    equals: Any  # the value it must have; None: present with any value
    side: Literal["client", "server", "receiver"]  # whose capabilities
    path: str  # dotted capability path


@dataclass(frozen=True)
class Method:
    """One JSON-RPC method of a revision."""

    method: str
    kind: Literal["request", "notification"]
    sender: Literal["client", "server", "both"]
    message: str  # the request or notification definition
    params: TypeExpr | None  # the type of its ``params`` member, None when it has none
    params_required: bool
    result: TypeExpr | None  # the result type of a request; None for a notification
    capability: str | None  # dotted path the receiving side must have advertised
    capability_side: Literal["client", "server", "receiver"] | None
    conditions: tuple[CapabilityCondition, ...] = ()


@dataclass(frozen=True)
class Patch:
    """An overlay fix applied to the upstream schema (shown by ``diff`` as a note)."""

    pointer: str
    expect: Any
    value: Any
    reason: str


@dataclass(frozen=True)
class InputRequests:
    """How a revision with multi-round-trip requests (overlay ``[[round_trip]]``) asks the
    client for input: the requests of ``methods`` travel in the field ``key`` of the result
    ``result`` (``InputRequiredResult.inputRequests``) instead of being sent as requests."""

    result: str
    key: str
    methods: tuple[str, ...]  # sorted


@dataclass
class Revision:
    revision: str
    sha256: str
    source: str
    dialect: Literal["draft-07", "2020-12"]
    definitions: dict[str, Definition] = field(default_factory=dict)  # sorted by name
    unions: dict[Site, UnionInfo] = field(default_factory=dict)  # by site
    methods: dict[str, Method] = field(default_factory=dict)  # sorted by method name
    patches: tuple[Patch, ...] = ()
    input_requests: InputRequests | None = None
    same: dict[str, str] = field(default_factory=dict)
    # an inline object identical to another -> the canonical member of its family, whose class it
    # shares (``codegen.families``); every definition stays in ``definitions`` under its own name

    def canonical(self, name: str) -> str:
        """The definition whose class ``name`` is bound to: itself, or its family's canonical."""
        return self.same.get(name, name)

    def objects(self) -> list[ObjectDef]:
        return [d for d in self.definitions.values() if isinstance(d, ObjectDef)]

    def get(self, name: str) -> Definition:
        return self.definitions[name]
