"""The gateway's sessions facing its clients: ``Face``, what every client is told of the server
(its handshake, learnt once, crossed into each client revision), and ``GatewayFront``, the
session of one client (or one stateless POST) that answers the handshake with it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import (
    ProtocolError,
    UnsupportedRevision,
)
from ...events import (
    Event,
    Negotiated,
    NegotiationFailed,
)
from ...negotiate import negotiate
from ...session import ServerSession
from ..crossing import Crossing
from .tasks_extension_to_core import TaskAnswer

if TYPE_CHECKING:
    pass

from .link import Link

__all__ = ["Face", "GatewayFront"]


class Face:
    """What every client is told of the server: its handshake (learnt once, ``learn``), crossed
    into each client revision on first use, with the losses logged once. A revision whose
    handshake would lose capabilities under --strict is refused (``of`` raises)."""

    def __init__(self, crossing: Crossing) -> None:
        self.crossing = crossing
        self.negotiated: Negotiated | None = None
        self._faces: dict[str, tuple[Any, Any, Any] | ProtocolError] = {}

    def learn(self, negotiated: Negotiated) -> None:
        self.negotiated = negotiated
        self._faces.clear()

    def of(self, revision: str) -> tuple[Any, Any, Any]:
        """(capabilities, info, instructions) for a client of ``revision``."""
        found = self._faces.get(revision)
        if found is None:
            assert self.negotiated is not None  # the gateway learns it before serving
            try:
                found = self.crossing.server_face(self.negotiated, revision)
            except ProtocolError as error:
                found = error
            self._faces[revision] = found
        if isinstance(found, ProtocolError):
            raise ProtocolError(found.code, found.message, found.data)
        return found


class GatewayFront(ServerSession):
    """The session facing one client (or one stateless POST): its handshake is answered with the
    server's ``Face`` in the agreed revision; ``client`` keeps what its initialize said of it."""

    def __init__(self, *args: Any, face: Face, **options: Any) -> None:
        super().__init__(*args, **options)
        self.face = face
        self.client: tuple[Any, Any, Any] | None = None  # (capabilities, info, speech)
        self.link: Link | None = None  # the link its requests go down, once there is one

    def _on_initialize(self, codec: Any, sp: Any, id: Any, message: Any, events: Any) -> None:
        if not self._bound:
            try:
                revision: str | None = negotiate(
                    message.params.protocol_version, self._initialize_revisions
                )
            except ProtocolError:
                revision = None  # answered by the session: no revision fits
            if revision is not None and not self._face(revision, codec, id, events):
                return
            self.client = (message.params.capabilities, message.params.client_info, sp)
        super()._on_initialize(codec, sp, id, message, events)

    def _result(self, incoming: Any, result: Any) -> Any:
        if type(result) is TaskAnswer:  # the extension's, which the revision has no class for
            return dict(result)
        return super()._result(incoming, result)

    def _on_discover(self, codec: Any, sp: Any, id: Any, message: Any, events: Any) -> None:
        if self._face(sp.revision, codec, id, events):
            super()._on_discover(codec, sp, id, message, events)

    def _face(self, revision: str, codec: Any, id: Any, events: list[Event]) -> bool:
        """Take the server's face in ``revision``; False (the handshake answered with the
        error) when it cannot be shown there without loss (--strict)."""
        try:
            self.capabilities, self.info, self.instructions = self.face.of(revision)
        except ProtocolError as error:
            failed = UnsupportedRevision(revision, list(self.revisions), id, error.code)
            failed.message = error.message
            failed.args, failed.data = (error.message,), error.data
            self._out.append(codec.error_response(failed))
            events.append(NegotiationFailed(error=failed))
            return False
        return True
