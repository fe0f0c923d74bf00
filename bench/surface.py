"""``mcpbind surface``: a tool's arguments checked through its generated type against
``jsonschema``'s validator on the same instances, and lock + generate of a 1,000-tool server.

    .venv/bin/python -m bench.surface      (also rows of `make bench`)

A benchmark, not a test: nothing here fails on a slow figure.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import timeit
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ARGUMENTS_VS_JSONSCHEMA = 10.0  # the generated type at least this many times faster
LOCK_AND_GENERATE = 2.0  # seconds, at most, for 1,000 tools

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# A tool's input as servers write them: nested objects, an array of objects, enums, bounds,
# a pattern, optional and required keys.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "date": {"type": "string", "minLength": 10, "maxLength": 10},
        "cabin": {"enum": ["economy", "premium", "business", "first"]},
        "passengers": {
            "type": "array",
            "minItems": 1,
            "maxItems": 9,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "age": {"type": "integer", "minimum": 0, "maximum": 130},
                    "bags": {"type": "integer", "minimum": 0, "maximum": 3},
                },
                "required": ["name", "age"],
                "additionalProperties": False,
            },
        },
        "budget": {"type": "number", "exclusiveMinimum": 0},
        "flexible": {"type": "boolean"},
    },
    "required": ["origin", "destination", "date", "passengers"],
    "additionalProperties": False,
}
VALID = {
    "origin": "CDG",
    "destination": "NRT",
    "date": "2026-12-01",
    "cabin": "economy",
    "passengers": [{"name": "Ada", "age": 36, "bags": 1}, {"name": "Bob", "age": 7}],
    "budget": 1200.5,
    "flexible": True,
}
INVALID = {**VALID, "passengers": [{"name": "Ada", "age": 36}, {"name": "Bob", "age": 131}]}


def _many(fns: dict[str, Callable[[], Any]], number: int = 2000) -> dict[str, float]:
    """Seconds per call of each function, the minimum of 5 rounds timing each in turn."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(5):
        for name, fn in fns.items():
            best[name] = min(best[name], timeit.timeit(fn, number=number) / number)
    return best


def _generated() -> Any:
    """The runtime's BoundTool of SCHEMA, from a module generated as `surface generate` makes them."""
    from codegen.surface.module import Document, types_module
    from mcpbind.surface.runtime import BoundTool

    made = types_module([Document("BookArguments", SCHEMA, DIALECT)], header="", doc="")
    assert made.roots["BookArguments"].exact  # the type says the whole schema: no fallback
    module = types.ModuleType("bench_surface_types")
    sys.modules[module.__name__] = module
    exec(compile(made.source, module.__name__, "exec"), module.__dict__)
    return BoundTool("book", module.BookArguments, dialect=DIALECT)


def measure_arguments(many: Callable[..., dict[str, float]] = _many) -> dict[str, float]:
    """Seconds per check of a valid and of an invalid instance, each way (timed in turn)."""
    import jsonschema

    from mcpbind.errors import ProtocolError

    tool = _generated()
    validator = jsonschema.Draft202012Validator(SCHEMA)
    assert validator.is_valid(VALID) and not validator.is_valid(INVALID)
    tool.check_arguments(VALID)

    def refused() -> None:
        try:
            tool.check_arguments(INVALID)
        except ProtocolError:
            return
        raise AssertionError("the generated type accepted an invalid instance")

    refused()
    return many(
        {
            "generated_valid": lambda: tool.check_arguments(VALID),
            "jsonschema_valid": lambda: validator.is_valid(VALID),
            "generated_invalid": refused,
            "jsonschema_invalid": lambda: validator.is_valid(INVALID),
        }
    )


def _book(
    origin: str,
    destination: str,
    date: str,
    passengers: list[dict[str, Any]],
    cabin: str = "economy",
    budget: float = 0.0,
    flexible: bool = False,
    extra: int = 0,
) -> str:
    return "booked"


def thousand_tools() -> Any:
    """An App serving 1,000 tools, each with its own input and output schema."""
    import mcpbind

    app = mcpbind.App("thousand", "1")
    for i in range(1000):
        schema = {
            **SCHEMA,
            "properties": {**SCHEMA["properties"], "extra": {"type": "integer", "minimum": i}},
        }
        app.tool(name=f"tool_{i:04d}", description=f"Tool number {i}.", input_schema=schema)(_book)
    return app


def measure_lock_and_generate(repeat: int = 3) -> dict[str, float]:
    """Wall seconds (best of ``repeat``) to lock the 1,000-tool App and to generate its package."""
    from codegen.surface.generate import package_files
    from mcpbind.surface.reader import read

    app = thousand_tools()
    locks, generates = [], []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(repeat):
            started = time.perf_counter()
            surface = asyncio.run(read(app))
            locked = time.perf_counter()
            surface.write(Path(folder) / "thousand.lock")
            files = package_files(surface, Path(folder) / "thousand_server")
            done = time.perf_counter()
            assert len(surface.items["tool"]) == 1000 and len(files) == 3
            locks.append(locked - started)
            generates.append(done - locked)
    return {"lock": min(locks), "generate": min(generates)}


def measure(timer: Any = None) -> dict[str, Any]:
    """Both measurements (``timer``: make bench's, whose ``many`` times functions in turn)."""
    many = timer.many if timer is not None else _many
    return {"arguments": measure_arguments(many), "thousand": measure_lock_and_generate()}


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The target rows of the report's headline table."""
    found = extra.get("surface")
    if not found:
        return []
    a, t = found["arguments"], found["thousand"]
    valid = a["jsonschema_valid"] / a["generated_valid"]
    invalid = a["jsonschema_invalid"] / a["generated_invalid"]
    total = t["lock"] + t["generate"]
    return [
        (
            f"tool arguments checked by the generated type >= {ARGUMENTS_VS_JSONSCHEMA:.0f}x "
            "faster than jsonschema",
            f"worst {min(valid, invalid):.1f}x",
            f"valid {valid:.1f}x ({a['generated_valid'] * 1e6:.2f} vs "
            f"{a['jsonschema_valid'] * 1e6:.1f} µs), invalid {invalid:.1f}x "
            f"({a['generated_invalid'] * 1e6:.2f} vs {a['jsonschema_invalid'] * 1e6:.1f} µs)",
            min(valid, invalid) >= ARGUMENTS_VS_JSONSCHEMA,
        ),
        (
            f"surface lock + generate, 1,000 tools < {LOCK_AND_GENERATE:.0f} s",
            f"{total:.2f} s",
            f"lock {t['lock']:.2f} s (an App in process), generate {t['generate']:.2f} s "
            "(laid out as black lays code out)",
            total < LOCK_AND_GENERATE,
        ),
    ]


def main() -> None:
    for target, measured, where, ok in targets({"surface": measure()}):
        print(f"{'met' if ok else 'MISSED'}: {target}: {measured} ({where})")


if __name__ == "__main__":
    main()
