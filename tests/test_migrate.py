"""`mcpbind migrate`: the libcst codemod driven by the diff IR, on sample user code."""

import sys

import pytest
from click.testing import CliRunner

from codegen.migrate import MARK, migrate_source, plan
from mcpbind.cli import main

CHANGES = "docs/changes/2025-11-25__2026-07-28.md"

CLIENT_2025_11_25 = '''\
"""A client written for 2025-11-25."""

from mcpbind import v2025_11_25 as M  # the bindings
from mcpbind.v2025_11_25 import (
    CallToolResult,
    InitializeRequestParams,  # handshake
    TextContent,
)


def hello(codec):
    # open the session
    params = InitializeRequestParams(
        protocol_version="2025-11-25",
        capabilities=M.ClientCapabilities(),
        client_info=M.Implementation(name="x", version="1"),
    )
    codec.send("initialize", params)
    codec.send("ping", None)
    return params.protocol_version


def tool_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],   is_error=False)
'''


@pytest.fixture(scope="module")
def to_2026():
    return plan("2025-11-25", "2026-07-28")


def test_imports_move_to_the_new_package_and_code_and_comments_are_kept(to_2026):
    after, _ = migrate_source(CLIENT_2025_11_25, to_2026)
    assert "v2025_11_25" not in after
    assert "from mcpbind import v2026_07_28 as M  # the bindings\n" in after
    assert "from mcpbind.v2026_07_28 import (\n" in after
    assert "    InitializeRequestParams,  # handshake\n" in after
    assert "    # open the session\n" in after
    assert "is_error=False)\n" in after and "],   is_error" in after  # odd spacing left alone
    # Nothing but the imports, the revision string and added comment lines differ.
    kept = [line for line in after.splitlines() if not line.lstrip().startswith(MARK)]
    expected = CLIENT_2025_11_25.replace("v2025_11_25", "v2026_07_28").replace(
        '"2025-11-25"', '"2026-07-28"'
    )
    assert kept == expected.splitlines()


def test_uses_of_what_2026_07_28_removed_or_broke_are_marked_with_kind_path_and_changes_file(
    to_2026,
):
    after, _ = migrate_source(CLIENT_2025_11_25, to_2026)
    lines = after.splitlines()

    def marks_above(code):
        i = next(i for i, line in enumerate(lines) if line.strip().startswith(code))
        found = []
        while lines[i - 1].strip().startswith(MARK):
            i -= 1
            found.append(lines[i].strip().removeprefix(MARK + " "))
        return sorted(found)

    assert marks_above('codec.send("initialize"') == [f"method_removed initialize ({CHANGES})"]
    assert marks_above('codec.send("ping"') == [f"method_removed ping ({CHANGES})"]
    assert marks_above("from mcpbind.v2026_07_28 import (") == [
        f"type_removed InitializeRequestParams ({CHANGES})"
    ]
    assert marks_above("params = InitializeRequestParams(") == sorted(
        [
            f"type_removed InitializeRequestParams ({CHANGES})",
            f'moved InitializeRequestParams.protocolVersion -> RequestMetaObject["io.modelcontextprotocol/protocolVersion"] ({CHANGES})',
            f'moved InitializeRequestParams.capabilities -> RequestMetaObject["io.modelcontextprotocol/clientCapabilities"] ({CHANGES})',
            f'moved InitializeRequestParams.clientInfo -> RequestMetaObject["io.modelcontextprotocol/clientInfo"] ({CHANGES})',
        ]
    )
    assert marks_above("return params.protocol_version") == [
        f'moved InitializeRequestParams.protocolVersion -> RequestMetaObject["io.modelcontextprotocol/protocolVersion"] ({CHANGES})'
    ]
    # 2026-07-28 results carry a required resultType: a call that does not pass it is marked.
    assert marks_above("return CallToolResult(") == [
        f"field_added CallToolResult.resultType ({CHANGES})"
    ]
    assert marks_above("def tool_result") == []


def test_a_required_field_passed_by_the_caller_and_unchanged_code_are_not_marked(to_2026):
    source = (
        "from mcpbind.v2025_11_25 import CallToolResult, TextContent\n"
        "ok = CallToolResult(content=[], result_type='complete')\n"
        "t = TextContent(type='text', text='x')\n"
        "kw = CallToolResult(**fields)\n"
    )
    after, _ = migrate_source(source, to_2026)
    assert MARK not in after
    assert after == source.replace("v2025_11_25", "v2026_07_28")


def test_the_request_meta_envelope_is_marked_where_a_request_is_built_with_or_without_it(to_2026):
    source = (
        "import mcpbind.v2025_11_25 as M\n"
        "p = M.CallToolRequestParams(name='echo')\n"
        "q = mcpbind.v2025_11_25.CallToolRequestParams(name='echo', meta=m)\n"
    )
    after, _ = migrate_source(source, to_2026)
    assert after.splitlines() == [
        "import mcpbind.v2026_07_28 as M",
        f"{MARK} field_required_changed CallToolRequestParams._meta ({CHANGES})",
        "p = M.CallToolRequestParams(name='echo')",
        f"{MARK} field_type_changed CallToolRequestParams._meta ({CHANGES})",
        "q = mcpbind.v2026_07_28.CallToolRequestParams(name='echo', meta=m)",
    ]


def test_2025_06_18_to_2025_11_25_marks_the_removed_error_type_and_the_reshaped_unions():
    p = plan("2025-06-18", "2025-11-25")
    source = (
        "from mcpbind.v2025_06_18 import EnumSchema, JSONRPCError, TextContent\n"
        "\n"
        "def fail(i):\n"
        "    return JSONRPCError(jsonrpc='2.0', id=i, error=err)\n"
        "\n"
        "schema = EnumSchema(type='string', enum=['a'])\n"
    )
    after, findings = migrate_source(source, p)
    doc = "docs/changes/2025-06-18__2025-11-25.md"
    assert after.splitlines() == [
        f"{MARK} type_changed EnumSchema ({doc})",
        f"{MARK} type_removed JSONRPCError ({doc})",
        "from mcpbind.v2025_11_25 import EnumSchema, JSONRPCError, TextContent",
        "",
        "def fail(i):",
        f"    {MARK} type_removed JSONRPCError ({doc})",
        "    return JSONRPCError(jsonrpc='2.0', id=i, error=err)",
        "",
        f"{MARK} type_changed EnumSchema ({doc})",
        "schema = EnumSchema(type='string', enum=['a'])",
    ]
    assert [f.line for f in findings if f.mark] == [1, 1, 4, 6]


def test_a_change_over_several_revisions_names_the_pair_where_it_happened():
    p = plan("2025-06-18", "2026-07-28")
    after, _ = migrate_source("from mcpbind.v2025_06_18 import JSONRPCError, PingRequest\n", p)
    assert "type_removed JSONRPCError (docs/changes/2025-06-18__2025-11-25.md)" in after
    assert "type_removed PingRequest (docs/changes/2025-11-25__2026-07-28.md)" in after


def test_a_rename_the_diff_reports_is_applied_to_imports_and_uses(to_2026, monkeypatch):
    monkeypatch.setitem(
        to_2026.renames, "Implementation", "Identity"
    )  # no real rename here: the diff has none
    source = "from mcpbind.v2025_11_25 import Implementation\nx = Implementation(name='a', version='1')\n"
    after, _ = migrate_source(source, to_2026)
    assert (
        after == "from mcpbind.v2026_07_28 import Identity\nx = Identity(name='a', version='1')\n"
    )


def test_check_writes_nothing_reports_markdown_and_exits_1_only_when_something_would_change(
    tmp_path,
):
    user = tmp_path / "app"
    user.mkdir()
    (user / "client.py").write_text(CLIENT_2025_11_25)
    (user / "other.py").write_text("import json\n")
    runner = CliRunner()
    args = ["migrate", "--from", "2025-11-25", "--to", "2026-07-28"]
    check = runner.invoke(main, [*args, "--check", str(user)])
    assert check.exit_code == 1, check.output
    assert (user / "client.py").read_text() == CLIENT_2025_11_25
    assert check.output.startswith("# mcpbind migrate 2025-11-25 -> 2026-07-28\n")
    assert f"## {user / 'client.py'}" in check.output and "other.py" not in check.output
    assert (
        "| 18 | method_removed initialize (docs/changes/2025-11-25__2026-07-28.md) |"
        in check.output
    )
    done = runner.invoke(main, [*args, str(user)])
    assert done.exit_code == 0, done.output
    assert "1 of 2 file(s) changed" in done.output
    migrated = (user / "client.py").read_text()
    again = runner.invoke(main, [*args, "--check", str(user)])
    assert again.exit_code == 0 and "0 of 2 file(s) would change" in again.output
    assert runner.invoke(main, [*args, str(user)]).exit_code == 0
    assert (user / "client.py").read_text() == migrated  # a second run adds nothing


def test_a_file_that_does_not_parse_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n")
    result = CliRunner().invoke(
        main, ["migrate", "--from", "2025-11-25", "--to", "2026-07-28", str(bad)]
    )
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and f"{bad}:1: cannot parse" in result.output


def test_without_libcst_the_command_names_the_extra_to_install(monkeypatch, tmp_path):
    import codegen

    monkeypatch.delitem(sys.modules, "codegen.migrate", raising=False)
    monkeypatch.delattr(codegen, "migrate", raising=False)
    monkeypatch.setitem(sys.modules, "libcst", None)  # what a plain install looks like
    result = CliRunner().invoke(
        main, ["migrate", "--from", "2025-11-25", "--to", "2026-07-28", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert (
        result.output
        == 'mcpbind migrate needs the generator (libcst missing): pip install "mcpbind[codegen]"\n'
    )
