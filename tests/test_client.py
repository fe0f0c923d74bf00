"""mcpbind.Client: a typed client whose results are the precise generated classes of the revision
it agreed, against an App in process, over stdio (the App run as a subprocess) and over Streamable
HTTP (the App's ASGI application under uvicorn on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev
from mcpbind.app import App, Context, Limits
from mcpbind.client.links import ObservedSession, PipeLink
from tests._net import free_port

T = TypeVar("T")
RELEASED = mcpbind.REVISIONS[: mcpbind.REVISIONS.index(mcpbind.LATEST) + 1]

SERVER = '''
import sys
from mcpbind import App
from tests._net import free_port

app = App("notes", revisions=sys.argv[1:] or None)


@app.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.resource("notes://first", mime_type="text/plain")
def first() -> str:
    return "remember the milk"


@app.prompt
def greet(name: str) -> str:
    return f"Hello, {name}!"


@app.completion(prompt="greet", argument="name")
def names(value, arguments):
    return [n for n in ("Ada", "Alan", "Grace") if n.startswith(value)]


app.run()
'''


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, 60)

    return asyncio.run(bounded())


def notes_app() -> App:
    namespace: dict[str, Any] = {}
    # The very server the subprocess runs, with every revision and without running it.
    exec(SERVER.replace("sys.argv[1:] or None", "None").replace("app.run()", ""), namespace)
    app: App = namespace["app"]
    return app


async def everything(client: mcpbind.Client) -> dict[str, Any]:
    """One of each request, and what came back."""
    return {
        "tools": await client.list_tools(),
        "call": await client.call_tool("add", {"a": 2, "b": 40}),
        "read": await client.read_resource("notes://first"),
        "resources": await client.list_resources(),
        "prompts": await client.list_prompts(),
        "prompt": await client.get_prompt("greet", {"name": "Ada"}),
        "complete": await client.complete(prompt="greet", argument="name", value="A"),
    }


def check(revision: str, found: dict[str, Any]) -> None:
    """Every result is the precise generated class of ``revision`` and says what was asked."""
    M = mcpbind.bindings(revision)
    assert {type(t) for t in found["tools"]} == {M.Tool}
    assert found["tools"][0].name == "add"
    assert type(found["call"]) is M.CallToolResult and found["call"].content[0].text == "42"
    assert type(found["read"]) is M.ReadResourceResult
    assert found["read"].contents[0].text == "remember the milk"
    assert [type(r) for r in found["resources"]] == [M.Resource]
    assert [type(p) for p in found["prompts"]] == [M.Prompt]
    assert type(found["prompt"]) is M.GetPromptResult
    assert found["prompt"].messages[0].content.text == "Hello, Ada!"
    assert type(found["complete"]) is M.CompleteResult
    assert found["complete"].completion.values == ["Ada", "Alan"]


@pytest.mark.parametrize("revision", RELEASED)
def test_every_result_is_the_precise_class_of_the_agreed_revision(revision: str) -> None:
    async def main() -> tuple[str | None, dict[str, Any]]:
        async with mcpbind.Client(notes_app(), revisions=[revision]) as client:
            assert type(client.server_capabilities) is mcpbind.bindings(revision).ServerCapabilities
            assert client.server_info.name == "notes"
            return client.revision, await everything(client)

    agreed, found = run(main())
    assert agreed == revision
    check(revision, found)


@pytest.mark.parametrize("revision", RELEASED)
def test_a_missing_resource_raises_resource_not_found(revision: str) -> None:
    async def main() -> None:
        async with mcpbind.Client(notes_app(), revisions=[revision]) as client:
            await client.read_resource("notes://nowhere")

    with pytest.raises(mcpbind.ResourceNotFound) as caught:
        run(main())
    assert caught.value.code == -32002 and caught.value.uri == "notes://nowhere"
    assert "notes://nowhere" in caught.value.message


def test_the_newest_revision_both_speak_is_agreed() -> None:
    older = App("older", revisions=["2025-06-18", "2025-03-26"])

    async def main() -> str | None:
        async with mcpbind.Client(older) as client:
            return client.revision

    assert run(main()) == "2025-06-18"


def test_no_common_revision_fails_to_open() -> None:
    newest = App("newest", revisions=["2026-07-28"])

    async def main() -> None:
        async with mcpbind.Client(newest, revisions=["2024-11-05"]):
            raise AssertionError("opened")

    with pytest.raises(mcpbind.UnsupportedRevision) as caught:
        run(main())
    assert "2024-11-05" in caught.value.message


def test_a_target_that_is_neither_url_nor_command_nor_app_is_refused() -> None:
    with pytest.raises(ValueError, match="a URL starts with http"):
        run(mcpbind.Client("notes.example").__aenter__())
    with pytest.raises(TypeError, match="expected a URL, a command"):
        run(mcpbind.Client(42).__aenter__())  # type: ignore[arg-type]


# -- over stdio ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25", "2026-07-28"])
def test_over_stdio_against_the_app_as_a_subprocess(revision: str, tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)

    async def main() -> tuple[str | None, dict[str, Any], int | None]:
        client = mcpbind.Client([sys.executable, str(script), revision])
        async with client:
            found = await everything(client)
            link = client._link
        assert link is not None
        return client.revision, found, link.proc.returncode  # type: ignore[attr-defined]

    agreed, found, status = run(main())
    assert agreed == revision and status == 0  # the server ended when its input closed
    check(revision, found)


def test_a_server_that_exits_at_once_fails_to_open_without_hanging() -> None:
    async def main() -> None:
        async with mcpbind.Client([sys.executable, "-c", "import sys; sys.exit(3)"]):
            raise AssertionError("opened")

    with pytest.raises(ConnectionError, match="exit status 3"):
        run(main())


# -- bounds -------------------------------------------------------------------------------------------------


def test_a_listing_is_read_page_by_page_up_to_max_pages() -> None:
    app = App("many", limits=Limits(page_size=1))
    for i in range(3):
        app.tool(name=f"t{i}")(lambda: "x")

    async def main() -> tuple[list[str], mcpbind.ProtocolError]:
        async with mcpbind.Client(app) as client:
            names = [t.name for t in await client.list_tools()]
        async with mcpbind.Client(app, max_pages=2) as client:
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await client.list_tools()
        return names, caught.value

    names, error = run(main())
    assert names == ["t0", "t1", "t2"]
    assert "past 2 pages" in error.message


def test_a_request_past_its_timeout_is_cancelled_on_the_server() -> None:
    app = App("slow")
    cancelled = asyncio.Event()

    @app.tool
    async def forever() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def main() -> None:
        async with mcpbind.Client(app, revisions=["2025-11-25"], timeout=0.2) as client:
            with pytest.raises(TimeoutError, match="no answer from the server within 0.2 s"):
                await client.call_tool("forever")
            await asyncio.wait_for(cancelled.wait(), 10)  # notifications/cancelled reached it

    run(main())


@pytest.mark.parametrize("over", ["memory", "http"])
def test_the_server_asking_more_input_rounds_than_allowed_is_refused(over: str) -> None:
    # The Client's max_rounds reaches every link: over HTTP it was the transport's default (16)
    # whatever the Client was given.
    if over == "http":
        pytest.importorskip("uvicorn", reason="mcpbind[http] is needed")
    app = App("insistent")
    asked: list[str] = []

    @app.tool
    async def again(ctx: Context) -> str:
        for _ in range(4):
            await ctx.elicit("More?", {"type": "object", "properties": {}})
        return "done"

    def accept(params: Any) -> dict[str, Any]:
        asked.append(params.message)
        return {"action": "accept", "content": {}}

    async def call(target: Any) -> mcpbind.ProtocolError:
        async with mcpbind.Client(
            target, revisions=["2026-07-28"], elicitation=accept, max_rounds=2
        ) as client:
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await client.call_tool("again")
            return caught.value

    async def main() -> mcpbind.ProtocolError:
        if over == "memory":
            return await call(app)
        async with serving(app) as url:
            return await call(url)

    error = run(main())
    assert error.code == mcpbind.errors.INTERNAL_ERROR
    assert "asked for input once more after 2 rounds for 'tools/call'" in error.message
    assert error.data == {"limit": "max_rounds", "max": 2}
    assert asked == ["More?", "More?"]


def test_a_request_the_client_has_no_handler_for_is_answered_method_not_found() -> None:
    app = App("asks")

    @app.tool
    async def roots(ctx: Context) -> str:
        try:
            await ctx.roots()
        except mcpbind.ProtocolError as error:
            return f"{error.code}"
        return "answered"

    async def main() -> list[str]:
        texts = []
        async with mcpbind.Client(app, revisions=["2025-11-25"]) as plain:
            texts.append((await plain.call_tool("roots")).content[0].text)
        async with mcpbind.Client(app, revisions=["2025-11-25"], roots=lambda: []) as asked:
            texts.append((await asked.call_tool("roots")).content[0].text)
        return texts

    # Without a roots handler the client declares no roots capability: the server may not ask.
    assert run(main()) == ["-32601", "answered"]


# -- over Streamable HTTP -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def serving(app: App) -> AsyncIterator[str]:
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app.asgi(), host="127.0.0.1", port=port, log_level="warning")
    web = uvicorn.Server(config)
    task = asyncio.ensure_future(web.serve())
    try:
        while not web.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        web.should_exit = True
        await task


def http_app(lifespan_events: list[str]) -> App:
    @contextlib.asynccontextmanager
    async def lifespan(app: App) -> AsyncIterator[str]:
        lifespan_events.append("start")
        yield "ready"
        lifespan_events.append("stop")

    app = notes_app()
    app._lifespan = lifespan

    @app.tool
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit(
            "Name?", {"type": "object", "properties": {"n": {"type": "string"}}}
        )
        return f"{ctx.lifespan} {answer.action} {answer.content['n']}"

    return app


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_over_http_against_the_apps_asgi_application(revision: str) -> None:
    pytest.importorskip("uvicorn", reason="mcpbind[http] is needed")
    lifespan: list[str] = []
    app = http_app(lifespan)

    async def main() -> tuple[dict[str, Any], Any, list[str]]:
        notes: list[ev.NotificationReceived] = []
        async with serving(app) as url:
            assert lifespan == ["start"]
            async with mcpbind.Client(
                url,
                revisions=[revision],
                elicitation=lambda p: {"action": "accept", "content": {"n": "Ada"}},
                on_notification=notes.append,
            ) as client:
                assert client.revision == revision
                found = await everything(client)
                asked = await client.call_tool("ask")
                await client.subscribe("notes://first")
                assert app.resource_updated("notes://first") == 1
                for _ in range(200):
                    if notes:
                        break
                    await asyncio.sleep(0.01)
        return found, asked, [n.method for n in notes]

    found, asked, methods = run(main())
    check(revision, found)
    assert asked.content[0].text == "ready accept Ada"
    assert methods == ["notifications/resources/updated"]
    assert lifespan == ["start", "stop"]


def test_every_call_bounds_its_wait_over_http_too() -> None:
    pytest.importorskip("uvicorn", reason="mcpbind[http] is needed")
    app = App("slow")

    @app.tool
    async def forever() -> str:
        await asyncio.Event().wait()
        return "never"

    @app.tool
    def quick() -> str:
        return "quick"

    async def main() -> Any:
        async with (
            serving(app) as url,
            mcpbind.Client(url, revisions=["2025-11-25"], timeout=0.5) as client,
        ):
            with pytest.raises(TimeoutError):
                await client.call_tool("forever")
            return await client.call_tool("quick")  # the client still works afterwards

    assert run(main()).content[0].text == "quick"


def test_results_of_the_app_are_schema_valid_for_the_revision() -> None:
    """What the client received re-encodes to exactly what its revision's schema accepts."""

    async def main() -> list[tuple[str, Any]]:
        out = []
        for revision in RELEASED:
            async with mcpbind.Client(notes_app(), revisions=[revision]) as client:
                result = await client.call_tool("add", {"a": 1, "b": 1})
                out.append((revision, result))
        return out

    for revision, result in run(main()):
        M = mcpbind.bindings(revision)
        again = mcpbind.decode(msgspec.json.encode(result), M.CallToolResult)
        assert again == result


def test_requests_of_the_server_answered_at_once_are_bounded() -> None:
    from mcpbind.client.links import MAX_SERVER_REQUESTS

    app = App("flood")
    release = asyncio.Event()

    @app.tool
    async def flood(ctx: Context) -> str:
        asks = [ctx.roots() for _ in range(MAX_SERVER_REQUESTS + 6)]
        found = await asyncio.gather(*asks, return_exceptions=True)
        busy = [f for f in found if isinstance(f, mcpbind.ProtocolError)]
        assert {e.code for e in busy} == {-32603}, busy
        assert "Client busy" in busy[0].message
        return f"{len(found) - len(busy)} answered, {len(busy)} refused"

    async def roots() -> list[str]:
        await release.wait()
        return ["file:///work"]

    async def main() -> Any:
        async with mcpbind.Client(app, revisions=["2025-11-25"], roots=roots) as client:
            link = client._link
            assert link is not None
            original, received = link.session.receive, []

            def receive(data: bytes | str) -> list[ev.Event]:
                found = original(data)
                received.extend(e for e in found if isinstance(e, ev.RequestReceived))
                if len(received) == MAX_SERVER_REQUESTS + 6:  # the whole flood has arrived
                    release.set()
                return found

            link.session.receive = receive  # type: ignore[method-assign]
            return await client.call_tool("flood")

    result = run(main())
    assert result.content[0].text == f"{MAX_SERVER_REQUESTS} answered, 6 refused"


# -- a cancel that comes with the answer ------------------------------------------------------


class _Written(PipeLink):
    """A link whose channel is a list: what the session writes is kept, nothing arrives but
    what a test feeds."""

    def __init__(self) -> None:
        session = ObservedSession(mcpbind.LATEST, observe=lambda event: None)
        super().__init__(session, serve=_refuse, timeout=5.0, max_rounds=16)
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


async def _refuse(event: ev.RequestReceived) -> Any:
    raise AssertionError("no request of the server is expected")


def test_a_cancel_that_comes_with_the_answer_is_not_dropped() -> None:
    # The answer and the caller's cancellation in the same turn of the loop: the caller is
    # cancelled (on 3.11 asyncio.wait_for returned the answer and dropped the cancellation, so
    # Client(tasks=True) polled on after call_tool was cancelled).
    async def main() -> None:
        link = _Written()
        waiting = asyncio.ensure_future(link._wait("k", 5.0))
        await asyncio.sleep(0)  # it waits now
        link._waiting["k"].set_result(ev.ResultReceived(id="k", method="ping", result={}))
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(main())
