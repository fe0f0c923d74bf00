"""The tasks layer with a shared store that cannot be reached: a clear -32603, and the task it
could not record is not kept (the workers' sharing itself: tests/interop/test_tasks_workers.py)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from mcpbind import ProtocolError
from mcpbind.transports.store import RedisStore
from tests.test_http_transport import run
from tests.test_tasks import OPTED_IN, layer, meta


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_task_the_shared_store_cannot_record_is_refused_and_not_kept() -> None:
    # nothing listens on that loopback port: the store is unreachable
    store = RedisStore(f"redis://127.0.0.1:{unused_port()}/0")
    tasks = layer()
    tasks.share(store)
    call = {"name": "quick", "arguments": {}, "_meta": meta(OPTED_IN)}
    get = {"taskId": "elsewhere", "_meta": meta(OPTED_IN)}

    async def go() -> Any:
        try:
            with pytest.raises(ProtocolError) as created:
                await tasks.respond("tools/call", call)
            with pytest.raises(ProtocolError) as got:
                await tasks.respond("tasks/get", get)
            return created.value, got.value
        finally:
            await tasks.aclose()
            await store.close()

    for error in run(go()):
        assert error.code == -32603
        assert "shared task store cannot be reached" in error.message
    assert tasks._tasks == {} and tasks._owned == {}
