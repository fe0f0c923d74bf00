"""``transports.deadline.Deadline`` (each HTTP request's bound in ``HttpLink.call``) decides as ``asyncio.timeout``
does: the same outcome, exception and task state in each case of an await's end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mcpbind.transports.deadline import Deadline


async def with_timeout(awaitable: Awaitable[Any], seconds: float) -> Any:
    async with asyncio.timeout(seconds):
        return await awaitable


async def with_deadline(awaitable: Awaitable[Any], seconds: float) -> Any:
    deadline = Deadline(asyncio.get_running_loop(), seconds)
    try:
        result = await awaitable
    except BaseException as error:
        if deadline.over(error):
            raise TimeoutError from error
        raise
    deadline.over(None)
    return result


Bound = Callable[[Awaitable[Any], float], Awaitable[Any]]


async def outcome(bound: Bound, case: str) -> tuple[str, int]:
    """What ``case`` ends in under ``bound``: the result or exception's name, and how many
    cancellations of the task are left pending after it."""
    loop = asyncio.get_running_loop()
    holder: dict[str, Any] = {}

    async def body() -> Any:
        task = asyncio.current_task()
        assert task is not None
        holder["task"] = task
        if case == "answer":
            future = loop.create_future()
            loop.call_later(0.01, future.set_result, "answer")
            result = await bound(future, 5)
        elif case == "late":
            result = await bound(asyncio.sleep(5), 0.02)
        elif case == "now":
            result = await bound(asyncio.sleep(5), 0)
        elif case == "cancelled":
            loop.call_later(0.01, task.cancel)
            result = await bound(asyncio.sleep(5), 5)
        elif case == "both":  # the deadline and someone else's cancel in the same turn
            when = loop.time() + 0.02
            loop.call_at(when, task.cancel)
            result = await bound(asyncio.sleep(5), when - loop.time())
        elif case == "raises":
            future = loop.create_future()
            loop.call_later(0.01, future.set_exception, ValueError("no"))
            result = await bound(future, 5)
        elif case == "inside a cancel":  # the task is being cancelled already, caught
            try:
                loop.call_soon(task.cancel)
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                result = await bound(asyncio.sleep(5), 0.02)
        await asyncio.sleep(0.05)  # a deadline left behind would cancel the task here
        return result

    task = asyncio.ensure_future(body())
    try:
        found = repr(await task)
    except BaseException as error:
        found = type(error).__name__
    return found, holder["task"].cancelling()


@pytest.mark.parametrize(
    "case", ["answer", "late", "now", "cancelled", "both", "raises", "inside a cancel"]
)
def test_a_deadline_ends_an_await_as_asyncio_timeout_does(case: str) -> None:
    async def main() -> tuple[Any, Any]:
        return await outcome(with_timeout, case), await outcome(with_deadline, case)

    expected, found = asyncio.run(main())
    assert found == expected
    if case == "late":
        assert found[0] == "TimeoutError"
    if case == "answer":
        assert found[0] == "'answer'"


def test_a_deadline_needs_a_task() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError):
            Deadline(loop, 1)
    finally:
        loop.close()
