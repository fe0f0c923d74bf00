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
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
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
        "store": None,
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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        shim, port, upstream, side, plan, profile, front = args[1:]
        first, runs = json.loads(plan)
        child(shim, int(port), upstream, side, (first, runs), profile, front == "front")
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
        "--front-only",
        action="store_true",
        help="the link answers every call itself (the HTTP front's cost, without the bridge)",
    )
    parsed = parser.parse_args(args)
    if not parsed.profile and (shutil.which("valgrind") is None or shutil.which("cc") is None):
        raise SystemExit("needs valgrind (callgrind) and a C compiler (cc)")
    with whole.running("mcpbind") as upstream:
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
