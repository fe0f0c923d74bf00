"""The tasks' facts rewritten between the core revision's tasks and the tasks extension that
replaced them: pure functions of plain JSON and the generated facts (``TASKS``, ``FACTS``), which
both directions of the translation and the crossing share (the bottom layer of ``bridge/``)."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from .._extensions import TASKS, TasksFacts
from ..errors import MISSING_REQUIRED_CLIENT_CAPABILITY, ProtocolError
from ..session._common import speech

__all__ = [
    "core_task",
    "extension_task",
    "plain",
    "undeclared",
    "undeclared_tasks",
    "untranslated_tasks",
    "wire_key",
]


def plain(value: Any) -> Any:
    """``value`` as plain JSON (None for an absent one)."""
    return None if value is UNSET or value is None else msgspec.to_builtins(value)


def extension_task(core: dict[str, Any], facts: TasksFacts) -> dict[str, Any]:
    """A core revision's task (plain JSON, its wire keys) as the extension's task fields."""
    renamed = dict(facts.core_renamed)
    return {renamed.get(k, k): v for k, v in core.items() if renamed.get(k, k) in facts.task_fields}


def core_task(task: dict[str, Any], facts: TasksFacts) -> dict[str, Any]:
    """The extension's task fields as the core revision's task (the reverse of
    ``extension_task``); the extension's other keys (``resultType``, ``result``...) are left out."""
    back = {new: old for old, new in facts.core_renamed}
    return {back.get(k, k): v for k, v in task.items() if k in facts.task_fields}


def wire_key(cls: Any, attribute: str) -> str:
    """The wire key of the field ``attribute`` of the generated Struct ``cls``."""
    return next(f.encode_name for f in msgspec.structs.fields(cls) if f.name == attribute)


def undeclared(method: str, facts: TasksFacts, caps_key: str) -> ProtocolError:
    """The error for the extension's ``method`` from a client that did not declare it."""
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: {method!r} needs the {facts.extension} "
        f"extension declared in the request's _meta {caps_key}",
        {"requiredCapabilities": {facts.extensions_key: {facts.extension: {}}}},
    )


def untranslated_tasks(
    caps: Any, server: str | None, client: str, log: list[str], translated: bool = False
) -> Any:
    """The server's capabilities (plain JSON, in the ``client``'s revision) as to the core
    revision's tasks capability that a ``server`` of the extension's revision advertised as the
    extension (projection moves the one into the other): without it, where the bridge does not
    translate a core client's tasks to the extension (its task requests would find no method;
    said in ``log``); ``translated`` (the HTTP gateway, ``gateway/tasks_core_to_extension.py``): what the
    translation serves (task-augmented calls, get, result, list, cancel)."""
    facts = TASKS.get(server or "")
    if facts is None or facts.core != client or not isinstance(caps, dict):
        return caps
    back = speech(client)
    gates = back.methods[back.facts.lifecycle["task_get"]].gates
    key = next((g.path.split(".")[0] for g in gates if g.side == "receiver"), None)
    if key is None or key not in caps:
        return caps
    if translated:
        served: dict[str, Any] = {}
        methods = (
            back.facts.lifecycle["task_list"],
            back.facts.lifecycle["task_cancel"],
            back.facts.features["call_tool"],
        )
        for method in methods:
            for gate in back.methods[method].gates:
                path = gate.path.split(".")
                if path[0] != key or len(path) < 2:
                    continue
                node = served
                for part in path[1:]:
                    node = node.setdefault(part, {})
        return {**caps, key: served}
    log.append(
        f"loss: the server's capabilities into MCP {client}: $.{key} dropped (the server offers "
        f"tasks as the {facts.extension} extension; the bridge does not translate MCP {client} "
        "tasks to it, so its task requests are refused)"
    )
    return {k: v for k, v in caps.items() if k != key}


def undeclared_tasks(caps: Any, source: Any, target: str | None, log: list[str]) -> Any:
    """The client's capabilities (plain JSON) for a server of ``target`` without the tasks
    extension that projection made of a core revision client's tasks capability (``source``: the
    client's capabilities, in its own revision): such a server would answer that client's calls
    with tasks, which the bridge does not translate back. Said in ``log``."""
    facts = TASKS.get(target or "")
    if facts is None or facts.core is None or not isinstance(caps, dict):
        return caps
    if type(source) is not speech(facts.core).facts.client_capabilities:
        return caps
    key = facts.extensions_key
    extensions = caps.get(key)
    if not isinstance(extensions, dict) or facts.extension not in extensions:
        return caps
    log.append(
        f"loss: the client's capabilities into MCP {target}: $.extensions.{facts.extension} "
        f"dropped (its MCP {facts.core} tasks capability: a server of the extension would "
        "answer calls the client did not make task-augmented with tasks; the bridge declares "
        "it on the task-augmented ones it translates)"
    )
    rest = {k: v for k, v in extensions.items() if k != facts.extension}
    out = {k: v for k, v in caps.items() if k != key}
    if rest:
        out[key] = rest
    return out
