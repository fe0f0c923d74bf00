"""The generator's commands of ``mcpbind``: ``generate``, ``pin`` and ``migrate``.

``mcpbind.cli`` (the console script) loads this module only when one of them is named. It
imports click and the standard library only, so that each command can say in one line which
extra to install when the generator is missing.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import NoReturn

import click

from . import cache, paths
from .digest import DigestError
from .pin import PinError, pins

# The import names of pyproject.toml's ``codegen`` extra (tests/test_packaging.py keeps them in step).
GENERATOR_MODULES = ("jinja2", "libcst", "black")


def _fail(command: str, exc: Exception) -> NoReturn:
    """One line naming what failed, exit 2: the input (a download, a file, a pin) is at fault."""
    click.echo(f"mcpbind {command}: {exc}", err=True)
    sys.exit(2)


def _require_generator(command: str) -> None:
    """Exit 2 with one line naming the extra to install when a module of the generator is missing."""
    missing = [m for m in GENERATOR_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        click.echo(
            f'mcpbind {command} needs the generator ({", ".join(missing)} missing): '
            'pip install "mcpbind[codegen]"',
            err=True,
        )
        sys.exit(2)


@click.command()
@click.option(
    "--revision",
    "-r",
    "revisions",
    multiple=True,
    metavar="R",
    help="Only this revision (repeatable). Default: every pinned revision.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 with a diff when committed output is stale.",
)
@click.option(
    "--force", is_flag=True, help="Regenerate even when no input changed since the last run."
)
def generate(revisions: tuple[str, ...], check: bool, force: bool) -> None:
    """Regenerate the bindings from the pinned schemas."""
    _require_generator("generate")
    if paths.INSTALLED:
        raise click.ClickException(
            "`mcpbind generate` runs in a checkout of mcpbind (it writes generated/ there)"
        )
    started = time.perf_counter()
    known = [p.revision for p in pins()]
    for r in revisions:
        if r not in known:
            raise click.BadParameter(
                f"{r!r} is not pinned; pinned: {', '.join(known)}", param_hint="--revision"
            )
    if not revisions and not force and cache.up_to_date():
        elapsed = time.perf_counter() - started
        click.echo(
            f"generated output is up to date: no input changed since the last run ({elapsed:.2f} s)"
        )
        return
    from . import write as writer  # the renderer (black, jinja2, libcst) loads only when needed

    try:
        files = writer.generate(revisions or None, settle=check)
    except PinError as exc:
        _fail("generate", exc)
    except Exception as exc:  # every stage raises its own error type with the reason
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc
    if check:
        diffs = writer.stale(files)
        if diffs:
            sys.stdout.write("".join(diffs))
            click.echo(
                f"generated output is stale in {len(diffs)} file(s); run `make generate`", err=True
            )
            sys.exit(1)
        if not revisions:
            cache.record(files)
        click.echo(f"generated output is up to date ({len(files)} files)")
        return
    try:
        writer.verify(files)
    except writer.VerifyError as exc:
        raise click.ClickException(str(exc)) from exc
    written = writer.write(files)
    if not revisions:
        cache.record(files)
    elapsed = time.perf_counter() - started
    click.echo(f"{len(written)} of {len(files)} files changed ({elapsed:.1f} s)")


@click.command()
@click.argument("revision", metavar="R")
@click.option(
    "--url", metavar="URL", help="Download the schema from URL (recorded as the revision's source)."
)
@click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="Read the schema from PATH.",
)
@click.option(
    "--examples",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    metavar="DIR",
    help="Also store the official examples (DIR/<Type>/<name>.json) beside the schema.",
)
@click.option(
    "--released/--draft",
    "released",
    default=None,
    help="Whether R is a released revision (LATEST is the last released one). Default: released when R is a date.",
)
@click.option(
    "--update", is_flag=True, help="Re-pin an already pinned revision (a moving one such as draft)."
)
def pin(
    revision: str,
    url: str | None,
    file: Path | None,
    examples: Path | None,
    released: bool | None,
    update: bool,
) -> None:
    """Pin revision R: store its schema in the schema directory and record it in schema/revisions.toml.

    Then `make generate` emits its package, the projections to and from every other revision
    and docs/changes/. Exit 2 with one line when the download fails, the file is not an MCP
    schema, or R is already pinned (without --update).
    """
    _require_generator("pin")
    from .pin import pin_revision, schema_file

    if paths.INSTALLED:
        raise click.ClickException(
            "`mcpbind pin` runs in a checkout of mcpbind (it writes schema/revisions.toml there)"
        )
    try:
        p = pin_revision(
            revision, url=url, file=file, examples=examples, released=released, update=update
        )
    except PinError as exc:
        _fail("pin", exc)
    state = "released" if p.released else "not released"
    click.echo(
        f"pinned {p.revision} ({state}) sha256 {p.sha256}, {p.size} bytes, from {p.source} -> {schema_file(p.revision)}"
    )
    click.echo("now run `make generate`")


@click.command()
@click.option(
    "--from", "a", required=True, metavar="A", help="The revision the code is written for."
)
@click.option("--to", "b", required=True, metavar="B", help="The revision to move it to.")
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; report in Markdown; exit 1 when something would change.",
)
@click.argument(
    "targets",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, path_type=Path),
    metavar="PATH...",
)
def migrate(a: str, b: str, check: bool, targets: tuple[Path, ...]) -> None:
    """Move Python code from revision A's bindings to B's (a libcst codemod driven by `mcpbind diff A B`).

    Rewrites imports of A's package to B's, renames what B renamed, and marks each use of what
    B removed or changed in a breaking way with a comment naming the change and docs/changes/.
    """
    _require_generator("migrate")
    from . import migrate as migrator

    known = [p.revision for p in pins()]
    for name, value in (("--from", a), ("--to", b)):
        if value not in known:
            raise click.BadParameter(
                f"{value!r} is not pinned; pinned: {', '.join(known)}", param_hint=name
            )
    try:
        report = migrator.migrate(a, b, list(targets), write=not check)
    except (PinError, DigestError, migrator.MigrateError) as exc:
        _fail("migrate", exc)
    if check:
        click.echo(report.markdown(), nl=False)
        sys.exit(1 if report.changed else 0)
    click.echo(report.summary())
