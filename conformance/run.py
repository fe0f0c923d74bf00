"""Run the official MCP conformance suite against a server and a client, and print one table.

`make conformance` calls this after `npm ci` in this folder has installed the suite at the version
pinned in package-lock.json together with the Node it needs. The server leg starts the server
command on a free loopback port and runs `conformance server --requirements R` for each revision R;
the client leg runs `conformance client --scenario S --spec-version R` for each listed client
scenario. Every verdict is read from the `checks.json` the suite writes: a scenario passes when
it has at least one successful check and no failed one (the rule of the suite's own tier-check),
and a client scenario also needs the suite's own exit status of 0. Scenarios a requirement set
runs without scoring (pending, extension, added after release) are reported and marked as such.

The exit status is 1 when any scored scenario fails, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = HERE / "node_modules" / ".bin"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance"

REVISIONS = ("2025-11-25", "2026-07-28")

# The client scenarios mcpbind's reference client targets, per revision (issue 15); the auth
# scenarios of the requirement sets need an OAuth client, which mcpbind does not provide.
CLIENT_SCENARIOS: dict[str, tuple[str, ...]] = {
    "2025-11-25": ("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"),
    "2026-07-28": (
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
    ),
}

TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T[\d-]+Z")

DEFAULT_SERVER = f"{shlex.quote(sys.executable)} examples/everything_server.py --port {{port}}"
DEFAULT_CLIENT = f"{shlex.quote(sys.executable)} examples/everything_client.py"


@dataclass
class Row:
    """One scenario run at one revision, with the suite's verdict."""

    scenario: str
    revision: str
    leg: str
    scored: str  # "yes", or the requirement set's reason for not scoring it
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    exit_ok: bool = True
    failures: list[str] = field(default_factory=list)
    found: bool = True

    @property
    def ok(self) -> bool:
        """Whether the suite's checks count this run as a pass."""
        return self.found and self.exit_ok and self.failed == 0 and self.passed > 0


def requirements(revision: str) -> dict[str, object]:
    """The suite's own requirement set for a revision, read with the suite's YAML parser."""
    path = SUITE / "requirements" / f"{revision}.yaml"
    script = (
        "const fs=require('fs');const y=require('yaml');"
        "process.stdout.write(JSON.stringify(y.parse(fs.readFileSync(process.argv[1],'utf8'))))"
    )
    out = subprocess.run(
        [str(BIN / "node"), "-e", script, str(path)],
        cwd=HERE,
        check=True,
        capture_output=True,
        text=True,
    )
    data: dict[str, object] = json.loads(out.stdout)
    return data


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Return once something accepts connections on the port; fail if the server died first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"conformance: the server exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"conformance: nothing listened on port {port} within {timeout:.0f} s")


def read_checks(files: list[Path], row: Row) -> None:
    """Fill a row from the last of the checks.json files the suite wrote for it."""
    if not files:
        row.found = False
        row.failures.append("the suite wrote no checks.json")
        return
    checks = json.loads(files[-1].read_text())
    for check in checks:
        status = check.get("status")
        if status == "SUCCESS":
            row.passed += 1
        elif status == "FAILURE":
            row.failed += 1
            message = check.get("errorMessage") or check.get("description") or ""
            row.failures.append(f"{check.get('id')}: {message}")
        elif status == "WARNING":
            row.warnings += 1


def suite_env() -> dict[str, str]:
    """The environment for the suite: its own Node first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def server_leg(url: str, revision: str, out: Path, timeout_ms: int, log: Path) -> list[Row]:
    """Run `conformance server --requirements revision` against url, one row per scenario."""
    reqs = requirements(revision)
    scored = [str(s) for s in reqs.get("server", []) or []]  # type: ignore[union-attr]
    unscored = {
        str(e["scenario"]): str(e["reason"])
        for e in reqs.get("not_scored", []) or []  # type: ignore[union-attr]
        if e.get("leg") == "server"
    }
    directory = out / "server" / revision
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        str(BIN / "conformance"),
        "server",
        "--url",
        url,
        "--requirements",
        revision,
        "--timeout",
        str(timeout_ms),
        "-o",
        str(directory),
    ]
    with log.open("ab") as sink:
        sink.write(f"\n$ {shlex.join(command)}\n".encode())
        sink.flush()
        subprocess.run(command, env=suite_env(), stdout=sink, stderr=sink, check=False)
    rows: list[Row] = []
    for scenario in [*scored, *unscored]:
        row = Row(scenario, revision, "server", unscored.get(scenario, "yes"))
        # The suite names each result folder server-<scenario>-<timestamp>.
        runs = [
            p
            for p in directory.glob(f"server-{scenario}-*/checks.json")
            if TIMESTAMP.fullmatch(p.parent.name[len(f"server-{scenario}-") :])
        ]
        read_checks(sorted(runs), row)
        rows.append(row)
    return rows


def client_leg(command: str, revision: str, out: Path, timeout_ms: int, log: Path) -> list[Row]:
    """Run the listed client scenarios of a revision against the client command."""
    rows: list[Row] = []
    for scenario in CLIENT_SCENARIOS[revision]:
        directory = out / "client" / revision / scenario.replace("/", "_")
        directory.mkdir(parents=True, exist_ok=True)
        argv = [
            str(BIN / "conformance"),
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--spec-version",
            revision,
            "--timeout",
            str(timeout_ms),
            "-o",
            str(directory),
        ]
        with log.open("ab") as sink:
            sink.write(f"\n$ {shlex.join(argv)}\n".encode())
            sink.flush()
            done = subprocess.run(argv, env=suite_env(), stdout=sink, stderr=sink, check=False)
        row = Row(scenario, revision, "client", "yes", exit_ok=done.returncode == 0)
        read_checks(sorted(directory.glob("*/checks.json")), row)
        if not row.exit_ok and not row.failures:
            row.failures.append(
                f"the suite exited {done.returncode} (client error, warning or timeout)"
            )
        rows.append(row)
    return rows


def table(rows: list[Row]) -> str:
    """The rows as one Markdown table, then the totals of scored and unscored runs."""
    lines = [
        "| scenario | revision | leg | scored | result | checks ok/failed/warn | first failure |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        first = row.failures[0] if row.failures else ""
        first = first.replace("|", "\\|").replace("\n", " ")
        if len(first) > 120:
            first = first[:117] + "..."
        lines.append(
            f"| {row.scenario} | {row.revision} | {row.leg} | {row.scored} | "
            f"{'pass' if row.ok else 'FAIL'} | {row.passed}/{row.failed}/{row.warnings} | {first} |"
        )
    lines.append("")
    for revision in sorted({r.revision for r in rows}):
        for leg in ("server", "client"):
            mine = [r for r in rows if r.revision == revision and r.leg == leg]
            scored = [r for r in mine if r.scored == "yes"]
            bonus = [r for r in mine if r.scored != "yes"]
            if not mine:
                continue
            lines.append(
                f"{revision} {leg}: {sum(r.ok for r in scored)}/{len(scored)} scored scenarios pass"
                + (f"; not scored: {sum(r.ok for r in bonus)}/{len(bonus)} pass" if bonus else "")
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-cmd", default=DEFAULT_SERVER, help="{port} is replaced")
    parser.add_argument("--client-cmd", default=DEFAULT_CLIENT)
    parser.add_argument("--legs", default="server,client", help="server, client or both")
    parser.add_argument("--revisions", default=",".join(REVISIONS))
    parser.add_argument("--timeout-ms", type=int, default=30000)
    parser.add_argument("--out", type=Path, default=None, help="keep the suite's results here")
    args = parser.parse_args()

    legs = {leg.strip() for leg in args.legs.split(",") if leg.strip()}
    revisions = [r.strip() for r in args.revisions.split(",") if r.strip()]
    out = args.out or Path(tempfile.mkdtemp(prefix="mcpbind-conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    log = out / "suite.log"
    rows: list[Row] = []

    if "server" in legs:
        port = free_port()
        server_log = (out / "server.log").open("wb")
        proc = subprocess.Popen(
            shlex.split(args.server_cmd.format(port=port)),
            cwd=ROOT,
            stdout=server_log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_listening(port, proc)
            for revision in revisions:
                rows += server_leg(
                    f"http://127.0.0.1:{port}/mcp", revision, out, args.timeout_ms, log
                )
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            server_log.close()
    if "client" in legs:
        for revision in revisions:
            rows += client_leg(args.client_cmd, revision, out, args.timeout_ms, log)

    print(table(rows))
    print(f"\nThe suite's own output and checks.json files: {out}")
    return 1 if any(not r.ok for r in rows if r.scored == "yes") else 0


if __name__ == "__main__":
    sys.exit(main())
