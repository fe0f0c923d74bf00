"""`mcpbind bridge` in front of a real server that dies with requests in flight (`make interop`):
server-everything, killed as 1,000 calls reach it: each is answered, and so are the calls that
follow until the client closes its input.
(tests/test_bridge_hostile.py does the same and more with small failing servers.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import mcpbind
from mcpbind import events as ev

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
CONNECTION_CLOSED = -32000  # docs/bridge.md, "Limits and failures"


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux: /proc/PID/task/TID/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def call(client: mcpbind.ClientSession) -> object:
    """A call that server-everything answers after a minute."""
    arguments = {"duration": 60, "steps": 1}
    return client.request(
        "tools/call", {"name": "trigger-long-running-operation", "arguments": arguments}
    )


def test_server_everything_killed_with_1000_calls_in_flight() -> None:
    if not driver.EVERYTHING.exists():
        pytest.fail("server-everything is not installed: run `make interop-setup`")
    bridge = subprocess.Popen(
        [MCPBIND, "bridge", "--", "node", str(driver.EVERYTHING), "stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert bridge.stdin is not None and bridge.stdout is not None and bridge.stderr is not None
    errors: list[bytes] = []
    threading.Thread(target=lambda: errors.extend(bridge.stderr or ()), daemon=True).start()
    client = mcpbind.ClientSession("2025-11-25", info={"name": "hostile", "version": "1"})

    def send() -> None:
        assert bridge.stdin is not None
        bridge.stdin.write(b"".join(m + b"\n" for m in client.data_to_send()))
        bridge.stdin.flush()

    def read() -> list[ev.Event]:
        assert bridge.stdout is not None
        line = bridge.stdout.readline()
        assert line, f"the bridge closed its output: {b''.join(errors).decode()}"
        return client.receive(line)

    try:
        client.connect()
        send()
        while client.state != "ready":
            read()
        send()  # initialized
        (server,) = children(bridge.pid)
        calls = [call(client) for _ in range(1000)]
        send()
        os.kill(server, signal.SIGKILL)  # the calls in its pipe, in the bridge, on their way
        answers: dict[object, ev.Event] = {}
        while not all(i in answers for i in calls):
            answers |= {e.id: e for e in read() if isinstance(e, ev.ErrorReceived)}
        later = [call(client) for _ in range(100)]  # the server is known to be gone
        send()
        while not all(i in answers for i in later):
            answers |= {e.id: e for e in read() if isinstance(e, ev.ErrorReceived)}
        got = {e.code: e.message for e in answers.values() if isinstance(e, ev.ErrorReceived)}
        assert got == {
            CONNECTION_CLOSED: f"Connection closed: the server exited (status {-signal.SIGKILL})"
        }
    finally:
        bridge.stdin.close()
        status = bridge.wait(30)
    assert status == 128 + signal.SIGKILL  # as a shell reports a process a signal ended
