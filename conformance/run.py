"""Run the official MCP conformance suite against a server and a client, and print one table.

`make conformance` calls this after `npm ci` in this folder has installed the suite at the version
pinned in package-lock.json together with the Node it needs. The server leg starts the server
command on a free loopback port and runs `conformance server --requirements R` for each revision R;
the client leg runs `conformance client --scenario S --spec-version R` for every client scenario
of the requirement set R (scored ones, and those it runs without scoring), one at a time, and the
extension leg runs each client extension scenario the sets name (the auth extensions) once, with
no spec version, as the suite runs extensions. Every verdict is read from the `checks.json` the suite writes: a scenario passes when
it has at least one successful check and no failed one (the rule of the suite's own tier-check),
and a client scenario also needs the suite's own exit status of 0 (the suite already excuses a
client's error exit where the scenario expects the client to refuse). Scenarios a requirement
set runs without scoring (pending, added after release) are reported and marked as such; the
client extension scenarios are scored in a group of their own ("extension"). A scenario for which
the suite ran no check at all (every check SKIPPED) is shown as "no check" and counts as no pass.

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
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = HERE / "node_modules" / ".bin"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance"

REVISIONS = ("2025-11-25", "2026-07-28")

# The revision column of the client extension scenarios, which belong to no revision.
EXTENSION = "extension"

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
    skipped: int = 0  # checks the suite reported as SKIPPED (it ran nothing for them)
    exit_ok: bool = True
    failures: list[str] = field(default_factory=list)
    found: bool = True

    @property
    def ok(self) -> bool:
        """Whether the suite's checks count this run as a pass."""
        return self.found and self.exit_ok and self.failed == 0 and self.passed > 0

    @property
    def unchecked(self) -> bool:
        """Whether the suite ran no check at all for this scenario (every check SKIPPED): it
        neither passes nor fails, and counts as no pass."""
        return self.found and self.passed == self.failed == 0 and self.skipped > 0


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


def listed(reqs: dict[str, object], key: str) -> list[Any]:
    """One list of a requirement set (empty when the set has none)."""
    value = reqs.get(key)
    return value if isinstance(value, list) else []


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
        elif status == "SKIPPED":
            row.skipped += 1
            row.failures.append(f"{check.get('id')}: {check.get('errorMessage') or ''}")


def suite_env() -> dict[str, str]:
    """The environment for the suite: its own Node first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def server_leg(url: str, revision: str, out: Path, timeout_ms: int, log: Path) -> list[Row]:
    """Run `conformance server --requirements revision` against url, one row per scenario."""
    reqs = requirements(revision)
    scored = [str(s) for s in listed(reqs, "server")]
    unscored = {
        str(e["scenario"]): str(e["reason"])
        for e in listed(reqs, "not_scored")
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


def client_plan(revision: str) -> list[tuple[str, str]]:
    """The client scenarios of a revision's requirement set, each with "yes" when scored or
    the set's reason for not scoring it; extension scenarios are left to the extension leg."""
    reqs = requirements(revision)
    plan = [(str(s), "yes") for s in listed(reqs, "client")]
    plan += [
        (str(e["scenario"]), str(e["reason"]))
        for e in listed(reqs, "not_scored")
        if e.get("leg") == "client" and e.get("reason") != EXTENSION
    ]
    return plan


def extension_plan(revisions: list[str]) -> list[str]:
    """The client extension scenarios the requirement sets name, each once, in their order."""
    names: dict[str, None] = {}
    for revision in revisions:
        for entry in listed(requirements(revision), "not_scored"):
            if entry.get("leg") == "client" and entry.get("reason") == EXTENSION:
                names[str(entry["scenario"])] = None
    return list(names)


def run_client(
    command: str, scenario: str, revision: str, scored: str, out: Path, timeout_ms: int, log: Path
) -> Row:
    """Run one client scenario (at a revision's wire, or with no spec version for an
    extension) and read its verdict."""
    directory = out / "client" / revision / scenario.replace("/", "_")
    directory.mkdir(parents=True, exist_ok=True)
    argv = [str(BIN / "conformance"), "client", "--command", command, "--scenario", scenario]
    if revision != EXTENSION:
        argv += ["--spec-version", revision]
    argv += ["--timeout", str(timeout_ms), "-o", str(directory)]
    with log.open("ab") as sink:
        sink.write(f"\n$ {shlex.join(argv)}\n".encode())
        sink.flush()
        done = subprocess.run(argv, env=suite_env(), stdout=sink, stderr=sink, check=False)
    row = Row(scenario, revision, "client", scored, exit_ok=done.returncode == 0)
    read_checks(sorted(directory.rglob("checks.json")), row)
    if not row.exit_ok and not row.failures:
        row.failures.append(
            f"the suite exited {done.returncode} (client error, warning or timeout)"
        )
    return row


def client_leg(command: str, revision: str, out: Path, timeout_ms: int, log: Path) -> list[Row]:
    """Run every client scenario of a revision's requirement set against the client command."""
    return [
        run_client(command, scenario, revision, scored, out, timeout_ms, log)
        for scenario, scored in client_plan(revision)
    ]


def extension_leg(
    command: str, revisions: list[str], out: Path, timeout_ms: int, log: Path
) -> list[Row]:
    """Run the client extension scenarios once each, scored as a group of their own."""
    return [
        run_client(command, scenario, EXTENSION, "yes", out, timeout_ms, log)
        for scenario in extension_plan(revisions)
    ]


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
            f"{'pass' if row.ok else 'no check' if row.unchecked else 'FAIL'} | "
            f"{row.passed}/{row.failed}/{row.warnings} | {first} |"
        )
    lines.append("")
    for revision in sorted({r.revision for r in rows}, key=lambda r: (r == EXTENSION, r)):
        for leg in ("server", "client"):
            mine = [r for r in rows if r.revision == revision and r.leg == leg]
            scored = [r for r in mine if r.scored == "yes"]
            bonus = [r for r in mine if r.scored != "yes"]
            if not mine:
                continue
            unchecked = sum(r.unchecked for r in bonus)
            lines.append(
                f"{revision} {leg}: {sum(r.ok for r in scored)}/{len(scored)} scored scenarios pass"
                + (f"; not scored: {sum(r.ok for r in bonus)}/{len(bonus)} pass" if bonus else "")
                + (f" ({unchecked} ran no check: the suite skipped it)" if unchecked else "")
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-cmd", default=DEFAULT_SERVER, help="{port} is replaced")
    parser.add_argument("--client-cmd", default=DEFAULT_CLIENT)
    parser.add_argument(
        "--legs", default="server,client,extension", help="server, client and/or extension"
    )
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
    if "extension" in legs:
        rows += extension_leg(args.client_cmd, revisions, out, args.timeout_ms, log)

    print(table(rows))
    print(f"\nThe suite's own output and checks.json files: {out}")
    return 1 if any(not r.ok for r in rows if r.scored == "yes") else 0


if __name__ == "__main__":
    sys.exit(main())
