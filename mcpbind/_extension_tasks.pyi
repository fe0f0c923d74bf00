# The shape of generated/mcpbind/_extension_tasks.py (generated from schema/extensions.toml), for
# type checkers: they resolve `mcpbind.*` inside this directory and do not see the generated one.
from typing import Any, NamedTuple

class TaskTypes(NamedTuple):
    create_result: Any
    get_result: Any
    by_status: dict[str, Any]
    requests: dict[str, tuple[Any, Any]]
    results: dict[str, Any]
    call_result: Any

TASK_TYPES: dict[str, TaskTypes]

def __getattr__(name: str) -> Any: ...
