"""``mcpbind validate``: every message of a transcript checked, results included, each finding
with its line, JSON-RPC error code and JSON path; unreadable input refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mcpbind.cli import main
from mcpbind.validate import Finding, validate_lines

SESSIONS = Path(__file__).resolve().parent.parent / "bench" / "sessions"


def msg(**fields: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", **fields})


def initialize(
    revision: str,
    client_caps: dict[str, Any] | None = None,
    server_caps: dict[str, Any] | None = None,
) -> list[str]:
    return [
        msg(
            id=0,
            method="initialize",
            params={
                "protocolVersion": revision,
                "capabilities": client_caps or {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        ),
        msg(
            id=0,
            result={
                "protocolVersion": revision,
                "capabilities": {"tools": {}} if server_caps is None else server_caps,
                "serverInfo": {"name": "s", "version": "1"},
            },
        ),
        msg(method="notifications/initialized"),
    ]


CLEAN = initialize("2024-11-05")
CALL = msg(id=1, method="tools/call", params={"name": "echo", "arguments": {}})


def run(
    tmp_path: Path, lines: list[str], *args: str, revision: str = "2024-11-05"
) -> tuple[int, str]:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", "--revision", revision, *args, str(f)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    messages = sum(1 for line in lines if line.strip())
    clean = f"{f}: {messages} message(s), no findings ({revision}{', strict' if args else ''})\n"
    assert result.stderr == (
        f"{result.stdout.count(chr(10))} finding(s)\n" if result.stdout else clean
    )
    return result.exit_code, result.stdout


def findings(
    lines: list[str], revision: str = "2024-11-05", strict: bool = False
) -> list[tuple[int, int, str]]:
    return [(f.line, f.code, f.path) for f in validate_lines(lines, revision, strict=strict)]


# -- the command ---------------------------------------------------------------------------------


def test_clean_transcript_exits_0(tmp_path: Path) -> None:
    assert run(tmp_path, CLEAN, "--strict") == (0, "")


def test_findings_exit_1_with_line_code_and_path(tmp_path: Path) -> None:
    code, out = run(tmp_path, [*CLEAN, msg(id=2, method="tools/call", params={"name": 5})])
    assert code == 1
    assert out.startswith(
        "line 4: [-32602] $.params.name: Invalid params for 'tools/call' (MCP 2024-11-05)"
    )


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "NUL byte at offset 8"),
        (
            '{"jsonrpc":"2.0","method":"ping","id":"caf\xe9"}\n'.encode("latin-1"),
            "byte 0xe9 at offset 42 (line 1)",
        ),
        ('{"jsonrpc":"2.0"}'.encode("utf-16"), "NUL byte"),
    ],
)
def test_binary_or_non_utf8_input_is_one_line_and_exit_2(
    tmp_path: Path, data: bytes, why: str
) -> None:
    f = tmp_path / "t.bin"
    f.write_bytes(data)
    result = CliRunner().invoke(main, ["validate", "--revision", "2024-11-05", str(f)])
    assert result.exit_code == 2
    assert not isinstance(result.exception, UnicodeDecodeError)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "not a UTF-8 text transcript" in result.stderr and why in result.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(CLEAN))
    assert CliRunner().invoke(main, ["validate", "--revision", "1999-01-01", str(f)]).exit_code == 2
    assert (
        CliRunner()
        .invoke(main, ["validate", "--revision", "2024-11-05", str(tmp_path / "none")])
        .exit_code
        == 2
    )
    assert CliRunner().invoke(main, ["validate", str(f)]).exit_code == 2


# -- results are checked against the request they answer -----------------------------------------


def test_a_result_of_the_wrong_shape_is_a_finding(tmp_path: Path) -> None:
    code, out = run(tmp_path, [*CLEAN, CALL, msg(id=1, result={"content": 5})])
    assert code == 1
    assert out.startswith(
        "line 5: [-32602] $.result.content: Invalid result: the result of 'tools/call'"
    )


def test_ids_are_per_direction() -> None:
    # The server asks for roots (id 1) while the client's tools/call (id 1) is pending; the client
    # answers the server first (the latest request with that id), then the server answers it.
    roots = msg(id=1, method="roots/list")
    lines = [*initialize("2024-11-05", {"roots": {}}), CALL, roots]
    good_roots = msg(id=1, result={"roots": [{"uri": "file:///a"}]})
    good_call = msg(id=1, result={"content": []})
    assert findings([*lines, good_roots, good_call]) == []
    bad_roots = msg(id=1, result={"roots": [{"uri": 5}]})
    assert findings([*lines, bad_roots, good_call]) == [(6, -32602, "$.result.roots[0].uri")]
    assert findings([*lines, good_roots, msg(id=1, result={"content": 5})]) == [
        (7, -32602, "$.result.content")
    ]


def test_a_response_nobody_asked_for_is_a_finding() -> None:
    assert findings([*CLEAN, msg(id=7, result={})]) == [(4, -32600, "$.id")]
    assert findings(
        [*CLEAN, CALL, msg(id=1, result={"content": []}), msg(id=1, result={"content": []})]
    ) == [(6, -32600, "$.id")]
    # An error response whose request id the peer could not read has id null: nothing to match.
    assert findings([*CLEAN, msg(id=None, error={"code": -32700, "message": "Parse error"})]) == []


def test_a_sender_reusing_an_id_is_a_finding() -> None:
    again = msg(id=1, method="tools/list")
    lines = [
        *CLEAN,
        CALL,
        msg(id=1, result={"content": []}),
        again,
        msg(id=1, result={"tools": []}),
    ]
    assert findings(lines) == [(6, -32600, "$.id")]


def test_a_request_both_sides_send_belongs_to_the_side_that_has_not_used_its_id() -> None:
    # The client used id 0 for initialize, so a ping with id 0 is the server's, and the reply
    # with id 0 the client's: neither is a reused id nor a stray response.
    lines = [*CLEAN, msg(id=0, method="ping"), msg(id=0, result={})]
    assert findings(lines) == []
    # With a fresh id the sender stays open; the response still answers it.
    assert findings([*CLEAN, msg(id="p", method="ping"), msg(id="p", result={})]) == []


def test_capability_gates_hold_in_both_directions() -> None:
    sampling = msg(
        id=5,
        method="sampling/createMessage",
        params={"messages": [], "maxTokens": 10},
    )
    assert findings([*initialize("2024-11-05", {"sampling": {}}), sampling]) == []
    assert findings([*initialize("2024-11-05", {}), sampling]) == [(4, -32601, "$")]
    # and the other way: a tools/call to a server that advertised no tools
    assert findings([*initialize("2024-11-05", {}, {}), CALL]) == [(4, -32601, "$")]


def test_a_line_separator_inside_a_string_does_not_split_the_line(tmp_path: Path) -> None:
    call = msg(id=1, method="tools/call", params={"name": "a\u2028b"})
    f = tmp_path / "t.jsonl"
    f.write_bytes(
        ("\n".join([*CLEAN, json.dumps(json.loads(call), ensure_ascii=False)]) + "\n").encode()
    )
    assert "\u2028".encode() in f.read_bytes()
    result = CliRunner().invoke(main, ["validate", "--revision", "2024-11-05", str(f)])
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == f"{f}: 4 message(s), no findings (2024-11-05)\n"  # one line each


# -- strict --------------------------------------------------------------------------------------


def test_wrong_revision_field_is_reported_with_strict_only(tmp_path: Path) -> None:
    lines = [CLEAN[0].replace('"version": "1"}', '"version": "1", "icons": []}'), *CLEAN[1:]]
    code, out = run(tmp_path, lines, "--strict")
    assert code == 1
    assert (
        "line 1: [-32602] $.params.clientInfo.icons: Implementation in 2024-11-05 does not define 'icons'"
        in out
    )
    assert "2025-11-25" in out  # where it comes from
    assert run(tmp_path, lines)[0] == 0


def test_strict_reports_unknown_keys_of_results_and_envelopes() -> None:
    result = msg(id=1, result={"content": [], "extra": 1}, other=2)
    assert findings([*CLEAN, CALL, result], strict=True) == [
        (5, -32600, "$.other"),
        (5, -32602, "$.result.extra"),
    ]


# -- batches (2025-03-26) ------------------------------------------------------------------------

BATCH_REVISION = "2025-03-26"
BATCH_REQUEST = json.dumps(
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}},
    ]
)
BATCH_RESPONSE = json.dumps(
    [
        {"jsonrpc": "2.0", "id": 2, "result": {"content": []}},
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}},
    ]
)


def test_a_valid_batch_is_clean_with_strict(tmp_path: Path) -> None:
    lines = [*initialize(BATCH_REVISION), BATCH_REQUEST, BATCH_RESPONSE]
    assert run(tmp_path, lines, "--strict", revision=BATCH_REVISION) == (0, "")


def test_batch_members_are_checked_with_their_index_in_the_path() -> None:
    bad = BATCH_RESPONSE.replace('"tools": []', '"tools": 5')
    assert findings([*initialize(BATCH_REVISION), BATCH_REQUEST, bad], BATCH_REVISION) == [
        (5, -32602, "$[1].result.tools")
    ]
    extra = BATCH_REQUEST.replace('"name": "echo"', '"name": "echo", "x": 1')
    lines = [*initialize(BATCH_REVISION), extra, BATCH_RESPONSE]
    assert findings(lines, BATCH_REVISION, strict=True) == [(4, -32602, "$[1].params.x")]


def test_a_batch_where_the_revision_has_none_is_a_finding() -> None:
    lines = [*initialize("2025-06-18"), BATCH_REQUEST, BATCH_RESPONSE]
    assert findings(lines, "2025-06-18") == [(4, -32600, "$"), (5, -32600, "$")]
    bad = BATCH_REQUEST.replace('"name": "echo"', '"name": 5')
    assert findings([*initialize("2025-06-18"), bad], "2025-06-18") == [
        (4, -32602, "$[1].params.name"),
        (4, -32600, "$"),
    ]


@pytest.mark.parametrize("batch", ["[]", "[[]]", f"[{BATCH_REQUEST}]"])
def test_an_empty_or_nested_batch_is_a_finding(batch: str) -> None:
    (finding,) = validate_lines([*initialize(BATCH_REVISION), batch], BATCH_REVISION)
    assert (finding.line, finding.code, finding.path) == (4, -32600, "$")
    assert (
        "empty batch" in finding.message
        if batch == "[]"
        else "a batch inside a batch" in finding.message
    )


def test_a_batch_from_both_sides_is_a_finding() -> None:
    mixed = json.dumps(
        [
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        ]
    )
    assert findings([*initialize(BATCH_REVISION)[:2], mixed], BATCH_REVISION) == [(3, -32600, "$")]


# -- recorded sessions with real peers -----------------------------------------------------------

# What server-everything (2026.8.31) and our interop driver really got wrong in bench/sessions/:
# resource_link content sent to clients of revisions without it, an 'array' elicitation property
# before 2025-11-25, and the driver's deliberate request with an unsupported _meta revision.
DEVIATIONS = {
    "2024-11-05": [
        (18, -32602, "$.result.content[1].type"),
        (29, -32602, "$.result.content[0].type"),
    ],
    "2025-03-26": [
        (18, -32602, "$.result.content[1].type"),
        (29, -32602, "$.result.content[0].type"),
    ],
    "2025-06-18": [(44, -32602, "$.params.requestedSchema.properties[...].type")],
    "2025-11-25": [],
    "2026-07-28": [(21, -32022, "$")],
}


@pytest.mark.parametrize("revision", sorted(DEVIATIONS))
def test_a_real_session_gives_exactly_its_deviations(revision: str) -> None:
    entries = [
        json.loads(line) for line in (SESSIONS / f"{revision}.jsonl").read_text().splitlines()
    ]
    lines = [json.dumps(e["message"]) for e in entries]  # the direction marks dropped
    got = findings(lines, revision)
    assert got == DEVIATIONS[revision]
    # the recorder marked the same server messages as violations when it received them
    marked = {n for n, e in enumerate(entries, 1) if "violation" in e}
    assert marked == {n for n, _, _ in got if entries[n - 1]["from"] == "server"}


def test_a_real_session_through_the_command(tmp_path: Path) -> None:
    entries = [
        json.loads(line) for line in (SESSIONS / "2024-11-05.jsonl").read_text().splitlines()
    ]
    code, out = run(tmp_path, [json.dumps(e["message"]) for e in entries])
    assert code == 1
    assert out.splitlines() == [
        str(f) for f in validate_lines([json.dumps(e["message"]) for e in entries], "2024-11-05")
    ]
    assert [line.split(":")[0] for line in out.splitlines()] == ["line 18", "line 29"]


# -- tasks (2025-11-25): a request with params.task is answered by its task, whose payload is the
# result of the method that created it; in both directions ------------------------------------

TASKS = "2025-11-25"
TASKS_SESSION = Path(__file__).resolve().parent / "fixtures" / "sessions" / f"{TASKS}-tasks.jsonl"


def task(task_id: str, status: str = "working") -> dict[str, Any]:
    at = "2025-11-25T00:00:00Z"
    return {"taskId": task_id, "status": status, "createdAt": at, "lastUpdatedAt": at, "ttl": 9}


SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}
TASK_LINES = [
    *initialize(
        TASKS,
        {"sampling": {}, "tasks": {"requests": {"sampling": {"createMessage": {}}}}},
        {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
    ),
    # 4-7: the client asks the server for a task, then for its payload
    msg(id=1, method="tools/call", params={"name": "echo", "task": {"ttl": 9}}),
    msg(id=1, result={"task": task("s-1")}),
    msg(id=2, method="tasks/result", params={"taskId": "s-1"}),
    msg(id=2, result={"content": [{"type": "text", "text": "done"}]}),
    # 8-13: the server asks the client for a task, polls it and asks for its payload, on ids
    # neither side used: only the task's requester sends these, so they are the server's
    msg(
        id="s1",
        method="sampling/createMessage",
        params={"messages": [], "maxTokens": 8, "task": {"ttl": 9}},
    ),
    msg(id="s1", result={"task": task("c-1")}),
    msg(id="s2", method="tasks/get", params={"taskId": "c-1"}),
    msg(id="s2", result=task("c-1", "completed")),
    msg(id="s3", method="tasks/result", params={"taskId": "c-1"}),
    msg(id="s3", result=SAMPLED),
]


def replaced(lines: list[str], number: int, result: Any) -> list[str]:
    """``lines`` with the result of the response on line ``number`` replaced."""
    out = list(lines)
    out[number - 1] = json.dumps({**json.loads(out[number - 1]), "result": result})
    return out


def test_task_replies_are_valid_in_both_directions() -> None:
    assert findings(TASK_LINES, TASKS) == []
    assert findings(TASK_LINES, TASKS, strict=True) == []


def test_a_task_s_payload_is_checked_as_the_result_of_the_method_that_created_it() -> None:
    assert findings(replaced(TASK_LINES, 7, {"x": 1}), TASKS) == [(7, -32602, "$.result")]
    no_model = {k: v for k, v in SAMPLED.items() if k != "model"}
    broken = list(validate_lines(replaced(TASK_LINES, 13, no_model), TASKS))
    assert [(f.line, f.code, f.path) for f in broken] == [(13, -32602, "$.result")]
    assert "the result of 'tasks/result' for a 'sampling/createMessage' task" in broken[0].message
    # and a task's creation result as one: the server's CreateTaskResult without its task's ttl
    created = {"task": {k: v for k, v in task("s-1").items() if k != "ttl"}}
    broken = list(validate_lines(replaced(TASK_LINES, 5, created), TASKS))
    assert [(f.line, f.code, f.path) for f in broken] == [(5, -32602, "$.result.task")]
    assert "the result of 'tools/call' asking for a task" in broken[0].message


def test_a_real_session_with_tasks_both_ways_has_no_deviations() -> None:
    # Recorded by tests/interop/tasks_recorder.py from server-everything (2026.8.31): the client's
    # task-augmented tools/call (simulate-research-query: polled, its input_required elicitation
    # answered inside tasks/result; a second one cancelled), and the server's task-augmented
    # sampling/createMessage and elicitation/create, which it polls with tasks/get and collects
    # with tasks/result. That server keeps to 2025-11-25 in all of it: there is no real deviation.
    entries = [json.loads(line) for line in TASKS_SESSION.read_text().splitlines()]
    lines = [json.dumps(e["message"]) for e in entries]
    tasked = {
        (e["from"], e["message"]["method"])
        for e in entries
        if "task" in e["message"].get("params", {})
    }
    assert tasked == {
        ("client", "tools/call"),
        ("server", "sampling/createMessage"),
        ("server", "elicitation/create"),
    }
    assert findings(lines, TASKS) == []
    assert findings(lines, TASKS, strict=True) == []
    assert not any("violation" in e for e in entries)
    # Each task reply (to a request with a task, or to tasks/result) is checked as what the task
    # made of it: emptied, each is a finding.
    asked: dict[tuple[str, Any], dict[str, Any]] = {}  # (sender, id) -> request
    replies = []
    for n, e in enumerate(entries, 1):
        m = e["message"]
        if "method" in m and "id" in m:
            asked[e["from"], m["id"]] = m
        elif "result" in m:
            req = asked.pop(("server" if e["from"] == "client" else "client", m["id"]))
            if "task" in req.get("params", {}) or req["method"] == "tasks/result":
                replies.append(n)
    assert replies == [14, 38, 41, 46, 50, 54, 58]
    for n in replies:
        got = findings(replaced(lines, n, {}), TASKS)
        assert [(line, code) for line, code, _ in got] == [(n, -32602)], n


def test_finding_reads_as_one_line() -> None:
    assert str(Finding(3, -32602, "$.params.name", "why")) == "line 3: [-32602] $.params.name: why"


# -- the tasks extension of 2026-07-28 ----------------------------------------------------------

_EXT_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
}
_TASK = {
    "taskId": "t1",
    "status": "working",
    "createdAt": "2026-11-25T08:00:00Z",
    "lastUpdatedAt": "2026-11-25T08:00:00Z",
    "ttlMs": 60000,
}


def _ext_call(declared: bool) -> dict[str, Any]:
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}} if declared else {}
    meta = {**_EXT_META, "io.modelcontextprotocol/clientCapabilities": caps}
    params = {"name": "slow", "arguments": {}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def _ext_findings(*messages: dict[str, Any]) -> list[tuple[int, int, str]]:
    lines = [json.dumps(m) for m in messages]
    return [(f.line, f.code, f.path) for f in validate_lines(lines, "2026-07-28", strict=True)]


def test_the_tasks_extension_validates_with_its_generated_classes() -> None:
    """A call answered with a task and the task polled: no finding (tasks/get was -32601 before
    validate knew the extension); a tasks/get of the wrong shape, its answer of the wrong shape,
    and a task made of a call that did not declare the extension are findings with their path."""
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    meta = {**_EXT_META, "io.modelcontextprotocol/clientCapabilities": caps}
    task = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "task", **_TASK}}
    get = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tasks/get",
        "params": {"taskId": "t1", "_meta": meta},
    }
    done = {
        "resultType": "complete",
        **_TASK,
        "status": "completed",
        "result": {"resultType": "complete", "content": [{"type": "text", "text": "2"}]},
    }
    assert (
        _ext_findings(_ext_call(True), task, get, {"jsonrpc": "2.0", "id": 2, "result": done}) == []
    )

    bad_get = {**get, "params": {"taskId": 7, "_meta": meta}}
    assert _ext_findings(_ext_call(True), task, bad_get) == [(3, -32602, "$.params.taskId")]
    missing = {k: v for k, v in done.items() if k != "lastUpdatedAt"}
    found = _ext_findings(
        _ext_call(True), task, get, {"jsonrpc": "2.0", "id": 2, "result": missing}
    )
    assert [(line, code) for line, code, _ in found] == [(4, -32602)]
    assert _ext_findings(_ext_call(False), task) == [(2, -32602, "$.result")]


def test_task_status_notifications_and_the_listen_filter_validate_with_the_extension() -> None:
    """notifications/tasks (the server's) is read with its generated class, and a listen
    filter's taskIds is the extension's key, not an undefined one (strict): both were findings
    (-32601, -32602) before validate knew them; a wrong status or a non-string id still is."""
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    meta = {**_EXT_META, "io.modelcontextprotocol/clientCapabilities": caps}
    task = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "task", **_TASK}}
    listen = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": ["t1"]}, "_meta": meta},
    }
    tag = {"io.modelcontextprotocol/subscriptionId": 2}
    ack = {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"taskIds": ["t1"]}, "_meta": tag},
    }
    error = {"code": -32603, "message": "broke"}
    note = {
        "jsonrpc": "2.0",
        "method": "notifications/tasks",
        "params": {**_TASK, "status": "failed", "error": error, "_meta": tag},
    }
    end = {"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete", "_meta": tag}}
    assert _ext_findings(_ext_call(True), task, listen, ack, note, end) == []

    wrong = {**note, "params": {**note["params"], "status": "bogus"}}
    assert _ext_findings(_ext_call(True), task, listen, ack, wrong) == [
        (5, -32602, "$.params.status")
    ]
    numbers = {**listen, "params": {**listen["params"], "notifications": {"taskIds": [1]}}}
    assert _ext_findings(_ext_call(True), task, numbers) == [
        (3, -32602, "$.params.notifications.taskIds")
    ]
