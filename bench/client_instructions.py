"""Instructions per tools/call of ``mcpbind.Client`` over HTTP (the client's session, its HTTP
transport, the request written and the answer read, the event loop's turns in between), counted
under valgrind where seconds move with the load.

    .venv/bin/python -m bench.client_instructions [--runs 200] [--warmup 100] [--keep DIR]
        [ERA ...]

The server is examples/everything_server.py, one process on a loopback port, not counted. The
client is one process under ``valgrind --tool=callgrind`` with instrumentation off:
``Client(URL, revisions=(ERA,))`` opened, ``--warmup`` calls of the ``test_simple_text`` tool,
then counting on for ``--runs`` calls one after another and off again. The count divided by the
runs is one call; ERA is 2025-11-25 (a session, its ``Mcp-Session-Id``) or 2026-07-28 (stateless
requests with the per-request ``_meta``), as bench/server.py's eras.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import server as whole
from .instructions import compile_shim, read_dumps, switches, valgrind

ERAS = ("2025-11-25", "2026-07-28")


def child(shim: str, url: str, era: str, runs: int, warmup: int, parts: bool = False) -> None:
    """Under callgrind: the client's calls, ``runs`` of them counted; with ``parts``, then two
    of its parts alone (``PARTS``) and the official `mcp` Client's calls, as many."""
    from mcpbind import Client

    start, stop = switches(shim)

    async def main() -> None:
        async with Client(url, revisions=(era,)) as client:
            for _ in range(warmup):
                await client.call_tool("test_simple_text", {})
            gc.collect()
            start()
            for _ in range(runs):
                await client.call_tool("test_simple_text", {})
            stop(era)
            result = await client.call_tool("test_simple_text", {})
            assert result.content[0].text == whole.TEXT, result
            if parts:
                await _parts(client, start, stop, era, runs, warmup)

    async def sdk() -> None:
        import logging

        import mcp
        import mcp.client.session

        from .client import sdk_mode

        logging.getLogger(mcp.client.session.logger.name).setLevel(logging.ERROR)
        async with mcp.Client(url, mode=sdk_mode(era)) as client:
            for _ in range(warmup):
                await client.call_tool("test_simple_text", {})
            gc.collect()
            start()
            for _ in range(runs):
                await client.call_tool("test_simple_text", {})
            stop(f"{era} sdk")
            result = await client.call_tool("test_simple_text", {})
            assert getattr(result.content[0], "text", None) == whole.TEXT, result

    asyncio.run(main())
    if parts:
        asyncio.run(sdk())


PARTS = """\
wire: the HTTP stack alone, mcpbind's HttpPool (a connection of its own to the same server):
    the POST of the call's very bytes and headers as the client sends them, its answer read
    whole, the connection released, on the same event loop;
session: the client's session and codec alone, no I/O: the Client's session queues the
    tools/call (params to the wire's bytes) and reads an answer of the server's (bytes to the
    generated result, the pending request settled, the events observed)."""


async def _parts(client: Any, start: Any, stop: Any, era: str, runs: int, warmup: int) -> None:
    """``PARTS``, each ``runs`` times counted after ``warmup``."""
    import msgspec

    from mcpbind.transports.http_pool import HttpPool

    http = client._link.http  # (the StreamableHTTPClient the Client's link opened)
    session = http.session
    params = {"name": "test_simple_text", "arguments": {}}
    session.request("tools/call", params)
    (message,) = session.data_to_send()
    headers = http._headers(message)
    pool = HttpPool(url=http.url, read_timeout=None)
    head = pool.head("POST", http.url, headers)

    async def post() -> bytes:
        answer = await pool.exchange(head, message)
        body = await answer.read()
        answer.release()
        return body

    body = await post()
    assert answer_text(body) == whole.TEXT, body
    for _ in range(warmup):
        await post()
    gc.collect()
    start()
    for _ in range(runs):
        await post()
    stop(f"{era} wire")
    await pool.aclose()

    # The server's answer to the request queued above, once for each id the session gives next.
    template = msgspec.json.decode(body)
    first = template["id"] + 1
    answers = [msgspec.json.encode({**template, "id": first + i}) for i in range(warmup + runs + 1)]
    session.receive(msgspec.json.encode(template))

    def exchange(answer: bytes) -> Any:
        session.request("tools/call", params)
        session.data_to_send()
        return session.receive(answer)

    for i in range(warmup):
        exchange(answers[i])
    gc.collect()
    start()
    for i in range(warmup, warmup + runs):
        exchange(answers[i])
    stop(f"{era} session")
    (event,) = exchange(answers[-1])
    assert event.result.content[0].text == whole.TEXT, event


def answer_text(body: bytes) -> Any:
    """The tool's text in a JSON answer."""
    import msgspec

    return msgspec.json.decode(body)["result"]["content"][0]["text"]


def count(
    url: str, era: str, runs: int, warmup: int, keep: Path | None, parts: bool = False
) -> dict[str, int]:
    with tempfile.TemporaryDirectory(prefix="bench-client-instructions-") as tmp:
        folder = Path(tmp)
        shim = compile_shim(folder)
        out_dir = keep or folder
        argv = [*valgrind(out_dir), sys.executable, "-m", "bench.client_instructions"]
        argv += ["--child", shim, url, era, str(runs), str(warmup), str(int(parts))]
        done = subprocess.run(argv, cwd=whole.ROOT, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"the counted client failed:\n{done.stderr[-3000:]}")
        found = read_dumps(out_dir)
        if era not in found:
            raise SystemExit("no count was dumped")
        return {label: total // runs for label, total in found.items()}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        shim, url, era, runs, warmup, parts = args[1:]
        child(shim, url, era, int(runs), int(warmup), parts == "1")
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.client_instructions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("eras", nargs="*", metavar="ERA", default=list(ERAS))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--keep", type=Path, default=None, help="keep callgrind's files here")
    parser.add_argument(
        "--parts",
        action="store_true",
        help="also count two parts of a call alone, in the same process, and then the official "
        "`mcp` SDK's Client making the same calls: " + PARTS,
    )
    parsed = parser.parse_args(args)
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        raise SystemExit("needs valgrind (callgrind) and a C compiler (cc)")
    with whole.running("mcpbind") as url:
        for era in parsed.eras:
            found = count(url, era, parsed.runs, parsed.warmup, parsed.keep, parsed.parts)
            print(f"Client, {era}: {found[era]:,} instructions per call")
            if parsed.parts:
                wire, session = found[f"{era} wire"], found[f"{era} session"]
                rest = found[era] - wire - session
                print(f"  wire (HttpPool's POST alone): {wire:,}")
                print(f"  session and codec alone: {session:,}")
                print(f"  the rest (Client, link, StreamableHTTPClient): {rest:,}")
                print(f"the official `mcp` Client, the same calls: {found[f'{era} sdk']:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
