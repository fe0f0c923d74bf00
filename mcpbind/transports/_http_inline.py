"""The handler of a POST's one request run in the request's own task (``InlineHandler``), and the
response that is written meanwhile by another (``HandledResponse``): a handler that answers without
waiting costs no task of its own (``StreamableHTTPServer._inline``)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ._http_calls import Call

__all__ = ["WAITS_MAX", "HandledResponse", "InlineHandler"]


WAITS_MAX = 256  # kinds of request remembered to wait (names come from clients: bounded)


class InlineHandler:
    """The handler of a POST's one request, run in the request's task rather than a task of its
    own (``StreamableHTTPServer._inline``): ``asyncio.current_task()`` is that task all along,
    so a timeout or task group the handler enters cancels the handler, as it would in a task of
    its own. What else cancels it is what cancelled its task before (``cancel``: the client
    cancelled the request or left, the session ended): what it awaits is cancelled, as
    ``Task.cancel`` does, or when it awaits nothing, a cancellation is thrown in at its next
    step.

    The request's task waits on a future of its own (``InlineStep``) for each of the handler's, so
    that a cancellation of that task by another task (an in-process client leaving, a server
    shutting down) never reaches what the handler awaits: the response ends, and the handler is
    handed over to a task of its own, where it goes on as it did when it had one from the start.
    A cancellation requested outside any task (a timer's or a callback's, as a timeout or a
    task group requests it) reaches the handler."""

    __slots__ = ("call", "kind", "run", "step", "cancelled", "later")

    def __init__(self, call: Call, kind: tuple[str, str | None]) -> None:
        self.call = call
        self.kind = kind  # its method, and the name its params give (a tool's)
        self.run: Coroutine[Any, Any, Any] | None = None  # (set once it waits; None once done)
        self.step: Any = None  # what it awaits: a future, or None for a bare yield
        self.cancelled = False  # a cancellation to throw in at its next step
        self.later = False  # a cancellation for what it awaits after what it hears now

    def cancel(self, msg: Any = None) -> bool:
        if self.run is None:
            return False  # it has not waited yet, or it is done: nothing to cancel
        step = self.step
        if not asyncio.isfuture(step):
            self.cancelled = True  # a bare yield: thrown in as it resumes
        elif step.done():
            # What it awaited came first (a task would have been woken before this): it hears
            # that, and what it awaits next is cancelled.
            self.later = True
        else:
            step.cancel(msg)
        return True

    def __await__(self) -> Generator[Any, Any, None]:
        """The handler, on from where it waits, in the task awaiting this."""
        run = self.run
        assert run is not None
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        try:
            while True:
                step = self.step
                relay: InlineStep | None = None
                if step is not None:
                    if not asyncio.isfuture(step) or not step._asyncio_future_blocking:
                        self.step = run.throw(RuntimeError(f"bad yield: {step!r}"))
                        continue
                    step._asyncio_future_blocking = False  # as a task takes it
                    relay = InlineStep(loop=loop)
                    relay.owner = task
                    step.add_done_callback(relay.wake)
                    relay._asyncio_future_blocking = True
                try:
                    yield relay
                except GeneratorExit:
                    run.close()
                    raise
                except BaseException as error:
                    if relay is None or not relay.by_task:  # the handler's own: it hears it
                        self.step = run.throw(error)
                        continue
                    # Another task cancelled this one: the response ends, the handler goes on.
                    step.remove_done_callback(relay.wake)
                    step._asyncio_future_blocking = True  # (as it yielded it)
                    loop.create_task(_handed_over(self))
                    run = None
                    raise
                if self.cancelled:
                    self.cancelled = False
                    self.step = run.throw(asyncio.CancelledError())
                else:
                    self.step = run.send(None)
                if self.later:
                    self.later = False
                    self.cancel()
        except StopIteration:
            return
        finally:
            if run is not None:
                self.run = None


class InlineStep(asyncio.Future[None]):
    """What the request's task (``owner``) awaits for one of its inline handler's futures: done
    when that one is; cancelled with the task, saying whether another task asked (``by_task``)."""

    owner: asyncio.Task[Any] | None = None
    by_task = False

    def wake(self, step: asyncio.Future[Any]) -> None:
        if not self.done():
            self.set_result(None)

    def cancel(self, msg: Any = None) -> bool:
        self.by_task = asyncio.current_task() not in (None, self.owner)
        return super().cancel(msg)


async def _handed_over(inline: InlineHandler) -> None:
    await inline


class HandledResponse(Response):
    """The response to a POST whose one handler (``InlineHandler``) waits: a task writes the response
    as ``respond`` makes it, while the request's task runs the handler to its end."""

    def __init__(self, respond: Coroutine[Any, Any, Response], inline: InlineHandler) -> None:
        self.status_code = 200
        self.background = None
        self._make = respond
        self._inline = inline

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writer = asyncio.get_running_loop().create_task(self._write(scope, receive, send))
        try:
            await self._inline
        except BaseException:
            writer.cancel()
            raise
        await writer

    async def _write(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self._make
        await response(scope, receive, send)
