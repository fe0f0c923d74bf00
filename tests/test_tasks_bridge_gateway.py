"""The HTTP gateway's translation of a 2025-11-25 client's tasks (mcpbind/bridge/tasks_http.py)
in this process, a child per session (``-- CMD``): a 2026-07-28 App of the tasks extension on
stdio (the server of tests/interop/test_tasks_stdio_front_peers.py), mcpbind's Streamable HTTP
client at 2025-11-25. A link whose ``tasks/result`` polls is not ended idle between two polls."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from mcpbind.transports.http_client import StreamableHTTPClient
from tests.interop.test_tasks_stdio_front_peers import SERVER
from tests.test_gateway import Served, client, run

CAPS: dict[str, Any] = {"tasks": {"list": {}, "cancel": {}}}


def test_a_link_polling_a_tasks_result_is_not_ended_idle(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)

    async def main() -> Any:
        served = Served(command=[sys.executable, str(script)], session_idle_timeout=0.3)
        async with served.running():
            session = StreamableHTTPClient(served.url, client("2025-11-25", capabilities=CAPS))
            await session.connect()
            call = {"name": "slow", "arguments": {"seconds": 1.5}, "task": {}}
            created = await session.call("tools/call", call)
            task_id = created.task.task_id
            result = await session.call("tasks/result", {"taskId": task_id})
            await asyncio.sleep(0)
            return result, served.log

    result, log = run(main())
    assert result.content[0].text == "slept 1.5", log
    assert not any("idle" in line for line in log), log
