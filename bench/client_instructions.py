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

from . import server as whole
from .instructions import compile_shim, read_dumps, switches, valgrind

ERAS = ("2025-11-25", "2026-07-28")


def child(shim: str, url: str, era: str, runs: int, warmup: int) -> None:
    """Under callgrind: the client's calls, ``runs`` of them counted."""
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

    asyncio.run(main())


def count(url: str, era: str, runs: int, warmup: int, keep: Path | None) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-client-instructions-") as tmp:
        folder = Path(tmp)
        shim = compile_shim(folder)
        out_dir = keep or folder
        argv = [*valgrind(out_dir), sys.executable, "-m", "bench.client_instructions"]
        argv += ["--child", shim, url, era, str(runs), str(warmup)]
        done = subprocess.run(argv, cwd=whole.ROOT, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"the counted client failed:\n{done.stderr[-3000:]}")
        found = read_dumps(out_dir)
        if era not in found:
            raise SystemExit("no count was dumped")
        return found[era] // runs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        shim, url, era, runs, warmup = args[1:]
        child(shim, url, era, int(runs), int(warmup))
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
    parsed = parser.parse_args(args)
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        raise SystemExit("needs valgrind (callgrind) and a C compiler (cc)")
    with whole.running("mcpbind") as url:
        for era in parsed.eras:
            found = count(url, era, parsed.runs, parsed.warmup, parsed.keep)
            print(f"Client, {era}: {found:,} instructions per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
