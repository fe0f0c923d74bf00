"""Schemas are read only when they are the pinned bytes; `mcpbind pin` adds and re-pins revisions."""

import hashlib
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from codegen import pin as pinning
from codegen.ir import Patch
from codegen.overlay import OverlayError, apply_patches
from mcpbind.cli import main

SHARED = Path(pinning.REPO_ROOT).parent / "shared" / "schemas"


def test_every_pin_matches_the_shared_manifest():
    manifest = json.loads((SHARED / "MANIFEST.json").read_text())
    by_revision = {r["revision"]: r for r in manifest["revisions"]}
    assert [p.revision for p in pinning.pins()] == [r["revision"] for r in manifest["revisions"]]
    for p in pinning.pins():
        r = by_revision[p.revision]
        assert p.sha256 == r["sha256"] and p.size == r["bytes"] and p.examples == r["examples"]
        assert p.source == (
            "https://raw.githubusercontent.com/modelcontextprotocol/modelcontextprotocol/"
            f"{manifest['commit']}/{r['upstream_path']}"
        )
        assert p.path == r["upstream_path"]


def test_a_schema_file_with_another_hash_stops_generation_naming_file_and_hashes(
    tmp_path, monkeypatch
):
    p = pinning.pin("2025-06-18")
    (tmp_path / p.revision).mkdir()
    bad = tmp_path / p.revision / "schema.json"
    bad.write_bytes(b'{"definitions": {}}')
    monkeypatch.setenv("MCPBIND_SCHEMA_DIR", str(tmp_path))
    with pytest.raises(pinning.PinError) as info:
        pinning.read_schema_bytes(p)
    message = str(info.value)
    assert str(bad) in message
    assert p.sha256 in message
    assert hashlib.sha256(b'{"definitions": {}}').hexdigest() in message


def test_a_file_missing_from_the_schema_directory_is_downloaded_from_its_url_verified_and_kept(
    tmp_path, monkeypatch
):
    p = pinning.pin("2024-11-05")
    real = (SHARED / "2024-11-05/schema.json").read_bytes()
    monkeypatch.setenv("MCPBIND_SCHEMA_DIR", str(tmp_path))
    asked = []

    def fetch(url):
        asked.append(url)
        return real

    data, source = pinning.read_schema_bytes(p, fetch=fetch)
    assert data == real
    assert asked == [
        f"https://raw.githubusercontent.com/modelcontextprotocol/modelcontextprotocol/{pinning.pin('draft').source.split('/')[5]}/schema/2024-11-05/schema.json"
    ]
    assert source == str(tmp_path / "2024-11-05" / "schema.json")
    data, _ = pinning.read_schema_bytes(
        p, fetch=lambda url: pytest.fail("schema directory not used")
    )
    assert data == real


def test_a_download_with_another_hash_is_refused_and_not_kept(tmp_path, monkeypatch):
    p = pinning.pin("2024-11-05")
    monkeypatch.setenv("MCPBIND_SCHEMA_DIR", str(tmp_path))
    with pytest.raises(pinning.PinError, match="sha256 mismatch"):
        pinning.read_schema_bytes(p, fetch=lambda url: b"tampered")
    assert not any(tmp_path.rglob("*.json"))


def test_without_a_directory_setting_or_shared_schemas_files_go_to_a_per_user_cache(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("MCPBIND_SCHEMA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(pinning, "REPO_ROOT", tmp_path / "checkout")
    assert pinning.schema_dir() == tmp_path / "mcpbind" / "schemas"


def test_an_overlay_patch_whose_upstream_value_changed_fails_loudly():
    schema = {"$defs": {"N": {"properties": {"minimum": {"type": "number"}}}}}
    patch = Patch(
        "/$defs/N/properties/minimum/type", expect="integer", value="number", reason="test"
    )
    with pytest.raises(OverlayError, match="expects upstream value 'integer' but found 'number'"):
        apply_patches(schema, (patch,), "test")
    fixed = apply_patches(
        {"$defs": {"N": {"properties": {"minimum": {"type": "integer"}}}}}, (patch,), "test"
    )
    assert fixed["$defs"]["N"]["properties"]["minimum"]["type"] == "number"


def test_every_overlay_patch_applies_to_the_pinned_schemas():
    from codegen.model import patched_schema
    from codegen.overlay import overlay

    applied = 0
    for p in pinning.pins():
        patched = patched_schema(p.revision)  # raises if a patch does not find its value
        applied += len(overlay(p.revision).patches)
        assert patched is not pinning.load_schema(p.revision)
    assert applied > 0


# -- mcpbind pin ----------------------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A copy of the pins and an empty schema directory holding the six pinned files, caches cleared."""
    pins_file = tmp_path / "revisions.toml"
    shutil.copyfile(pinning.PINS_FILE, pins_file)
    schemas = tmp_path / "schemas"
    for p in pinning.pins():
        (schemas / p.revision).mkdir(parents=True)
        (schemas / p.revision / "schema.json").symlink_to(SHARED / p.revision / "schema.json")
    monkeypatch.setattr(pinning, "PINS_FILE", pins_file)
    monkeypatch.setenv("MCPBIND_SCHEMA_DIR", str(schemas))
    pinning.pins.cache_clear()
    pinning.load_schema.cache_clear()
    yield pins_file, schemas
    pinning.pins.cache_clear()
    pinning.load_schema.cache_clear()


class _Files(http.server.BaseHTTPRequestHandler):
    routes: dict[str, bytes] = {}

    def do_GET(self):  # noqa: N802 - the stdlib's name
        body = self.routes.get(self.path)
        if body is None:
            self.send_error(404, "Not Found")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A loopback HTTP server: assign ``routes`` (path -> bytes), read ``url``."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    _Files.routes = {}
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.routes = _Files.routes
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def synthetic_schema() -> bytes:
    """2026-07-28 with one more optional field on ``Implementation``: a revision that never existed."""
    schema = json.loads((SHARED / "2026-07-28" / "schema.json").read_bytes())
    schema["$defs"]["Implementation"]["properties"]["synthetic"] = {
        "type": "string",
        "description": "test",
    }
    return json.dumps(schema, indent=4).encode()


def test_pin_url_downloads_checks_stores_and_records_source_hash_size_and_release(
    workspace, server
):
    pins_file, schemas = workspace
    data = synthetic_schema()
    server.routes["/v/schema.json"] = data
    url = server.url + "/v/schema.json"
    result = CliRunner().invoke(main, ["pin", "2027-01-01", "--url", url, "--released"])
    assert result.exit_code == 0, result.output
    assert (schemas / "2027-01-01" / "schema.json").read_bytes() == data
    ps = pinning.read_pins(pins_file)
    assert [p.revision for p in ps] == [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        "2026-07-28",
        "2027-01-01",
        "draft",
    ]  # dated, so before draft
    new = ps[5]
    assert (new.source, new.sha256, new.size, new.released) == (
        url,
        hashlib.sha256(data).hexdigest(),
        len(data),
        True,
    )
    assert [p for p in ps if p.revision != "2027-01-01"] == list(
        pinning.read_pins(pinning.REPO_ROOT / "schema" / "revisions.toml")
    )


def test_pin_file_records_the_file_name_and_a_draft_goes_last(workspace, tmp_path):
    pins_file, schemas = workspace
    f = tmp_path / "next.json"
    f.write_bytes(synthetic_schema())
    examples = tmp_path / "ex" / "Implementation"
    examples.mkdir(parents=True)
    (examples / "one.json").write_text('{"name": "x", "version": "1"}')
    result = CliRunner().invoke(
        main, ["pin", "next", "--file", str(f), "--draft", "--examples", str(tmp_path / "ex")]
    )
    assert result.exit_code == 0, result.output
    last = pinning.read_pins(pins_file)[-1]
    assert (last.revision, last.source, last.released, last.examples) == (
        "next",
        "next.json",
        False,
        1,
    )
    assert (schemas / "next" / "examples" / "Implementation" / "one.json").is_file()


@pytest.mark.parametrize(
    ("args", "route", "body", "expected"),
    [
        (
            ["--url", "{url}/missing.json"],
            None,
            None,
            "cannot download {url}/missing.json: HTTP 404",
        ),
        (
            ["--url", "{url}/x.json"],
            "/x.json",
            b"<html>not json</html>",
            "{url}/x.json: not an MCP schema: not JSON",
        ),
        (
            ["--url", "{url}/x.json"],
            "/x.json",
            b'{"$defs": {"Foo": {}}}',
            "{url}/x.json: not an MCP schema: no definition JSONRPCMessage",
        ),
        (
            ["--url", "http://127.0.0.1:9/none.json"],
            None,
            None,
            "cannot download http://127.0.0.1:9/none.json",
        ),
    ],
)
def test_pin_failures_are_one_line_naming_the_input_and_exit_2(
    workspace, server, args, route, body, expected
):
    pins_file, schemas = workspace
    before = pins_file.read_text()
    if route:
        server.routes[route] = body
    args = [a.replace("{url}", server.url) for a in args]
    result = CliRunner().invoke(main, ["pin", "2027-01-01", *args])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and expected.replace("{url}", server.url) in result.output
    assert pins_file.read_text() == before and not (schemas / "2027-01-01").exists()


def test_a_pinned_revision_is_re_pinned_only_with_update(workspace, server):
    pins_file, schemas = workspace
    server.routes["/draft.json"] = synthetic_schema()
    runner = CliRunner()
    refused = runner.invoke(main, ["pin", "draft", "--url", server.url + "/draft.json"])
    assert refused.exit_code == 2 and "draft is already pinned; pass --update" in refused.output
    (schemas / "draft" / "schema.json").unlink()  # the shared file stays untouched
    moved = runner.invoke(
        main, ["pin", "draft", "--url", server.url + "/draft.json", "--draft", "--update"]
    )
    assert moved.exit_code == 0, moved.output
    draft = pinning.read_pins(pins_file)[-1]
    assert (
        draft.revision == "draft" and draft.sha256 == hashlib.sha256(synthetic_schema()).hexdigest()
    )
    assert draft.examples == 129  # the examples pinned before are kept


def test_a_pinned_file_missing_from_the_schema_directory_is_one_line_and_exit_2(
    workspace, tmp_path
):
    pins_file, schemas = workspace
    f = tmp_path / "local.json"
    f.write_bytes(synthetic_schema())
    assert CliRunner().invoke(main, ["pin", "2027-01-01", "--file", str(f)]).exit_code == 0
    (schemas / "2027-01-01" / "schema.json").unlink()
    pinning.pins.cache_clear()
    result = CliRunner().invoke(main, ["generate", "--check", "-r", "2027-01-01"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert (
        f"{schemas / '2027-01-01' / 'schema.json'}: pinned file of revision 2027-01-01 is missing"
        in result.output
    )


def test_a_new_revision_needs_only_pin_and_generate(tmp_path):
    """In a copy of the checkout: `mcpbind pin` then `mcpbind generate`, no other edit, and the
    package, its projections, its change document, LATEST and the tests' revision list follow."""
    import os
    import subprocess
    import sys

    root = pinning.REPO_ROOT
    copy = tmp_path / "checkout"
    for part in ("codegen", "templates", "schema", "mcpbind", "generated", "docs/changes"):
        shutil.copytree(root / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "tests").mkdir()
    shutil.copyfile(root / "tests" / "_revisions.py", copy / "tests" / "_revisions.py")
    schemas = tmp_path / "schemas"
    for p in pinning.pins():
        (schemas / p.revision).mkdir(parents=True)
        (schemas / p.revision / "schema.json").symlink_to(SHARED / p.revision / "schema.json")
    new_file = tmp_path / "2027-01-01.json"
    new_file.write_bytes(synthetic_schema())
    env = {**os.environ, "MCPBIND_SCHEMA_DIR": str(schemas), "PYTHONPATH": str(copy)}
    env.pop("MCPBIND_GENERATED_DIR", None)

    def run(*code: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", *code],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    cli = "import sys; from mcpbind.cli import main; main(sys.argv[1:])"
    run(cli, "pin", "2027-01-01", "--file", str(new_file), "--released")
    run(cli, "generate", "-r", "2026-07-28", "-r", "2027-01-01")
    out = run(
        "import json, mcpbind, mcpbind.v2027_01_01 as m, msgspec\n"
        "from mcpbind._projection import v2026_07_28__v2027_01_01, v2027_01_01__v2026_07_28\n"
        "from tests._revisions import REVISIONS\n"
        'impl = mcpbind.decode(b\'{"name": "x", "version": "1", "synthetic": "s"}\', m.Implementation)\n'
        "print(json.dumps([list(mcpbind.REVISIONS), mcpbind.LATEST, REVISIONS, impl.synthetic, m.REVISION]))"
    )
    revisions, latest, test_revisions, synthetic, revision = json.loads(out)
    expected = [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        "2026-07-28",
        "2027-01-01",
        "draft",
    ]
    assert revisions == test_revisions == expected
    assert (latest, synthetic, revision) == ("2027-01-01", "s", "2027-01-01")
    changes = (copy / "docs" / "changes" / "2026-07-28__2027-01-01.md").read_text()
    assert "| field_added | `Implementation.synthetic` |" in changes
