"""Key refresh of the resource server (``ResourceServer``, docs/auth.md) against a real
authorization server of the test's own (tests/interop/authserver.py in its own process) whose
JWKS endpoint the test makes fail, answer slowly or drip its body: tokens naming made-up key ids
cost at most one fetch of the key set per ``jwks_refresh_interval``, whether it succeeds or
fails; requests that need the set meanwhile share the one fetch in flight; a token whose key is
cached never waits on a fetch; and a fetch ends at ``timeout`` however its server answers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey
from starlette.responses import Response

from mcpbind.auth.resource import AuthInfo, ResourceServer
from tests._net import free_port, wait_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

SCRIPT = Path(__file__).resolve().parent / "authserver.py"
RESOURCE = "http://127.0.0.1:9/mcp"  # (only named: tokens are for it, nothing is served there)


@pytest.fixture
def issuer(tmp_path: Path) -> Iterator[str]:
    """An authorization server of this test's own (its JWKS is made to misbehave): its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(port), str(tmp_path / "key.pem")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def jwks(issuer: str, **mode: Any) -> int:
    """Set the JWKS endpoint's behaviour (none: as usual); how many times it was asked so far."""
    async with httpx.AsyncClient() as http:
        (await http.post(f"{issuer}/jwks/mode", json=mode)).raise_for_status()
        return int((await http.get(f"{issuer}/jwks/count")).json()["count"])


async def good_token(issuer: str) -> str:
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{issuer}/token",
            auth=("app", "app-secret"),
            data={"grant_type": "client_credentials", "scope": "mcp:read", "resource": RESOURCE},
        )
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def made_up(issuer: str, count: int) -> list[str]:
    """Tokens with the right claims, each signed by a key of its own under a key id the
    authorization server never listed."""
    claims = {"iss": issuer, "aud": RESOURCE, "sub": "mallory", "exp": int(time.time()) + 3600}
    return [
        jwt.encode({"alg": "ES256", "kid": f"made-up-{n}"}, claims, ECKey.generate_key("P-256"))
        for n in range(count)
    ]


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def status(answer: AuthInfo | Response) -> int:
    return 200 if isinstance(answer, AuthInfo) else answer.status_code


def test_made_up_key_ids_cost_one_fetch_per_interval_when_the_key_set_fails(issuer: str) -> None:
    """The issue's run: the JWKS failing, 50 tokens with made-up key ids (25 at once, then 25
    one after the other) cost one fetch, not 50. Then with keys cached and the interval
    passed: the JWKS failing again, 50 more cost one fetch, and the good token still verifies
    from the cache."""

    async def run() -> tuple[int, list[int], int, list[int], int]:
        forged = made_up(issuer, 50)
        rs = ResourceServer(RESOURCE, issuer)  # jwks_refresh_interval 30 s
        before = await jwks(issuer, fail=True)
        answers = await asyncio.gather(*(rs.check(bearer(t)) for t in forged[:25]))
        answers += [await rs.check(bearer(t)) for t in forged[25:]]
        statuses = [status(a) for a in answers]
        failing = await jwks(issuer) - before
        # when to ask again: the rest of the 30 s interval, in whole seconds
        waits = {int(a.headers["retry-after"]) for a in answers if isinstance(a, Response)}
        assert waits and all(1 <= w <= 30 for w in waits), waits

        interval = 3.0
        rs = ResourceServer(RESOURCE, issuer, jwks_refresh_interval=interval)
        good = await good_token(issuer)
        assert status(await rs.check(bearer(good))) == 200  # the set fetched, and cached
        await asyncio.sleep(interval + 0.1)  # an unknown kid may cause a fetch again
        before = await jwks(issuer, fail=True)
        forged = made_up(issuer, 50)
        later = [
            status(a) for a in await asyncio.gather(*(rs.check(bearer(t)) for t in forged[:25]))
        ]
        later += [status(await rs.check(bearer(t))) for t in forged[25:]]
        cached = status(await rs.check(bearer(good)))
        return failing, statuses, await jwks(issuer) - before, later, cached

    failing, statuses, refetched, later, cached = asyncio.run(run())
    assert failing == 1, failing
    assert statuses == [503] * 50  # the authorization server's keys cannot be had
    assert refetched == 1, refetched
    # The 25 that awaited the failed fetch: 503; the 25 after it, within the interval: their
    # key ids are not in the cached set, which is not fetched again.
    assert later == [503] * 25 + [401] * 25, later
    assert cached == 200


def test_a_slow_key_set_delays_only_the_requests_that_need_it(issuer: str) -> None:
    """The JWKS answering after 4 s: a token whose key is cached is answered at once while 10
    made-up key ids await the one fetch they share (one fetch, all answered when it ends); the
    JWKS slow and failing: 10 more share one fetch too (not one after the other)."""

    async def run() -> dict[str, Any]:
        rs = ResourceServer(RESOURCE, issuer, jwks_refresh_interval=0.5)
        good = await good_token(issuer)
        assert status(await rs.check(bearer(good))) == 200  # the set cached
        await asyncio.sleep(0.6)
        before = await jwks(issuer, delay=4)
        waiting = [asyncio.ensure_future(rs.check(bearer(t))) for t in made_up(issuer, 10)]
        await asyncio.sleep(0.5)  # the fetch is under way
        answer = await rs.check(bearer(good))
        still_waiting = sum(not w.done() for w in waiting)
        unknown = [status(a) for a in await asyncio.gather(*waiting)]
        shared = await jwks(issuer) - before

        await asyncio.sleep(0.6)
        before = await jwks(issuer, delay=2, fail=True)
        started = time.monotonic()
        failed = [
            status(a)
            for a in await asyncio.gather(*(rs.check(bearer(t)) for t in made_up(issuer, 10)))
        ]
        return {
            "good": status(answer),
            "still_waiting": still_waiting,
            "unknown": unknown,
            "shared": shared,
            "failed": failed,
            "failed_fetches": await jwks(issuer) - before,
            "failed_took": time.monotonic() - started,
        }

    seen = asyncio.run(run())
    assert seen["good"] == 200
    assert seen["still_waiting"] == 10  # the good token was answered before the fetch ended
    assert seen["unknown"] == [401] * 10 and seen["shared"] == 1, seen
    assert seen["failed"] == [503] * 10 and seen["failed_fetches"] == 1, seen
    assert seen["failed_took"] < 10, seen  # one 2 s fetch, not ten in a row


def test_a_fetch_ends_at_its_timeout_however_the_server_answers(issuer: str) -> None:
    """The JWKS sending its body a byte every 0.5 s (each read well within the HTTP client's
    timeout, the whole far beyond it): the fetch ends at ``timeout`` with 503, and the next
    request within the refresh interval does not fetch again."""

    async def run() -> tuple[Response | AuthInfo, float, int, int]:
        rs = ResourceServer(RESOURCE, issuer, timeout=2.0)
        good = await good_token(issuer)
        before = await jwks(issuer, drip=0.5)
        started = time.monotonic()
        answer = await rs.check(bearer(good))
        took = time.monotonic() - started
        again = status(await rs.check(bearer(good)))
        return answer, took, again, await jwks(issuer) - before

    answer, took, again, fetches = asyncio.run(run())
    assert status(answer) == 503 and took < 6, (answer, took)
    assert b"did not come within 2 s" in answer.body
    assert again == 503 and fetches == 1
