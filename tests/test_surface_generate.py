"""``mcpbind surface generate``: a typed package from a lock, that regenerates byte-identically,
passes ``mypy --strict``, and calls the server through ``mcpbind.Client`` with typed arguments
and results; what a type cannot say is named in a comment and checked by the fallback."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

import mcpbind
from codegen.surface.generate import package_files, write
from mcpbind.surface import Lock, lock
from mcpbind.surface.kinds import speech
from mcpbind.surface.lockfile import item_of
from mcpbind.surface.runtime import ToolCallError

FIXTURES = Path(__file__).parent / "fixtures"
SERVER = [sys.executable, str(FIXTURES / "surface_server.py")]
MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
REVISION = "2025-11-25"


def surface(*tools: dict[str, Any]) -> Lock:
    sp = speech(REVISION)
    items = {"tool": {t["name"]: item_of("tool", t, sp) for t in tools}}
    return Lock(REVISION, {"name": "shop", "version": "2"}, items | {"prompt": {}})


def imported(tmp_path: Path, locked: Lock, package: str) -> Any:
    write(package_files(locked, tmp_path / package), tmp_path / package)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(package)
    finally:
        sys.path.remove(str(tmp_path))


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("generate")
    path = folder / "weather.lock"
    asyncio.run(lock(SERVER, path))
    subprocess.run(
        [MCPBIND, "surface", "generate", str(path), "-o", str(folder / "weather_server")],
        check=True,
        capture_output=True,
    )
    return path, folder


def test_the_package_regenerates_byte_identically_and_check_finds_it_stale_when_edited(
    weather: tuple[Path, Path],
) -> None:
    path, folder = weather
    package = folder / "weather_server"
    check = [MCPBIND, "surface", "generate", str(path), "-o", str(package), "--check"]
    clean = subprocess.run(check, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert sorted(p.name for p in package.iterdir() if p.suffix == ".py") == [
        "__init__.py",
        "client.py",
        "types.py",
    ]
    first = {p.name: p.read_bytes() for p in package.glob("*.py")}
    assert package_files(Lock.read(path), package) == {
        (package / n).resolve(): t.decode() for n, t in first.items()
    }
    types_py = package / "types.py"
    types_py.write_text(types_py.read_text().replace("city: str", "city: int"))
    stale = subprocess.run(check, capture_output=True, text=True)
    assert stale.returncode == 1 and "-    city: str\n+    city: int" not in stale.stdout
    assert "+    city: str" in stale.stdout and "is stale in 1 file(s)" in stale.stderr
    types_py.write_bytes(first["types.py"])


def black_check(folder: Path) -> subprocess.CompletedProcess[str]:
    """black --check with the repository's settings (line length 100, Python 3.11)."""
    return subprocess.run(
        [sys.executable, "-m", "black", "--check", "-l", "100", "-t", "py311", str(folder)],
        capture_output=True,
        text=True,
    )


def test_the_generated_package_is_black_formatted_and_clean_under_mypy_strict(
    weather: tuple[Path, Path],
) -> None:
    _, folder = weather
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "weather_server"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout
    formatted = black_check(folder / "weather_server")
    assert formatted.returncode == 0, formatted.stderr


def test_a_package_of_every_test_suite_schema_is_black_formatted_and_mypy_strict(
    tmp_path: Path,
) -> None:
    """The layout (codegen/surface/layout.py) held to black, and the types to mypy, on the
    official Test Suite's schemas, each a tool's input and output schema."""
    from mcpbind.surface.canonical import digest
    from mcpbind.surface.lockfile import Item
    from tests._json_schema_suite import DRAFTS, groups

    for draft, dialect in DRAFTS.items():
        items = {}
        for i, (file, group, schema, _) in enumerate(groups(draft)):
            name = f"{file[:-5]} {group}"[:60] + f" {i}"
            d = {"name": name, "description": group, "inputSchema": schema, "outputSchema": schema}
            dialects = {"inputSchema": dialect, "outputSchema": dialect}
            items[name] = Item("tool", name, d, digest(d), dialects)
        locked = Lock(REVISION, {"name": f"suite {draft}", "version": "1"}, {"tool": items})
        package = tmp_path / f"suite_{draft.replace('-', '_')}"
        write(package_files(locked, package), package)
    formatted = black_check(tmp_path)
    assert formatted.returncode == 0, formatted.stderr
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "suite_draft7", "suite_draft2020_12"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


def test_calls_through_the_generated_client_are_typed(weather: tuple[Path, Path]) -> None:
    _, folder = weather
    sys.path.insert(0, str(folder))
    try:
        generated = importlib.import_module("weather_server")
    finally:
        sys.path.remove(str(folder))

    async def calls() -> None:
        async with mcpbind.Client(SERVER) as client:
            server = generated.WeatherServer(client)
            added = await server.add(a=2, b=40)
            assert type(added) is generated.AddResult and added.result == 42
            weather = await server.get_weather(city="Oslo", days=2)
            assert weather.content[0].text == "sunny in Oslo for 2 day(s)"
            with pytest.raises(mcpbind.ProtocolError) as refused:
                await server.get_weather(city="Oslo", days=8)
            assert refused.value.code == -32602
            assert refused.value.message == (
                "tool 'get_weather': $.arguments.days: Expected `int` <= 7"
            )
            prompt = await server.forecast_prompt(city="Rome")
            assert prompt.messages[0].content.text == "What is the weather in Rome?"
            page = await server.read_city_weather(city="Lima")
            assert page.contents[0].text == "sunny in Lima"

    asyncio.run(calls())


def test_names_are_deterministic_and_collision_free(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"self": {"type": "string"}, "class": {"type": "integer"}},
    }
    locked = surface(
        {"name": "get-weather", "inputSchema": schema},
        {"name": "get_weather", "inputSchema": {"type": "object"}},
        {"name": "client", "inputSchema": {"type": "object"}},
        {"name": "class", "inputSchema": {"type": "object"}},
    )
    first = package_files(locked, tmp_path / "shop")
    assert package_files(locked, tmp_path / "shop") == first
    generated = imported(tmp_path, locked, "shop")
    methods = sorted(m for m in vars(generated.ShopServer) if not m.startswith("__"))
    assert methods == ["class_", "client_", "get_weather", "get_weather_"]
    assert black_check(tmp_path / "shop").returncode == 0
    assert msgspec.convert({"self": "x", "class": 1}, generated.GetWeatherArguments).class_ == 1
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "shop"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


def test_what_a_type_cannot_say_is_commented_and_checked_by_the_fallback(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"size": {"type": "integer"}, "unit": {"type": "string"}},
        "required": ["size"],
        "not": {"required": ["unit"], "properties": {"size": {"const": 0}}},
    }
    locked = surface({"name": "measure", "inputSchema": schema})
    generated = imported(tmp_path, locked, "measure_pkg")
    source = (tmp_path / "measure_pkg" / "types.py").read_text()
    assert "# Not said by the types below, checked by the fallback validator:" in source
    assert "# - definition MeasureArguments: `not` (checked by the fallback)" in source
    tool = generated.client.MEASURE
    assert msgspec.convert(
        {"size": 0, "unit": "m"}, generated.MeasureArguments
    )  # the type passes it
    with pytest.raises(mcpbind.ProtocolError, match=r"\$.arguments: .* should not be valid"):
        tool.check_arguments({"size": 0, "unit": "m"})
    assert tool.check_arguments({"size": 1, "unit": "m"}).size == 1


def test_a_tool_error_raises_with_its_text() -> None:
    result = mcpbind.bindings(REVISION).CallToolResult(
        content=[mcpbind.bindings(REVISION).TextContent(text="no such city")],
        is_error=True,
    )
    assert str(ToolCallError("get_weather", result)) == "tool 'get_weather' failed: no such city"
