"""The defaults of the Streamable HTTP server's limits (``StreamableHTTPServer``'s options;
docs/limits.md says what a client gets past each). ``http_server`` names them too."""

from __future__ import annotations

MAX_BODY_SIZE = 4 * 1024 * 1024
BODY_TIMEOUT = 30.0
MAX_SESSIONS = 1024
SESSION_IDLE_TIMEOUT = 30 * 60.0
SESSION_EVICTABLE_AFTER = 60.0
# Seconds a worker's copy of a session in a shared store serves requests after the store last
# confirmed the session, without asking it again (a request a second per session and worker, not
# one each). Each ask restarts the session's idle time in the store as session_idle_timeout plus
# this, so a session never expires there sooner than session_idle_timeout after its last request;
# a DELETE on another worker reaches this one's copy at once (the store's channel), or at the
# next ask should that message be lost.
SESSION_RECHECK = 1.0
MAX_IN_FLIGHT = 128
MAX_QUEUED = 1000
RETRY_MS = 1000
RESUME_TIMEOUT = 30.0
# The tools whose x-mcp-header designations are kept to check Mcp-Param-* headers against.
MAX_DESIGNATED = 4096
