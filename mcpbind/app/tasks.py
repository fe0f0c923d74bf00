"""Tools of an App that run as tasks (the tasks extension, ``mcpbind.tasks``).

``app_tasks(app, "slow", ...)`` runs calls of the App's tools named there as tasks, for clients
that declare the extension; serve the layer it returns with ``app.asgi(tasks=layer)``. The task
runs the tool's own function with its arguments converted as the App converts them, and its
result is the App's result of that value in the extension's revision (a ``ToolError``, or any
other exception of the tool, is a tool error; a ``ProtocolError`` fails the task).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import INVALID_PARAMS, ProtocolError
from ..tasks import TaskContext, Tasks, When
from .revision import rev
from .signature import ArgumentError
from .tools import ToolError

if TYPE_CHECKING:
    from .app import App
    from .tools import Tool

__all__ = ["app_tasks"]


def app_tasks(
    app: App,
    *names: str,
    required: tuple[str, ...] = (),
    when: dict[str, When] | None = None,
    layer: Tasks | None = None,
    **bounds: Any,
) -> Tasks:
    """The tasks layer (``layer``, else a new ``Tasks(**bounds)``) running calls of the App's
    tools ``names`` (and ``required``, which a client that did not declare the extension may
    not call: -32021) as tasks; ``when[name](params)`` decides per call, as in ``Tasks.tool``.
    A tool must be registered first, and must not take a ``Context`` (a task asks the client
    through ``TaskContext``, which a plain tool does not see): else ``ValueError``."""
    tasks = layer if layer is not None else Tasks(**bounds)
    server = app._server
    for name in (*names, *required):
        tool = server.tools.get(name)
        if tool is None:
            raise ValueError(f"the App has no tool {name!r} to run as a task")
        if tool.handler.wants_context:
            raise ValueError(f"tool {name!r} takes a Context, which a task cannot give it")
        tasks.tool(
            name,
            _work(tool, server.results, tasks.revision),
            required=name in required,
            when=(when or {}).get(name),
        )
    return tasks


def _work(tool: Tool, results: Any, revision: str) -> Any:
    r = rev(revision)
    name = tool.name

    async def work(context: TaskContext, params: dict[str, Any]) -> Any:
        try:
            kwargs = tool.handler.parameters.convert(params.get("arguments"))
        except ArgumentError as exc:
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid arguments for tool {name!r}: {exc}"
            ) from None
        try:
            value = await tool.handler(kwargs, None)
        except ProtocolError:
            raise
        except ToolError as exc:
            return results.text_result(str(exc), r, "the error of tool", name, error=True)
        except Exception as exc:  # a tool's failure is the model's to read, as in a plain call
            failed = f"{type(exc).__name__}: {exc}"
            return results.text_result(failed, r, "the error of tool", name, error=True)
        if type(value) is str and tool.text:
            return results.text_result(value, r, "the result of tool", name)
        return tool.result(value, results, r)

    return work
