"""The stdio bridge's session facing the client (``HeldFront``): it holds the client's handshake
until the server's is done, then answers it from what the server said."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ...errors import (
    ProtocolError,
)
from ...events import (
    Event,
)
from ...negotiate import negotiate
from ...session import ServerSession
from ..crossing import Edge
from ..limits import too_many

__all__ = ["Held", "HeldFront"]


class Held(msgspec.Struct, frozen=True, gc=False):
    """A handshake from the client, held until the server's handshake is done."""

    initialize: bool
    codec: Any
    speech: Any
    id: Any
    message: Any


class HeldFront(Edge, ServerSession):
    """The session facing the client: it holds the client's handshake until ``open`` (at most
    ``limit`` handshakes; more are refused)."""

    def __init__(self, revisions: Iterable[str], limit: int) -> None:
        super().__init__(revisions)
        self.held: list[Held] = []
        self.opened = False
        self.limit = limit

    def _on_initialize(self, codec: Any, sp: Any, id: Any, message: Any, events: Any) -> None:
        if self.opened or self._bound:
            super()._on_initialize(codec, sp, id, message, events)
        else:
            self._hold(Held(True, codec, sp, id, message))

    def _on_discover(self, codec: Any, sp: Any, id: Any, message: Any, events: Any) -> None:
        if self.opened:
            super()._on_discover(codec, sp, id, message, events)
        else:
            self._hold(Held(False, codec, sp, id, message))

    def _hold(self, held: Held) -> None:
        if len(self.held) < self.limit:
            self.held.append(held)
        else:
            self.reject(too_many(held.id, self.limit, "the client", "the server"))

    def open(self, capabilities: Any, info: Any, instructions: Any) -> list[Event]:
        """Answer the held handshakes with the server's capabilities, info and instructions."""
        self.capabilities, self.info, self.instructions = capabilities, info, instructions
        self.opened = True
        events: list[Event] = []
        for h in self.held:
            answer = self._on_initialize if h.initialize else self._on_discover
            answer(h.codec, h.speech, h.id, h.message, events)
        self.held.clear()
        return events

    def refuse(self, error: ProtocolError) -> None:
        """Answer the held handshakes with ``error``."""
        for h in self.held:
            self._out.append(
                h.codec.error_response(ProtocolError(error.code, error.message, error.data, h.id))
            )
        self.held.clear()

    def revision_of(self, held: Held) -> str | None:
        """The revision the client's held handshake will be answered in (None: none fits)."""
        if not held.initialize:
            return str(held.speech.revision)
        try:
            return negotiate(held.message.params.protocol_version, self._initialize_revisions)
        except ProtocolError:
            return None
