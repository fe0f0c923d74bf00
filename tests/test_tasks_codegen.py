"""The tasks extension's facts: read by the generator from the pinned npm package (by sha256),
never guessed: a tampered tarball or a missing declaration is an error naming it."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest

import codegen.extensions
from codegen.extensions import (
    _Module,
    cache_path,
    read_extension_pins,
    tarball_path,
    tasks_facts,
)
from codegen.pin import PinError
from mcpbind._extensions import TASKS


def test_the_generated_facts_are_what_the_pinned_package_declares() -> None:
    (pin,) = read_extension_pins()
    facts = tasks_facts(pin)
    assert facts.sha256 == pin.sha256
    assert asdict(facts) == TASKS[pin.extends]._asdict()


def test_a_tarball_that_is_not_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPBIND_SCHEMA_DIR", str(tmp_path))
    (pin,) = read_extension_pins()
    where = tarball_path(pin)
    where.parent.mkdir(parents=True)
    where.write_bytes(b"not the package")
    with pytest.raises(PinError, match="sha256 mismatch for extension tasks"):
        tasks_facts(pin)


def test_a_declaration_the_module_lacks_is_named() -> None:
    module = _Module('export const OTHER = "x";\n', "pkg 1.0 schemas.js")
    with pytest.raises(PinError, match="no declaration of TASKS_EXTENSION_ID_V2"):
        module.string("TASKS_EXTENSION_ID_V2")


def test_a_download_is_kept_in_the_user_cache_never_in_the_shared_schemas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ../shared/schemas is the upstream data as given, often read-only: a tarball it lacks is
    # looked for, and kept, in the per-user cache.
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o555)
    monkeypatch.delenv("MCPBIND_SCHEMA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(codegen.extensions, "schema_dir", lambda: shared)
    (pin,) = read_extension_pins()
    where = cache_path(pin)
    assert where.is_relative_to(tmp_path / "cache")
    assert tarball_path(pin).is_relative_to(shared)
    where.parent.mkdir(parents=True)
    where.write_bytes(b"not the package")
    with pytest.raises(PinError, match=f"{where}: sha256 mismatch"):
        tasks_facts(pin)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"core_renamed": {"ttl": "ttlMs"}}, "does not pair TaskV1Schema"),  # one left out
        ({"core_renamed": {"ttl": "ttlMs", "pollInterval": "every"}}, "does not pair"),
        ({"core_forbidden": "never"}, "TaskSupportV1Schema has no 'never'"),
        ({"related_task_module": "package/dist/core/v1/index.js"}, "no relatedTaskKey"),
    ],
)
def test_core_task_facts_that_do_not_fit_the_package_are_refused(
    change: dict[str, object], says: str
) -> None:
    (pin,) = read_extension_pins()
    with pytest.raises(PinError, match=says):
        tasks_facts(replace(pin, **change))  # type: ignore[arg-type]


def test_the_facts_name_the_keys_the_package_declares() -> None:
    # What the runtime writes and reads instead of literals: each is what the pinned schema says,
    # and each is the wire key of the generated class the runtime converts with.
    import msgspec

    from mcpbind import bindings
    from mcpbind._extension_tasks import TASK_TYPES

    (pin,) = read_extension_pins()
    f = TASKS[pin.extends]
    assert (f.extensions_key, f.task_id, f.status) == ("extensions", "taskId", "status")
    assert (f.input_requests, f.result, f.error) == ("inputRequests", "result", "error")
    types = TASK_TYPES[pin.extends]

    def wire(cls: object) -> set[str]:
        return {x.encode_name for x in msgspec.structs.fields(cls)}  # type: ignore[arg-type]

    for method, (_, params) in types.requests.items():
        assert f.task_id in wire(params), method
    assert {f.task_id, f.status} <= wire(types.create_result)
    assert f.input_requests in wire(types.by_status[f.input_required])
    assert f.result in wire(types.by_status[f.completed])
    assert f.error in wire(types.by_status[f.failed])
    facts = bindings(pin.extends).FACTS
    assert f.extensions_key in wire(facts.client_capabilities)
    assert f.extensions_key in wire(facts.server_capabilities)
    # The task result's discriminator is the revision's own (FACTS.result_kinds), not a fact of
    # the extension.
    assert facts.result_kinds is not None
    assert facts.result_kinds.key in wire(types.create_result)


def test_the_type_stubs_are_the_generated_records() -> None:
    # mcpbind/*.pyi are written by the generator from the same field lists as the records.
    import ast

    from mcpbind._extension_tasks import TaskTypes
    from mcpbind._extensions import TasksFacts

    root = Path(__file__).resolve().parent.parent / "mcpbind"
    for stub, record in (("_extensions.pyi", TasksFacts), ("_extension_tasks.pyi", TaskTypes)):
        tree = ast.parse((root / stub).read_text())
        (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        names = [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)]  # type: ignore[union-attr]
        assert tuple(names) == record._fields, stub
