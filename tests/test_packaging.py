"""The wheel: runtime plus every generated package; msgspec the runtime's only import, click the
command line's; on a plain install, offline, every command that needs no generator works."""

import json
import os
import re
import subprocess
import sys
import time
import tomllib
import venv
import zipfile

import pytest

from codegen.cli import GENERATOR_MODULES
from codegen.paths import REPO_ROOT

PACKAGES = ("v2024_11_05", "v2025_03_26", "v2025_06_18", "v2025_11_25", "v2026_07_28", "draft")


@pytest.fixture(scope="module")
def wheel_file(tmp_path_factory):
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
    return path


@pytest.fixture(scope="module")
def wheel(wheel_file):
    return zipfile.ZipFile(wheel_file)


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
    digests = sorted(n for n in names if n.endswith(".json"))
    assert digests == [f"mcpbind/_digest/{p}.json" for p in sorted(PACKAGES)]
    for name in digests:  # each a digest of the IR, none an upstream schema
        assert json.loads(wheel.read(name))["format"] == "mcpbind.digest/1"


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


def test_the_command_line_loads_click_and_the_runtime_only():
    code = (
        "import sys, mcpbind.cli;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'codegen', 'jinja2', 'libcst', 'black', 'datamodel_code_generator'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert out.stdout.strip() == "[]"


def test_the_generator_modules_are_the_codegen_extra():
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert tuple(re.split(r"[<>=!~\[; ]", r)[0] for r in extras["codegen"]) == GENERATOR_MODULES


# -- a plain install, offline ------------------------------------------------------------------------

TRANSCRIPT = [
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    },
    {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 7}},
]


@pytest.fixture(scope="module")
def plain(wheel_file, tmp_path_factory):
    """A fresh venv holding the wheel, msgspec and click only, installed with no index."""
    root = tmp_path_factory.mktemp("plain")
    found = root / "wheels"
    found.mkdir()
    (found / wheel_file.name).write_bytes(wheel_file.read_bytes())
    # The dependencies' wheels come from the project's own package index (or pip's cache)
    # before the install; the install itself sees that folder and nothing else.
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(found)]
        + ["msgspec>=0.22,<0.23", "click>=8.1"],
        capture_output=True,
        text=True,
        check=False,
    )
    if fetched.returncode != 0:
        pytest.skip(f"cannot fetch the msgspec and click wheels: {fetched.stderr.strip()[-300:]}")
    env_dir = root / "venv"
    venv.create(env_dir)  # without pip of its own: this pip installs into it (--python)
    offline = {
        k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "MCPBIND_"))
    }
    offline.update(
        PIP_CONFIG_FILE=os.devnull,  # no index, no find-links but the folder named
        HTTP_PROXY="http://127.0.0.1:9",  # anything that tries the network fails at once
        HTTPS_PROXY="http://127.0.0.1:9",
        http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install"]
        + ["-q", "--no-index", "--find-links", str(found), "mcpbind"],
        check=True,
        capture_output=True,
        env=offline,
        cwd=root,
    )
    (root / "session.jsonl").write_text("".join(json.dumps(m) + "\n" for m in TRANSCRIPT))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(env_dir / "bin" / "mcpbind"), *args],
            capture_output=True,
            text=True,
            env=offline,
            cwd=root,
            timeout=60,
            check=False,
        )

    return env_dir, run


def test_a_plain_install_holds_no_generator(plain):
    env_dir, _ = plain
    code = (
        f"import importlib.util as u; print([m for m in {GENERATOR_MODULES!r} if u.find_spec(m)])"
    )
    out = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_plain_install_runs_help_revisions_validate_and_diff_offline(plain):
    _, run = plain
    started = time.perf_counter()
    helped = run("--help")
    assert helped.returncode == 0 and "validate" in helped.stdout and "diff" in helped.stdout
    listed = run("revisions")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        "2026-07-28",
        "draft",
    ]
    checked = run("validate", "--revision", "2025-11-25", "session.jsonl")
    assert checked.returncode == 1, checked.stderr  # the last line's name is not a string
    assert checked.stdout.startswith("line 4: [-32602] $.params.name: Invalid params")
    changed = run("diff", "2025-06-18", "2025-11-25", "--format", "json")
    assert changed.returncode == 0, changed.stderr
    report = json.loads(changed.stdout)
    assert report["summary"]["total"] > 0
    assert (REPO_ROOT / "docs" / "changes" / "2025-06-18__2025-11-25.md").read_text() == run(
        "diff", "2025-06-18", "2025-11-25"
    ).stdout
    assert time.perf_counter() - started < 30


@pytest.mark.parametrize(
    "args, line",
    [
        (("generate",), 'mcpbind generate needs the generator (jinja2, libcst, black missing): pip install "mcpbind[codegen]"'),
        (("pin", "2099-01-01", "--file", "x.json"), 'mcpbind pin needs the generator (jinja2, libcst, black missing): pip install "mcpbind[codegen]"'),
        (("migrate", "--from", "2025-06-18", "--to", "2025-11-25", "."), 'mcpbind migrate needs the generator (jinja2, libcst, black missing): pip install "mcpbind[codegen]"'),
        (("diff", "1999", "2000"), "mcpbind diff: A: '1999' is not a known revision; known: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28, draft"),
        (("validate", "--revision", "2025-11-25", "missing.jsonl"), "mcpbind validate: Invalid value for 'FILE': 'missing.jsonl': No such file or directory (see `mcpbind validate --help`)"),
        (("diff", "2025-06-18"), "mcpbind diff: Missing argument 'B'. (see `mcpbind diff --help`)"),
    ],
)  # fmt: skip
def test_on_a_plain_install_a_user_error_is_one_line_and_exit_2(plain, args, line):
    _, run = plain
    done = run(*args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")
