"""THE one place listing every deliberate disagreement of the differential tests.

The differential tests (tests/test_differential.py) compare mcpbind with the ``jsonschema``
reference validator on instances generated from every definition of every revision. Where the
two are *meant* to differ, or where the instances are generated from something other than the
reference schema, the case is listed here with its reason and a predicate that scopes it as
narrowly as the tests can express. Nothing else in the tests may skip or relax a comparison.

Each entry's predicate is used by the tests; each entry also has a test that checks that the
disagreement is still real (so a fix on either side makes the entry fail and get removed).

Kinds
-----
``deliberate``  mcpbind and the reference validator give different verdicts, on purpose.
``generation``  not a verdict difference: what the instances are generated from differs from the
                reference schema (always narrowing; every generated instance is still checked
                against the reference schema).
``known bug``   a generator defect the tests mark as strict xfail until it is fixed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["deliberate", "generation", "known bug"]


@dataclass(frozen=True)
class Disagreement:
    id: str
    kind: Kind
    scope: str  # where it applies, in words; ``applies`` is the same thing as code
    reason: str
    applies: Callable[..., bool]


def _integral_float(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _always(*_: Any) -> bool:
    return True


def _tag_dropped(tags: frozenset[tuple[str, Any]], mutation: Any, original: Any) -> bool:
    """A mutation that removes the tag key (with its tag value) of a tagged Struct."""
    if mutation.kind != "drop_key":
        return False
    node = original
    for p in mutation.path:
        node = node[p]
    return (mutation.key, node.get(mutation.key)) in tags


INTEGRAL_FLOAT = Disagreement(
    id="integral-float-for-integer",
    kind="deliberate",
    scope="a JSON number with a zero fraction (1.0, 1e300) where the schema says `integer`",
    reason=(
        "JSON Schema counts 1.0 as an integer; msgspec decodes `int` fields from JSON integers "
        "only and rejects 1.0. MCP peers send integers as integers (JSON-RPC ids, error codes, "
        "counts), and accepting 1.0 would make re-encoding change the wire text, so mcpbind "
        "keeps msgspec's strictness. The mutations never produce such floats; "
        "test_integral_float_disagreement pins the difference."
    ),
    applies=_integral_float,
)

TAG_OPTIONAL_DIRECT = Disagreement(
    id="tag-optional-when-decoded-directly",
    kind="deliberate",
    scope=(
        "removing the tag key (e.g. `type` of TextContent, `method` of a request) from a Struct "
        "that the IR gives a tag (ObjectDef.tag), when the Struct is decoded as itself rather "
        "than through the union that the tag discriminates"
    ),
    reason=(
        "msgspec treats a Struct's tag as implied by the type when the type is known: decoding "
        '`M.TextContent` from an object without `"type"` succeeds (and re-encoding adds '
        '`"type": "text"`). The schema requires the key. Through a union (ContentBlock, '
        "ClientRequest) the tag is required, as the schema says, and the tests still demand it "
        "there: only mutations whose mcpbind verdict is 'accepted' AND whose removed key/value "
        "pair is a tag of the revision are tolerated."
    ),
    applies=_tag_dropped,
)

CLOSED_OBJECTS = Disagreement(
    id="closed-objects-for-generation",
    kind="generation",
    scope=(
        "object schemas with `properties` and no `additionalProperties` keyword (IR extra "
        "'ignored'), except `_meta` fields and *MetaObject definitions (IR extra 'kept')"
    ),
    reason=(
        "such objects accept undeclared keys but a msgspec Struct does not keep them, so an "
        "instance carrying one cannot round-trip to equal JSON. Instances for the round-trip are "
        "generated with `additionalProperties: false` on those objects; acceptance of undeclared "
        "keys is still tested, by the `add_key` mutation at every object of every instance and "
        "by check_undeclared_key on every object definition (kept objects must re-encode them, ignored ones drop them)."
    ),
    applies=_always,
)

MERGED_ALL_OF = Disagreement(
    id="all-of-merged-for-generation",
    kind="generation",
    scope="`allOf` schemas (2025-11-25: CancelTaskResult, GetTaskResult, "
    "TaskStatusNotificationParams, URLElicitationRequiredError.error; 2026-07-28 and draft: the "
    "`error` members of the *Error definitions)",
    reason=(
        "closing each `allOf` part separately would forbid the other parts' keys; the generation "
        "schema merges the parts first (as the generator's model stage does) and closes the "
        "merged object only when one of the parts is not explicitly open."
    ),
    applies=_always,
)

RECURSIVE_REFS = Disagreement(
    id="recursive-refs-cut-for-generation",
    kind="generation",
    scope="definitions that reach themselves through `$ref` (JSONValue and JSONObject in "
    "2026-07-28 and draft)",
    reason=(
        "hypothesis-jsonschema inlines every reference and cannot handle recursion. In the "
        "generation schema, a reference from inside a recursive definition to a recursive "
        "definition is replaced by the unconstrained schema `{}`: JSONObject becomes an object "
        "of arbitrary JSON values, JSONValue any JSON value (JSONArray is a plain array of JSONValue). Nested arbitrary JSON is still "
        "generated; the instances stay valid for the real (recursive) schema, which the "
        "reference validator checks."
    ),
    applies=_always,
)

LEGACY_MANY_SHIM = Disagreement(
    id="hypothesis-jsonschema-many-shim",
    kind="generation",
    scope="every object instance generated by hypothesis-jsonschema 0.23 under hypothesis >= 6.150",
    reason=(
        "hypothesis-jsonschema calls `cu.many(...).more()`, an internal API that current "
        "hypothesis replaced by a context manager (AttributeError: 'many' object has no attribute "
        "'more'). tests/_schema_strategies.py adapts the new API to the old protocol for "
        "hypothesis-jsonschema only; generation itself is unchanged."
    ),
    applies=_always,
)

#: every entry, for the record and for the tests that check each is still real
ALL: tuple[Disagreement, ...] = (
    INTEGRAL_FLOAT,
    TAG_OPTIONAL_DIRECT,
    CLOSED_OBJECTS,
    MERGED_ALL_OF,
    RECURSIVE_REFS,
    LEGACY_MANY_SHIM,
)

KNOWN_BUGS: tuple[Disagreement, ...] = tuple(d for d in ALL if d.kind == "known bug")


def known_bug(revision: str, name: str) -> Disagreement | None:
    """The ``known bug`` entry covering a definition, if any."""
    return next((d for d in KNOWN_BUGS if d.applies(revision, name)), None)


#: agreements worth stating because they are easy to get wrong (tested, not tolerated)
AGREEMENTS = {
    "format-not-asserted": "neither side asserts `format` (uri, byte, date-time): the reference "
    "validator runs without a format checker, as JSON Schema's default, and mcpbind keeps `str`",
    "bool-is-not-a-number": "`true` is not an `integer` or `number` for either side",
}


# ---------------------------------------------------------------------------------------------
# Official examples (tests/test_examples.py) that carry keys their own schema does not declare.
# Both sides accept them (undeclared keys are allowed); mcpbind's Structs do not keep them (see
# CLOSED_OBJECTS), so re-encoding gives the example without exactly these keys.


@dataclass(frozen=True)
class UndeclaredKeys:
    keys: tuple[tuple[str | int, ...], ...]  # JSON paths of the keys that are not kept
    decodes_as: str  # the class the example decodes to (at ``at``)
    reason: str
    at: tuple[str, ...] = ()  # attribute path from the decoded value to the checked one


_LIST_ROOTS = UndeclaredKeys(
    keys=(("id",),),
    decodes_as="ListRootsRequest",
    reason=(
        "the example has an `id`, but in 2026-07-28 ListRootsRequest is an input request "
        "embedded in a result and its schema declares only `method` and `params`"
    ),
)
_READ_RESOURCE = UndeclaredKeys(
    keys=(("result", "contents"),),
    decodes_as="InputRequiredResult",
    at=("result",),
    reason=(
        "the example's result lacks `cacheScope` and `ttlMs`, which ReadResourceResult requires "
        "in 2026-07-28, so under the schema it is not a ReadResourceResult; it matches the other "
        "member of the result union, InputRequiredResult, which does not declare `contents`"
    ),
)

EXAMPLES_WITH_UNDECLARED_KEYS: dict[str, UndeclaredKeys] = {
    f"{revision}/{name}/{file}": entry
    for revision in ("2026-07-28", "draft")
    for name, file, entry in (
        ("ListRootsRequest", "list-roots-request.json", _LIST_ROOTS),
        ("ReadResourceResultResponse", "read-resource-result-response.json", _READ_RESOURCE),
    )
}
