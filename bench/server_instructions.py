"""Instructions per tools/call of the whole server (uvicorn, the ASGI app, the session, the codec),
counted under valgrind where `python -m bench.server`'s requests per second move with the load.

    .venv/bin/python -m bench.server_instructions [--runs 200] [--warmup 100]
        [--app everything|bare|empty] [--http httptools|h11] [--keep DIR] [--profile FILE]
        [ERA ...]

One server process runs under ``valgrind --tool=callgrind`` with instrumentation off: the app of
examples/everything_server.py (``--app empty``: an ASGI app answering every request with a
fixed 200, sent the very request the server gets, head and body: what uvicorn alone costs; ``--app bare``: a ``StreamableHTTPServer`` whose handler
is a coroutine returning the tool's text result, the transport and session without the App) served by ``mcpbind.transports.serving.uvicorn_config`` on
a loopback port (uvicorn's ``--http`` protocol), wrapped in a counter of HTTP requests. This process (not counted) sends each
era's tools/call of bench/server.py one after another on one keep-alive connection: ``--warmup``
requests, then ``--runs`` counted ones. The counter switches counting on as the first counted
request reaches the app and dumps the count as the one after the last does, so that a count
holds whole request cycles: the request's parsing, the app, the response's writing and the
event loop's turns in between. The count divided by the runs is one request.

``--profile FILE``: instead of counting, run the server (not under valgrind) with cProfile over
the counted requests of each era and write its statistics to FILE.ERA (``python -m pstats``):
where the instructions go, by Python function.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .instructions import compile_shim, read_dumps, switches, valgrind
from .processes import free_port, listening
from .server import ERAS, ROOT, TEXT, request

EMPTY_BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'
TARGET = 2.0  # the example server's tools/call, at most this many times the empty app's request
APPS = ("everything", "empty")


def _empty_app() -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": EMPTY_BODY})

    return app


def _bare_app() -> Any:
    from mcpbind.transports.http_server import Call, StreamableHTTPServer

    result = {"content": [{"type": "text", "text": TEXT}]}

    async def handler(call: Call) -> Any:
        return result

    return StreamableHTTPServer(
        handler,
        revisions=("2025-06-18", "2025-11-25", "2026-07-28"),
        capabilities={"tools": {}},
        info={"name": "bench", "version": "1"},
    )


def child(
    shim: str, port: int, app_name: str, http: str, plan: list[tuple[str, int, int]], profile: str
) -> None:
    """The server, under callgrind (or cProfile into ``profile``.ERA): ``plan`` is (label, first
    counted request, runs) per era, the requests numbered from 1 as they reach the app."""
    sys.path.insert(0, str(ROOT / "examples"))
    import uvicorn

    from mcpbind.transports.serving import uvicorn_config

    if app_name == "empty":
        inner = _empty_app()
    elif app_name == "bare":
        inner = _bare_app()
    else:
        import everything_server

        inner = everything_server.build(f"http://127.0.0.1:{port}/mcp", None, None)
    switched: tuple[Callable[[], None], Callable[[str], None]]
    if profile:
        import cProfile

        profiler = cProfile.Profile()

        def stop(label: str) -> None:
            profiler.disable()
            profiler.dump_stats(f"{profile}.{label}")
            profiler.clear()

        switched = (profiler.enable, stop)
    else:
        switched = switches(shim)
    app = counted(inner, plan, *switched)
    uvicorn.Server(uvicorn_config(app, "127.0.0.1", port, log_level="warning", http=http)).run()


def counted(
    inner: Any,
    plan: Sequence[tuple[str, int, int]],
    start: Callable[[], None],
    stop: Callable[[str], None],
) -> Any:
    """The ASGI app ``inner`` wrapped in a counter of its HTTP requests, numbered from 1 as they
    reach it: for each (label, first, runs) of ``plan``, ``start()`` as request ``first``
    arrives and ``stop(label)`` as the one after the last counted does, so that a count holds
    whole request cycles."""
    starts = {first: label for label, first, _ in plan}
    ends = {first + runs: label for label, first, runs in plan}
    seen = 0

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal seen
        if scope["type"] == "http":
            seen += 1
            if seen in ends:
                stop(ends[seen])
            if seen in starts:
                start()
        await inner(scope, receive, send)

    return app


def send_calls(
    port: int, headers: dict[str, str], body: dict[str, Any], n: int, answered: bool = True
) -> None:
    """POST ``body`` ``n`` times, each with a fresh id, one after another on one keep-alive
    connection; ``RuntimeError`` for an answer other than a 200 (a tools/call's, when
    ``answered``: carrying the tool's text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for i in range(n):
        data = json.dumps(dict(body, id=i), separators=(",", ":")).encode()
        conn.request("POST", "/mcp", body=data, headers=headers)
        answer = conn.getresponse()
        said = answer.read()
        called = answered and body.get("method") == "tools/call"
        if answer.status != 200 or (called and TEXT.encode() not in said):
            raise RuntimeError(f"unexpected answer {answer.status}: {said[:300]!r}")
    conn.close()


def count(
    eras: list[str],
    app_name: str,
    http: str,
    runs: int,
    warmup: int,
    keep: Path | None,
    profile: str = "",
) -> dict[str, int]:
    """era -> instructions of one tools/call request cycle ({} with ``profile``)."""
    with tempfile.TemporaryDirectory(prefix="bench-server-instructions-") as tmp:
        folder = Path(tmp)
        shim = "" if profile else compile_shim(folder)
        out_dir = keep or folder
        port = free_port()
        # Request numbers as the app sees them: per era, (the setup requests of the era: the
        # initialize and initialized of a session, and the check), warmup, runs, one more.
        plan: list[tuple[str, int, int]] = []
        n = 0
        for era in eras:
            n += (2 if era == "2025-11-25" and app_name != "empty" else 0) + warmup
            plan.append((era, n + 1, runs))
            n += runs + 1
        argv = [] if profile else valgrind(out_dir)
        argv += [sys.executable, "-m", "bench.server_instructions", "--child"]
        argv += [shim, str(port), app_name, http, json.dumps(plan), profile]
        # valgrind starts the server slowly; it dumps its counts as it ends.
        with listening(argv, port, "the counted server", seconds=300, stop_seconds=60):
            url = f"http://127.0.0.1:{port}/mcp"
            for era in eras:
                # The empty app reads the very request the server answers (no session opened:
                # an id of the form the server gives), so that uvicorn's part is the same.
                fake = "0" * 32 if app_name == "empty" else None
                headers, body = request(url, era, session=fake)  # 2025-11-25: opens a session
                send_calls(port, headers, body, warmup + runs + 1, app_name != "empty")
        if profile:
            return {}
        return {label: total // runs for label, total in read_dumps(out_dir).items()}


def measure(runs: int = 60, warmup: int = 50) -> dict[str, Any]:
    """The `make bench` row (issue 36): era -> {"everything", "empty"} instructions per request,
    the example server's tools/call and the empty app on the same ``serve()``; {} without
    valgrind or a C compiler. Each era is counted in a server process of its own: in one that
    served the other era first, Python 3.11's adaptive interpreter has specialized the shared
    code's attribute lookups for the other era's objects, and the second era's requests take
    the generic way (20,000-25,000 instructions a request more, whichever era comes second)."""
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        print("bench/server_instructions.py: no valgrind or cc; skipped", file=sys.stderr)
        return {}
    out: dict[str, Any] = {
        era: {app: count([era], app, "httptools", runs, warmup, None)[era] for app in APPS}
        for era in ERAS
    }
    out["runs"] = runs
    print(f"  server instructions: {out}", file=sys.stderr)
    return out


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The row of the report's headline table: the whole server against its serving stack."""
    found = extra.get("server_instructions")
    if not found:
        return []
    ratios = {era: found[era]["everything"] / found[era]["empty"] for era in ERAS}
    worst = max(ratios, key=ratios.__getitem__)
    where = "; ".join(
        f"{era} {ratios[era]:.2f}x ({found[era]['everything']:,} vs {found[era]['empty']:,})"
        for era in ERAS
    )
    return [
        (
            f"whole server, tools/call <= {TARGET:g}x an empty ASGI app sent the same request on "
            f"the same `serve()` (instructions per request, callgrind, {found['runs']} requests "
            "on one connection)",
            f"worst {ratios[worst]:.2f}x",
            where,
            ratios[worst] <= TARGET,
        )
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        shim, port, app_name, http, plan, profile = args[1:]
        steps = [tuple(p) for p in json.loads(plan)]
        child(shim, int(port), app_name, http, steps, profile)
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.server_instructions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("eras", nargs="*", metavar="ERA", default=list(ERAS))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--app", choices=("everything", "bare", "empty"), default="everything")
    parser.add_argument("--http", choices=("httptools", "h11"), default="httptools")
    parser.add_argument("--keep", type=Path, default=None, help="keep callgrind's files here")
    parser.add_argument("--profile", default="", help="cProfile statistics to FILE.ERA instead")
    parsed = parser.parse_args(args)
    if not parsed.profile and (shutil.which("valgrind") is None or shutil.which("cc") is None):
        raise SystemExit("needs valgrind (callgrind) and a C compiler (cc)")
    found = count(
        parsed.eras,
        parsed.app,
        parsed.http,
        parsed.runs,
        parsed.warmup,
        parsed.keep,
        parsed.profile,
    )
    if parsed.profile:
        print(f"profiles in {parsed.profile}.ERA")
        return 0
    for era in parsed.eras:
        print(f"{parsed.app} ({parsed.http}) {era}: {found.get(era, 0):,} instructions per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
