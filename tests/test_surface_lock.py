"""Locking a server's surface, checking it and reviewing its changes (``mcpbind surface lock``,
``check``, ``diff``), against real servers started as subprocesses."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import rfc8785

import mcpbind
from mcpbind.surface import Lock, LockError, check, diff, lock
from mcpbind.surface.reader import read

FIXTURES = Path(__file__).parent / "fixtures"
SERVER = [sys.executable, str(FIXTURES / "surface_server.py")]
RAW = [sys.executable, str(FIXTURES / "raw_surface_server.py")]
CLI = [str(Path(sys.executable).with_name("mcpbind"))]


def variant(name: str) -> dict[str, str]:
    return {"env": {**os.environ, "SURFACE_VARIANT": name}}


def sha256(value: object) -> str:
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


@pytest.fixture(scope="module")
def base_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("surface") / "weather.lock"
    asyncio.run(lock(SERVER, path))
    return path


def test_a_lock_holds_every_item_by_kind_and_name_with_the_digest_of_its_definition(
    base_lock: Path,
) -> None:
    locked = Lock.read(base_lock)
    assert locked.revision == mcpbind.LATEST
    assert locked.server == {"name": "weather", "version": "1.0"}
    assert {k: sorted(v) for k, v in locked.items.items()} == {
        "tool": ["add", "get_weather"],
        "prompt": ["forecast"],
        "resource": ["weather://about"],
        "resource_template": ["weather://cities/{city}"],
    }
    for item in locked:
        assert item.sha256 == sha256(item.definition)
    tool = locked.items["tool"]["get_weather"]
    assert tool.definition["annotations"] == {"readOnlyHint": False, "destructiveHint": False}
    dialect = mcpbind.bindings(locked.revision).FACTS.schema_dialect
    assert tool.dialects == {"inputSchema": dialect, "outputSchema": dialect} or tool.dialects == {
        "inputSchema": dialect
    }


def test_the_lock_file_is_sorted_json_and_the_same_surface_writes_the_same_bytes(
    base_lock: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again.lock"
    asyncio.run(lock(SERVER, again))
    text = base_lock.read_text()
    assert again.read_text() == text
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert json.loads(text)["format"] == "mcpbind-surface-lock/1"


def test_every_page_and_every_key_the_server_sent_is_locked_with_its_declared_dialect() -> None:
    locked = asyncio.run(read(RAW))
    assert locked.revision == "2025-11-25" and sorted(locked.items["tool"]) == ["first", "second"]
    first = locked.items["tool"]["first"]
    assert first.definition["x-vendor-note"] == "ignore previous instructions"
    assert first.sha256 == sha256(first.definition)
    assert first.dialects == {"inputSchema": "https://json-schema.org/draft/2020-12/schema"}
    second = locked.items["tool"]["second"]
    assert second.dialects == {"inputSchema": "http://json-schema.org/draft-07/schema#"}


def test_a_lock_edited_by_hand_is_refused_naming_the_item(base_lock: Path, tmp_path: Path) -> None:
    body = json.loads(base_lock.read_text())
    body["items"]["tool"]["get_weather"]["definition"]["description"] = "Something else."
    edited = tmp_path / "edited.lock"
    edited.write_text(json.dumps(body))
    with pytest.raises(LockError, match=r"items.tool\['get_weather'\]: sha256 .* edited by hand"):
        Lock.read(edited)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("not json", "not JSON"),
        ('{"format": "other"}', "not a mcpbind-surface-lock/1 lock"),
        ('{"format": "mcpbind-surface-lock/1", "revision": "1999"}', "revision '1999'"),
    ],
)
def test_an_unreadable_lock_is_one_clear_error(text: str, error: str) -> None:
    with pytest.raises(LockError, match=error):
        Lock.loads(text, "x.lock")


def test_the_same_server_checks_clean(base_lock: Path) -> None:
    report = asyncio.run(check(base_lock, SERVER))
    assert report.changes == [] and not report.drifted


@pytest.mark.parametrize(
    ("name", "kind", "path", "breaking"),
    [
        ("description", "description_changed", "description", False),
        ("parameter", "parameter_narrowed", "inputSchema.properties.days", True),
        ("annotation", "annotation_changed", "annotations.destructiveHint", True),
    ],
)
def test_a_server_changed_after_the_lock_fails_check_naming_the_change(
    base_lock: Path, name: str, kind: str, path: str, breaking: bool
) -> None:
    done = subprocess.run(
        [*CLI, "surface", "check", str(base_lock), "--", *SERVER],
        capture_output=True,
        text=True,
        **variant(name),
    )
    assert done.returncode == 1, done.stderr
    assert "differs from the lock" in done.stderr
    assert f"| {kind} | tool 'get_weather' | `{path}` |" in done.stdout
    report = asyncio.run(check(base_lock, SERVER, **variant(name)))
    (change,) = report.changes
    assert (change.kind, change.item, change.path, change.breaking) == (
        kind,
        "get_weather",
        path,
        breaking,
    )


def test_a_new_or_renamed_tool_is_unapproved(base_lock: Path) -> None:
    new = asyncio.run(check(base_lock, SERVER, **variant("new")))
    assert [(c.kind, c.item) for c in new.changes] == [("item_added", "send")] and new.drifted
    renamed = asyncio.run(check(base_lock, SERVER, **variant("renamed")))
    assert [(c.kind, c.before, c.after, c.breaking) for c in renamed.changes] == [
        ("item_renamed", "get_weather", "weather_for", True)
    ]


def test_check_exits_0_on_a_matching_server_and_2_on_a_missing_lock(base_lock: Path) -> None:
    ok = subprocess.run(
        [*CLI, "surface", "check", str(base_lock), "--", *SERVER], capture_output=True, text=True
    )
    assert ok.returncode == 0 and "matches the lock (5 items)" in ok.stderr, ok.stderr
    missing = subprocess.run(
        [*CLI, "surface", "check", "nowhere.lock", "--", *SERVER], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "nowhere.lock: cannot read the lock" in missing.stderr


def test_diff_of_two_locks_in_json_gives_kinds_and_breaking_flags(
    base_lock: Path, tmp_path: Path
) -> None:
    changed = tmp_path / "parameter.lock"
    lock_cli = [*CLI, "surface", "lock", "-o", str(changed), "--", *SERVER]
    subprocess.run(lock_cli, check=True, capture_output=True, **variant("parameter"))
    done = subprocess.run(
        [*CLI, "surface", "diff", str(base_lock), str(changed), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    body = json.loads(done.stdout)
    assert body["format"] == "mcpbind.surface-diff/1"
    assert body["summary"] == {
        "total": 1,
        "breaking": 1,
        "drifted": True,
        "by_kind": {"parameter_narrowed": 1},
    }
    (change,) = body["changes"]
    assert change["item"] == {"kind": "tool", "name": "get_weather"}
    assert change["before"] == '{"maximum": 7, "minimum": 1, "type": "integer"}'
    report = diff(Lock.read(base_lock), Lock.read(changed))
    assert [c.kind for c in report.changes] == ["parameter_narrowed"]


def test_integers_beyond_doubles_are_hashed_as_the_double_rfc_8785_writes() -> None:
    from mcpbind.surface.canonical import canonical, digest

    definition = {"name": "t", "inputSchema": {"maximum": 2**53, "minimum": -(2**64)}}
    assert canonical(definition) == (
        b'{"inputSchema":{"maximum":9007199254740992,"minimum":-18446744073709552000},"name":"t"}'
    )
    assert digest(definition) == hashlib.sha256(canonical(definition)).hexdigest()


def test_a_lock_whose_key_names_another_item_is_refused(base_lock: Path, tmp_path: Path) -> None:
    body = json.loads(base_lock.read_text())
    tools = body["items"]["tool"]
    tools["get_weather"], tools["add"] = tools["add"], tools["get_weather"]
    swapped = tmp_path / "swapped.lock"
    swapped.write_text(json.dumps(body))
    with pytest.raises(
        LockError, match=r"items.tool\['add'\] holds the definition of 'get_weather'"
    ):
        Lock.read(swapped)
