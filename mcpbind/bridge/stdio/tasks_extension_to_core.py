"""Tasks across the stdio bridge, from a client of the tasks extension (the revision it extends)
to a server of the core revision's tasks it replaces: the stdio bridge's port of the translation
``bridge/tasks_extension_to_core.py`` holds (the reverse is ``tasks_core_to_extension.py``).

``StdioTaskBridge.between(bridge)`` is the translator when the two sides agreed on such a pair,
else None; ``Bridge`` asks it first. Its answers are written to the client's session (the
extension's, which no class of the client's revision has, as they are), the task's input
requests answered on the server's. What it asks of the bridge is ``StdioTaskHost``.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..._extensions import TASKS
from ...errors import ProtocolError
from ...events import TaskCreated
from ..tasks_extension_to_core import TaskBridge, TaskHost

__all__ = ["ClientFacing", "CrossedRequest", "StdioTaskBridge", "StdioTaskHost"]


class CrossedRequest(Protocol):
    """A client's request that crossed the bridge (``requests.Forwarded``)."""

    @property
    def id(self) -> Any: ...

    @property
    def method(self) -> str: ...

    @property
    def revision(self) -> str: ...


class ClientFacing(Protocol):
    """The session facing the client (``front.HeldFront``), as the translator answers on it."""

    @property
    def revision(self) -> str | None: ...

    def reject(self, error: ProtocolError) -> None:
        """Answer the request ``error.id`` with ``error``."""
        ...

    def respond_unchecked(self, request_id: Any, result: Any, read: bool = False) -> None:
        """Answer ``request_id`` with ``result`` as it is."""
        ...


class StdioTaskHost(TaskHost, Protocol):
    """What the stdio bridge's translator asks of the ``Bridge`` beyond ``TaskHost``."""

    @property
    def front(self) -> ClientFacing:
        """The session facing the client."""
        ...

    @property
    def max_in_flight(self) -> int: ...

    def quietly(self, call: Any, *args: Any) -> None:
        """``call(*args)``, a ``ProtocolError`` it raises logged."""
        ...

    def claim_forwarded(self, id: Any, revision: str) -> CrossedRequest | None:
        """The client's request forwarded as ``id``, no longer awaited by the bridge."""
        ...


class StdioTaskBridge(TaskBridge):
    """The translator of one stdio bridge (module docstring)."""

    bridge: StdioTaskHost

    @classmethod
    def between(cls, bridge: StdioTaskHost) -> StdioTaskBridge | None:
        """The translator for ``bridge`` once both sides agreed, or None when its client is not
        of a revision the tasks extension extends or its server not of the core revision whose
        tasks the extension replaces."""
        facts = TASKS.get(bridge.front.revision or "")
        if facts is None or facts.core is None or bridge.back.revision != facts.core:
            return None
        return cls(bridge, facts)

    def _created(self, e: TaskCreated) -> bool:
        up = self.bridge.claim_forwarded(e.id, self.client)
        if up is None:
            return False
        self._answer(up.id, self._made(e, up.revision, up.method), session=True)
        return True

    def limit(self) -> int:
        """The requests of the client it may hold at once (the bridge's ``max_in_flight``)."""
        return int(self.bridge.max_in_flight)

    def _respond(self, sid: Any, answer: Any) -> None:
        bridge = self.bridge
        if isinstance(answer, ProtocolError):
            bridge.quietly(bridge.back.respond_error, sid, answer.code, answer.message, answer.data)
        else:
            bridge.quietly(bridge.back.respond, sid, answer)

    def _answer(self, id: Any, result: dict[str, Any], session: bool = False) -> None:
        self.bridge.front.respond_unchecked(id, result, read=session)

    def _error(self, id: Any, error: ProtocolError) -> None:
        self.bridge.front.reject(ProtocolError(error.code, error.message, error.data, id))
