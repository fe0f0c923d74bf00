"""``mcpbind bridge --listen ... --surface LOCK [--on-drift block|warn]``: the gateway enforcing
a surface lock on the server behind it, a real server (an App run as the gateway's child) changed
after it was locked, at its start (``description``, ``parameter``, ``annotation``, ``new``) or
while clients are connected (``later``: the server says its tool list changed). Clients of
either era in front, over Streamable HTTP and HTTP+SSE, mcpbind's and the official ``mcp``
package's."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mcpbind import Client, ProtocolError
from mcpbind.surface import lock
from tests._net import free_port, started, stopped

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, str(ROOT / "tests" / "fixtures" / "surface_server.py")]
MCPBIND = [sys.executable, "-c", "from mcpbind.cli import main; main()"]


@pytest.fixture(scope="module")
def locks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The base server locked at a revision of each era."""
    found = {}
    for revision in ("2025-11-25", "2026-07-28"):
        path = tmp_path_factory.mktemp("gateway") / f"weather-{revision}.lock"
        asyncio.run(lock(SERVER, path, revisions=[revision]))
        found[revision] = path
    return found


@contextmanager
def gateway(
    path: Path, variant: str, mode: str, upstream: bool = False
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The gateway enforcing the lock at ``path`` in front of the server started as
    ``variant`` (a child per session, or with ``upstream`` one server over Streamable HTTP):
    its base URL and process (stderr piped)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SURFACE_VARIANT": variant}
    behind: subprocess.Popen[bytes] | None = None
    server = ["--", *SERVER]
    if upstream:
        server_port = free_port()
        behind = started([*SERVER, "--port", str(server_port)], server_port, cwd=ROOT, env=env)
        server = ["--upstream", f"http://127.0.0.1:{server_port}/mcp"]
    port = free_port()
    try:
        process = started(
            [
                *MCPBIND,
                "bridge",
                "--listen",
                f"127.0.0.1:{port}",
                "--surface",
                str(path),
                "--on-drift",
                mode,
                *server,
            ],
            port,
            cwd=ROOT,
            env=env,
        )
        try:
            yield f"http://127.0.0.1:{port}", process
        finally:
            stopped(process)
    finally:
        if behind is not None:
            stopped(behind)


def through(
    base: str, revision: str, steps: Callable[[Client], Awaitable[Any]], front: str = "/mcp"
) -> Any:
    async def main() -> Any:
        async with Client(base + front, revisions=[revision], timeout=30) as client:
            return await steps(client)

    return asyncio.run(main())


async def names(client: Client) -> list[str]:
    return sorted(t.name for t in await client.list_tools())


def stderr_of(process: subprocess.Popen[bytes]) -> str:
    stopped(process)
    assert process.stderr is not None
    return process.stderr.read().decode()


# The clients in front: (the revision the client speaks, the gateway's front).
FRONTS = [("2024-11-05", "/sse"), ("2025-06-18", "/mcp"), ("2026-07-28", "/mcp")]


@pytest.mark.parametrize("upstream", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize(
    ("variant", "change"),
    [
        ("description", "description_changed at description"),
        ("parameter", "parameter_narrowed at inputSchema.properties.days"),
        ("annotation", "annotation_changed at annotations.destructiveHint"),
    ],
)
def test_block_leaves_a_drifted_tool_out_and_refuses_its_call_on_every_front(
    locks: dict[str, Path], upstream: str, variant: str, change: str
) -> None:
    path = locks[upstream]

    async def steps(client: Client) -> None:
        with pytest.raises(ProtocolError) as refused:  # before any listing
            await client.call_tool("get_weather", {"city": "Paris"})
        assert refused.value.code == -32602
        assert refused.value.message == (
            f"tool 'get_weather' differs from the lock {path}: {change}; refused"
        )
        assert await names(client) == ["add"]
        assert (await client.call_tool("add", {"a": 2, "b": 3})).content[0].text == "5"

    with gateway(path, variant, "block") as (base, process):
        for revision, front in FRONTS:
            through(base, revision, steps, front)
    logged = stderr_of(process)
    assert f"tool 'get_weather' differs from the lock {path}" in logged, logged


def test_block_refuses_a_new_tool(locks: dict[str, Path]) -> None:
    async def steps(client: Client) -> None:
        assert await names(client) == ["add", "get_weather"]
        with pytest.raises(ProtocolError, match="tool 'send' is not in the lock .*unapproved"):
            await client.call_tool("send", {"data": "x"})

    with gateway(locks["2026-07-28"], "new", "block") as (base, _):
        through(base, "2025-11-25", steps)


def test_warn_lists_and_calls_a_drifted_tool_and_logs_it(locks: dict[str, Path]) -> None:
    path = locks["2025-11-25"]

    async def steps(client: Client) -> Any:
        listed = await names(client)
        return listed, await client.call_tool("get_weather", {"city": "Paris"})

    with gateway(path, "description", "warn") as (base, process):
        listed, result = through(base, "2026-07-28", steps)
    assert listed == ["add", "get_weather"]
    assert result.content[0].text == "sunny in Paris for 1 day(s)"
    logged = stderr_of(process)
    assert "(listed, warn" in logged and "(used, warn" in logged, logged


@pytest.mark.parametrize("over_http", [False, True], ids=["child", "upstream-url"])
@pytest.mark.parametrize("upstream", ["2025-11-25", "2026-07-28"])
def test_a_change_while_connected_is_caught_at_the_servers_list_changed(
    locks: dict[str, Path], upstream: str, over_http: bool
) -> None:
    async def steps(client: Client) -> None:
        assert await names(client) == ["add", "get_weather"]
        ok = await client.call_tool("get_weather", {"city": "Oslo"})
        assert ok.content[0].text == "sunny in Oslo for 1 day(s)"
        await client.read_resource("weather://about")  # the server changes and says so
        refused: ProtocolError | None = None
        for _ in range(100):  # its notification reaches the gateway on its own
            try:
                await client.call_tool("get_weather", {"city": "Oslo"})
            except ProtocolError as error:
                refused = error
                break
            await asyncio.sleep(0.05)
        assert refused is not None, "the changed tool was still called after 5 s"
        assert "description_changed at description" in refused.message
        assert await names(client) == ["add"]

    with gateway(locks[upstream], "later", "block", upstream=over_http) as (base, _):
        through(base, "2025-11-25", steps)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_official_client_sees_the_lock_enforced(locks: dict[str, Path], mode: str) -> None:
    pytest.importorskip("mcp.client", reason="the pinned `mcp` package (dev extras) is needed")
    from mcp import Client as Official

    async def main(url: str) -> tuple[list[str], Any, str]:
        async with Official(url, mode=mode, cache=None) as client:
            listed = sorted(t.name for t in (await client.list_tools()).tools)
            try:
                await client.call_tool("get_weather", {"city": "Paris"})
            except Exception as error:  # noqa: BLE001 - the SDK's own error class
                return listed, error, client.protocol_version
            return listed, None, client.protocol_version

    with gateway(locks["2026-07-28"], "description", "block") as (base, _):
        listed, error, version = asyncio.run(main(base + "/mcp"))
    assert (version == "2026-07-28") == (mode == "2026-07-28")
    assert listed == ["add"]
    assert error is not None and "tool 'get_weather' differs from the lock" in str(error)
