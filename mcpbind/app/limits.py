"""The bounds of what clients can make an App hold."""

from __future__ import annotations

import msgspec

__all__ = ["Limits"]


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds of what clients can make a server hold (each past its bound is an error)."""

    page_size: int = 100  # items per list page (tools, resources, templates, prompts)
    in_flight: int = 256  # requests being answered at once, over every connection
    input_rounds: int = 8  # rounds of input one multi-round-trip request may take
    subscriptions: int = 1000  # resource URIs one connection may subscribe to
    listeners: int = 1024  # open subscription streams (2026-07-28 subscriptions/listen)
    listen_seconds: float = 300.0  # how long a subscription stream stays open before it ends
