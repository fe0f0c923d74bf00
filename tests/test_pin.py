"""Schemas are read only when they are the pinned bytes."""

import hashlib

import pytest

from codegen import pin as pinning
from codegen.ir import Patch
from codegen.overlay import OverlayError, apply_patches


def test_every_pin_matches_the_shared_manifest():
    import json
    from pathlib import Path

    manifest = json.loads((Path(pinning.REPO_ROOT).parent / "shared/schemas/MANIFEST.json").read_text())
    by_revision = {r["revision"]: r for r in manifest["revisions"]}
    assert [p.revision for p in pinning.pins()] == [r["revision"] for r in manifest["revisions"]]
    for p in pinning.pins():
        assert p.sha256 == by_revision[p.revision]["sha256"]
        assert p.path == by_revision[p.revision]["upstream_path"]
        assert p.commit == manifest["commit"]


def test_a_schema_file_with_another_hash_stops_generation_naming_file_and_hashes(tmp_path, monkeypatch):
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


def test_without_a_schema_directory_the_pinned_commit_is_downloaded_verified_and_cached(tmp_path, monkeypatch):
    p = pinning.pin("2024-11-05")
    real = (pinning.REPO_ROOT.parent / "shared/schemas/2024-11-05/schema.json").read_bytes()
    monkeypatch.setattr(pinning, "schema_dir", lambda: None)
    monkeypatch.setattr(pinning, "CACHE_DIR", tmp_path)
    asked = []

    def fetch(url):
        asked.append(url)
        return real

    data, source = pinning.read_schema_bytes(p, fetch=fetch)
    assert data == real
    assert asked == [f"https://raw.githubusercontent.com/modelcontextprotocol/modelcontextprotocol/{p.commit}/{p.path}"]
    assert source == str(tmp_path / p.commit / p.path)
    data, _ = pinning.read_schema_bytes(p, fetch=lambda url: pytest.fail("cache not used"))
    assert data == real


def test_a_download_with_another_hash_is_refused_and_not_cached(tmp_path, monkeypatch):
    p = pinning.pin("2024-11-05")
    monkeypatch.setattr(pinning, "schema_dir", lambda: None)
    monkeypatch.setattr(pinning, "CACHE_DIR", tmp_path)
    with pytest.raises(pinning.PinError, match="sha256 mismatch"):
        pinning.read_schema_bytes(p, fetch=lambda url: b"tampered")
    assert not any(tmp_path.rglob("*.json"))


def test_an_overlay_patch_whose_upstream_value_changed_fails_loudly():
    schema = {"$defs": {"N": {"properties": {"minimum": {"type": "number"}}}}}
    patch = Patch("/$defs/N/properties/minimum/type", expect="integer", value="number", reason="test")
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
