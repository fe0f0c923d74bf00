"""The pinned protocol extensions (``schema/extensions.toml``) and the facts read from them.

An extension is pinned as an npm package (name, version, the registry's tarball URL, sha256);
its tarball is read from the schema directory's ``extensions/`` if there, else from the per-user
cache (``MCPBIND_SCHEMA_DIR`` if set), where it is downloaded on first use; it is refused unless
its sha256 matches the pin. The tasks extension is
published only as zod schemas (``dist/core/v2/schemas.js``): its open objects are
``z.unknown().transform(...)`` and its JSON values ``z.custom``, which no zod-to-JSON-Schema
conversion can describe, so what the generator takes from it is the facts the runtime needs,
each read from the module's own declarations: the extension id, the ``_meta`` key clients
declare it under, the methods, the notification, the result discriminators, the statuses with
the field each one carries, the task fields, and the method a task may answer. A declaration the
reader cannot find is an error naming it, never a guess.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .paths import SCHEMA_DIR
from .pin import PinError, _download, _fetch, _sha256, _user_cache, _write_atomic, schema_dir

EXTENSIONS_FILE = SCHEMA_DIR / "extensions.toml"


@dataclass(frozen=True)
class ExtensionPin:
    name: str
    package: str
    version: str
    source: str
    sha256: str
    module: str
    extends: str
    # The core revision's tasks the extension replaces (what a bridge translates); see the toml.
    core: str | None = None
    core_module: str | None = None
    related_task_module: str | None = None
    core_renamed: dict[str, str] | None = None
    core_forbidden: str | None = None


def read_extension_pins(path: Path | None = None) -> tuple[ExtensionPin, ...]:
    path = path or EXTENSIONS_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ()
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PinError(f"{path}: {exc}") from exc
    return tuple(ExtensionPin(**entry) for entry in data.get("extension", []))


def tarball_path(p: ExtensionPin) -> Path:
    """Where the tarball of ``p`` is looked for first: the schema directory's ``extensions/``."""
    return schema_dir() / "extensions" / f"{p.name}-{p.version}.tgz"


def cache_path(p: ExtensionPin) -> Path:
    """Where a downloaded tarball of ``p`` is kept: ``MCPBIND_SCHEMA_DIR`` if set, else the
    per-user cache. Never ``../shared/schemas``: that directory is the upstream data as given
    (often read-only), not a place to write."""
    base = (
        Path(os.environ["MCPBIND_SCHEMA_DIR"])
        if os.environ.get("MCPBIND_SCHEMA_DIR")
        else _user_cache()
    )
    return base / "extensions" / f"{p.name}-{p.version}.tgz"


def read_tarball(p: ExtensionPin) -> bytes:
    """The verified tarball of ``p``: from the schema directory or the cache, else downloaded
    into the cache."""
    for where in dict.fromkeys((tarball_path(p), cache_path(p))):
        try:
            data = where.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise PinError(f"cannot read {where}: {exc.strerror}") from exc
        _check(p, data, str(where))
        return data
    data = _fetch(p.source, _download)
    _check(p, data, p.source)
    _write_atomic(cache_path(p), data)
    return data


def _check(p: ExtensionPin, data: bytes, where: str) -> None:
    actual = _sha256(data)
    if actual != p.sha256:
        raise PinError(
            f"{where}: sha256 mismatch for extension {p.name} ({p.package} {p.version}): "
            f"expected {p.sha256}, got {actual}"
        )


def module_text(p: ExtensionPin, module: str | None = None) -> str:
    """The text of the package's file ``module`` (default: the pin's ``module``)."""
    module = module or p.module
    with tarfile.open(fileobj=io.BytesIO(read_tarball(p)), mode="r:gz") as tar:
        try:
            member = tar.extractfile(module)
        except KeyError:
            member = None
        if member is None:
            raise PinError(f"{p.package} {p.version} has no file {module}")
        return member.read().decode("utf-8")


# -- reading the tasks module ------------------------------------------------------------------


class _Module:
    """Declarations of one JavaScript module, found by name."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where

    def declaration(self, name: str) -> str:
        """The text of ``const NAME = ...`` (or ``export const``) up to the next declaration."""
        found = re.search(
            rf"^(?:export )?const {re.escape(name)} = (.*?)(?=^(?:export |const |function |//))",
            self.text,
            re.S | re.M,
        )
        if found is None:
            raise PinError(f"{self.where}: no declaration of {name}")
        return found.group(1)

    def string(self, name: str) -> str:
        found = re.fullmatch(r'\s*"([^"]+)";\s*', self.declaration(name))
        if found is None:
            raise PinError(f"{self.where}: {name} is not a string constant")
        return found.group(1)

    def literal(self, name: str, key: str | None = None) -> str:
        """The ``z.literal("...")`` of a declaration (of its field ``key`` when given)."""
        body = self.declaration(name)
        pattern = (
            rf'\b{re.escape(key)}: z\.literal\("([^"]+)"\)' if key else r'z\.literal\("([^"]+)"\)'
        )
        found = re.search(pattern, body)
        if found is None:
            raise PinError(f"{self.where}: no literal {key or ''} in {name}")
        return found.group(1)

    def call_argument(self, name: str, function: str) -> str:
        found = re.fullmatch(rf'\s*{re.escape(function)}\("([^"]+)"\);\s*', self.declaration(name))
        if found is None:
            raise PinError(f"{self.where}: {name} is not {function}(...)")
        return found.group(1)

    def enum(self, name: str) -> tuple[str, ...]:
        found = re.search(r"z\.enum\(\[(.*?)\]\)", self.declaration(name), re.S)
        if found is None:
            raise PinError(f"{self.where}: {name} is not a z.enum")
        return tuple(re.findall(r'"([^"]+)"', found.group(1)))

    def keys(self, name: str) -> tuple[str, ...]:
        """The keys of an object shape (``{ key: ..., ... }``), spreads left out."""
        body = self.declaration(name)
        return tuple(re.findall(r"^\s{4}(\w+):", body, re.M))


def _doc(text: str = "", default: Any = dataclasses.MISSING) -> Any:
    """A field of a facts record, with the comment the generated record gives it."""
    return dataclasses.field(default=default, metadata={"doc": text})


@dataclass(frozen=True)
class TasksFacts:
    """What the tasks extension says, as the runtime reads it (``mcpbind._extensions``): the
    generated ``TasksFacts`` record is written from these fields (their annotations and docs)."""

    revision: str = _doc("the revision whose requests carry the extension")
    package: str = _doc("the npm package the facts were read from")
    version: str = _doc()
    sha256: str = _doc("of the package's tarball")
    extension: str = _doc("the key under capabilities.extensions")
    extensions_key: str = _doc("the capabilities member listing the extensions a side supports")
    capabilities_key: str = _doc("the request _meta key a client declares its capabilities under")
    get: str = _doc()
    update: str = _doc()
    cancel: str = _doc()
    notification: str = _doc()
    task_result: str = _doc("the resultType of a result that created a task")
    complete_result: str = _doc("the resultType of every other result")
    eligible: str = _doc("the method whose result may be a task")
    statuses: tuple[str, ...] = _doc()
    working: str = _doc()
    input_required: str = _doc("the status whose task carries input requests")
    completed: str = _doc("... its result")
    failed: str = _doc("... its error")
    cancelled: str = _doc()
    task_fields: tuple[str, ...] = _doc("the fields of every task, in the package's order")
    task_id: str = _doc("the task field naming it, and the params member of get/update/cancel")
    status: str = _doc("the task field holding its status (what its variants are told by)")
    input_requests: str = _doc("the field of an input_required task holding its requests")
    result: str = _doc("the field of a completed task holding its result")
    error: str = _doc("the field of a failed task holding its error")
    input_responses: str = _doc("the field of the update request's params holding the answers")
    listen_filter: str = _doc("the subscription filter's key naming the tasks a stream follows")
    core: str | None = _doc("the core revision whose tasks it replaces (a bridge's), or None", None)
    core_renamed: tuple[tuple[str, str], ...] = _doc(
        "(core task field, its name in the extension)", ()
    )
    related_task_key: str | None = _doc("the core _meta key tying a request to its task", None)
    core_tool_execution: tuple[str, ...] = _doc("the path to a core Tool's task support", ())
    core_taskable: tuple[str, ...] = _doc(
        "the task support values that let a call become a task", ()
    )


def facts_rows(tasks: TasksFacts | None) -> list[tuple[str, str, str, str]]:
    """(name, annotation, comment, value) of each field of the generated ``TasksFacts``, in
    order; the value is its Python literal (empty without ``tasks``): the repr of a str or a
    tuple of them is a literal of the same value (black formats it)."""
    return [
        (
            f.name,
            str(f.type),
            f.metadata["doc"],
            repr(getattr(tasks, f.name)) if tasks is not None else "",
        )
        for f in dataclasses.fields(TasksFacts)
    ]


# Each status variant of DetailedTask, by the declaration that holds it, with the field (if any)
# that it alone carries: the name of the fact is the generator's, the wire values upstream's.
_VARIANTS = {
    "working": ("WorkingTaskV2Schema", None),
    "input_required": ("InputRequiredTaskV2Schema", "inputRequests"),
    "completed": ("CompletedTaskV2Schema", "result"),
    "failed": ("FailedTaskV2Schema", "error"),
    "cancelled": ("CancelledTaskV2Schema", None),
}


def tasks_facts(p: ExtensionPin) -> TasksFacts:
    m = _Module(module_text(p), f"{p.package} {p.version} {p.module}")
    statuses = m.enum("TaskStatusV2Schema")
    variant: dict[str, Any] = {}
    for fact, (name, field) in _VARIANTS.items():
        status = m.literal(name, "status")
        if status not in statuses:
            raise PinError(f"{m.where}: {name} has status {status!r}, not one of {statuses}")
        if field is not None and f"    {field}:" not in m.declaration(name):
            raise PinError(f"{m.where}: {name} does not carry {field}")
        variant[fact] = status
    task_fields = m.keys("TaskBaseShape") + m.keys("TaskV2Schema")
    named = re.search(
        r"params: z\.object\(\{ (\w+): z\.string\(\) \}\)", m.declaration("taskIdRequestV2Schema")
    )
    if named is None or named.group(1) not in task_fields:
        raise PinError(f"{m.where}: taskIdRequestV2Schema's params name no task field")
    task_id = named.group(1)
    holder = re.search(r"^\s{4}(\w+): TaskStatusV2Schema", m.declaration("TaskV2Schema"), re.M)
    if holder is None:
        raise PinError(f"{m.where}: TaskV2Schema has no status field")
    update_params = m.declaration("UpdateTaskRequestV2Schema")
    responses = re.search(
        rf"{task_id}: z\.string\(\),\s*(\w+): InputResponsesV2Schema", update_params
    )
    if responses is None:
        raise PinError(f"{m.where}: UpdateTaskRequestV2Schema has no input responses field")
    carried = {fact: field for fact, (_, field) in _VARIANTS.items() if field is not None}
    return TasksFacts(
        **_core_facts(p, statuses, task_fields),
        revision=p.extends,
        package=p.package,
        version=p.version,
        sha256=p.sha256,
        extension=m.string("TASKS_EXTENSION_ID_V2"),
        extensions_key=_one(m.keys("ClientTaskCapabilityEnvelopeV2Schema"), m.where),
        capabilities_key=m.string("CLIENT_CAPABILITIES_META_KEY_V2"),
        get=m.call_argument("GetTaskRequestV2Schema", "taskIdRequestV2Schema"),
        update=m.literal("UpdateTaskRequestV2Schema", "method"),
        cancel=m.call_argument("CancelTaskRequestV2Schema", "taskIdRequestV2Schema"),
        notification=m.literal("TaskStatusNotificationV2Schema", "method"),
        task_result=m.literal("CreateTaskResultV2Schema", "resultType"),
        complete_result=m.literal("CompleteResultTypeSchema"),
        eligible=m.literal("TaskEligibleMethodV2Schema"),
        statuses=statuses,
        task_fields=task_fields,
        task_id=task_id,
        status=holder.group(1),
        input_requests=carried["input_required"],
        result=carried["completed"],
        error=carried["failed"],
        input_responses=responses.group(1),
        listen_filter=_one(m.keys("TaskSubscriptionNotificationsV2Schema"), m.where),
        **variant,
    )


def _one(keys: tuple[str, ...], where: str) -> str:
    """The one key of a declaration that has exactly one."""
    if len(keys) != 1:
        raise PinError(f"{where}: expected one key, found {keys}")
    return keys[0]


def _core_facts(
    p: ExtensionPin, statuses: tuple[str, ...], fields: tuple[str, ...]
) -> dict[str, Any]:
    """What a bridge needs of the core revision's tasks (the pin's ``core``), each read from the
    package's declarations of them or checked against those: the same statuses, the task fields
    renamed, the path to a tool's task support and the values that let a call become a task,
    and the ``_meta`` key tying a request to its task."""
    if p.core is None:
        return {}
    if not (p.core_module and p.related_task_module and p.core_renamed and p.core_forbidden):
        raise PinError(
            f"{EXTENSIONS_FILE}: extension {p.name}: core needs core_module, "
            "related_task_module, core_renamed and core_forbidden"
        )
    v1 = _Module(module_text(p, p.core_module), f"{p.package} {p.version} {p.core_module}")
    found = re.search(r"export const TaskStatusesV1 = \[(.*?)\];", v1.text, re.S)
    if found is None:
        raise PinError(f"{v1.where}: no declaration of TaskStatusesV1")
    if tuple(re.findall(r'"([^"]+)"', found.group(1))) != statuses:
        raise PinError(f"{v1.where}: the core task statuses differ from the extension's {statuses}")
    core_fields = v1.keys("TaskV1Schema")
    renamed = dict(p.core_renamed)
    if set(core_fields) - set(renamed) != set(fields) - set(renamed.values()) or not (
        set(renamed) <= set(core_fields) and set(renamed.values()) <= set(fields)
    ):
        raise PinError(
            f"{v1.where}: core_renamed {renamed} does not pair TaskV1Schema {core_fields} "
            f"with the extension's task fields {fields}"
        )
    execution = re.search(
        r"^\s{4}(\w+): ToolExecutionV1Schema", v1.declaration("ToolV1Schema"), re.M
    )
    support = re.search(
        r"^\s{4}(\w+): TaskSupportV1Schema", v1.declaration("ToolExecutionV1Schema"), re.M
    )
    if execution is None or support is None:
        raise PinError(f"{v1.where}: ToolV1Schema declares no task support")
    values = v1.enum("TaskSupportV1Schema")
    if p.core_forbidden not in values:
        raise PinError(f"{v1.where}: TaskSupportV1Schema has no {p.core_forbidden!r}")
    routing = module_text(p, p.related_task_module)
    key = re.search(r'const relatedTaskKey = "([^"]+)";', routing)
    if key is None:
        raise PinError(f"{p.package} {p.version} {p.related_task_module}: no relatedTaskKey")
    return {
        "core": p.core,
        "core_renamed": tuple(renamed.items()),
        "related_task_key": key.group(1),
        "core_tool_execution": (execution.group(1), support.group(1)),
        "core_taskable": tuple(v for v in values if v != p.core_forbidden),
    }


def extension_facts() -> dict[str, Any]:
    """Every pinned extension's facts, by name (only the tasks extension is known)."""
    facts: dict[str, Any] = {}
    for p in read_extension_pins():
        if p.name != "tasks":
            raise PinError(f"{EXTENSIONS_FILE}: no reader for extension {p.name!r}")
        facts[p.name] = tasks_facts(p)
    return facts


# -- the extension's messages as Structs ---------------------------------------------------------


@dataclass(frozen=True)
class StructView:
    """One generated Struct of the extension: its class name, docstring, the ``status`` tag it
    is told apart by (or None), and its fields (py name, wire key, annotation, default or None)."""

    name: str
    doc: str
    tag: str | None
    fields: tuple[tuple[str, str, str, str | None], ...]
    tag_field: str = ""  # the field the tag is the value of
    # The class it extends: Struct, or a revision's class it adds fields to (which the type
    # checker sees as Any: hence the template's ignore).
    base: str = "Struct"


@dataclass(frozen=True)
class TasksTypesView:
    """What ``templates/extension_tasks.py.j2`` writes for one extended revision."""

    revision: str
    package: str  # the revision's generated package (its types are imported from there)
    structs: tuple[StructView, ...]
    # TaskTypes record: (field, Python expression), the fields of ``TASK_TYPES_FIELDS`` in order
    record: tuple[tuple[str, str], ...]
    get_result: str = ""  # the union tagged by status ``tasks/get`` answers with


# The fields of the generated ``TaskTypes`` record: (name, annotation, comment).
TASK_TYPES_FIELDS = (
    ("create_result", "Any", "the answer of a call that became a task"),
    ("get_result", "Any", "the get method's answer: one class per status (tagged by it)"),
    ("by_status", "dict[str, Any]", "status -> the class of the get method's answer"),
    ("requests", "dict[str, tuple[Any, Any]]", "method -> (its request class, its params class)"),
    ("results", "dict[str, Any]", "method -> the class of its result"),
    ("call_result", "Any", "the result a completed task carries (the eligible method's own)"),
    ("notification", "Any", "the status notification (its params tagged by status)"),
    ("noted_by_status", "dict[str, Any]", "status -> the class of the notification's params"),
    (
        "listen_filter",
        "tuple[str, Any] | None",
        "(listen params member, class) taking the task ids key",
    ),
    (
        "listen",
        "tuple[Any, Any] | None",
        "(request, params class) of a listen whose filter names tasks",
    ),
)


# The zod schemas of the package's declarations that name a type of the revision it extends (by
# its definition name there): what the field holds is that type, checked to exist.
_REVISION_TYPES = {
    "InputRequestsV2Schema": "InputRequests",
    "InputResponsesV2Schema": "InputResponses",
    "ErrorV2Schema": "Error",
    "RequestIdV2Schema": "RequestId",
}

# The classes written, by the role each plays (the TaskTypes record's fields).
_STATUS_CLASS = {
    "working": "WorkingTask",
    "input_required": "InputRequiredTask",
    "completed": "CompletedTask",
    "failed": "FailedTask",
    "cancelled": "CancelledTask",
}


def _snake(wire: str) -> str:
    from .names import snake

    return snake(wire)


def tasks_types(facts: TasksFacts, rev: Any, core: Any | None) -> TasksTypesView:
    """The Structs of the extension's messages, read from the pinned package's declarations
    (``facts``' package) and typed by the revision it extends (``rev``, the IR): the task result
    of a call, the detailed task ``tasks/get`` answers (tagged by ``status``; a completed task's
    ``result`` is the eligible method's own result), the three requests with their params and
    the revision's per-request ``_meta``. ``core`` (the IR of the core revision whose tasks the
    extension replaces) checks that the task fields are required exactly where they are there
    (renamed by ``core_renamed``). A declaration the generator cannot type is an error naming
    it."""
    pins = {p.name: p for p in read_extension_pins()}
    m = _Module(module_text(pins["tasks"]), f"{facts.package} {facts.version} tasks module")
    defs = rev.definitions

    def revision_type(name: str) -> str:
        if name not in defs:
            raise PinError(f"{m.where}: MCP {rev.revision} has no {name} to type a field with")
        return f"_r.{name}"

    eligible = rev.methods.get(facts.eligible)
    if eligible is None:
        raise PinError(f"MCP {rev.revision} has no method {facts.eligible!r}")
    own = [
        t.name
        for t in getattr(eligible.result, "members", (eligible.result,))
        if hasattr(t, "name") and t.name != "InputRequiredResult"
    ]
    if len(own) != 1:
        raise PinError(f"MCP {rev.revision}: {facts.eligible} has no one result class: {own}")
    result_class = revision_type(own[0])
    # The revision's own names for what the extension's messages share with it: the result
    # discriminator's key and the capabilities member listing extensions.
    from .overlay import overlay

    kinds = {k.field for k in overlay(rev.revision).result_kinds}
    if len(kinds) != 1:
        raise PinError(f"MCP {rev.revision} has no one result discriminator: {sorted(kinds)}")
    kind = kinds.pop()
    if m.literal("CreateTaskResultV2Schema", kind) != facts.task_result:
        raise PinError(f"{m.where}: CreateTaskResultV2Schema's {kind} is not {facts.task_result!r}")
    # The revision's subscription filter the package's listen filter key is added to: the one
    # object member of the listen request's params besides _meta.
    listen = overlay(rev.revision).lifecycle.get("listen")
    filter_member: tuple[str, str] | None = None
    listen_classes: tuple[str, str, bool, bool] | None = None  # request, params, both required
    if listen is not None and listen in rev.methods:
        params = defs[rev.methods[listen].params.name]
        found = [
            (f.wire, f.type.name, f.required)
            for f in params.fields
            if f.wire != "_meta"
            and hasattr(f.type, "name")
            and hasattr(defs[f.type.name], "fields")
        ]
        if len(found) != 1:
            raise PinError(f"MCP {rev.revision}: {listen}'s params hold no one filter: {found}")
        filter_member = found[0][:2]
        listen_classes = (
            rev.methods[listen].message,
            params.name,
            rev.methods[listen].params_required,
            found[0][2],
        )
    for side in ("ClientCapabilities", "ServerCapabilities"):
        if facts.extensions_key not in {f.wire for f in defs[side].fields}:
            raise PinError(f"MCP {rev.revision}: {side} has no {facts.extensions_key!r}")

    def annotate(expr: str, where: str) -> tuple[str, bool]:
        """(annotation, required) of one zod field expression."""
        optional = expr.endswith(".optional()")
        if optional:
            expr = expr[: -len(".optional()")]
        nullable = expr.endswith(".nullable()")
        if nullable:
            expr = expr[: -len(".nullable()")]
        simple = {"z.string()": "str", "z.int()": "int", "z.array(z.string())": "list[str]"}
        if expr in simple:
            ann = simple[expr]
        elif expr in _REVISION_TYPES:
            ann = revision_type(_REVISION_TYPES[expr])
        elif expr == "JsonObjectSchema" and where == "result":
            ann = result_class  # the result of the one method a task may answer
        elif expr == "TaskStatusV2Schema":
            ann = "Literal[" + ", ".join(repr(s) for s in facts.statuses) + "]"
        elif expr == "MetaSchema":
            ann = revision_type("ResultMetaObject")
        else:
            raise PinError(f"{m.where}: cannot type field {where!r} declared as {expr}")
        if nullable:
            ann += " | None"
        return ann, not optional

    def fields(name: str) -> list[tuple[str, str, str, str | None]]:
        out: list[tuple[str, str, str, str | None]] = []
        for wire, expr in re.findall(r"^\s{4}(\w+): (.+?),?$", m.declaration(name), re.M):
            if expr.startswith("z.literal("):
                continue  # the tag
            ann, required = annotate(expr, wire)
            out.append(
                (
                    _snake(wire),
                    wire,
                    ann if required else f"{ann} | UnsetType",
                    None if required else "UNSET",
                )
            )
        return out

    base = fields("TaskBaseShape")
    if core is not None:
        _check_core_task(facts, core, base, m.where)
    meta = ("meta", "_meta", f"{revision_type('ResultMetaObject')} | UnsetType", "UNSET")
    structs: list[StructView] = []
    by_status: list[tuple[str, str]] = []
    for fact, (declaration, own_field) in _VARIANTS.items():
        status = getattr(facts, fact)
        extra = [f for f in fields(declaration) if f[1] == own_field] if own_field else []
        complete = (
            _snake(kind),
            kind,
            f"Literal[{facts.complete_result!r}]",
            None,
        )
        structs.append(
            StructView(
                _STATUS_CLASS[fact],
                f"The answer of {facts.get} for a task {status!r}.",
                status,
                tuple(sorted([*base, *extra, complete, meta])),
                tag_field=facts.status,
            )
        )
        by_status.append((status, _STATUS_CLASS[fact]))
    # The status notification: its params are the detailed task (as the get method answers it,
    # without the result discriminator) with the revision's notification _meta.
    if "DetailedTaskV2Schema" not in m.declaration("TaskStatusNotificationParamsV2Schema"):
        raise PinError(f"{m.where}: TaskStatusNotificationParamsV2Schema is not a detailed task")
    note_meta = ("meta", "_meta", f"{revision_type('NotificationMetaObject')} | UnsetType", "UNSET")
    noted: list[tuple[str, str]] = []
    for fact, (declaration, own_field) in _VARIANTS.items():
        status = getattr(facts, fact)
        extra = [f for f in fields(declaration) if f[1] == own_field] if own_field else []
        name = f"{_STATUS_CLASS[fact]}Status"
        structs.append(
            StructView(
                name,
                f"The params of {facts.notification} for a task {status!r}.",
                status,
                tuple(sorted([*base, *extra, note_meta])),
                tag_field=facts.status,
            )
        )
        noted.append((status, name))
    structs.append(
        StructView(
            "TaskStatusNotification",
            f"A {facts.notification} notification: a task's status, tagged by its status.",
            facts.notification,
            (
                ("jsonrpc", "jsonrpc", 'Literal["2.0"]', None),
                ("params", "params", " | ".join(c for _, c in noted), None),
            ),
            tag_field="method",
        )
    )
    status_ann = "Literal[" + ", ".join(repr(s) for s in facts.statuses) + "]"
    structs.append(
        StructView(
            "CreateTaskResult",
            f"The answer of a {facts.eligible} that became a task ({facts.task_result!r}).",
            None,
            tuple(
                sorted(
                    [
                        *base,
                        (_snake(facts.status), facts.status, status_ann, None),
                        (_snake(kind), kind, f"Literal[{facts.task_result!r}]", None),
                        meta,
                    ]
                )
            ),
        )
    )
    request_meta = ("meta", "_meta", revision_type("RequestMetaObject"), None)
    task_id = (_snake(facts.task_id), facts.task_id, "str", None)
    answers = (
        _snake(facts.input_responses),
        facts.input_responses,
        revision_type("InputResponses"),
        None,
    )
    for kind, method, extra_fields in (
        ("Get", facts.get, ()),
        ("Update", facts.update, (answers,)),
        ("Cancel", facts.cancel, ()),
    ):
        params = f"{kind}TaskRequestParams"
        structs.append(
            StructView(
                params,
                f"The params of {method}.",
                None,
                tuple(sorted([task_id, *extra_fields, request_meta])),
            )
        )
        structs.append(
            StructView(
                f"{kind}TaskRequest",
                f"A {method} request.",
                method,
                (
                    ("id", "id", revision_type("RequestId"), None),
                    ("jsonrpc", "jsonrpc", 'Literal["2.0"]', None),
                    ("params", "params", params, None),
                ),
                tag_field="method",
            )
        )
    # A listen request whose filter holds the package's key naming the tasks: the revision's
    # listen classes, extended (the revision's filter class has no such field, so it would be
    # dropped by a conversion into it).
    if filter_member is not None and listen_classes is not None:
        request_class, params_class, params_required, filter_required = listen_classes
        structs.append(
            StructView(
                "TaskSubscriptionFilter",
                f"The revision's {filter_member[1]} with the {facts.extension} extension's key.",
                None,
                tuple(fields("TaskSubscriptionNotificationsV2Schema")),
                base=f"_r.{filter_member[1]}",
            )
        )

        def member(wire: str, ann: str, required: bool) -> tuple[str, str, str, str | None]:
            return (
                _snake(wire),
                wire,
                ann if required else f"{ann} | UnsetType",
                None if required else "UNSET",
            )

        structs.append(
            StructView(
                "TaskListenRequestParams",
                f"The params of {listen} with a filter naming tasks.",
                None,
                (member(filter_member[0], "TaskSubscriptionFilter", filter_required),),
                base=f"_r.{params_class}",
            )
        )
        structs.append(
            StructView(
                "TaskListenRequest",
                f"A {listen} request with a filter naming tasks.",
                None,
                (member("params", "TaskListenRequestParams", params_required),),
                base=f"_r.{request_class}",
            )
        )
    record = dict(
        create_result="CreateTaskResult",
        get_result="GetTaskResult",
        by_status="{" + ", ".join(f"{s!r}: {c}" for s, c in by_status) + "}",
        requests=(
            "{"
            + ", ".join(
                f"{method!r}: ({kind}TaskRequest, {kind}TaskRequestParams)"
                for kind, method in (
                    ("Get", facts.get),
                    ("Update", facts.update),
                    ("Cancel", facts.cancel),
                )
            )
            + "}"
        ),
        # update and cancel answer the revision's open Result (resultType complete, _meta, more)
        results=(
            "{"
            + f"{facts.get!r}: GetTaskResult, {facts.update!r}: _r.Result, {facts.cancel!r}: _r.Result"
            + "}"
        ),
        call_result=result_class,
        notification="TaskStatusNotification",
        noted_by_status="{" + ", ".join(f"{s!r}: {c}" for s, c in noted) + "}",
        listen_filter=(
            f"({filter_member[0]!r}, _r.{filter_member[1]})" if filter_member else "None"
        ),
        listen="(TaskListenRequest, TaskListenRequestParams)" if listen_classes else "None",
    )
    assert list(record) == [name for name, _, _ in TASK_TYPES_FIELDS]  # one list of fields
    from .paths import package_name

    return TasksTypesView(
        facts.revision,
        package_name(facts.revision),
        tuple(structs),
        tuple(record.items()),
        " | ".join(c for _, c in by_status),
    )


def _check_core_task(
    facts: TasksFacts, core: Any, base: list[tuple[str, str, str, str | None]], where: str
) -> None:
    """The extension's task fields are the core revision's ``Task`` fields (renamed), required
    where they are required there."""
    task = core.definitions.get("Task")
    if task is None:
        raise PinError(f"MCP {core.revision} has no Task")
    renamed = dict(facts.core_renamed)
    core_required = {renamed.get(f.wire, f.wire): f.required for f in task.fields}
    mine = {wire: default is None for _, wire, _, default in base}
    mine[facts.status] = True
    if core_required != mine:
        raise PinError(
            f"{where}: the task fields {mine} (required) differ from MCP {core.revision}'s Task "
            f"{core_required}"
        )
