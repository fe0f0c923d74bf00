"""The HTTP client against a server that answers every request with a bare 401 (a challenge
naming no metadata, and no metadata anywhere): the client ends with one clear
AuthorizationError at once, instead of asking again and again (it used to spin at 100 % CPU).

The server is a real HTTP server (uvicorn) in its own process."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpbind import ClientSession
from mcpbind.auth import AuthorizationCode, AuthorizationError, OAuthClient
from mcpbind.transports.http_client import StreamableHTTPClient
from tests._net import free_port, wait_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[2]

# What a protected server without metadata answers: 401, a bare challenge, a JSON error body.
BARE_401 = """
import sys, uvicorn
from starlette.responses import JSONResponse

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    response = JSONResponse(
        {"error": "invalid_token", "error_description": "Missing Authorization header"},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )
    await response(scope, receive, send)

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


@pytest.fixture(scope="module")
def bare_401() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", BARE_401, str(port)])
    try:
        wait_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def connect(url: str, revision: str, auth: OAuthClient | None) -> float:
    """Connect and return the CPU seconds this process spent until the error came."""
    session = ClientSession(revisions=(revision,), info={"name": "t", "version": "1"})
    cpu = time.process_time()
    options = {"auth": auth} if auth is not None else {}
    async with StreamableHTTPClient(url, session, **options) as client:
        with pytest.raises(AuthorizationError) as caught:
            # Within a second: the old client was still asking when this timed out.
            await asyncio.wait_for(client.connect(), 1.0)
    assert caught.value.status == 401
    assert "401" in caught.value.message
    return time.process_time() - cpu


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_a_bare_401_without_auth_ends_in_one_clear_error(bare_401: str, revision: str) -> None:
    spent = asyncio.run(connect(bare_401, revision, None))
    assert spent < 0.5  # the CPU stayed idle: no loop of requests


def test_a_bare_401_with_auth_ends_in_one_clear_error(bare_401: str) -> None:
    async def never(url: str) -> str:
        raise AssertionError("no metadata, so no authorization request")

    auth = OAuthClient(AuthorizationCode(never))
    spent = asyncio.run(connect(bare_401, "2026-07-28", auth))
    assert spent < 0.5


def test_the_example_client_exits_with_the_error(bare_401: str) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "everything_client.py"), bare_401],
        env={**os.environ, "MCP_CONFORMANCE_PROTOCOL_VERSION": "2026-07-28"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 1
    assert "authorization failed: HTTP 401" in done.stderr
    assert "without a usable challenge" in done.stderr
    assert done.stderr.count("\n") == 1  # one line: the error, no traceback
    assert after.ru_utime - before.ru_utime < 10  # the start-up, not a spin until killed
