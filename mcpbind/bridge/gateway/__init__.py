"""``mcpbind bridge --listen``: the bridge as an HTTP gateway any MCP client can reach, each client
in its own revision, in front of one server of its own (docs/bridge.md, "The HTTP front").

The front is mcpbind's own HTTP servers on one port: ``StreamableHTTPServer`` (every revision) and
``SSEServer`` (HTTP+SSE, the transport of 2024-11-05 clients). Each request they hand over goes
down a ``Link``: a ``Crossing`` (the translations of the stdio bridge, shared) whose
``ClientSession`` talks to the server over an ``upstream`` transport: a child process per client
session (``--listen ... -- CMD``), or an MCP server over HTTP (``--upstream URL``).

- A client session of a revision with the initialize handshake gets a link of its own, opened on
  its first request with the client's capabilities and info and ended with the session (DELETE,
  idle expiry, the HTTP+SSE stream closed).
- Clients of the per-request ``_meta`` revisions have no session: their requests go down one link
  per client identity (its info, capabilities and authenticated principal), at most
  ``max_shared`` of them; the least recently used one with nothing in flight makes room.
- The server's handshake is learnt once, on the first request (a probe connection), and every
  client is answered from it in its own revision (``Face``).
- A server's own request (sampling, elicitation, roots) reaches a client that has the method as
  that request, and a client of a round-trip revision (which has none) as an input-required
  result of the request it belongs to; the client's retry carries the answer back (``link.Pending``).
- Nothing is lost: every request gets the server's answer or an error naming why (the server is
  gone, past ``max_in_flight``, the link could not open); a client that leaves cancels its
  requests on the server.

The package, by job: ``app`` (the ASGI application and its link table), ``link`` (one client's
link), ``front`` (the session facing a client), ``tasks_extension_to_core`` and
``tasks_core_to_extension`` (its tasks translations), ``relay`` (retries between processes),
``upstream`` (the transports to the server) and ``cli`` (the command-line glue).
"""

from __future__ import annotations

from ...transports.http_limits import MAX_IN_FLIGHT  # of one link: the HTTP server's own bound
from ..limits import INPUT_TIMEOUT
from .app import (
    CLIENT_INFO,
    DROPPED_WITHIN,
    MAX_DROPPED,
    MAX_SHARED,
    OPEN_TIMEOUT,
    Gateway,
    sse_revisions,
)
from .cli import GC_THRESHOLD, build, run, serving
from .link import Link
from .relay import MAX_RELAYED, RELAY_TIMEOUT

__all__ = [
    "CLIENT_INFO",
    "DROPPED_WITHIN",
    "GC_THRESHOLD",
    "INPUT_TIMEOUT",
    "MAX_DROPPED",
    "MAX_IN_FLIGHT",
    "MAX_RELAYED",
    "MAX_SHARED",
    "OPEN_TIMEOUT",
    "RELAY_TIMEOUT",
    "Gateway",
    "Link",
    "build",
    "run",
    "serving",
    "sse_revisions",
]
