"""The wheel: runtime plus every generated package, msgspec its only runtime dependency."""

import subprocess
import sys
import zipfile

import pytest

from codegen.paths import REPO_ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(REPO_ROOT)],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("mcpbind-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_holds_the_runtime_and_every_generated_package(wheel):
    names = set(wheel.namelist())
    for package in ("v2024_11_05", "v2025_03_26", "v2025_06_18", "v2025_11_25", "v2026_07_28", "draft"):
        assert f"mcpbind/{package}/types.py" in names
        assert f"mcpbind/{package}/methods.py" in names
    assert {"mcpbind/__init__.py", "mcpbind/codec.py", "mcpbind/_revisions.py", "mcpbind/_provenance.py"} <= names
    assert "codegen/_schema/revisions.toml" in names and "codegen/_templates/types.py.j2" in names
    assert not [n for n in names if n.endswith(".json")], "no upstream schema data in the wheel"


def test_msgspec_is_the_only_runtime_dependency(wheel):
    metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    requires = [line for line in wheel.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    runtime = [r for r in requires if "extra ==" not in r]
    assert runtime == ["Requires-Dist: msgspec<0.23,>=0.22"]
    assert any("click" in r and "extra == 'codegen'" in r for r in requires)
