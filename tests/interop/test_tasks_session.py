"""A 2025-11-25 session with server-everything using tasks both ways, recorded live
(``tasks_recorder.py``): every message the server sends decodes precisely on our client, and
``mcpbind validate`` finds nothing in the whole transcript (task replies included)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402
import tasks_recorder  # noqa: E402

from mcpbind.validate import validate_lines  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


def test_a_live_session_with_tasks_both_ways_validates() -> None:
    if shutil.which("node") is None or not driver.EVERYTHING.exists():
        pytest.fail(
            "server-everything is not installed: run `make interop` (npm ci in tests/interop)"
        )
    s = tasks_recorder.record()
    assert s.violations == []
    assert {"sampling/createMessage", "elicitation/create", "tasks/get", "tasks/result"} <= set(
        s.server_requests
    )
    tasked = {
        (e["from"], e["message"]["method"])
        for e in s.transcript
        if "task" in e["message"].get("params", {})
    }
    assert tasked == {
        ("client", "tools/call"),
        ("server", "sampling/createMessage"),
        ("server", "elicitation/create"),
    }
    lines = [json.dumps(e["message"]) for e in s.transcript]
    assert [str(f) for f in validate_lines(lines, tasks_recorder.REVISION, strict=True)] == []
