"""``mcpbind validate``: a wrong-revision field, an undecodable line, a clean file."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from codegen.cli import main

CLEAN = [
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05",'
    '"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}',
    '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},'
    '"serverInfo":{"name":"s","version":"1"}}}',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}',
]


def run(tmp_path: Path, lines: list[str], *args: str) -> tuple[int, str]:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", "--revision", "2024-11-05", *args, str(f)])
    return result.exit_code, result.output


def test_clean_transcript_exits_0(tmp_path: Path) -> None:
    assert run(tmp_path, CLEAN, "--strict") == (0, "")


def test_wrong_revision_field_is_reported_with_strict_only(tmp_path: Path) -> None:
    lines = [CLEAN[0].replace('"version":"1"}', '"version":"1","icons":[]}'), *CLEAN[1:]]
    code, out = run(tmp_path, lines, "--strict")
    assert code == 1
    assert "line 1: $.params.clientInfo.icons: Implementation in 2024-11-05 does not define 'icons'" in out
    assert "2025-11-25" in out  # where it comes from
    assert run(tmp_path, lines)[0] == 0


@pytest.mark.parametrize("strict", [(), ("--strict",)])
def test_undecodable_line_is_reported(tmp_path: Path, strict: tuple[str, ...]) -> None:
    code, out = run(tmp_path, [*CLEAN, '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":5}}'], *strict)
    assert code == 1
    assert out.startswith("line 4: does not decode under 2024-11-05")
    assert "$.params.name" in out
