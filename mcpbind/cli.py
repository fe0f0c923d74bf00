"""The ``mcpbind`` command line.

A tool room beside the runtime: the runtime never imports this module, and it imports only
click and the runtime at start-up, so a plain ``pip install mcpbind`` runs every command that
needs no generator (``revisions``, ``validate``, ``diff``, which reads the committed digests).
The generator's commands (``generate``, ``pin``, ``migrate``) live in ``codegen/cli.py`` and load
when named; each says in one line which extra to install when the generator is missing.

Every user error is one line on stderr and exit 2, never a usage block or a traceback.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

import click

from ._revisions import LATEST, REVISIONS, SHA256, SOURCES

if TYPE_CHECKING:
    from .bridge.gateway.surface import SurfaceLock

# The generator's commands: name -> the ``codegen.cli`` attribute that defines it.
GENERATOR_COMMANDS = {"generate": "generate", "pin": "pin", "migrate": "migrate"}


class UserError(click.ClickException):
    """What the user gave is at fault (a revision, a file, a download): one line, exit 2."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        ctx = click.get_current_context(silent=True)
        self.where = ctx.command_path if ctx is not None else "mcpbind"

    def show(self, file: IO[Any] | None = None) -> None:
        _echo_line(f"{self.where}: {self.format_message()}")


class _Main(click.Group):
    """The command group: the runtime's commands, plus the generator's loaded when named."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *GENERATOR_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in GENERATOR_COMMANDS:
            from codegen import cli as generator  # click and the standard library only

            command: click.Command = getattr(generator, GENERATOR_COMMANDS[name])
            return command
        return super().get_command(ctx, name)

    def main(  # type: ignore[override]
        self, args: Any = None, prog_name: str | None = None, **extra: Any
    ) -> Any:
        """Run as click does, but report a usage error in one line (with where to find help)."""
        standalone = extra.pop("standalone_mode", True)
        if not standalone:
            return super().main(args, prog_name, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()  # the help text itself
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "mcpbind"
            _echo_line(f"{where}: {exc.format_message()} (see `{where} --help`)")
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            _echo_line("mcpbind: aborted")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def _echo_line(message: str) -> None:
    """An error on stderr as one line, whatever line breaks its message holds."""
    click.echo(" ".join(message.split()), err=True)


@click.group("mcpbind", cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Exact msgspec bindings for every MCP revision: inspect, validate and compare revisions.

    validate checks a transcript, diff compares two revisions, bridge proxies between two.
    generate, pin and migrate need the generator: pip install "mcpbind[codegen]".
    """


# The runtime's commands:
# each imports what it needs inside, so that `mcpbind --help` loads only click and the runtime.


@main.command()
def revisions() -> None:
    """List the pinned revisions, oldest first, with their sha256 and source."""
    for r in REVISIONS:
        mark = "  (latest)" if r == LATEST else ""
        click.echo(f"{r:<12} {SHA256[r]}  {SOURCES[r]}{mark}")


def _known(value: str, what: str) -> str:
    if value not in REVISIONS:
        raise UserError(f"{what}: {value!r} is not a known revision; known: {', '.join(REVISIONS)}")
    return value


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
@click.option(
    "--summary",
    is_flag=True,
    help="Only the counts by section and kind, and the methods added and removed by name.",
)
def diff(a: str, b: str, fmt: str, summary: bool) -> None:
    """The protocol changes from revision A to revision B, each with a kind and whom it breaks.

    Computed from the digests of the two revisions that ship with mcpbind (no schema needed).
    On a terminal the generated-file comment of docs/changes/ is left out.
    """
    from codegen import diff_render  # the standard library only: no generator needed
    from codegen.diff import diff as compute
    from codegen.digest import DigestError

    _known(a, "A"), _known(b, "B")
    try:
        result = compute(a, b)
    except DigestError as exc:
        raise UserError(str(exc)) from None
    if summary:
        text = (
            diff_render.summary(result) if fmt == "markdown" else diff_render.summary_json(result)
        )
    elif fmt == "markdown":
        text = diff_render.markdown(result, header=not sys.stdout.isatty())
    else:
        text = diff_render.to_json(result)
    click.echo(text, nl=False)


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
    there is none, 1 when there are findings, 2 when FILE is not a UTF-8 text transcript. A last
    line on stderr counts the findings, or the messages checked when there is none.
    """
    from .validate import UnreadableTranscript, read_transcript, validate_lines

    _known(revision, "--revision")
    try:
        lines = read_transcript(file.read())
    except UnreadableTranscript as exc:
        raise UserError(f"{file.name}: {exc}") from None
    findings = 0
    for finding in validate_lines(lines, revision, strict=strict):
        click.echo(str(finding))
        findings += 1
    if findings:
        click.echo(f"{findings} finding(s)", err=True)
        sys.exit(1)
    messages = sum(1 for line in lines if line.strip())
    mode = ", strict" if strict else ""
    click.echo(f"{file.name}: {messages} message(s), no findings ({revision}{mode})", err=True)


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
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=1),
    metavar="N",
    # The defaults are the bridge's own (MAX_LINE, MAX_IN_FLIGHT_PER_SIDE), not loaded for --help.
    help="The longest message (one line) read from either side, 16777216 (16 MiB) by default. "
    "A longer one is dropped unread: from the client it is answered with -32600, from the "
    "server it fails the request it answers (or ends the connection when it cannot be told "
    "what it was).",
)
@click.option(
    "--max-in-flight",
    type=click.IntRange(min=1),
    metavar="N",
    help="How many requests from each side may await the other side's answer at once, 1024 by "
    "default; one more is answered at once with error -32603 (Server busy). With --listen: the "
    "requests of one client session (or identity) awaiting the server, 128 by default.",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help="Serve MCP over HTTP on HOST:PORT instead of stdio (the gateway): Streamable HTTP at "
    "--path for every revision, HTTP+SSE at /sse and /messages for 2024-11-05 clients; any number "
    "of clients, each in its own revision. The server is CMD (a child per client session) or "
    "--upstream.",
)
@click.option(
    "--path", default="/mcp", show_default=True, help="The Streamable HTTP endpoint (--listen)."
)
@click.option(
    "--upstream",
    metavar="URL",
    help="With --listen: the MCP server at URL (Streamable HTTP, or HTTP+SSE when it answers the "
    "opening POST with a 4xx) instead of CMD.",
)
@click.option(
    "--redis",
    metavar="URL",
    help="With --listen: keep sessions and event logs in this Redis, so that any worker serves "
    "any session and a client resumes its streams on any of them (docs/bridge.md).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="With --listen --upstream --redis: gateway processes on one port.",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --listen: client sessions held per front (each with its own link to the server), "
    "64 with CMD (a child each), 1024 with --upstream.",
)
@click.option(
    "--max-shared",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --listen: links of clients without a session (2026-07-28 on), one per client "
    "identity, 16 by default.",
)
@click.option(
    "--input-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Seconds a server's request waits for a 2026-07-28 client to retry with its answer, "
    "300 by default.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="With --listen: a host name clients may reach the gateway by (Host and Origin are "
    "checked); the loopback names by default. Repeat for several.",
)
@click.option(
    "--auth-server",
    metavar="URL",
    help="With --listen: clients present bearer tokens of this authorization server "
    "(Streamable HTTP only: HTTP+SSE is then off). The gateway never passes them on.",
)
@click.option(
    "--upstream-client-id",
    metavar="ID",
    help="With --listen --upstream: the gateway's own OAuth client at the upstream's "
    "authorization server (client credentials grant); clients' tokens are never passed on.",
)
@click.option(
    "--upstream-client-secret",
    metavar="SECRET",
    envvar="MCPBIND_UPSTREAM_CLIENT_SECRET",
    help="The secret of --upstream-client-id (or the MCPBIND_UPSTREAM_CLIENT_SECRET variable).",
)
@click.option(
    "--surface",
    "surface_lock",
    metavar="LOCK",
    help="With --listen: enforce this lock of the server's surface (`mcpbind surface lock`): a "
    "tool, prompt, resource or template it does not approve (new, renamed, or changed since) is "
    "left out of lists and its use refused with a JSON-RPC error naming the item and the "
    "change (--on-drift block), or only logged (warn). The server is spoken to in the lock's "
    "revision unless --server-revision says otherwise.",
)
@click.option(
    "--on-drift",
    type=click.Choice(["block", "warn"]),
    default="block",
    show_default=True,
    help="With --surface: what is done with what the lock does not approve.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- CMD ARGS...")
def bridge(
    client_revision: str,
    server_revision: str,
    strict: bool,
    max_line_bytes: int | None,
    max_in_flight: int | None,
    listen: str | None,
    path: str,
    upstream: str | None,
    redis: str | None,
    workers: int,
    max_sessions: int | None,
    max_shared: int | None,
    input_timeout: float | None,
    allowed_hosts: tuple[str, ...],
    auth_server: str | None,
    upstream_client_id: str | None,
    upstream_client_secret: str | None,
    surface_lock: str | None,
    on_drift: str,
    command: tuple[str, ...],
) -> None:
    """A proxy between MCP clients and an MCP server of different revisions: on stdio (one
    client), or with --listen over HTTP (any number of clients, each in its own revision).

    Each side negotiates its own revision; every message crossing is projected into the other
    side's revision. What the target revision cannot carry follows the overlay's [[loss]] rules
    (e.g. resource_link content becomes a text block holding its URI for 2024-11-05) and is
    logged on stderr with its JSON path. Handshakes are translated (initialize <->
    server/discover), as are ids, progress and cancellation. When either side goes away, every
    pending request gets an error and the bridge exits (when the server went first, once the
    client closes its input or has been silent for 2 s, its requests answered with the error).
    """
    sides = _sides(client_revision, server_revision)
    gateway_only = {
        "--upstream": upstream,
        "--redis": redis,
        "--max-sessions": max_sessions,
        "--max-shared": max_shared,
        "--allowed-host": allowed_hosts or None,
        "--auth-server": auth_server,
        "--upstream-client-id": upstream_client_id,
        "--workers": workers if workers != 1 else None,
        "--surface": surface_lock,
    }
    if listen is not None:
        enforced = None
        if surface_lock is not None:
            enforced = _surface(surface_lock, on_drift, sides, server_revision)
        _listen(
            listen,
            path,
            list(command),
            sides,
            strict=strict,
            max_line=max_line_bytes,
            max_in_flight=max_in_flight,
            upstream=upstream,
            redis=redis,
            workers=workers,
            max_sessions=max_sessions,
            max_shared=max_shared,
            input_timeout=input_timeout,
            allowed_hosts=allowed_hosts,
            auth_server=auth_server,
            upstream_client=(upstream_client_id, upstream_client_secret),
            surface=enforced,
        )
        return
    given = [name for name, value in gateway_only.items() if value is not None]
    if given:
        raise UserError(f"{', '.join(given)} only go with --listen")
    if not command:
        raise UserError("the server to start is missing: -- CMD ARGS...")
    sys.exit(_stdio(list(command), sides, strict, max_line_bytes, max_in_flight, input_timeout))


def _surface(
    path: str, mode: str, sides: dict[str, tuple[str, ...]], server_revision: str
) -> SurfaceLock:
    """The lock at ``path`` as the gateway enforces it (a ``UserError`` naming what is wrong
    with it); the server's side then speaks the lock's revision unless it was chosen."""
    from .bridge.gateway.surface import SurfaceLock
    from .surface.lockfile import Lock, LockError

    try:
        lock = Lock.read(path)
    except LockError as error:
        raise UserError(f"--surface {path}: {error}") from None
    if server_revision == "auto":
        sides["server"] = (lock.revision,)
    return SurfaceLock(lock, "warn" if mode == "warn" else "block")


def _sides(client_revision: str, server_revision: str) -> dict[str, tuple[str, ...]]:
    """The revisions each side of the bridge may speak, by side: ``auto`` is every released one."""
    from ._revisions import RELEASED

    sides = {}
    for name, value in (("client", client_revision), ("server", server_revision)):
        if value != "auto" and value not in REVISIONS:
            raise UserError(f"--{name}-revision {value!r}: one of auto, {', '.join(REVISIONS)}")
        sides[name] = RELEASED if value == "auto" else (value,)
    return sides


def _stdio(
    command: list[str],
    sides: dict[str, tuple[str, ...]],
    strict: bool,
    max_line: int | None,
    max_in_flight: int | None,
    input_timeout: float | None,
) -> int:
    """``mcpbind bridge`` on stdio: run the bridge to the server ``command``; its exit status."""
    from .bridge.limits import INPUT_TIMEOUT, MAX_IN_FLIGHT_PER_SIDE
    from .bridge.stdio import run
    from .transports.stdio import MAX_LINE

    return run(
        command,
        sides["client"],
        sides["server"],
        strict=strict,
        max_line=max_line or MAX_LINE,
        max_in_flight=max_in_flight or MAX_IN_FLIGHT_PER_SIDE,
        input_timeout=input_timeout or INPUT_TIMEOUT,
    )


def _listen(
    listen: str,
    path: str,
    command: list[str],
    sides: dict[str, Any],
    *,
    strict: bool,
    max_line: int | None,
    max_in_flight: int | None,
    upstream: str | None,
    redis: str | None,
    workers: int,
    max_sessions: int | None,
    max_shared: int | None,
    input_timeout: float | None,
    allowed_hosts: tuple[str, ...],
    auth_server: str | None,
    upstream_client: tuple[str | None, str | None] = (None, None),
    surface: SurfaceLock | None = None,
) -> None:
    """``mcpbind bridge --listen``: check the options, then serve the gateway."""
    from .bridge import gateway

    host, port = _listen_checks(listen, path, command, upstream, redis, workers, upstream_client)
    client_id, client_secret = upstream_client
    options: dict[str, Any] = {
        "command": command or None,
        "upstream": upstream,
        "client_revisions": sides["client"],
        "server_revisions": sides["server"],
        "strict": strict,
        "path": path,
        "store": redis,
        "max_sessions": max_sessions or (64 if command else None),
        "resource": f"http://{listen}{path}",
        # HTTP+SSE sessions live in one process: processes sharing a port cannot serve them.
        "sse": workers == 1,
    }
    if surface is not None:
        options["surface"] = surface
    for name, value in (
        ("max_line", max_line),
        ("max_in_flight", max_in_flight),
        ("max_shared", max_shared),
        ("input_timeout", input_timeout),
    ):
        if value is not None:
            options[name] = value
    if allowed_hosts:
        options["allowed_hosts"] = tuple(h.lower() for h in allowed_hosts)
    if client_id is not None:
        options["upstream_client"] = (client_id, client_secret)
    sse = gateway.sse_revisions(sides["client"], sse=options["sse"], auth=auth_server is not None)
    server = upstream if upstream is not None else f"{shlex.join(command)} (a child per session)"
    revisions = f"client revisions {_span(sides['client'])}, server {_span(sides['server'])}"

    def started(bound_host: str, bound_port: int) -> None:
        where = f"[{bound_host}]" if ":" in bound_host else bound_host
        url = f"http://{where}:{bound_port}{path}"
        fronts = f"{url} (HTTP+SSE at /sse for {_span(sse)})" if sse else url
        click.echo(
            f"mcpbind bridge: listening on {fronts}; server: {server}; {revisions}", err=True
        )

    gateway.run(host, port, options, workers=workers, auth_server=auth_server, on_started=started)


def _listen_checks(
    listen: str,
    path: str,
    command: list[str],
    upstream: str | None,
    redis: str | None,
    workers: int,
    upstream_client: tuple[str | None, str | None],
) -> tuple[str, int]:
    """The options of ``mcpbind bridge --listen`` checked together (a ``UserError`` saying what is
    wrong); the host and port to listen on."""
    host, colon, port = listen.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--listen {listen!r}: HOST:PORT, such as 127.0.0.1:8000")
    if (upstream is None) == (not command):
        raise UserError("--listen serves either a server command (-- CMD ARGS) or --upstream URL")
    if upstream is not None and not upstream.startswith(("http://", "https://")):
        raise UserError(f"--upstream {upstream!r}: an http:// or https:// URL")
    if workers > 1 and (upstream is None or redis is None):
        raise UserError(
            "--workers above 1 needs --upstream and --redis: the workers share sessions through "
            "Redis, and a session with a child of its own lives in the worker running it "
            "(docs/bridge.md says how to route such sessions)"
        )
    if not path.startswith("/"):
        raise UserError(f"--path {path!r}: a path starting with /")
    client_id, client_secret = upstream_client
    if client_id is not None and upstream is None:
        raise UserError("--upstream-client-id goes with --upstream URL")
    if client_id is not None and not client_secret:
        raise UserError(
            "--upstream-client-id needs its secret: --upstream-client-secret or "
            "MCPBIND_UPSTREAM_CLIENT_SECRET"
        )
    return host.strip("[]"), int(port)


def _span(revisions: Sequence[str]) -> str:
    """``2024-11-05 to 2026-07-28``, or the one revision."""
    first, last = revisions[0], revisions[-1]
    return first if first == last else f"{first} to {last}"


# `mcpbind surface lock|check|diff|generate`: a server's own surface (imports click only here).
from .surface.cli import surface  # noqa: E402

main.add_command(surface)
