"""Stage 5, write: verify generated files, then replace the committed ones (or report drift).

Nothing replaces committed output before every new file compiles, parses with libcst and
imports, and msgspec has built a decoder for every type it defines.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import libcst

from . import any_revision, diff_render, digest, extensions, projection
from .diff import compare
from .emit import format_python, on_all_cores, render, revision_files
from .ir import Revision
from .model import build
from .paths import CHANGES_DIR, GENERATED_DIR, REPO_ROOT, package_name
from .pin import pins

# The hand-written package: the type stubs of generated records sit there, beside their users.
STUBS_DIR = REPO_ROOT / "mcpbind"


class VerifyError(Exception):
    """Generated code failed verification; nothing was written."""


def revisions_file() -> str:
    ps = pins()
    return render(
        "revisions.py.j2",
        pins=ps,
        packages={p.revision: package_name(p.revision) for p in ps},
        latest=[p.revision for p in ps if p.released][-1],
    )


def extensions_file() -> str:
    """generated/mcpbind/_extensions.py: the facts of the pinned extensions."""
    tasks = extensions.extension_facts().get("tasks")
    return render("extensions.py.j2", tasks=tasks, rows=extensions.facts_rows(tasks))


def extension_tasks_file(irs: dict[str, Revision]) -> str:
    """generated/mcpbind/_extension_tasks.py: the tasks extension's messages as Structs, typed
    by the revision it extends (its IR from ``irs``, else built)."""
    tasks = extensions.extension_facts().get("tasks")
    view = None
    if tasks is not None:
        rev = irs.get(tasks.revision) or build(tasks.revision)
        core = (irs.get(tasks.core) or build(tasks.core)) if tasks.core else None
        view = extensions.tasks_types(tasks, rev, core)
    return render("extension_tasks.py.j2", view=view, fields=extensions.TASK_TYPES_FIELDS)


def extension_stubs() -> dict[Path, str]:
    """mcpbind/_extensions.pyi and _extension_tasks.pyi: the shape of the two records above for
    type checkers (which do not see generated/), written from the same field lists."""
    tasks = extensions.extension_facts().get("tasks")
    facts = render("extensions.pyi.j2", rows=extensions.facts_rows(tasks))
    types = render("extension_tasks.pyi.j2", fields=extensions.TASK_TYPES_FIELDS)
    return {STUBS_DIR / "_extensions.pyi": facts, STUBS_DIR / "_extension_tasks.pyi": types}


def generate(revisions: Iterable[str] | None = None, *, settle: bool = False) -> dict[Path, str]:
    """Every generated file (absolute path -> content) for ``revisions`` (default: all).

    With ``settle``, also prove that black's one pass settled every Python file
    (``emit.format_python``); ``mcpbind generate --check`` asks for it."""
    wanted = list(revisions) if revisions is not None else [p.revision for p in pins()]
    files: dict[Path, str] = {
        GENERATED_DIR / "_revisions.py": revisions_file(),
        GENERATED_DIR / "_extensions.py": extensions_file(),
        **extension_stubs(),
    }
    irs = {revision: build(revision) for revision in wanted}
    files[GENERATED_DIR / "_extension_tasks.py"] = extension_tasks_file(irs)
    for revision, rev in irs.items():
        package = GENERATED_DIR / package_name(revision)
        for name, text in revision_files(rev).items():
            files[package / name] = text
        files[digest_file(revision)] = digest.dump(rev)
    files.update(change_files(irs))
    pairs = projection.projection_files(irs)
    complete = set(irs) == {p.revision for p in pins()}
    if not complete:  # these name every pinned revision: only a run over all of them writes them
        del pairs[projection.PACKAGE_INIT]
    files.update({GENERATED_DIR / path: text for path, text in pairs.items()})
    if complete:
        files[GENERATED_DIR / "_provenance.py"] = projection.provenance_file(irs)
        files[GENERATED_DIR / any_revision.FILE] = any_revision.any_revision_file(irs)
    python = format_python(
        {path: text for path, text in files.items() if path.suffix == ".py"}, settle=settle
    )
    return {**files, **python}


def digest_file(revision: str) -> Path:
    """Where the digest of ``revision`` is committed (``codegen.digest``)."""
    return GENERATED_DIR / digest.DIGEST_DIR / f"{package_name(revision)}.json"


def change_files(irs: dict[str, Revision]) -> dict[Path, str]:
    """``docs/changes/<A>__<B>.md`` for each consecutive pair of pinned revisions in ``irs``.

    Each compares the two digests read back, as ``mcpbind diff`` does, so the documents are
    exactly what the command prints.
    """
    order = [p.revision for p in pins()]
    digests = {r: digest.load(digest.dump(rev)) for r, rev in irs.items()}
    return {
        CHANGES_DIR / f"{a}__{b}.md": diff_render.markdown(compare(digests[a], digests[b]))
        for a, b in zip(order, order[1:], strict=False)
        if a in irs and b in irs
    }


_IMPORT_CHECK = """
import importlib, sys
import msgspec
from mcpbind._support import dec_hook
for package in sys.argv[1:]:
    if package == "any_revision":
        importlib.import_module("mcpbind.any_revision")
        continue
    if package == "_projection":
        import pkgutil
        for info in pkgutil.iter_modules(importlib.import_module("mcpbind._projection").__path__):
            importlib.import_module("mcpbind._projection." + info.name)
        continue
    module = importlib.import_module("mcpbind." + package + ".types")
    for name in module.__all__:
        msgspec.json.Decoder(getattr(module, name), dec_hook=dec_hook)
"""


def _parse_error(item: tuple[str, str]) -> str | None:
    """Why the Python source ``text`` of file ``rel`` does not compile or parse with libcst."""
    rel, text = item
    try:
        compile(text, rel, "exec")
        libcst.parse_module(text)
    except (SyntaxError, libcst.ParserSyntaxError) as exc:
        return f"{rel}: generated code does not parse: {exc}"
    return None


def verify(files: dict[Path, str]) -> None:
    """Compile, parse and import the new files from a scratch copy; raise VerifyError if any fails.

    The import runs in a child process while the files are parsed on all cores: the parse
    error, when there is one, is what is reported."""
    files = {p: t for p, t in files.items() if p.is_relative_to(GENERATED_DIR)}  # not docs/changes
    for path, text in files.items():
        if path.suffix == ".json":
            try:
                digest.load(text)
            except digest.DigestError as exc:
                rel = path.relative_to(REPO_ROOT)
                raise VerifyError(f"{rel}: generated digest does not load: {exc}") from exc
    python = sorted(
        ((str(p.relative_to(REPO_ROOT)), t) for p, t in files.items() if p.suffix != ".json"),
        key=lambda item: -len(item[1]),  # largest first balances the workers
    )
    with tempfile.TemporaryDirectory() as scratch:
        for path, text in files.items():
            target = Path(scratch) / path.relative_to(GENERATED_DIR)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        packages = sorted(
            p.relative_to(GENERATED_DIR).parts[0]
            for p in files
            if p.parent != GENERATED_DIR and p.suffix == ".py"  # packages, not the digests
        )
        if GENERATED_DIR / any_revision.FILE in files:
            packages.append("any_revision")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
            "MCPBIND_GENERATED_DIR": scratch,
        }
        with subprocess.Popen(
            [sys.executable, "-c", _IMPORT_CHECK, *packages],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        ) as importing:
            try:
                errors = [e for e in on_all_cores(_parse_error, python) if e is not None]
            except BaseException:
                importing.kill()
                raise
            if errors:
                importing.kill()
                raise VerifyError(errors[0])
            _, stderr = importing.communicate()
        if importing.returncode != 0:
            raise VerifyError(f"generated code does not import:\n{stderr.strip()}")


def stale(files: dict[Path, str]) -> list[str]:
    """Unified diffs of every file whose committed content differs from ``files``."""
    diffs = []
    for path, text in sorted(files.items()):
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old != text:
            rel = str(path.relative_to(REPO_ROOT))
            diffs.append(
                "".join(
                    difflib.unified_diff(
                        old.splitlines(keepends=True),
                        text.splitlines(keepends=True),
                        fromfile=f"a/{rel}",
                        tofile=f"b/{rel}",
                    )
                )
            )
    return diffs


def write(files: dict[Path, str]) -> list[Path]:
    """Write the files that changed (each atomically); returns the ones written."""
    written = []
    for path, text in sorted(files.items()):
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        written.append(path)
    return written
