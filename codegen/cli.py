"""The ``mcpbind`` command line."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from . import cache, paths
from .pin import PinError, pins, read_schema_bytes


def _fail(command: str, exc: Exception) -> NoReturn:
    """One line naming what failed, exit 2: the input (a download, a file, a pin) is at fault."""
    click.echo(f"mcpbind {command}: {exc}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Generate and inspect exact msgspec bindings for every MCP revision."""


@main.command()
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
        files = writer.generate(revisions or None)
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


@main.command()
def revisions() -> None:
    """List the pinned revisions with their sha256 and source."""
    for p in pins():
        try:
            _, source = read_schema_bytes(p)
            status = "ok"
        except PinError as exc:
            source, status = p.source, f"unavailable: {exc}"
        click.echo(f"{p.revision:<12} {p.sha256}  {source}  [{status}]")


@main.command()
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
    help="markdown for review, json for tools (shape in docs/diff.md).",
)
def diff(a: str, b: str, fmt: str) -> None:
    """The protocol changes from revision A to revision B, each with a kind and whom it breaks."""
    from . import diff as differ
    from . import diff_render

    known = [p.revision for p in pins()]
    for name, value in (("A", a), ("B", b)):
        if value not in known:
            raise click.BadParameter(
                f"{value!r} is not pinned; pinned: {', '.join(known)}", param_hint=name
            )
    try:
        result = differ.diff(a, b)
    except PinError as exc:
        _fail("diff", exc)
    click.echo(
        diff_render.markdown(result) if fmt == "markdown" else diff_render.to_json(result), nl=False
    )


class _Unreadable(click.ClickException):
    exit_code = 2  # like a usage error: nothing was validated


@main.command()
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


@main.command()
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
    try:
        from . import migrate as migrator
    except ImportError as exc:
        if exc.name not in ("libcst", "jinja2"):
            raise
        click.echo(
            "mcpbind migrate: needs libcst; install the codegen extra: pip install 'mcpbind[codegen]'",
            err=True,
        )
        sys.exit(2)
    known = [p.revision for p in pins()]
    for name, value in (("--from", a), ("--to", b)):
        if value not in known:
            raise click.BadParameter(
                f"{value!r} is not pinned; pinned: {', '.join(known)}", param_hint=name
            )
    try:
        report = migrator.migrate(a, b, list(targets), write=not check)
    except PinError as exc:
        _fail("migrate", exc)
    except migrator.MigrateError as exc:
        _fail("migrate", exc)
    if check:
        click.echo(report.markdown(), nl=False)
        sys.exit(1 if report.changed else 0)
    click.echo(report.summary())


@main.command()
@click.option(
    "--revision",
    "-r",
    "revision",
    required=True,
    metavar="R",
    help="The revision the transcript speaks.",
)
@click.option("--strict", is_flag=True, help="Also report keys that R does not define.")
@click.argument("file", type=click.File("rb"))
def validate(revision: str, strict: bool, file: Any) -> None:
    """Check a JSON-RPC transcript (JSON Lines, both directions of one session) against revision R.

    Each finding is a line: its line number, JSON-RPC error code and JSON path. Exit 0 when
    there is none, 1 when there are findings, 2 when FILE is not a UTF-8 text transcript.
    """
    import mcpbind
    from mcpbind.validate import UnreadableTranscript, read_transcript, validate_lines

    if revision not in mcpbind.REVISIONS:
        raise click.BadParameter(
            f"{revision!r} is not a known revision: {', '.join(mcpbind.REVISIONS)}"
        )
    try:
        lines = read_transcript(file.read())
    except UnreadableTranscript as exc:
        raise _Unreadable(f"{file.name}: {exc}") from None
    findings = 0
    for finding in validate_lines(lines, revision, strict=strict):
        click.echo(str(finding))
        findings += 1
    if findings:
        click.echo(f"{findings} finding(s)", err=True)
        sys.exit(1)


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog="""\b
Example: an MCP client that speaks 2025-11-25 in front of a server held to 2026-07-28:
  mcpbind bridge --server-revision 2026-07-28 -- python server.py
The client runs `mcpbind bridge ... -- CMD ARGS` as its server command.""",
)
@click.option(
    "--client-revision",
    default="auto",
    metavar="R|auto",
    show_default=True,
    help="The revision to speak with the client (on stdin/stdout); auto: the newest released "
    "revision the client asks for.",
)
@click.option(
    "--server-revision",
    default="auto",
    metavar="R|auto",
    show_default=True,
    help="The revision to speak with the server (CMD, started by the bridge); auto: the newest "
    "released revision the server accepts.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Answer a message the other side's revision cannot carry whole with a JSON-RPC error "
    "(the lost JSON paths in its data) instead of passing it on with the loss logged on stderr.",
)
@click.argument(
    "command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD ARGS..."
)
def bridge(
    client_revision: str, server_revision: str, strict: bool, command: tuple[str, ...]
) -> None:
    """A stdio proxy between an MCP client and an MCP server of different revisions.

    Each side negotiates its own revision; every message crossing is projected into the other
    side's revision. What the target revision cannot carry follows the overlay's [[loss]] rules
    (e.g. resource_link content becomes a text block holding its URI for 2024-11-05) and is
    logged on stderr with its JSON path. Handshakes are translated (initialize <->
    server/discover), as are ids, progress and cancellation. When either side goes away, every
    pending request gets an error and the bridge exits.
    """
    from mcpbind import RELEASED, REVISIONS
    from mcpbind.bridge.stdio import run

    sides = {}
    for name, value in (("client", client_revision), ("server", server_revision)):
        if value != "auto" and value not in REVISIONS:
            _fail(
                "bridge",
                ValueError(f"--{name}-revision {value!r}: one of auto, {', '.join(REVISIONS)}"),
            )
        sides[name] = RELEASED if value == "auto" else (value,)
    sys.exit(run(list(command), sides["client"], sides["server"], strict=strict))
