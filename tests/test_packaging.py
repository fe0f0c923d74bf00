"""The wheel: runtime plus every generated package; msgspec the runtime's only import, click the
command line's."""

import subprocess
import sys
import zipfile

import pytest

from codegen.paths import REPO_ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(out),
            str(REPO_ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("mcpbind-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_holds_the_runtime_and_every_generated_package(wheel):
    names = set(wheel.namelist())
    for package in (
        "v2024_11_05",
        "v2025_03_26",
        "v2025_06_18",
        "v2025_11_25",
        "v2026_07_28",
        "draft",
    ):
        assert f"mcpbind/{package}/types.py" in names
        assert f"mcpbind/{package}/methods.py" in names
    assert {
        "mcpbind/__init__.py",
        "mcpbind/codec.py",
        "mcpbind/_revisions.py",
        "mcpbind/_provenance.py",
    } <= names
    assert "codegen/_schema/revisions.toml" in names and "codegen/_templates/types.py.j2" in names
    assert not [n for n in names if n.endswith(".json")], "no upstream schema data in the wheel"


def test_msgspec_and_click_are_the_only_runtime_dependencies(wheel):
    metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    requires = [
        line
        for line in wheel.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    runtime = sorted(r for r in requires if "extra ==" not in r)
    assert [r.split()[1].split("<")[0].split(">")[0] for r in runtime] == ["click", "msgspec"]
    assert any("jinja2" in r and "extra == 'codegen'" in r for r in requires)


def test_the_wheel_is_typed(wheel):
    assert "mcpbind/py.typed" in wheel.namelist()


def test_importing_the_runtime_loads_msgspec_only():
    """click serves the command line; importing mcpbind, a revision and the codec loads none of it."""
    code = (
        "import sys, mcpbind, mcpbind.v2025_11_25; mcpbind.Codec('2025-11-25');"
        "print(sorted(m for m in ('click', 'jinja2', 'libcst', 'black', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert out.stdout.strip() == "[]"
