"""Instructions, not seconds: the workloads' decode and encode counted under valgrind.

    .venv/bin/python -m bench.instructions [--runs 20] [--what decode,encode]
        [--anchors mcpbind,floor,orjson] [--keep DIR] TEXT...

On the shared 2-core machine the times of `make bench` move by a third from run to run, too much
to see a change of a few percent in the codec's per-message Python. Instruction counts do not
move with the load. One process runs under ``valgrind --tool=callgrind`` with instrumentation
off; for each workload whose name contains one of the TEXTs, each direction and each anchor, it
runs the anchor's runner up to ``WARM_RUNS`` times (everything built, caches warm, bytecode
specialized), then switches counting on, runs it ``--runs`` times and dumps the count through
callgrind's client requests (a ten-line C shim compiled with ``cc`` into a temporary folder).
The count divided by the runs is one pass over the workload, in the very runners `make bench`
times:

- ``mcpbind``: ``Codec.decode`` / ``Codec.encode`` per message (bench/anchors.py ``Mcpbind``);
- ``floor``: the decode and encode floors of `make bench` (bench/anchors.py ``decode_floor``,
  ``encode_floor``), the anchors of the codec's targets;
- ``guarded`` (encode only): the guarded encode floor (``guarded_encode_floor``), the anchor of
  the encode bound;
- ``orjson``: ``orjson.loads`` / ``dumps``.

Each line prints the counts and codec / floor. Instructions are a proxy for time: orjson does
more per instruction than Python does. ``--keep DIR`` keeps callgrind's files, one per count,
for ``callgrind_annotate`` (where the instructions went, by C function).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .anchors import (
    Mcpbind,
    Orjson,
    accepted_by_mcpbind,
    decode_floor,
    encode_floor,
    guarded_encode_floor,
)
from .workloads import ROOT, all_workloads

SHIM = r"""
#include <valgrind/callgrind.h>
void bench_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void bench_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void bench_zero(void) { CALLGRIND_ZERO_STATS; }
void bench_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""
ANCHORS = ("mcpbind", "floor", "guarded", "orjson")


def runners(anchor: str, what: str, names: list[str]) -> list[tuple[str, Callable[[], Any]]]:
    """(workload name, runner) of ``anchor`` for every workload a TEXT of ``names`` selects."""
    out = []
    for w in all_workloads():
        label = f"{w.name} ({w.revision})"
        if not any(text in label for text in names):
            continue
        w = accepted_by_mcpbind(w)
        decode, _ = Mcpbind().decoder(w)
        assert decode is not None
        if anchor == "guarded":
            if what == "decode":
                continue  # (an encode floor only)
            fn = guarded_encode_floor(w, decode())
        elif anchor == "floor":
            fn = decode_floor(w) if what == "decode" else encode_floor(w, decode())
        else:
            a = Mcpbind() if anchor == "mcpbind" else Orjson()
            fn, note = a.decoder(w)
            if what == "encode" and fn is not None:
                fn, note = a.encoder(w, fn())
            if fn is None:
                raise SystemExit(f"{w.name}: {note}")
        out.append((label, fn))
    return out


def switches(shim: str) -> tuple[Callable[[], None], Callable[[str], None]]:
    """Counting's two switches, through the compiled shim: ``start()`` counts from zero,
    ``stop(label)`` dumps the count under ``label`` and stops counting."""
    lib = ctypes.CDLL(shim)
    lib.bench_dump.argtypes = [ctypes.c_char_p]

    def start() -> None:
        lib.bench_start()
        lib.bench_zero()

    def stop(label: str) -> None:
        lib.bench_dump(label.encode())
        lib.bench_stop()

    return start, stop


# Uncounted runs of a job first, at most WARM_RUNS and at least two, for up to WARM_SECONDS: Python
# 3.11 specializes a function's bytecode after its eighth call, and respecializes an instruction
# only after some 50 misses, so that code another job specialized for other objects (another
# revision's) settles on this job's only after that many runs (a long job is warm sooner)
WARM_RUNS = 100
WARM_SECONDS = 2.0


def count_each(shim: str, runs: int, jobs: list[tuple[str, Callable[[], Any]]]) -> None:
    """Under callgrind: each job run up to ``WARM_RUNS`` times (warm, its bytecode
    specialized), then ``runs`` times counted, one dump each labelled with its name; an "empty"
    job first, whose count ``callgrind`` subtracts."""
    start, stop = switches(shim)

    def nothing() -> None:
        return None

    gc.collect()
    gc.disable()
    for label, fn in [("empty", nothing), *jobs]:
        deadline = time.monotonic() + WARM_SECONDS
        for warmed in range(WARM_RUNS):
            fn()
            if warmed >= 1 and time.monotonic() > deadline:
                break
        start()
        for _ in range(runs):
            fn()
        stop(label)


def child(shim: str, runs: int, whats: list[str], anchors: list[str], names: list[str]) -> None:
    """Under callgrind: count each runner's ``runs`` passes, one dump each."""
    jobs: list[tuple[str, Callable[[], Any]]] = []
    for what in whats:
        for anchor in anchors:
            for label, fn in runners(anchor, what, names):
                jobs.append((f"{label}\t{what}\t{anchor}", fn))
    count_each(shim, runs, jobs)


def compile_shim(folder: Path) -> str:
    """The shim of callgrind's client requests compiled into ``folder``: its shared object."""
    source = folder / "shim.c"
    source.write_text(SHIM)
    shim = folder / "shim.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(source)], check=True)
    return str(shim)


def valgrind(out_dir: Path) -> list[str]:
    """The command prefix running a program under callgrind, counting off until the shim turns it
    on, its dumps written to ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out_dir}/callgrind.%p",
    ]


def read_dumps(out_dir: Path) -> dict[str, int]:
    """Label -> instructions of each dump the shim made into ``out_dir``, in the order counted."""
    found: dict[str, int] = {}
    dumps = [p for p in out_dir.glob("callgrind.*.*") if p.suffix[1:].isdigit()]
    for path in sorted(dumps, key=lambda p: int(p.suffix[1:])):
        text = path.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
        total = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
        if trigger is not None and total is not None:
            found[trigger.group(1)] = int(total.group(1))
    return found


def callgrind(
    child_argv: Callable[[str], list[str]], runs: int, keep: Path | None = None
) -> dict[str, int]:
    """Run ``python *child_argv(shim)`` (which calls ``count_each`` with ``runs``) under
    callgrind with the shim compiled; label -> instructions of one pass, "empty" subtracted."""
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        folder = Path(tmp)
        shim = compile_shim(folder)
        out_dir = keep or folder
        argv = [*valgrind(out_dir), sys.executable, *child_argv(shim)]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"the counting process failed:\n{proc.stderr[-3000:]}")
        found = read_dumps(out_dir)
        empty = found.pop("empty", 0)
        return {k: (v - empty) // runs for k, v in found.items()}


def count_module(module: str, runs: int, keep: Path | None = None) -> dict[str, dict[str, int]]:
    """Under callgrind, ``python -m module --child SHIM RUNS``, which counts its jobs with
    ``count_each``, each labelled ``NAME PATH`` (the path one word): name -> path ->
    instructions of one pass."""
    found = callgrind(lambda shim: ["-m", module, "--child", shim, str(runs)], runs, keep)
    out: dict[str, dict[str, int]] = {}
    for label, count in found.items():
        name, path = label.rsplit(None, 1)
        out.setdefault(name, {})[path] = count
    return out


def counts(
    runs: int, whats: list[str], anchors: list[str], names: list[str], keep: Path | None
) -> dict[tuple[str, str, str], int]:
    """(workload, what, anchor) -> instructions of one pass."""

    def child_argv(shim: str) -> list[str]:
        lists = [",".join(whats), ",".join(anchors)]
        return ["-m", "bench.instructions", "--child", shim, str(runs), *lists, *names]

    found = callgrind(child_argv, runs, keep)
    out: dict[tuple[str, str, str], int] = {}
    for label, count in found.items():
        workload, what, anchor = label.split("\t")
        out[workload, what, anchor] = count
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        shim, runs, whats, anchors, *names = args[1:]
        child(shim, int(runs), whats.split(","), anchors.split(","), names)
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.instructions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="+", metavar="TEXT")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--what", default="decode,encode")
    parser.add_argument("--anchors", default=",".join(ANCHORS))
    parser.add_argument("--keep", type=Path, default=None, help="keep callgrind's files here")
    parsed = parser.parse_args(args)
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        raise SystemExit("needs valgrind (callgrind) and a C compiler (cc)")
    whats, anchors = parsed.what.split(","), parsed.anchors.split(",")
    found = counts(parsed.runs, whats, anchors, parsed.names, parsed.keep)
    workloads = list(dict.fromkeys(w for w, _, _ in found))
    for what in whats:
        for w in workloads:
            row = {a: found.get((w, what, a)) for a in anchors}
            cells = "  ".join(f"{a} {v:>12,}" for a, v in row.items() if v is not None)
            ratio = ""
            if row.get("mcpbind") and row.get("floor"):
                ratio = f"  codec/floor {row['mcpbind'] / row['floor']:.2f}"
            if row.get("mcpbind") and row.get("guarded"):
                ratio += f"  codec/guarded {row['mcpbind'] / row['guarded']:.2f}"
            print(f"{what:6s} {w[:56]:56s} {cells}{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
