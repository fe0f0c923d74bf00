"""Instructions, not seconds: the workloads' decode and encode counted under valgrind.

    .venv/bin/python -m bench.instructions [--runs 30] [--what decode,encode] TEXT...

On the shared 2-core machine the times of `make bench` move by a third from run to run, too much
to see a change of a few percent in the codec's per-message Python. Instruction counts move by
a few percent at most (the allocator's first passes among them; more runs, less of that): each
workload whose name contains one of the TEXTs is decoded (or encoded) ``--runs``
times in a process under ``valgrind --tool=cachegrind``, and once with no runs; the difference
divided by the runs is the count of one pass over the workload, for mcpbind and for orjson.
Instructions are a proxy: orjson does more per instruction than Python does, so a ratio of
instructions is lower than the ratio of times (about 1.1-1.4x lower on the sessions).
"""

from __future__ import annotations

import argparse
import gc
import re
import shutil
import subprocess
import sys

from .anchors import Mcpbind, Orjson, accepted_by_mcpbind
from .workloads import ROOT, all_workloads


def run(anchor: str, what: str, names: list[str], runs: int) -> None:
    """The body measured: one workload pass ``runs`` times, after everything is built."""
    fns = []
    for w in all_workloads():
        if any(text in f"{w.name} ({w.revision})" for text in names):
            w = accepted_by_mcpbind(w)
            a = Mcpbind() if anchor == "mcpbind" else Orjson()
            decode, _ = a.decoder(w)
            if what == "decode":
                fns.append(decode)
            else:
                encode, note = a.encoder(w, decode())
                if encode is None:
                    raise SystemExit(f"{w.name}: {note}")
                fns.append(encode)
    for fn in fns:
        fn()
    gc.disable()
    for _ in range(runs):
        for fn in fns:
            fn()


def count(anchor: str, what: str, names: list[str], runs: int) -> int:
    argv = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        "--child",
        anchor,
        what,
        str(runs),
        *names,
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind:\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        anchor, what, runs, *names = args[1:]
        run(anchor, what, names, int(runs))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("names", nargs="+", metavar="TEXT")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--what", default="decode,encode")
    parsed = parser.parse_args(args)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    for what in parsed.what.split(","):
        per_run = {}
        for anchor in ("mcpbind", "orjson"):
            base = count(anchor, what, parsed.names, 0)
            per_run[anchor] = (count(anchor, what, parsed.names, parsed.runs) - base) // parsed.runs
        ratio = per_run["mcpbind"] / per_run["orjson"]
        print(
            f"{what:6s} {' + '.join(parsed.names)}: mcpbind {per_run['mcpbind']:,} "
            f"orjson {per_run['orjson']:,} instructions per pass, ratio {ratio:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
