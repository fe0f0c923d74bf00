"""The docs' code runs as written: every ```` ```python ```` block of docs/*.md and README.md, in
order, each page in a directory of its own, and ``mypy --strict`` over the client examples.

A block's info string says how it runs:

- ```` ```python ````: a program; it must exit 0.
- ```` ```python file=NAME ````: written to NAME for the page's later blocks (``server.py``).
- ```` ```python fragment ````: a piece of a larger program, shown alone: not run.
- ```` ```python fails ````: a program that shows a failure; it must not exit 0.
- ```` ```sh run ````: a command that must exit 0; ```` ```sh background ````: a server the
  page's later blocks reach, started and waited for (each port of its block listening) and
  stopped after the page. Other ```` ```sh ```` blocks (``pip install``) are not run.

On a page with background servers, each port ``80NN`` its blocks name is replaced by a port
free on this machine.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from codegen.paths import REPO_ROOT
from tests._net import free_port, wait_port

PAGES = sorted((REPO_ROOT / "docs").glob("*.md")) + [REPO_ROOT / "README.md"]
BLOCK = re.compile(r"^```([^\n`]*)\n(.*?)^```", flags=re.S | re.M)
MODES = {"run", "file", "fragment", "fails", "background"}
PORT = re.compile(r"\b80\d\d\b")
BIN = str(Path(sys.executable).parent)
# The calls whose results must not be Any for a type checker (issue: a typed Client).
TYPED_CALLS = (".call_tool(", ".list_tools(", ".read_resource(", ".get_prompt(")
CLIENT = re.compile(r"(?<![\w.])Client\(")  # mcpbind.Client, not OAuthClient(...)


@dataclass
class Block:
    page: str
    index: int
    language: str
    mode: str  # "run" (a plain python block), "file", "fragment", "fails", "background"
    name: str | None  # file=NAME
    code: str

    @property
    def where(self) -> str:
        return f"{self.page} block {self.index}"


def blocks(page: Path) -> list[Block]:
    found = []
    text = page.read_text(encoding="utf-8")
    for index, match in enumerate(BLOCK.finditer(text)):
        language, *words = match.group(1).split() or [""]
        mode, name = "run", None
        for word in words:
            key, _, value = word.partition("=")
            assert key in MODES, f"{page.name} block {index}: unknown mark {word!r}"
            mode, name = key, value or None
        if language == "sh" and not words:
            mode = "fragment"  # shown, not run (an install line)
        found.append(Block(page.name, index, language, mode, name, match.group(2)))
    return found


def python_blocks(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.language == "python"]


def env() -> dict[str, str]:
    """The environment the page's code runs in: this checkout's mcpbind, this venv's commands."""
    return {
        **os.environ,
        "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO_ROOT),
    }


def with_ports(page: list[Block]) -> list[Block]:
    """The page's blocks with each port 80NN replaced by a free one, where it starts servers."""
    if not any(b.mode == "background" for b in page):
        return page
    ports: dict[str, str] = {}
    for b in page:
        for port in PORT.findall(b.code):
            ports.setdefault(port, str(free_port()))
    return [
        Block(b.page, b.index, b.language, b.mode, b.name, PORT.sub(lambda m: ports[m[0]], b.code))
        for b in page
    ]


def run_page(page: Path, where: Path) -> None:
    """Run the page's blocks in order in ``where``."""
    servers: list[subprocess.Popen[bytes]] = []
    try:
        for b in with_ports(blocks(page)):
            if b.mode == "fragment" or b.language not in ("python", "sh"):
                continue
            if b.mode == "file":
                assert b.name, f"{b.where}: file= needs a name"
                (where / b.name).write_text(b.code, encoding="utf-8")
                continue
            if b.language == "python":
                script = where / f"_block_{b.index}.py"
                script.write_text(b.code, encoding="utf-8")
                argv = [sys.executable, script.name]
            else:
                argv = ["bash", "-e", "-c", b.code]
            if b.mode == "background":
                server = subprocess.Popen(
                    argv, cwd=where, env=env(), stdout=subprocess.DEVNULL, start_new_session=True
                )
                servers.append(server)
                for port in PORT.findall(b.code) or re.findall(r":(\d{4,5})\b", b.code):
                    wait_port(int(port), server)
                continue
            done = subprocess.run(argv, cwd=where, env=env(), capture_output=True, timeout=300)
            said = (done.stdout + done.stderr).decode(errors="replace")
            if b.mode == "fails":
                assert done.returncode != 0, f"{b.where} was to fail:\n{said}"
            else:
                assert done.returncode == 0, f"{b.where} failed:\n{said}"
    finally:
        for server in servers:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_of_the_page_runs_or_is_marked(page: Path, tmp_path: Path):
    run_page(page, tmp_path)


def test_getting_started_serves_and_calls_its_first_server_over_stdio_and_http():
    page = python_blocks(REPO_ROOT / "docs" / "getting-started.md")
    files = {b.name for b in page if b.mode == "file"}
    assert {"server.py", "http_server.py", "test_server.py"} <= files
    calls = [b.code for b in page if b.mode == "run"]
    assert any('["python", "server.py"]' in c and "http://127.0.0.1:8000/mcp" in c for c in calls)
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    first_link = re.search(r"\]\(([^)]+\.md)\)", readme)
    assert first_link and first_link.group(1) == "docs/getting-started.md"
    assert 'pip install "mcpbind[http]"' in (REPO_ROOT / "docs" / "getting-started.md").read_text()


def test_mypy_strict_passes_over_the_client_examples_with_no_any_in_typed_calls(tmp_path: Path):
    """Each page's client examples (the runnable blocks using ``Client(``, with the files they
    import) under ``mypy --strict``; ``--disallow-any-expr`` finds an ``Any`` on the lines of
    the typed calls."""
    checked = []
    for page in PAGES:
        page_blocks = python_blocks(page)
        clients = [b for b in page_blocks if b.mode in ("run", "file") and CLIENT.search(b.code)]
        if not clients:
            continue
        for b in page_blocks:
            if b.mode == "file" or b in clients:
                name = b.name or f"{page.stem.replace('-', '_')}_{b.index}.py"
                (tmp_path / name).write_text(b.code, encoding="utf-8")
                checked.append(name)
    assert len(checked) >= 6, checked
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--disallow-any-expr",
            "--show-column-numbers",
            *sorted(set(checked)),
        ],
        cwd=tmp_path,
        env={**env(), "MYPYPATH": str(REPO_ROOT / "generated")},
        capture_output=True,
        text=True,
        timeout=900,
    )
    problems = []
    for line in done.stdout.splitlines():
        found = re.match(r"(.+?):(\d+):(\d+): error: (.*)", line)
        if found is None:
            continue
        name, number, column, message = found[1], int(found[2]), int(found[3]), found[4]
        source = (tmp_path / name).read_text(encoding="utf-8").splitlines()[number - 1]
        any_expression = message.startswith(
            ('Expression has type "Any"', "Expression type contains")
        )
        # An Any starting before the method's name is the call's result (or holds it); one
        # after it is an argument (a dict literal typed by the Mapping[str, Any] parameter).
        calls = [source.find(call) for call in TYPED_CALLS if call in source]
        if not any_expression or (calls and column - 1 < min(calls)):
            problems.append(f"{line}\n    {source.strip()}")
    ran = re.search(r"(?:Success: no issues found in|\(checked) (\d+) source file", done.stdout)
    assert ran and int(ran[1]) == len(set(checked)), done.stdout + done.stderr
    assert not problems, "\n".join(problems)
