"""Who hears of changes: the resource URIs each connection subscribed to (revisions with
``resources/subscribe``), the open subscription streams (revisions with ``subscriptions/listen``),
and the connections reached outside any request (``peers``: stdio and in-process connections, the
HTTP server's sessions)."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import msgspec
from msgspec import UNSET

from .._support import convert, meta_key
from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from .context import Exchange
from .limits import Limits
from .revision import Rev, fields, rev

__all__ = ["Subscriptions"]

# A subscription filter's attributes (generated ``SubscriptionFilter``) -> the feature role of
# the notifications each one asks for.
_FILTER = {
    "tools_list_changed": "tools_changed",
    "prompts_list_changed": "prompts_changed",
    "resources_list_changed": "resources_changed",
}
_SUBSCRIBED = "resource_subscriptions"


class _Listener(msgspec.Struct):
    exchange: Any
    wanted: frozenset[str]  # feature roles of the notifications it asked for
    uris: frozenset[str]
    meta: dict[str, Any]  # the _meta tagging each notification with the subscription


class Subscriptions:
    """The subscriptions of every connection of one App, within ``limits``. A peer (in
    ``peers``) has ``connections()``: the (session, notify) pairs it reaches."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.peers: weakref.WeakSet[Any] = weakref.WeakSet()
        # Per connection (a ServerSession), weakly: its state goes with its session.
        self._subscribed: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        self._listeners: dict[int, _Listener] = {}
        self._closing: asyncio.Event | None = None  # set when serving stops (one per run)

    @property
    def listening(self) -> int:
        """The subscription streams open now."""
        return len(self._listeners)

    async def subscribe(self, exchange: Exchange, r: Rev) -> Any:
        """The connection of ``exchange`` hears of updates of the resource its request names."""
        uris = self._subscribed.setdefault(exchange.session, set())
        if len(uris) >= self.limits.subscriptions:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: this connection subscribed to {len(uris)} resources (the limit)",
            )
        uris.add(exchange.params.uri)
        return {}

    async def unsubscribe(self, exchange: Exchange, r: Rev) -> Any:
        """It no longer does."""
        self._subscribed.get(exchange.session, set()).discard(exchange.params.uri)
        return {}

    async def listen(self, exchange: Exchange, r: Rev, offers: dict[str, bool]) -> Any:
        """A subscription stream: acknowledge what the server can deliver of the filter, then
        keep the request open (until the client cancels it, the server closes, or
        ``listen_seconds`` pass) for the notifications it asked for."""
        if len(self._listeners) >= self.limits.listeners:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Server busy: {len(self._listeners)} subscription streams are open (the limit)",
            )
        asked = exchange.params.notifications
        offered: dict[str, Any] = {}
        wanted = set()
        for attribute, role in _FILTER.items():
            if getattr(asked, attribute) is True and role in r.features and offers[role]:
                offered[attribute] = True
                wanted.add(role)
        uris: frozenset[str] = frozenset()
        subscribed = getattr(asked, _SUBSCRIBED)
        if subscribed is not UNSET and "resource_updated" in r.features:
            uris = frozenset(subscribed[: self.limits.subscriptions])
            offered[_SUBSCRIBED] = sorted(uris)
        ack = r.features["acknowledged"]
        tag_key = meta_key(r.module.METHODS[ack].params, "subscription_id")
        tag = {tag_key: exchange.id} if tag_key is not None else {}
        names = fields(type(asked))
        meta = fields(r.module.METHODS[ack].params)["meta"]
        notifications = {names[a]: v for a, v in offered.items()}
        exchange.notify(ack, {"notifications": notifications, meta: tag})
        listener = _Listener(exchange, frozenset(wanted), uris, {meta: tag})
        self._listeners[id(listener)] = listener
        if self._closing is None:
            self.open()
        assert self._closing is not None
        try:
            # awaited in this task (not wait_for's own): a cancelled stream is gone at once
            async with asyncio.timeout(self.limits.listen_seconds):
                await self._closing.wait()
        except TimeoutError:
            pass
        finally:
            del self._listeners[id(listener)]
        cls = r.facts.wires[exchange.method].result
        names = fields(cls)
        key = meta_key(cls, "subscription_id")
        data: dict[str, Any] = {names["meta"]: {key: exchange.id} if key is not None else {}}
        kinds = r.facts.result_kinds
        if kinds is not None:
            data[kinds.key] = kinds.own
        return convert(data, cls)

    def open(self) -> None:
        """Serving starts (in the running event loop)."""
        self._closing = asyncio.Event()

    def close(self) -> None:
        """End every subscription stream (the server is shutting down)."""
        if self._closing is not None:
            self._closing.set()

    def notify(
        self, role: str, params: dict[str, Any] | None = None, uri: str | None = None
    ) -> int:
        """Send the ``role`` notification to every connection that takes it: subscribed to
        ``uri`` when given; the number of connections reached."""
        reached = 0
        for peer in list(self.peers):
            for session, send in peer.connections():
                r = rev(session.revision) if session.revision else None
                if r is None or session.state != "ready" or role not in r.features:
                    continue
                if uri is not None and uri not in self._subscribed.get(session, ()):
                    continue
                if r.meta is not None:
                    continue  # per-request revisions hear of changes on their subscription stream
                try:
                    send(r.features[role], params)
                except ProtocolError:
                    continue
                reached += 1
        for listener in list(self._listeners.values()):
            if uri is not None and uri not in listener.uris:
                continue
            if uri is None and role not in listener.wanted:
                continue
            exchange = listener.exchange
            r = rev(exchange.revision)
            method = r.features.get(role)
            if method is None:
                continue
            try:
                exchange.notify(method, {**(params or {}), **listener.meta})
            except ProtocolError:
                continue
            reached += 1
        return reached
