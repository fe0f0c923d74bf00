"""``mcpbind surface``: lock, check, diff and generate a server's surface (docs/surface.md).

Loaded by ``mcpbind.cli`` at start-up: this module imports click only; each command imports
what it needs when it runs. Exit codes: 0 done (``check``: the server matches its lock), 1 a
``check`` that found changes or a ``generate --check`` that found the package stale, 2 what was
given is at fault (a lock, a target, a server that cannot be reached or read)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["surface"]

TARGET_HELP = "TARGET is a URL (http:// or https://) or a command after --: -- CMD ARGS..."


def _fail(message: str) -> Any:
    click.echo(f"{click.get_current_context().command_path}: {' '.join(message.split())}", err=True)
    sys.exit(2)


def _target(words: tuple[str, ...]) -> str | list[str]:
    if words[:1] == ("--",):  # (click keeps it when it follows another argument)
        words = words[1:]
    if not words:
        _fail(f"the server is missing. {TARGET_HELP}")
    if len(words) == 1 and words[0].startswith(("http://", "https://")):
        return words[0]
    return list(words)


def _revisions(given: tuple[str, ...]) -> dict[str, Any]:
    from .._revisions import REVISIONS

    for r in given:
        if r not in REVISIONS:
            _fail(f"--revision {r!r}: one of {', '.join(REVISIONS)}")
    return {"revisions": given} if given else {}


def _run(coroutine: Any) -> Any:
    """Run a command's coroutine; what the server or the input got wrong is one line, exit 2."""
    from ..errors import ProtocolError
    from .canonical import MissingExtra
    from .lockfile import LockError

    try:
        return asyncio.run(coroutine)
    except (ProtocolError, LockError, MissingExtra, ConnectionError, TimeoutError, OSError) as exc:
        _fail(str(exc))
    except ValueError as exc:
        _fail(str(exc))


def _lock(path: str) -> Any:
    from .canonical import MissingExtra
    from .lockfile import Lock, LockError

    try:
        return Lock.read(path)
    except (LockError, MissingExtra) as exc:
        return _fail(str(exc))


_REVISION = click.option(
    "--revision",
    "-r",
    "revisions",
    multiple=True,
    metavar="R",
    help="A revision to offer the server (repeatable); default: every released one, newest "
    "preferred.",
)
_TIMEOUT = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for each answer of the server.",
)
_TARGET_ARGS: dict[str, Any] = {"ignore_unknown_options": True, "allow_interspersed_args": False}


@click.group("surface")
def surface() -> None:
    """A server's own tools, prompts and resources: lock them, check and review changes, and
    generate a typed client (needs pip install "mcpbind[surface]")."""


@surface.command(context_settings=_TARGET_ARGS, epilog=TARGET_HELP)
@click.option(
    "-o",
    "--output",
    default="mcp-surface.lock",
    show_default=True,
    metavar="LOCK",
    help="The lock file to write.",
)
@_REVISION
@_TIMEOUT
@click.argument("target", nargs=-1, type=click.UNPROCESSED, metavar="TARGET")
def lock(output: str, revisions: tuple[str, ...], timeout: float, target: tuple[str, ...]) -> None:
    """Lock the surface of the server at TARGET: every tool, prompt, resource and resource
    template, each with the sha256 of its RFC 8785 canonical JSON."""
    from .api import lock as lock_surface

    where = _target(target)
    found = _run(lock_surface(where, output, timeout=timeout, **_revisions(revisions)))
    counts = ", ".join(f"{len(v)} {k.replace('_', ' ')}(s)" for k, v in found.items.items())
    click.echo(
        f"locked {counts} of {found.server.get('name', 'the server')} ({found.revision}) in {output}"
    )


@surface.command(context_settings=_TARGET_ARGS, epilog=TARGET_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
)
@_TIMEOUT
@click.argument("lock_file", metavar="LOCK")
@click.argument("target", nargs=-1, type=click.UNPROCESSED, metavar="TARGET")
def check(fmt: str, timeout: float, lock_file: str, target: tuple[str, ...]) -> None:
    """Exit 1 with a report when the surface of the server at TARGET differs from LOCK (a new
    or renamed item is unapproved); exit 0 when it matches."""
    from . import render
    from .api import check as check_surface

    locked = _lock(lock_file)
    report = _run(check_surface(locked, _target(target), timeout=timeout))
    if report.changes:
        click.echo(
            render.markdown(report) if fmt == "markdown" else render.to_json(report), nl=False
        )
    if report.drifted:
        click.echo(
            f"{lock_file}: the server's surface differs from the lock "
            f"({len(report.changes)} change(s))",
            err=True,
        )
        sys.exit(1)
    click.echo(
        f"{lock_file}: the server's surface matches the lock ({len(locked)} items)", err=True
    )


# (options may follow OLD and NEW, as in ``mcpbind diff``; a command comes after --)
@surface.command(context_settings={"ignore_unknown_options": True}, epilog=TARGET_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
    help="markdown for review, json for tools (shape in docs/surface.md).",
)
@_TIMEOUT
@click.argument("old", metavar="OLD")
@click.argument("new", nargs=-1, type=click.UNPROCESSED, metavar="NEW")
def diff(fmt: str, timeout: float, old: str, new: tuple[str, ...]) -> None:
    """Review the changes from the lock OLD to NEW: another lock, or a live server (a URL, or
    -- CMD ARGS...). Each change has a kind and says whether it breaks a caller."""
    from . import render
    from .api import diff as diff_surfaces
    from .api import read_target

    before = _lock(old)
    if new[:1] != ("--",) and len(new) == 1 and _is_lock(new[0]):
        after = _lock(new[0])
    else:
        after = _run(read_target(_target(new), timeout=timeout, revisions=(before.revision,)))
    report = diff_surfaces(before, after)
    click.echo(render.markdown(report) if fmt == "markdown" else render.to_json(report), nl=False)


def _is_lock(word: str) -> bool:
    """A lock file (an existing file holding a JSON object), not a URL or a one-word command."""
    path = Path(word)
    if word.startswith(("http://", "https://")) or not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(64).lstrip()[:1] == b"{"


# The import names of the generator (pyproject.toml's codegen extra).
_GENERATOR = ("jinja2", "libcst", "black")


@surface.command()
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="PACKAGE",
    help="The package directory to write (its name is the import name, e.g. weather_server).",
)
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="Write nothing; exit 1 with a diff when PACKAGE is stale.",
)
@click.argument("lock_file", metavar="LOCK")
def generate(output: str, check_only: bool, lock_file: str) -> None:
    """Generate a typed Python package for the server locked in LOCK: a msgspec Struct of each
    tool's arguments, typed results, a typed async client class on mcpbind.Client."""
    missing = [m for m in _GENERATOR if importlib.util.find_spec(m) is None]
    if missing:
        _fail(
            f"surface generate needs the generator ({', '.join(missing)} missing): "
            'pip install "mcpbind[codegen]"'
        )
    import codegen.surface.generate as generator

    locked = _lock(lock_file)
    try:
        files = generator.package_files(locked, Path(output))
    except generator.GenerateError as exc:
        _fail(str(exc))
    if check_only:
        diffs = generator.stale(files)
        if diffs:
            sys.stdout.write("".join(diffs))
            click.echo(
                f"{output} is stale in {len(diffs)} file(s): run `mcpbind surface generate "
                f"{lock_file} -o {output}`",
                err=True,
            )
            sys.exit(1)
        click.echo(f"{output} is up to date ({len(files)} files)")
        return
    written = generator.write(files, Path(output))
    click.echo(f"{len(written)} of {len(files)} files changed in {output}")
