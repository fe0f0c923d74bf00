"""The codec's bound in instructions (issue 36): for each workload of the decode and encode tables,
the codec's instructions over 1.3x its floor's, a message, next to what 0.5 µs is in the codec's
own instructions in the run at hand.

The timed bound (1.3x the floor plus 0.5 µs a message) holds an allowance in seconds, and what
a microsecond buys moves with the host: the same code's decode of a recorded session took 228 µs
in one run on this machine and 332 µs in another, a few hours apart. The instructions over 1.3x
the floor do not move with the host (callgrind, `bench.instructions`: the very runners `make
bench` times, ``runs`` passes each); the codec's instructions over its own measured time in the
run say how many of them 0.5 µs was worth then. A workload whose count a message is under that
figure is within the allowance at the run's speed, in the codec's own instructions; the timed
row and this one differ where the codec and its floor do unlike amounts a cycle (msgspec's C
against the codec's Python). A reference, not a target of its own.
"""

from __future__ import annotations

import shutil
from typing import Any

from .instructions import counts

# The codec's bound (issue 36), here and in bench/__main__.py's tables: at most CODEC_VS_FLOOR
# times its floor, decode and encode (encode's floor is the guarded one), plus PER_MESSAGE seconds
# for each message of the workload (the checks a codec must make cost a fixed amount a message)
CODEC_VS_FLOOR = 1.3
PER_MESSAGE = 0.5e-6
ANCHOR = {"decode": "floor", "encode": "guarded"}  # what each direction's bound multiplies


def measure(runs: int) -> dict[tuple[str, str, str], int]:
    """(workload label, direction, anchor) -> instructions of one pass, for every workload; {}
    without valgrind or a C compiler."""
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        return {}
    return counts(runs, ["decode", "encode"], ["mcpbind", "floor", "guarded"], [""], None)


def _label(row: Any) -> str:
    return f"{row.workload.name} ({row.workload.revision})"


def figures(row: Any, what: str, found: dict[tuple[str, str, str], int]) -> dict[str, float]:
    """One workload's figures in ``what``: the codec's and its anchor's instructions a pass, the
    codec's over 1.3x the anchor's a message, and 0.5 µs in the codec's instructions at the
    run's speed (its count over its time); {} when a figure is missing."""
    label = _label(row)
    ours, anchor = found.get((label, what, "mcpbind")), found.get((label, what, ANCHOR[what]))
    seconds = (row.decode if what == "decode" else row.encode).get("mcpbind")
    messages = len(row.workload.messages)
    if not ours or not anchor or not seconds or not messages:
        return {}
    return {
        "codec": ours,
        "anchor": anchor,
        "over": (ours - CODEC_VS_FLOOR * anchor) / messages,
        "allowance": PER_MESSAGE * ours / seconds,
    }


def table(rows: list[Any], found: dict[tuple[str, str, str], int]) -> list[str]:
    """The section's table: a line per workload, decode and encode side by side."""
    lines = [
        "| workload | messages | decode: codec | floor | over 1.3x floor, a message | 0.5 µs in the codec's instructions, this run | encode: codec | guarded floor | over 1.3x guarded floor, a message | 0.5 µs in the codec's instructions, this run |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]  # fmt: skip
    for row in rows:
        cells = []
        for what in ("decode", "encode"):
            f = figures(row, what, found)
            if not f:
                cells += ["-"] * 4
                continue
            over = f"{f['over']:,.0f}"
            cells += [
                f"{f['codec']:,.0f}",
                f"{f['anchor']:,.0f}",
                over if f["over"] <= f["allowance"] else f"**{over}**",
                f"{f['allowance']:,.0f}",
            ]
        lines.append(
            f"| {_label(row)} | {len(row.workload.messages)} | " + " | ".join(cells) + " |"
        )
    return lines


def targets(
    rows: list[Any], found: dict[tuple[str, str, str], int]
) -> list[tuple[str, str, str, bool | None]]:
    """A reference row of the headline table for each direction."""
    out: list[tuple[str, str, str, bool | None]] = []
    for what, anchor in (("decode", "its floor"), ("encode", "its guarded floor")):
        each = [(f, row.workload.name) for row in rows if (f := figures(row, what, found))]
        if not each:
            continue
        beyond = sorted(
            ((f, name) for f, name in each if f["over"] > f["allowance"]),
            key=lambda fn: -fn[0]["over"],
        )
        worst = max(each, key=lambda fn: fn[0]["over"])
        low = min(f["allowance"] for f, _ in each)
        high = max(f["allowance"] for f, _ in each)
        where = (
            f"within this run's 0.5 µs on {len(each) - len(beyond)}/{len(each)} workloads "
            f"(0.5 µs was {low:,.0f}-{high:,.0f} of the codec's instructions, by workload)"
        )
        if beyond:
            where += "; beyond it: " + ", ".join(
                f"{name} {f['over']:,.0f} (0.5 µs: {f['allowance']:,.0f})" for f, name in beyond[:4]
            )
            if len(beyond) > 4:
                where += f" and {len(beyond) - 4} more"
        out.append(
            (
                f"(reference) codec {what} over 1.3x {anchor} in instructions a message "
                "(callgrind: the host's speed does not move them), against what 0.5 µs was in "
                "the codec's instructions in this run",
                f"worst {worst[0]['over']:,.0f} ({worst[1]})",
                where,
                None,
            )
        )
    return out
