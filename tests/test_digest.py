"""Digests: each revision's IR as committed JSON, so that `mcpbind diff` needs no schema."""

import json

import pytest
from click.testing import CliRunner

import mcpbind
from codegen import digest
from codegen.diff import compare, diff
from codegen.model import build
from codegen.pin import pins
from codegen.write import digest_file
from mcpbind.cli import main

REVISIONS = [p.revision for p in pins()]
PAIRS = list(zip(REVISIONS, REVISIONS[1:], strict=False))


@pytest.fixture(scope="module")
def irs():
    return {r: build(r) for r in REVISIONS}


def test_a_digest_holds_the_whole_ir_but_how_unions_decode(irs):
    for r, rev in irs.items():
        back = digest.load(digest.dump(rev))
        assert (back.revision, back.sha256, back.dialect) == (rev.revision, rev.sha256, rev.dialect)
        assert back.definitions == rev.definitions, r
        assert back.methods == rev.methods, r
        assert back.patches == rev.patches, r
        assert list(back.definitions) == list(rev.definitions)  # the same order


def test_the_committed_digests_are_what_the_generator_writes(irs):
    for r, rev in irs.items():
        assert digest_file(r).read_text(encoding="utf-8") == digest.dump(rev), r


def test_diff_from_the_digests_equals_diff_from_the_schemas(irs):
    for a, b in PAIRS:
        from_digests = diff(a, b)
        assert from_digests == compare(irs[a], irs[b]), (a, b)
        assert (
            from_digests.changes or a == "2026-07-28"
        )  # a pair with nothing to compare proves nothing


@pytest.fixture
def no_schemas(monkeypatch, tmp_path):
    """The schema directory empty and every download refused."""
    import urllib.request

    import codegen.pin as pinning

    def no_network(url, *args, **kwargs):
        raise AssertionError(f"fetched {url}")

    monkeypatch.setenv("MCPBIND_SCHEMA_DIR", str(tmp_path))
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    pinning.load_schema.cache_clear()
    yield tmp_path
    pinning.load_schema.cache_clear()
    assert not list(tmp_path.iterdir())


def test_diff_needs_no_schema(no_schemas):
    result = CliRunner().invoke(main, ["diff", "2025-06-18", "2025-11-25", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["summary"]["total"] > 0


def test_migrate_plans_from_the_digests_too(no_schemas):
    from codegen.migrate import plan

    p = plan("2025-11-25", "2026-07-28")
    assert "ping" in p.methods  # removed in 2026-07-28: each use gets a mark


def test_the_digests_are_small():
    sizes = [digest_file(r).stat().st_size for r in REVISIONS]
    assert sum(sizes) < 2_000_000


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "damaged digest"),
        ('{"format": "mcpbind.digest/9"}', "not a mcpbind.digest/1 digest"),
        ('{"format": "mcpbind.digest/1", "revision": "x"}', "damaged digest: KeyError"),
        ("[]", "damaged digest"),
    ],
)
def test_a_damaged_or_foreign_digest_is_a_digest_error(text, message):
    with pytest.raises(digest.DigestError, match=message):
        digest.load(text)


def test_an_unknown_revision_names_the_known_ones():
    with pytest.raises(digest.DigestError, match="'1999-01-01' is not a known revision.*draft"):
        digest.read("1999-01-01")


def test_a_missing_digest_is_one_line_naming_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(mcpbind, "__path__", [str(tmp_path)])
    result = CliRunner().invoke(main, ["diff", "2025-06-18", "2025-11-25"])
    assert result.exit_code == 2
    assert result.output == (
        "mcpbind diff: no digest of revision 2025-06-18 (_digest/v2025_06_18.json); "
        "run `make generate`\n"
    )


def test_a_damaged_committed_digest_is_one_line_naming_the_file(monkeypatch, tmp_path):
    (tmp_path / "_digest").mkdir()
    (tmp_path / "_digest" / "v2025_06_18.json").write_text('{"format": "mcpbind.digest/1"}')
    monkeypatch.setattr(mcpbind, "__path__", [str(tmp_path)])
    result = CliRunner().invoke(main, ["diff", "2025-06-18", "2025-11-25"])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert f"{tmp_path / '_digest' / 'v2025_06_18.json'}: damaged digest" in result.output
