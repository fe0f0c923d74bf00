"""One await of the running task bounded in time: ``asyncio.timeout``'s decision without its
context manager, which costs tens of thousands of instructions in Python 3.11 (a client's
request waits under one; a server's body read in chunks under one)."""

from __future__ import annotations

import asyncio


class Deadline:
    """``asyncio.timeout(seconds)``'s work around one await of the running task, at a fraction
    of its cost (it is on every request): the task cancelled when the time runs out, and
    ``over`` deciding as ``asyncio.Timeout.__aexit__`` does whether the await's end is the
    deadline's (the caller raises ``TimeoutError``) or anything else's (it goes on)::

        deadline = Deadline(loop, seconds)
        try:
            result = await awaitable
        except BaseException as error:
            if deadline.over(error):
                raise TimeoutError from error
            raise
        deadline.over(None)
    """

    __slots__ = ("_cancelling", "_handle", "_task", "_expired")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("Timeout should be used inside a task")
        self._task = task
        self._expired = False
        # (the cancellations of the task already under way are not the deadline's)
        self._cancelling = task.cancelling()
        if seconds <= 0:  # (asyncio.Timeout: a deadline not in the future expires at once)
            self._handle: asyncio.Handle = loop.call_soon(self._expire)
        else:
            self._handle = loop.call_at(loop.time() + seconds, self._expire)

    def _expire(self) -> None:
        self._task.cancel()
        self._expired = True

    def over(self, error: BaseException | None) -> bool:
        """The await ended (``error``: with it): whether it ended by this deadline."""
        self._handle.cancel()
        if not self._expired:
            return False
        self._expired = False
        return self._task.uncancel() <= self._cancelling and isinstance(
            error, asyncio.CancelledError
        )
