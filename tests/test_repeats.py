"""``mcpbind._repeats.Repeats``: lines about a peer's repeated misdeeds, the first of a kind said
at once, the others counted once per interval. The rate is read from an injected clock (no real
time is measured here); the gateway and the stdio bridge use it with real flooding peers
(tests/test_gateway_hostile.py, tests/test_bridge_hostile.py)."""

from __future__ import annotations

import asyncio

import pytest

from mcpbind._repeats import Repeats


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_line_of_a_kind_is_said_and_the_others_counted_per_interval() -> None:
    said: list[str] = []
    clock = Clock()
    repeats = Repeats(said.append, 10.0, clock=clock)
    for n in range(1000):
        repeats("dropped", f"dropped {n}")
        clock.now += 0.001
    repeats("other", "another kind")  # said at once: a kind of its own
    assert said == ["dropped 0", "another kind"]
    clock.now = 110.5  # the interval is over: the next line says the count, itself included
    repeats("dropped", "dropped 1000")
    assert said[2] == "dropped 1000 (and 1,000 more like it in the last 10.5 s)"
    clock.now = 115.0
    repeats("dropped", "dropped 1001")
    assert len(said) == 3  # counted in the new interval
    repeats.flush()
    assert said[3] == "dropped 1001 (and 1 more like it in the last 4.5 s)"
    assert len(said) == 4  # "another kind" had nothing more to count


def test_a_kind_quiet_for_an_interval_is_said_again_at_once() -> None:
    said: list[str] = []
    clock = Clock()
    repeats = Repeats(said.append, 10.0, clock=clock)
    repeats("dropped", "one")
    clock.now += 10.0
    repeats("dropped", "two")
    assert said == ["one", "two"]


def test_on_a_loop_the_count_is_said_when_the_interval_ends() -> None:
    said: list[str] = []
    woken: list[int] = []

    async def main() -> None:
        repeats = Repeats(said.append, 0.05, wake=lambda: woken.append(len(said)))
        for _ in range(100):
            repeats("dropped", "dropped")
        assert said == ["dropped"]
        for _ in range(200):  # a hang guard, not a timing check
            if len(said) == 2:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert said[0] == "dropped"
    assert said[1].startswith("dropped (and 99 more like it in the last ")
    assert woken == [2]


def test_an_interval_that_bounds_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="interval must be positive, not 0"):
        Repeats(print, 0)
