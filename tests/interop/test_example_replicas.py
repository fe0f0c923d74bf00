"""Servers started apart (examples/everything_server.py on two ports, one Redis) serve one
client's 2026-07-28 input rounds whichever of them each request reaches, when they sign request
states with one key (``--state-key-file``); without it, each refuses the other's state."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_http_workers import ACCEPT, Worker  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

NAME = "test_input_required_result_elicitation"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
HEADERS = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}


def post(url: str, params: dict[str, Any]) -> Any:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    answer = httpx.post(url, json=message, headers={**HEADERS, "mcp-name": NAME}, timeout=20)
    return answer.json()


def round_across(first: Worker, second: Worker) -> Any:
    """Ask on ``first``, retry with the answer and the request state on ``second``."""
    asked = post(first.url, {"name": NAME, "arguments": {}, "_meta": META})["result"]
    assert asked["resultType"] == "input_required"
    answers = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    retry = {"inputResponses": answers, "requestState": asked["requestState"]}
    return post(second.url, {"name": NAME, "arguments": {}, "_meta": META, **retry})


def test_servers_started_apart_take_each_others_request_states(
    example_redis: str, tmp_path: Path
) -> None:
    key = tmp_path / "state.key"
    key.write_bytes(secrets.token_bytes(32))
    a = Worker(example_redis, "--state-key-file", str(key))
    b = Worker(example_redis, "--state-key-file", str(key))
    try:
        assert round_across(a, b)["result"]["content"][0]["text"] == "Hello, Ada!"
        assert round_across(b, a)["result"]["content"][0]["text"] == "Hello, Ada!"
    finally:
        a.stop()
        b.stop()


def test_without_a_shared_key_the_other_server_refuses_the_state(example_redis: str) -> None:
    a, b = Worker(example_redis), Worker(example_redis)
    try:
        error = round_across(a, b)["error"]
        assert error["code"] == -32602 and "requestState" in error["message"]
    finally:
        a.stop()
        b.stop()


def test_a_short_key_file_is_refused_at_start(example_redis: str, tmp_path: Path) -> None:
    key = tmp_path / "short.key"
    key.write_bytes(b"too short")
    with pytest.raises(RuntimeError, match="9 bytes; a key needs 32 or more"):
        Worker(example_redis, "--state-key-file", str(key))
