# The shape of generated/mcpbind/_extensions.py (generated from schema/extensions.toml), for type
# checkers: they resolve `mcpbind.*` inside this directory and do not see the generated one.
from typing import NamedTuple

class TasksFacts(NamedTuple):
    revision: str
    package: str
    version: str
    sha256: str
    extension: str
    capabilities_key: str
    get: str
    update: str
    cancel: str
    notification: str
    task_result: str
    complete_result: str
    eligible: str
    statuses: tuple[str, ...]
    working: str
    input_required: str
    completed: str
    failed: str
    cancelled: str
    task_fields: tuple[str, ...]
    input_responses: str
    listen_filter: str
    core: str | None
    core_renamed: tuple[tuple[str, str], ...]
    related_task_key: str | None
    core_tool_execution: tuple[str, ...]
    core_taskable: tuple[str, ...]

TASKS: dict[str, TasksFacts]
