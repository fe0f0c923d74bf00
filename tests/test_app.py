"""mcpbind.App: what a server written as decorated functions answers, in every revision. Each test
drives a real ``ClientSession`` (through ``mcpbind.Client``, or by hand where the wire matters)
against the App's own ``ServerSession``, in this process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Annotated, Any, TypedDict, TypeVar

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev
from mcpbind.app import App, Context, Limits, ToolError

T = TypeVar("T")
RELEASED = mcpbind.REVISIONS[: mcpbind.REVISIONS.index(mcpbind.LATEST) + 1]
ROUND_TRIP = "2026-07-28"  # the revision that asks for input by multi-round-trip results
REQUESTS = ("2025-06-18", "2025-11-25")  # revisions that ask by requests to the client


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, 30)

    return asyncio.run(bounded())


def client(app: App, revision: str, **options: Any) -> mcpbind.Client:
    return mcpbind.Client(app, revisions=[revision], **options)


def module(revision: str) -> Any:
    return mcpbind.bindings(revision)


# -- schemas from type hints ----------------------------------------------------------------------


class Point(msgspec.Struct):
    x: float
    y: float = 0.0


class Options(TypedDict, total=False):
    verbose: bool


def shapes_app() -> App:
    app = App("shapes")

    @app.tool
    def scale(
        p: Point,
        factor: Annotated[float, msgspec.Meta(gt=0, description="how much bigger")] = 2.0,
        options: Options | None = None,
    ) -> Point:
        """Scale a point."""
        return Point(p.x * factor, p.y * factor)

    @app.tool
    def count(n: Annotated[int, msgspec.Meta(ge=0)]) -> int:
        return n + 1

    @app.tool
    def hello(name: str) -> str:
        return f"hello {name}"

    return app


def test_input_and_output_schemas_come_from_the_type_hints() -> None:
    async def main() -> dict[str, Any]:
        async with client(shapes_app(), mcpbind.LATEST) as c:
            return {t.name: msgspec.to_builtins(t) for t in await c.list_tools()}

    tools = run(main())
    point = {
        "title": "Point",
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
        "required": ["x"],
    }
    assert tools["scale"]["description"] == "Scale a point."
    assert tools["scale"]["inputSchema"] == {
        "type": "object",
        "properties": {
            "p": {"$ref": "#/$defs/Point"},
            "factor": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "how much bigger",
                "default": 2.0,
            },
            "options": {"anyOf": [{"$ref": "#/$defs/Options"}, {"type": "null"}]},
        },
        "required": ["p"],
        "$defs": {
            "Point": point,
            "Options": {
                "title": "Options",
                "type": "object",
                "properties": {"verbose": {"type": "boolean"}},
                "required": [],
            },
        },
    }
    assert tools["scale"]["outputSchema"] == {k: v for k, v in point.items() if k != "title"}
    assert tools["count"]["inputSchema"]["properties"] == {"n": {"type": "integer", "minimum": 0}}
    assert tools["count"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert "outputSchema" not in tools["hello"]  # a string is text content, not structured


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_structured_results_carry_structured_content_and_its_text(revision: str) -> None:
    async def main() -> tuple[Any, Any, Any]:
        async with client(shapes_app(), revision) as c:
            scaled = await c.call_tool("scale", {"p": {"x": 1, "y": 2}, "factor": 3})
            counted = await c.call_tool("count", {"n": 41})
            hello = await c.call_tool("hello", {"name": "you"})
            return scaled, counted, hello

    scaled, counted, hello = run(main())
    M = module(revision)
    assert type(scaled) is M.CallToolResult
    assert scaled.structured_content == {"x": 3.0, "y": 6.0}
    assert msgspec.json.decode(scaled.content[0].text) == {"x": 3.0, "y": 6.0}
    assert counted.structured_content == {"result": 42} and counted.content[0].text == "42"
    assert hello.structured_content is msgspec.UNSET and hello.content[0].text == "hello you"


def test_a_revision_without_structured_content_gets_its_text() -> None:
    async def main() -> Any:
        async with client(shapes_app(), "2024-11-05") as c:
            return await c.call_tool("scale", {"p": {"x": 1}})

    result = run(main())
    assert type(result) is module("2024-11-05").CallToolResult
    assert msgspec.json.decode(result.content[0].text) == {"x": 2.0, "y": 0.0}


# -- bad arguments and failing tools ----------------------------------------------------------------


@pytest.mark.parametrize("revision", RELEASED)
def test_bad_arguments_are_answered_as_the_revision_says(revision: str) -> None:
    async def main() -> list[Any]:
        out: list[Any] = []
        async with client(shapes_app(), revision) as c:
            for args in ({"n": -1}, {"n": "one"}, {}):
                try:
                    out.append(await c.call_tool("count", args))
                except mcpbind.ProtocolError as error:
                    out.append(error)
        return out

    found = run(main())
    expected = [
        "Expected `int` >= 0 - at `$.n`",
        "Expected `int`, got `str` - at `$.n`",
        "Object missing required field `n`",
    ]
    if module(revision).FACTS.tool_argument_errors == "result":
        assert revision in ("2025-11-25", "2026-07-28")
        for result, text in zip(found, expected, strict=True):
            assert result.is_error is True
            assert result.content[0].text == f"Invalid arguments for tool 'count': {text}"
    else:
        assert revision in ("2024-11-05", "2025-03-26", "2025-06-18")
        for error, text in zip(found, expected, strict=True):
            assert isinstance(error, mcpbind.ProtocolError) and error.code == -32602
            assert error.message == f"Invalid arguments for tool 'count': {text}"


def test_a_whole_float_is_an_integer_as_json_schema_says() -> None:
    async def main() -> list[Any]:
        out: list[Any] = []
        async with client(shapes_app(), "2025-11-25") as c:
            for args in ({"n": 3.0}, {"n": 3.5}, {"n": -1.0}):
                out.append(await c.call_tool("count", args))
        return out

    whole, fraction, negative = run(main())
    assert whole.is_error is not True and whole.structured_content == {"result": 4}  # n + 1
    assert fraction.content[0].text.endswith("Expected `int`, got `float` - at `$.n`")
    assert negative.content[0].text.endswith("Expected `int` >= 0 - at `$.n`")


def test_an_unknown_tool_is_a_protocol_error_in_every_revision() -> None:
    async def main(revision: str) -> mcpbind.ProtocolError:
        async with client(shapes_app(), revision) as c:
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await c.call_tool("nope")
            return caught.value

    for revision in ("2024-11-05", "2026-07-28"):
        error = run(main(revision))
        assert (error.code, error.message) == (-32602, "Unknown tool: 'nope'")


def test_a_failing_tool_answers_with_a_tool_error() -> None:
    app = App("failing")

    @app.tool
    def refuse() -> str:
        raise ToolError("not today")

    @app.tool
    async def crash() -> str:
        raise ValueError("boom")

    async def main() -> tuple[Any, Any]:
        async with client(app, "2025-11-25") as c:
            return await c.call_tool("refuse"), await c.call_tool("crash")

    refused, crashed = run(main())
    assert refused.is_error is True and refused.content[0].text == "not today"
    assert crashed.is_error is True and crashed.content[0].text == "ValueError: boom"


def test_a_result_that_breaks_the_output_schema_is_an_internal_error() -> None:
    app = App("liar")

    @app.tool
    def where() -> Point:
        return {"x": "far"}  # type: ignore[return-value]

    async def main() -> mcpbind.ProtocolError:
        async with client(app, "2025-11-25") as c:
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await c.call_tool("where")
            return caught.value

    error = run(main())
    assert error.code == -32603 and "Expected `float`, got `str` - at `$.x`" in error.message


def test_functions_mcp_cannot_call_by_name_are_refused_when_registered() -> None:
    app = App("strict")
    with pytest.raises(TypeError, match="'args' must be an ordinary"):

        @app.tool
        def spread(*args: int) -> int:
            return sum(args)

    with pytest.raises(TypeError, match=r"parameters \['name'\] must be the template's"):

        @app.resource("users://{id}")
        def user(name: str) -> str:
            return name


# -- how handlers run ---------------------------------------------------------------------------------


def test_sync_handlers_run_in_a_worker_thread_and_async_ones_on_the_loop() -> None:
    app = App("threads")
    seen: dict[str, int] = {}

    @app.tool
    def blocking() -> str:
        seen["sync"] = threading.get_ident()
        return "ok"

    @app.tool
    async def awaiting() -> str:
        seen["async"] = threading.get_ident()
        return "ok"

    async def main() -> int:
        async with client(app, "2025-11-25") as c:
            await c.call_tool("blocking")
            await c.call_tool("awaiting")
        return threading.get_ident()

    loop_thread = run(main())
    assert seen["async"] == loop_thread
    assert seen["sync"] != loop_thread


def test_the_lifespan_runs_once_around_serving_and_handlers_see_its_value() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: App) -> AsyncIterator[dict[str, str]]:
        events.append("start")
        yield {"db": "connected"}
        events.append("stop")

    app = App("lifespan", lifespan=lifespan)

    @app.tool
    def db(ctx: Context) -> str:
        return str(ctx.lifespan["db"])

    async def main() -> list[str]:
        async with client(app, "2025-11-25") as a, client(app, "2026-07-28") as b:
            texts = [(await a.call_tool("db")).content[0].text]
            texts.append((await b.call_tool("db")).content[0].text)
            assert events == ["start"]
        return texts

    assert run(main()) == ["connected", "connected"]
    assert events == ["start", "stop"]


# -- asking the client: one handler, requests or multi-round-trip results -------------------------------


class Name(msgspec.Struct):
    name: str


def asking_app(runs: list[str]) -> App:
    app = App("asking")

    @app.tool
    async def greet(style: str, ctx: Context) -> str:
        runs.append(ctx.revision)
        answer = await ctx.elicit("Your name?", Name)
        sampled = await ctx.sample(f"A {style} greeting", max_tokens=10)
        roots = await ctx.roots()
        assert answer.content is not None  # an Elicited[Name]
        return (
            f"{answer.action}:{answer.content.name} {sampled.content.text} "
            f"{[r.uri for r in roots.roots]} {type(answer.result).__module__}"
        )

    @app.tool
    def ask_in_a_thread(ctx: Context) -> str:
        answer = ctx.wait(ctx.elicit("Your name?", Name))
        assert answer.content is not None
        return f"{answer.content.name} from a thread"

    return app


def answers() -> dict[str, Any]:
    return {
        "elicitation": lambda params: {"action": "accept", "content": {"name": "Ada"}},
        "sampling": lambda params: {
            "role": "assistant",
            "content": {"type": "text", "text": f"hi ({params.messages[0].content.text})"},
            "model": "test",
        },
        "roots": lambda: ["file:///work"],
    }


@pytest.mark.parametrize("revision", [*REQUESTS, ROUND_TRIP])
def test_the_same_handler_asks_the_client_in_every_revision(revision: str) -> None:
    runs: list[str] = []
    requests: list[str] = []

    async def main() -> tuple[Any, Any]:
        c = client(asking_app(runs), revision, **answers())
        async with c:
            link = c._link
            assert link is not None
            original = link.session.receive

            def receive(data: bytes | str) -> list[ev.Event]:
                found = original(data)
                requests.extend(e.method for e in found if isinstance(e, ev.RequestReceived))
                requests.extend("input required" for e in found if isinstance(e, ev.InputRequired))
                return found

            link.session.receive = receive  # type: ignore[method-assign]
            return await c.call_tool("greet", {"style": "warm"}), await c.call_tool(
                "ask_in_a_thread"
            )

    greeted, threaded = run(main())
    package = module(revision).__name__
    assert greeted.content[0].text == (
        f"accept:Ada hi (A warm greeting) ['file:///work'] {package}.types"
    )
    assert threaded.content[0].text == "Ada from a thread"
    if revision == ROUND_TRIP:  # three input rounds: the handler ran four times
        assert runs == [revision] * 4
        assert requests == ["input required"] * 4  # three for greet, one for the thread's ask
    else:  # the handler ran once and asked by requests in the middle of it
        assert runs == [revision]
        assert requests == [
            "elicitation/create",
            "sampling/createMessage",
            "roots/list",
            "elicitation/create",
        ]


def raw_pair(app: App, revision: str, caps: Any = None) -> tuple[Any, Any, list[bytes]]:
    """A ClientSession talking to an App connection by hand (the wire, message by message)."""
    session = mcpbind.ClientSession(
        revisions=[revision], capabilities=caps or {}, info={"name": "raw", "version": "1"}
    )
    out: list[bytes] = []
    return session, app.connect(out.append), out


async def exchange(session: Any, connection: Any, out: list[bytes]) -> list[ev.Event]:
    """Deliver what the client queued and collect the events of the answers."""
    found: list[ev.Event] = []
    for _ in range(50):
        for data in session.data_to_send():
            connection.receive(data)
        await asyncio.sleep(0)
        sent, out[:] = list(out), []
        for data in sent:
            found += session.receive(data)
        if found and not session.data_to_send():
            return found
    raise AssertionError("no answer")


def test_a_request_state_the_server_did_not_issue_is_refused() -> None:
    runs: list[str] = []
    app = asking_app(runs)

    async def main() -> list[Any]:
        session, connection, out = raw_pair(app, ROUND_TRIP, {"elicitation": {}})
        session.connect()
        await exchange(session, connection, out)
        session.request("tools/call", {"name": "greet", "arguments": {"style": "warm"}})
        (needed,) = await exchange(session, connection, out)
        assert isinstance(needed, ev.InputRequired) and needed.request_state
        accepted = {"action": "accept", "content": {"name": "Ada"}}
        forged = ev.InputRequired(
            id=needed.id,
            method=needed.method,
            params=needed.params,
            input_requests=needed.input_requests,
            request_state=needed.request_state[:-4] + "AAAA",
            result=needed.result,
        )
        session.answer(forged, {"elicit-0": accepted})
        found = await exchange(session, connection, out)
        # The same state on a request with other arguments: a replay.
        other = msgspec.structs.replace(
            needed.params, arguments={"style": "cold"}, meta=msgspec.UNSET
        )
        session.answer(
            msgspec.structs.replace(needed, params=other),  # type: ignore[type-var]
            {"elicit-0": accepted},
        )
        return found + await exchange(session, connection, out)

    forged, replayed = run(main())
    for error in (forged, replayed):
        assert isinstance(error, ev.ErrorReceived), error
        assert error.code == -32602 and "requestState was not issued" in error.message


def test_apps_sharing_a_state_key_take_each_others_request_states() -> None:
    key = bytes(range(32))
    first, second, stranger = asking_app([]), asking_app([]), asking_app([])
    first.sign_with(key)
    second.sign_with(key)

    async def retried_on(other: App) -> ev.Event:
        caps = {"elicitation": {}, "sampling": {}}
        session, connection, out = raw_pair(first, ROUND_TRIP, caps)
        session.connect()
        await exchange(session, connection, out)
        session.request("tools/call", {"name": "greet", "arguments": {"style": "warm"}})
        (needed,) = await exchange(session, connection, out)
        assert isinstance(needed, ev.InputRequired)
        session.answer(needed, {"elicit-0": {"action": "accept", "content": {"name": "Ada"}}})
        out.clear()
        (answer,) = await exchange(session, other.connect(out.append), out)
        return answer

    # the second App asks the next question (sampling): it took the first App's state
    moved = run(retried_on(second))
    assert isinstance(moved, ev.InputRequired) and list(moved.input_requests) == ["sample-1"]
    refused = run(retried_on(stranger))
    assert isinstance(refused, ev.ErrorReceived) and refused.code == -32602
    with pytest.raises(ValueError, match="at least 32 bytes"):
        stranger.sign_with(b"short")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        App("weak", state_key=b"short")


def test_asking_for_a_capability_the_client_lacks_is_refused() -> None:
    runs: list[str] = []

    async def main(revision: str) -> mcpbind.ProtocolError:
        async with client(asking_app(runs), revision) as c:  # no elicitation handler
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await c.call_tool("greet", {"style": "warm"})
            return caught.value

    error = run(main(ROUND_TRIP))
    assert error.code == -32021 and error.data == {"requiredCapabilities": {"elicitation": {}}}
    error = run(main("2025-11-25"))  # the session refuses to send what was not advertised
    assert error.code == -32601 and "elicitation" in error.message


def test_input_rounds_are_bounded() -> None:
    app = App("insistent", limits=Limits(input_rounds=2))

    @app.tool
    async def again(ctx: Context) -> str:
        for _ in range(3):
            await ctx.elicit("More?", Name)
        return "done"

    async def main() -> mcpbind.ProtocolError:
        async with client(app, ROUND_TRIP, **answers()) as c:
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await c.call_tool("again")
            return caught.value

    error = run(main())
    assert error.code == -32603 and "asked for input 3 times (the limit is 2)" in error.message


def gathering_app(runs: list[str]) -> App:
    app = App("gathering")

    @app.tool
    async def survey(ctx: Context) -> str:
        runs.append(ctx.revision)
        name, sampled, roots = await ctx.gather(
            ctx.elicit("Your name?", Name, key="name"),
            ctx.sample("A greeting", max_tokens=10, key="greeting"),
            ctx.roots(key="roots"),
        )
        return f"{name.content.name} {sampled.content.text} {[r.uri for r in roots.roots]}"

    return app


@pytest.mark.parametrize("revision", [*REQUESTS, ROUND_TRIP])
def test_gathered_asks_are_asked_together(revision: str) -> None:
    runs: list[str] = []
    asked: list[Any] = []

    async def main() -> Any:
        async with client(gathering_app(runs), revision, **answers()) as c:
            link = c._link
            assert link is not None
            original = link.session.receive

            def receive(data: bytes | str) -> list[ev.Event]:
                found = original(data)
                asked.extend(e.method for e in found if isinstance(e, ev.RequestReceived))
                asked.extend(
                    sorted(e.input_requests) for e in found if isinstance(e, ev.InputRequired)
                )
                return found

            link.session.receive = receive  # type: ignore[method-assign]
            return await c.call_tool("survey")

    result = run(main())
    assert result.content[0].text == "Ada hi (A greeting) ['file:///work']"
    if revision == ROUND_TRIP:  # one round asking for all three, by the keys given
        assert asked == [["greeting", "name", "roots"]] and runs == [revision] * 2
    else:  # three requests sent at once, in one run of the handler
        assert sorted(asked) == ["elicitation/create", "roots/list", "sampling/createMessage"]
        assert runs == [revision]


def test_an_ask_key_used_twice_in_one_request_is_refused() -> None:
    app = App("forgetful")

    @app.tool
    async def twice(ctx: Context) -> str:
        await ctx.elicit("Your name?", Name, key="name")
        await ctx.elicit("Your name again?", Name, key="name")
        return "never"

    async def main() -> Any:
        async with client(app, ROUND_TRIP, **answers()) as c:
            return await c.call_tool("twice")

    result = run(main())
    assert result.is_error and "ask key 'name' used twice in one request" in result.content[0].text


def test_a_handler_can_require_a_client_capability() -> None:
    app = App("demanding")

    @app.tool
    def needs_sampling(ctx: Context) -> str:
        ctx.require("sampling")
        return "has sampling"

    async def main(revision: str, **handlers: Any) -> Any:
        async with client(app, revision, **handlers) as c:
            try:
                return (await c.call_tool("needs_sampling")).content[0].text
            except mcpbind.ProtocolError as error:
                return error

    error = run(main(ROUND_TRIP))
    assert error.code == -32021 and error.data == {"requiredCapabilities": {"sampling": {}}}
    error = run(main("2025-11-25"))
    assert error.code == -32602 and "'sampling'" in error.message
    for revision in (ROUND_TRIP, "2025-11-25"):
        assert run(main(revision, sampling=answers()["sampling"])) == "has sampling"


def test_a_tool_may_list_a_schema_of_its_own_and_still_convert_its_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "unit": {"type": "string"}},
        "if": {"required": ["unit"]},
        "then": {"properties": {"n": {"minimum": 0}}},
    }
    app = App("schemas")

    @app.tool(input_schema=schema)
    def measure(n: int, unit: str = "m") -> str:
        return f"{n}{unit}"

    async def main() -> tuple[Any, Any, Any]:
        async with client(app, "2025-11-25") as c:
            (listed,) = await c.list_tools()
            good = await c.call_tool("measure", {"n": 3})
            bad = await c.call_tool("measure", {"n": "three"})
            return listed, good, bad

    listed, good, bad = run(main())
    assert msgspec.to_builtins(listed.input_schema) == schema
    assert good.content[0].text == "3m"
    assert bad.is_error and "Expected `int`, got `str` - at `$.n`" in bad.content[0].text
    with pytest.raises(ValueError, match="cannot be described"):
        app.tool(input_schema={"type": "array"})(measure)


def test_close_stream_polls_over_http_and_is_false_elsewhere() -> None:
    from mcpbind.transports.http_client import StreamableHTTPClient
    from tests.test_http_transport import INFO, URL, http

    app = App("polling")

    @app.tool
    async def poll(ctx: Context) -> str:
        return f"closed={ctx.close_stream()}"

    async def over_http(revision: str) -> str:
        session = mcpbind.ClientSession(revisions=(revision,), info=INFO)
        transport = http(app.asgi(retry_ms=10))
        async with StreamableHTTPClient(URL, session, http=transport, listen=False) as c:
            await c.connect()
            result = await c.call("tools/call", {"name": "poll", "arguments": {}})
        return str(result.content[0].text)

    async def in_process() -> str:
        async with client(app, "2025-11-25") as c:
            return str((await c.call_tool("poll")).content[0].text)

    # 2025-11-25 sessions have priming events: the response ends, the client resumes it
    assert run(over_http("2025-11-25")) == "closed=True"
    assert run(over_http("2025-06-18")) == "closed=False"  # no priming events: nothing cut
    assert run(in_process()) == "closed=False"


# -- progress, logging, cancellation --------------------------------------------------------------------


def chatty_app() -> App:
    app = App("chatty")

    @app.tool
    async def work(ctx: Context) -> str:
        for step in (1, 2):
            ctx.progress(step, 2, f"step {step}")
        ctx.log("debug", "details")
        ctx.log("info", {"done": True}, logger="work")
        return "worked"

    return app


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25", "2026-07-28"])
def test_progress_and_log_messages_reach_the_client(revision: str) -> None:
    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        progress: list[Any] = []
        notes: list[ev.NotificationReceived] = []
        c = client(chatty_app(), revision, on_notification=notes.append)
        async with c:
            await c.call_tool("work", progress=lambda *p: progress.append(p))
            before = [(n.params.level, n.params.data) for n in notes]
            notes.clear()
            await c.set_log_level("info")
            await c.call_tool("work")
            await asyncio.sleep(0.01)  # the notifications travel before the result
            after = [(n.params.level, n.params.data) for n in notes]
        return progress, before, after

    progress, before, after = run(main())
    with_message = (
        "message" in mcpbind.bindings(revision).ProgressNotificationParams.__struct_fields__
    )
    assert progress == [
        (1, 2, "step 1" if with_message else None),
        (2, 2, "step 2" if with_message else None),
    ]
    if revision == "2026-07-28":  # nothing unless the request's _meta asks for a level
        assert before == []
    else:  # every level until logging/setLevel says otherwise
        assert before == [("debug", "details"), ("info", {"done": True})]
    assert after == [("info", {"done": True})]


def test_cancelling_a_request_cancels_its_handler() -> None:
    app = App("patient")
    seen: list[str] = []
    started = threading.Event()

    @app.tool
    async def wait_async() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("async cancelled")
            raise
        return "never"

    @app.tool
    def wait_sync(ctx: Context) -> str:
        started.set()
        for _ in range(1000):
            if ctx.cancelled:
                seen.append("sync saw cancelled")
                return "stopped"
            threading.Event().wait(0.01)
        return "never"

    async def main() -> None:
        async with client(app, "2025-11-25") as c:
            for name in ("wait_async", "wait_sync"):
                started.clear()
                call = asyncio.ensure_future(c.call_tool(name))
                while not started.is_set():
                    await asyncio.sleep(0.01)
                call.cancel()  # the client sends notifications/cancelled
                with contextlib.suppress(asyncio.CancelledError):
                    await call
                for _ in range(300):
                    if len(seen) == (1 if name == "wait_async" else 2):
                        break
                    await asyncio.sleep(0.01)

    run(main())
    assert seen == ["async cancelled", "sync saw cancelled"]


# -- resources, prompts, completions --------------------------------------------------------------------


def library_app(limits: Limits | None = None) -> App:
    app = App("library", limits=limits or Limits())

    @app.resource("file:///readme.md", mime_type="text/markdown")
    def readme() -> str:
        """The read-me."""
        return "# hello"

    @app.resource("file:///logo.png", mime_type="image/png")
    def logo() -> bytes:
        return b"\x89PNG"

    @app.resource("books://{shelf}/{number}")
    def book(shelf: str, number: int) -> dict[str, Any]:
        return {"shelf": shelf, "number": number, "next": number + 1}

    @app.resource("files://{+path}", mime_type="text/plain")
    def file(path: str) -> str:
        return f"file at {path}"

    @app.prompt
    def review(book: str, tone: str = "kind") -> str:
        """Review a book."""
        return f"Review {book}, {tone}ly."

    @app.prompt(name="chat")
    def conversation(topic: str) -> list[Any]:
        L = mcpbind.bindings(mcpbind.LATEST)
        return [
            f"Let us talk about {topic}.",
            L.PromptMessage(role="assistant", content=L.TextContent(text="Gladly.")),
        ]

    @app.completion(prompt="review", argument="tone")
    def tones(value: str, arguments: dict[str, str]) -> list[str]:
        return [t for t in ("kind", "keen", "kinetic") if t.startswith(value)]

    @app.completion(resource="books://{shelf}/{number}", argument="number")
    async def numbers(value: str, arguments: dict[str, str]) -> list[str]:
        return [str(n) for n in range(150) if str(n).startswith(value)]

    return app


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25", "2026-07-28"])
def test_resources_are_listed_and_read(revision: str) -> None:
    async def main() -> tuple[Any, ...]:
        async with client(library_app(), revision) as c:
            listed = await c.list_resources()
            templates = await c.list_resource_templates()
            readme = await c.read_resource("file:///readme.md")
            logo = await c.read_resource("file:///logo.png")
            book = await c.read_resource("books://fiction/7")
            file = await c.read_resource("files://a/b%20c.txt")
            with pytest.raises(mcpbind.ProtocolError) as missing:
                await c.read_resource("books://fiction/seven")
            return listed, templates, readme, logo, book, file, missing.value

    listed, templates, readme, logo, book, file, missing = run(main())
    M = module(revision)
    assert [(r.uri, r.name, r.mime_type) for r in listed] == [
        ("file:///readme.md", "readme", "text/markdown"),
        ("file:///logo.png", "logo", "image/png"),
    ]
    assert listed[0].description == "The read-me."
    assert [t.uri_template for t in templates] == ["books://{shelf}/{number}", "files://{+path}"]
    assert type(readme) is M.ReadResourceResult
    assert readme.contents[0].text == "# hello"
    assert type(logo.contents[0]) is M.BlobResourceContents and logo.contents[0].blob == "iVBORw=="
    assert msgspec.json.decode(book.contents[0].text) == {
        "shelf": "fiction",
        "number": 7,
        "next": 8,
    }
    assert book.contents[0].mime_type == "application/json"
    assert file.contents[0].text == "file at a/b%20c.txt"  # reserved expansion: kept as is
    # "seven" matches the template but is no integer: the template's variables say so.
    assert missing.code == -32602 and "$.number" in missing.message


def test_a_resource_nothing_serves_is_not_found() -> None:
    async def main() -> mcpbind.ProtocolError:
        async with client(library_app(), "2025-11-25") as c:
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await c.read_resource("file:///nowhere")
            return caught.value

    error = run(main())
    assert (error.code, error.message, error.data) == (
        -32002,
        "Resource not found: file:///nowhere",
        {"uri": "file:///nowhere"},
    )


@pytest.mark.parametrize("revision", ["2024-11-05", "2026-07-28"])
def test_prompts_are_listed_and_filled(revision: str) -> None:
    async def main() -> tuple[Any, ...]:
        async with client(library_app(), revision) as c:
            listed = await c.list_prompts()
            review = await c.get_prompt("review", {"book": "Dune"})
            chat = await c.get_prompt("chat", {"topic": "tea"})
            with pytest.raises(mcpbind.ProtocolError) as missing:
                await c.get_prompt("review", {})
            return listed, review, chat, missing.value

    listed, review, chat, missing = run(main())
    M = module(revision)
    assert [(p.name, [(a.name, a.required) for a in p.arguments]) for p in listed] == [
        ("review", [("book", True), ("tone", False)]),
        ("chat", [("topic", True)]),
    ]
    assert type(review) is M.GetPromptResult and review.description == "Review a book."
    assert [(m.role, m.content.text) for m in review.messages] == [("user", "Review Dune, kindly.")]
    assert [(m.role, m.content.text) for m in chat.messages] == [
        ("user", "Let us talk about tea."),
        ("assistant", "Gladly."),
    ]
    assert missing.code == -32602 and "Object missing required field `book`" in missing.message


def test_completions_suggest_at_most_a_hundred_values_with_the_total() -> None:
    async def main() -> tuple[Any, Any, Any]:
        async with client(library_app(), "2025-11-25") as c:
            tones = await c.complete(prompt="review", argument="tone", value="k")
            numbers = await c.complete(
                resource="books://{shelf}/{number}", argument="number", value=""
            )
            unknown = await c.complete(prompt="nope", argument="x", value="")
            return tones, numbers, unknown

    tones, numbers, unknown = run(main())
    assert type(tones) is module("2025-11-25").CompleteResult
    assert tones.completion.values == ["kind", "keen", "kinetic"]
    assert len(numbers.completion.values) == 100 and numbers.completion.total == 150
    assert numbers.completion.has_more is True
    assert unknown.completion.values == []


def test_every_page_of_a_long_list_is_read_and_a_bad_cursor_is_refused() -> None:
    app = App("many", limits=Limits(page_size=2))
    for i in range(5):
        app.tool(name=f"t{i}")(lambda: "x")

    async def main() -> tuple[list[str], mcpbind.ProtocolError, Any]:
        async with client(app, "2025-11-25") as c:
            names = [t.name for t in await c.list_tools()]
            first = await c.request("tools/list")
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await c.request("tools/list", {"cursor": "7"})
            return names, caught.value, first

    names, error, first = run(main())
    assert names == ["t0", "t1", "t2", "t3", "t4"]
    assert [t.name for t in first.tools] == ["t0", "t1"] and first.next_cursor == "2"
    assert error.code == -32602 and "unknown cursor '7'" in error.message


# -- subscriptions and list changes ------------------------------------------------------------------------


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_subscribed_clients_hear_of_updates_and_list_changes(revision: str) -> None:
    app = library_app()

    async def main() -> list[tuple[str, Any]]:
        notes: list[ev.NotificationReceived] = []
        async with client(app, revision, on_notification=notes.append) as c:
            await c.subscribe("file:///readme.md")
            await c.watch_lists()
            assert app.resource_updated("file:///logo.png") == 0  # nobody subscribed to it
            assert app.resource_updated("file:///readme.md") == 1
            assert app.resources_changed() == 1

            @app.prompt
            def late() -> str:  # registered while serving: clients are told
                return "late"

            for _ in range(100):
                if len(notes) >= 3:
                    break
                await asyncio.sleep(0.01)
            assert "late" in [p.name for p in await c.list_prompts()]
            await c.unsubscribe("file:///readme.md")
            assert app.resource_updated("file:///readme.md") == 0
        return [
            (n.method, None if n.params is msgspec.UNSET else msgspec.to_builtins(n.params))
            for n in notes
        ]

    notes = run(main())
    methods = [m for m, _ in notes]
    assert methods == [
        "notifications/resources/updated",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    ]
    assert notes[0][1]["uri"] == "file:///readme.md"
    if revision == "2026-07-28":  # on the subscription stream, each tagged with it
        for _, params in notes:
            assert "io.modelcontextprotocol/subscriptionId" in params["_meta"]


def test_subscriptions_of_one_connection_are_bounded() -> None:
    async def main() -> mcpbind.ProtocolError:
        async with client(library_app(Limits(subscriptions=1)), "2025-11-25") as c:
            await c.subscribe("file:///readme.md")
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await c.subscribe("file:///logo.png")
            return caught.value

    error = run(main())
    assert error.code == -32602 and "subscribed to 1 resources (the limit)" in error.message


def test_requests_in_flight_are_bounded() -> None:
    app = App("busy", limits=Limits(in_flight=1))
    gate = asyncio.Event()

    @app.tool
    async def hold() -> str:
        await gate.wait()
        return "held"

    async def main() -> tuple[Any, mcpbind.ProtocolError]:
        async with client(app, "2025-11-25") as c:
            first = asyncio.ensure_future(c.call_tool("hold"))
            await asyncio.sleep(0.05)
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await c.call_tool("hold")
            gate.set()
            return await first, caught.value

    held, error = run(main())
    assert held.content[0].text == "held"
    assert error.code == -32603 and "1 requests are being answered (the limit)" in error.message


# -- results projected to older revisions -----------------------------------------------------------------


def test_what_an_older_revision_cannot_carry_follows_the_loss_rules(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App("links")
    L = mcpbind.bindings(mcpbind.LATEST)

    @app.tool
    def link() -> list[Any]:
        return [L.TextContent(text="see"), L.ResourceLink(uri="file:///a.txt", name="a")]

    async def main(revision: str) -> Any:
        async with client(app, revision) as c:
            return await c.call_tool("link")

    with caplog.at_level(logging.INFO, logger="mcpbind.app"):
        old = run(main("2024-11-05"))
        new = run(main("2025-11-25"))
    assert type(new.content[1]) is module("2025-11-25").ResourceLink
    assert [type(c).__name__ for c in old.content] == ["TextContent", "TextContent"]
    assert "file:///a.txt" in old.content[1].text
    lines = [r.getMessage() for r in caplog.records if "ResourceLink replaced" in r.getMessage()]
    assert (
        lines == [lines[0]]
        and "into MCP 2024-11-05: $.content[1]: ResourceLink replaced" in lines[0]
    )


def test_text_results_are_built_in_each_revision_as_their_projection() -> None:
    """The commonest result, one text block (a tool's text, a tool error), is built in the
    request's revision directly, in every released revision: exactly what projecting the newest
    revision's result gives."""
    from mcpbind.app.content import Results
    from mcpbind.app.revision import rev
    from mcpbind.bridge.losses import convey

    results = Results("private", 0)
    for revision in RELEASED:
        for extra in ({}, {"is_error": True}):
            newest = results.call_tool(content=[results.text(text="42")], **extra)
            error = bool(extra)
            got = results.text_result("42", rev(revision), "the result of tool", "t", error=error)
            assert got == convey(newest, revision)[0], revision
            assert type(got) is module(revision).CallToolResult
            again = results.text_result("42", rev(revision), "the result of tool", "t", error=error)
            assert again == got and again is not got and again.content is not got.content
        assert results._texts[revision] is not None  # built directly, not conveyed


# -- stdio ----------------------------------------------------------------------------------------------------


SERVER = """
import sys
from mcpbind import App

app = App("echo")

@app.tool
def echo(text: str) -> str:
    return text

app.run(max_line=int(sys.argv[1]))
"""


def test_on_stdio_an_overlong_line_is_refused_and_the_next_one_served(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)

    async def main() -> list[Any]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            "2000",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        session = mcpbind.ClientSession(
            revisions=["2025-11-25"], info={"name": "t", "version": "1"}
        )
        session.connect()
        proc.stdin.write(b"[" + b"1," * 5000 + b"1]\n")  # 10 kB: past the 2,000 bytes allowed
        for data in session.data_to_send():
            proc.stdin.write(data + b"\n")
        found: list[Any] = [msgspec.json.decode(await proc.stdout.readline())]
        found += session.receive(await proc.stdout.readline())
        for data in session.data_to_send():
            proc.stdin.write(data + b"\n")
        session.request("tools/call", {"name": "echo", "arguments": {"text": "still here"}})
        for data in session.data_to_send():
            proc.stdin.write(data + b"\n")
        found += session.receive(await proc.stdout.readline())
        proc.stdin.close()
        assert await proc.wait() == 0
        return found

    refused, opened, echoed = run(main())
    assert refused["id"] is None and refused["error"]["code"] == -32600
    assert refused["error"]["message"] == (
        "Invalid Request: a message of 10003 bytes exceeds the limit of 2000 bytes"
    )
    assert isinstance(opened, ev.Negotiated)
    assert isinstance(echoed, ev.ResultReceived) and echoed.result.content[0].text == "still here"


# -- the guide ------------------------------------------------------------------------------------------


def test_the_guides_examples_run_verbatim() -> None:
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "app.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 2
    server = blocks[0].split("async def main")[0].strip().splitlines()
    assert len(server) <= 12  # the server of the opening example: about ten lines
    for block in blocks:
        exec(compile(block, "docs/app.md", "exec"), {})
