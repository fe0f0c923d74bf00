"""What a session's ``receive`` reports: one event class per thing that happened on the wire.

Payloads (``params``, ``result``, ``message``) are the generated classes of the revision the
message travelled in, the same in every revision: a request is a ``RequestReceived`` with its
``id`` whether or not that revision's generated request class carries the id itself.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from .errors import ProtocolError, UnsupportedRevision

__all__ = [
    "ANSWERS",
    "ErrorReceived",
    "Event",
    "InputRequired",
    "Initialized",
    "MessageRejected",
    "Negotiated",
    "NegotiationFailed",
    "NotificationReceived",
    "PingReceived",
    "ProgressReceived",
    "RequestCancelled",
    "RequestReceived",
    "ResponseDropped",
    "ResultReceived",
    "TaskCreated",
]

RequestId = Union[str, int]  # noqa: UP007


class _Event(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    pass


class Negotiated(_Event, frozen=True):
    """Both sides agreed on ``revision``. On a client: the handshake result arrived (``result``
    is the initialize or discover result); on a server: it answered the handshake. ``peer``
    holds what the other side advertised: its capabilities and implementation info (``None``
    where the handshake carries none)."""

    revision: str
    capabilities: Any  # the peer's capabilities, a generated Struct of ``revision``
    info: Any  # the peer's Implementation, or None
    result: Any = None  # the handshake result (client side)


class NegotiationFailed(_Event, frozen=True):
    """No revision both sides speak, or the server's answer to the handshake could not be read;
    ``error`` says which, and names both sides' lists. The session is then in state ``"failed"``
    and refuses to send."""

    error: UnsupportedRevision


class Initialized(_Event, frozen=True):
    """The client said it is ready (the initialized notification); the server may now send."""


class RequestReceived(_Event, frozen=True):
    """The peer sent a request; answer it with ``respond(id, result)``."""

    id: RequestId
    method: str
    params: Any  # the generated params Struct, or UNSET
    message: Any  # the generated request Struct
    revision: str


class NotificationReceived(_Event, frozen=True):
    """The peer sent a notification the session does not handle itself."""

    method: str
    params: Any
    message: Any
    revision: str


class ResultReceived(_Event, frozen=True):
    """A result answering the request ``id``, of the precise result class of ``method``."""

    id: RequestId
    method: str
    result: Any


class ErrorReceived(_Event, frozen=True):
    """An error response to the request ``id`` (``method`` is None when the id is unknown)."""

    id: RequestId | None
    method: str | None
    code: int
    message: str
    data: Any = None


class TaskCreated(_Event, frozen=True):
    """A task-augmented request was accepted as a task: poll it by ``task_id``."""

    id: RequestId
    method: str
    task_id: str
    result: Any


class InputRequired(_Event, frozen=True):
    """The server needs input before it can answer ``method``: answer with
    ``client.answer(event, responses)``, which retries the request with them."""

    id: RequestId
    method: str
    params: Any  # the params the request was sent with
    input_requests: Any  # name -> generated input request, or UNSET
    request_state: Any  # opaque state to send back, or UNSET
    result: Any

    def asked(self, revision: str) -> dict[str, RequestReceived]:
        """Each input request by its name (the key of its response in ``client.answer``), as
        the request event a client already answers (its ``id`` that name), in ``revision``, the
        revision agreed."""
        return {
            name: RequestReceived(
                id=name,
                method=asked.method,
                params=getattr(asked, "params", None),
                message=asked,
                revision=revision,
            )
            for name, asked in (self.input_requests or {}).items()
        }


class ProgressReceived(_Event, frozen=True):
    """Progress on the request ``id`` (None when the token matches no request in flight)."""

    id: RequestId | None
    token: str | int
    progress: float
    total: float | None = None
    message: str | None = None


class RequestCancelled(_Event, frozen=True):
    """The peer cancelled the request ``id``: it will not read a response to it."""

    id: RequestId
    reason: str | None = None


class ResponseDropped(_Event, frozen=True):
    """A response arrived for the request ``id`` after this side cancelled it; it was dropped."""

    id: RequestId
    method: str


class PingReceived(_Event, frozen=True):
    """The peer pinged; the session has already answered."""

    id: RequestId


class MessageRejected(_Event, frozen=True):
    """A message from the peer broke the protocol. ``error`` says what, and ``sender`` which
    side sent it; ``answered`` is true when an error response to it was queued."""

    error: ProtocolError
    sender: str
    answered: bool = False


Event = Union[  # noqa: UP007
    Negotiated,
    NegotiationFailed,
    Initialized,
    RequestReceived,
    NotificationReceived,
    ResultReceived,
    ErrorReceived,
    TaskCreated,
    InputRequired,
    ProgressReceived,
    RequestCancelled,
    ResponseDropped,
    PingReceived,
    MessageRejected,
]

# The events that answer a request this side sent: whichever of these carries its id settles it.
ANSWERS = (ResultReceived, ErrorReceived, InputRequired, TaskCreated)
