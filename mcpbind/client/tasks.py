"""A ``Client``'s side of the tasks extension (SEP-2663, ``Client(tasks=True)``): a tool call
the server answered with a task is followed to its end with ``tasks/get``, the questions it
asks answered with ``tasks/update`` through the client's handlers, and the tool's result
returned; a call cancelled or out of time cancels its task (``tasks/cancel``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from msgspec import UNSET

from .._extension_tasks import TASK_TYPES
from .._extensions import TASKS, TasksFacts
from ..errors import INTERNAL_ERROR, ProtocolError
from ..events import RequestReceived

__all__ = ["MIN_POLL_INTERVAL", "TaskFollower", "declared"]

# The shortest wait between two polls, whatever pollIntervalMs the server suggests (seconds).
MIN_POLL_INTERVAL = 0.01
# The wait between two polls when the server suggests none (seconds).
DEFAULT_POLL_INTERVAL = 0.5

Request = Callable[[str, Any], Awaitable[Any]]
Serve = Callable[[RequestReceived], Awaitable[Any]]
# Opens a subscription stream with the given listen params; returns when the server ends it.
Listen = Callable[[dict[str, Any]], Awaitable[Any]]


def declared(revisions: tuple[str, ...], capabilities: dict[str, Any]) -> None:
    """Add to ``capabilities`` (plain JSON) the extension of every revision offered that has
    it (the client declares it in each request's ``_meta`` there)."""
    for revision in revisions:
        facts = TASKS.get(revision)
        if facts is not None:
            extensions = capabilities.setdefault(facts.extensions_key, {})
            extensions.setdefault(facts.extension, {})


class TaskFollower:
    """Follows one task of the agreed ``revision`` to its end (``follow``); ``request`` sends a
    request and returns its result, ``serve`` answers an input request. With ``listen`` (the
    revision has subscription streams), the task's status notifications are listened for while
    it is followed: ``woken`` (task id -> event, shared with what reads the notifications) wakes
    the poll at once instead of a poll interval later; a notification lost, or a server that
    sends none or refuses the stream, leaves the polling as it is."""

    def __init__(
        self,
        revision: str,
        request: Request,
        serve: Serve,
        timeout: float | None,
        max_rounds: int,
        listen: Listen | None = None,
        woken: dict[str, asyncio.Event] | None = None,
    ) -> None:
        self.facts: TasksFacts = TASKS[revision]
        self.types = TASK_TYPES[revision]
        self.revision = revision
        self.request = request
        self.serve = serve
        self.timeout = timeout
        self.max_rounds = max_rounds
        self.listen = listen if self.types.listen_filter is not None else None
        self.woken = woken if woken is not None else {}

    @classmethod
    def of(
        cls,
        revision: str | None,
        request: Request,
        serve: Serve,
        timeout: float | None,
        max_rounds: int,
        listen: Listen | None = None,
        woken: dict[str, asyncio.Event] | None = None,
    ) -> TaskFollower | None:
        """The follower of tasks in ``revision``, or None where the extension is not."""
        if revision is None or revision not in TASKS or revision not in TASK_TYPES:
            return None
        return cls(revision, request, serve, timeout, max_rounds, listen, woken)

    def is_task(self, result: Any) -> bool:
        return type(result) is self.types.create_result

    async def follow(self, task: Any) -> Any:
        """The tool's result once ``task`` (the generated task result of the call) completes.
        A failed task raises ``ProtocolError`` with its error, a cancelled one -32603; past
        ``timeout`` seconds (from now) ``TimeoutError``; more than ``max_rounds`` input rounds
        -32603. Whenever this does not return the result, the task is cancelled on the server
        (unless it ended there)."""
        ended = False
        wake = asyncio.Event()
        # One event per task followed (a task id is the server's: one already followed here
        # is not followed twice over the same events).
        own = self.woken.setdefault(task.task_id, wake) is wake
        listening = asyncio.ensure_future(self._listen(task.task_id)) if own else None
        try:
            async with asyncio.timeout(self.timeout):
                result = await self._poll(task, wake if own else None)
                ended = True
                return result
        except _Ended as end:
            ended = True
            raise end.error from None
        except TimeoutError:
            raise TimeoutError(
                f"the task {task.task_id!r} did not end within {self.timeout} s"
            ) from None
        finally:
            if own:
                del self.woken[task.task_id]
            if listening is not None:
                listening.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listening
            if not ended:
                await self._cancel(task.task_id)

    async def _listen(self, task_id: str) -> None:
        """Listen for the task's status notifications until the server ends the stream (the
        task is over) or the follower stops; a refusal or a lost stream only means polling."""
        if self.listen is None or self.types.listen_filter is None:
            return
        member = self.types.listen_filter[0]
        with contextlib.suppress(ProtocolError, TimeoutError, ConnectionError, OSError):
            await self.listen({member: {self.facts.listen_filter: [task_id]}})

    async def _poll(self, task: Any, wake: asyncio.Event | None) -> Any:
        f, by_status = self.facts, self.types.by_status
        interval = task.poll_interval_ms
        rounds = 0
        while True:
            if wake is not None:
                wake.clear()  # a notification from now on is news to the get below
            current = await self.request(f.get, {f.task_id: task.task_id})
            t = type(current)
            if t is by_status[f.completed]:
                return current.result
            if t is by_status[f.failed]:
                error = current.error
                data = None if error.data is UNSET else error.data
                raise _Ended(ProtocolError(error.code, error.message, data))
            if t is by_status[f.cancelled]:
                raise _Ended(
                    ProtocolError(INTERNAL_ERROR, f"the server cancelled the task {task.task_id!r}")
                )
            if current.poll_interval_ms is not UNSET:
                interval = current.poll_interval_ms
            if t is by_status[f.input_required]:
                rounds += 1
                if rounds > self.max_rounds:
                    raise ProtocolError(
                        INTERNAL_ERROR,
                        f"the task {task.task_id!r} asked for input more than "
                        f"{self.max_rounds} times",
                    )
                answers = {
                    name: await self.serve(self._asked(name, asked))
                    for name, asked in current.input_requests.items()
                }
                await self.request(f.update, {f.task_id: task.task_id, f.input_responses: answers})
                continue  # what the answers changed is seen at once
            wait = DEFAULT_POLL_INTERVAL if interval is UNSET else interval / 1000
            if wake is None:
                await asyncio.sleep(max(wait, MIN_POLL_INTERVAL))
                continue
            with contextlib.suppress(TimeoutError):  # the poll interval, or a notification
                async with asyncio.timeout(max(wait, MIN_POLL_INTERVAL)):
                    await wake.wait()

    def _asked(self, name: str, asked: Any) -> RequestReceived:
        """One input request of the task as the request event the client's handlers answer."""
        return RequestReceived(
            id=name,
            method=asked.method,
            params=getattr(asked, "params", None),
            message=asked,
            revision=self.revision,
        )

    async def _cancel(self, task_id: str) -> None:
        """Ask the server to cancel the task (bounded by ``timeout``; a failure is ignored: the
        call has already failed or been cancelled)."""
        with contextlib.suppress(ProtocolError, TimeoutError, ConnectionError, OSError):
            await asyncio.wait_for(
                asyncio.shield(self.request(self.facts.cancel, {self.facts.task_id: task_id})),
                self.timeout,
            )


class _Ended(Exception):
    """The task ended on the server without a result: its error (nothing to cancel)."""

    def __init__(self, error: ProtocolError) -> None:
        super().__init__(error.message)
        self.error = error
