"""Run a stdio command between this process's stdin/stdout, writing every line of both
directions, in the order they pass, to a transcript (one JSON-RPC message a line, as
``mcpbind validate`` reads it): a line is written down before it is passed on, so an answer is
never written before the request it answers.

    python tests/interop/bridge_tap.py TRANSCRIPT CMD ARGS...
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import IO


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()

    with open(out, "wb") as transcript:

        def pump(source: IO[bytes], sink: IO[bytes]) -> None:
            for line in source:
                with lock:
                    transcript.write(line if line.endswith(b"\n") else line + b"\n")
                    transcript.flush()
                try:
                    sink.write(line)
                    sink.flush()
                except (BrokenPipeError, ValueError):
                    break
            sink.close()

        down = threading.Thread(target=pump, args=(sys.stdin.buffer, child.stdin), daemon=True)
        down.start()
        pump(child.stdout, sys.stdout.buffer)
        return child.wait()


if __name__ == "__main__":
    sys.exit(main())
