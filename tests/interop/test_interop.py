"""Sessions with real MCP peers (`make interop`): every message they send decodes precisely."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

# Where server-everything (2026.8.31) does not keep to the revision it negotiated: it sends
# content and schema shapes of later revisions. mcpbind rejects them with -32602 and the path;
# the session goes on (the driver answers a rejected server request with the error response).
KNOWN_DEVIATIONS = {
    "2024-11-05": ["Invalid value 'resource_link' - at `$.result.content"],
    "2025-03-26": ["Invalid value 'resource_link' - at `$.result.content"],
    "2025-06-18": ["Invalid enum value 'array' - at `$.params.requestedSchema.properties"],
    "2025-11-25": [],
    "2026-07-28": [],
}


@pytest.mark.parametrize("revision", [*driver.EVERYTHING_REVISIONS, *driver.MODERN_REVISIONS])
def test_session(revision: str, tmp_path: Path) -> None:
    if revision in driver.EVERYTHING_REVISIONS:
        if shutil.which("node") is None or not driver.EVERYTHING.exists():
            pytest.fail(
                "server-everything is not installed: run `make interop` (npm ci in tests/interop)"
            )
    else:
        pytest.importorskip("mcp.server", reason="the pinned `mcp` package (dev extras) is needed")
    s = driver.run(revision)
    (tmp_path / f"{revision}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in s.transcript))
    assert len(s.received) >= 10
    for v in s.violations:
        assert v.code == -32602, v
        assert any(k in v.message for k in KNOWN_DEVIATIONS[revision]), v.message
    # every server message was decoded (or is a listed deviation)
    from_server = [e for e in s.transcript if e["from"] == "server"]
    assert all("decoded" in e or "violation" in e for e in from_server)
    kinds = {e["decoded"] for e in from_server if "decoded" in e}
    if revision in driver.EVERYTHING_REVISIONS:
        assert "Response[InitializeResult]" in kinds
        assert "Response[CallToolResult]" in kinds
        assert "Response[ListToolsResult]" in kinds
        assert "Response[GetPromptResult]" in kinds
        assert "Response[ReadResourceResult]" in kinds
        assert "Response[CompleteResult]" in kinds
        assert {"sampling/createMessage", "roots/list"} <= set(s.server_requests)
        if revision >= "2025-06-18":
            assert any("ElicitRequest" in k for k in kinds) or s.violations
    else:
        assert "Response[DiscoverResult]" in kinds
        assert any(k.startswith("Response[CallToolResult") for k in kinds), kinds
        err = s.unsupported_version_error
        assert err.error.code in (-32022, -32602), err
