"""``mcpbind bridge --listen``'s command-line glue: the gateway one process serves (``build``,
``serving``), the client revisions of its HTTP+SSE front, and ``run``."""

from __future__ import annotations

import functools
import gc
from typing import TYPE_CHECKING, Any

from ...auth.client import OAuthClient

if TYPE_CHECKING:
    pass

from .app import Gateway, sse_revisions

__all__ = ["GC_THRESHOLD", "build", "run", "serving", "sse_revisions"]


GC_THRESHOLD = 10_000  # allocations between the serving process's young collections (``run``)


def build(options: dict[str, Any], auth_server: str | None = None) -> Gateway:
    """The application one gateway process serves (``--workers`` builds one in each):
    ``Gateway(**options)``, with its Streamable HTTP front protected by ``auth_server``'s tokens
    when given (docs/auth.md; the HTTP+SSE front, which has no authorization, is then off), and
    its own client credentials for the upstream when ``options["upstream_client"]`` holds an
    ``(id, secret)`` pair."""
    options = dict(options)
    client = options.pop("upstream_client", None)
    if client is not None:
        # Built here, in the process serving: an OAuthClient holds a lock of its event loop.
        from ...auth.grants import ClientCredentials

        options["upstream_auth"] = OAuthClient(ClientCredentials(*client))
    if auth_server is not None:
        from ...auth.resource import ResourceServer

        options["auth"] = ResourceServer(options.pop("resource"), auth_server)
    else:
        options.pop("resource", None)
    return Gateway(**options)


def run(host: str, port: int, options: dict[str, Any], *, workers: int = 1, **extra: Any) -> None:
    """``mcpbind bridge --listen HOST:PORT``: serve ``build(options, ...)`` until interrupted,
    with the connection bounds of ``mcpbind.transports.serving`` (``workers`` processes on one
    port, each with its own gateway; they share sessions through the ``store``)."""
    from ...transports.serving import serve

    factory = functools.partial(serving, options, extra.pop("auth_server", None))
    serve(
        factory() if workers == 1 else factory,
        host,
        port,
        workers=workers,
        log_level="warning",
        **extra,
    )


def serving(options: dict[str, Any], auth_server: str | None) -> Gateway:
    """``build`` in the process that serves it, with the cyclic garbage collector told what a
    gateway's heap is: what exists once it is built (six revisions' bindings, its libraries)
    lives as long as the process, so it is frozen out of every collection (``gc.freeze``), and
    collections start after ``GC_THRESHOLD`` allocations rather than 700. Under load the
    collector otherwise spent about 6% of a gateway's CPU (perf, 16 connections), walking that
    heap again and again while nothing in it was garbage. What a request allocates and drops
    is freed by its reference counts; the collector only finds cycles, later."""
    gateway = build(options, auth_server)
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    gc.freeze()
    return gateway
