"""Thread safety: nothing msgspec builds lazily is ever used half built (docs/threads.md).

msgspec 0.22 caches a Struct's decoding info on the class before it has built it; a thread that
meets it then crashes the interpreter. Each check runs in a fresh interpreter (a crash must not
take pytest down, and what an earlier test built must not hide what is built lazily).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest


def run(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


PREPARED = """
    import gc, json, sys
    import msgspec
    import mcpbind
    from mcpbind import _support
    from mcpbind._support import OpenObject, Untagged

    def built(cls):
        # msgspec's info of a Struct class is reachable from it once msgspec has built it
        return any(type(r).__qualname__ == "StructInfo" for r in gc.get_referents(cls))

    out = {}
    for revision in mcpbind.REVISIONS:
        module = mcpbind.bindings(revision)
        # every class of the package and its modules, private ones included
        modules = [m for name, m in sys.modules.items() if name == module.__name__ or name.startswith(module.__name__ + ".")]
        classes = {v for m in modules for v in vars(m).values() if isinstance(v, type)}
        structs = {c for c in classes if issubclass(c, msgspec.Struct) and c is not msgspec.Struct}
        structs |= {c._fields_type for c in classes if issubclass(c, OpenObject) and c is not OpenObject}
        hooked = {c for c in classes if issubclass(c, (OpenObject, Untagged)) and c not in (OpenObject, Untagged)}
        before = sum(built(c) for c in structs)
        _support.prepare(module)
        out[revision] = {
            "structs": len(structs),
            "built_before": before,
            "not_built": sorted(c.__name__ for c in structs if not built(c)),
            "hooked": len(hooked),
            "no_hook": sorted(c.__name__ for c in hooked if c not in _support._HOOKS),
            "no_classes": sorted(c.__name__ for c in hooked if issubclass(c, Untagged) and c._classes is None),
        }
    print(json.dumps(out))
"""


def test_prepare_builds_everything_msgspec_would_build_on_first_use() -> None:
    proc = run(PREPARED)
    assert proc.returncode == 0, explain(proc)
    for revision, r in json.loads(proc.stdout).items():
        # Importing builds nothing (so that this check can tell), and there is something to build.
        assert r["structs"] > 100 and r["hooked"] > 5, (revision, r)
        assert r["built_before"] < r["structs"], (revision, r)
        assert r["not_built"] == [], (revision, r["not_built"])
        assert r["no_hook"] == [], (revision, r["no_hook"])
        assert r["no_classes"] == [], (revision, r["no_classes"])


HALF_BUILT = """
    import json, sys, threading, time
    import msgspec
    import mcpbind
    from mcpbind import OpenObject

    entered, release = threading.Event(), threading.Event()

    def slow_int():
        # Evaluated by msgspec while it builds Inner's info, halfway through Outer's: the first
        # time, hold that thread there while another one uses Outer.
        if not entered.is_set():
            entered.set()
            release.wait()
        return int

    class Inner(msgspec.Struct):
        x: "slow_int()"

    class Outer(msgspec.Struct):
        inner: Inner
        y: int

    class Open(OpenObject):  # decoded by dec_hook, which converts into Outer
        _attributes = {"inner": "inner", "y": "y"}
        _fields_type = Outer

    class Holder(msgspec.Struct):
        open: Open

    value = {"inner": {"x": 1}, "y": 2}
    use = {
        "decode": lambda: mcpbind.decode(json.dumps(value), Outer),
        "convert": lambda: mcpbind.convert(value, Outer),
        "dec_hook": lambda: mcpbind.convert({"open": value}, Holder),
    }[sys.argv[1]]
    results = []

    def work():
        results.append(use())

    first = threading.Thread(target=work)
    first.start()
    entered.wait()
    second = threading.Thread(target=work)
    second.start()
    time.sleep(0.3)  # the second thread decodes now through half-built Outer, or waits
    release.set()
    first.join()
    second.join()
    print(json.dumps([msgspec.to_builtins(r) for r in results]))
"""


@pytest.mark.parametrize("entry", ["decode", "convert", "dec_hook"])
def test_a_thread_waits_for_a_type_another_thread_is_building(entry: str) -> None:
    proc = run(HALF_BUILT, entry, timeout=30)
    assert proc.returncode == 0, explain(proc)
    expected = {"inner": {"x": 1}, "y": 2}
    assert json.loads(proc.stdout) == [{"open": expected} if entry == "dec_hook" else expected] * 2


STRESS = """
    import json, threading
    import msgspec
    import mcpbind

    VALUES = {
        "CallToolResult": {
            "content": [{"type": "text", "text": "x"}, {"type": "resource", "resource": {"uri": "u", "text": "t"}}],
            "_meta": {"a": 1},
        },
        "ReadResourceResult": {"contents": [{"uri": "u", "text": "t"}, {"uri": "u", "blob": "YQ=="}]},
        "ListToolsResult": {"tools": [{"name": "a", "inputSchema": {"type": "object", "properties": {}}}]},
        "ClientRequest": {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": {}}},
    }
    THREADS = 32
    start = threading.Barrier(THREADS)
    decoded = []

    def work(i):
        module = mcpbind.bindings(mcpbind.REVISIONS[i % len(mcpbind.REVISIONS)])
        names = list(VALUES)[i % 4:] + list(VALUES)[: i % 4]  # each thread meets the types in its own order
        start.wait()
        for name in names:
            tp = getattr(module, name)
            for how in ("decode", "convert") if i % 2 else ("convert", "decode"):
                try:
                    if how == "decode":
                        mcpbind.decode(json.dumps(VALUES[name]), tp)
                    else:
                        mcpbind.convert(VALUES[name], tp)
                    decoded.append(name)
                except msgspec.ValidationError:  # a request shape of another revision
                    decoded.append(None)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(len(decoded), sum(d is not None for d in decoded))
"""


def test_threads_decoding_every_revision_at_once() -> None:
    # Before the fix, 7 runs in 10 of this crashed; six clean runs in a row would have happened
    # about once in 1400 tries.
    for _ in range(6):
        proc = run(STRESS)
        assert proc.returncode == 0, explain(proc)
        total, ok = map(int, proc.stdout.split())
        assert total == 32 * 4 * 2 and ok > total // 2, proc.stdout


CODECS = """
    import json, threading
    from mcpbind import REVISIONS, Codec, ProtocolError

    THREADS = 32
    start = threading.Barrier(THREADS)
    done = []

    def attempt(codec, message):
        try:
            codec.decode(json.dumps(message).encode())
        except ProtocolError:  # a bad message, a method or result shape another revision has
            pass

    def work(i):
        revision = REVISIONS[i % len(REVISIONS)]
        start.wait()
        server = Codec(revision, "server")  # built and used before the client codec exists
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": {}}},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "ping"},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": 3}},
        ):
            attempt(server, message)
        client = Codec(revision, "client")
        client.expect(5, "tools/call")
        content = [{"type": "text", "text": "x"}, {"type": "resource", "resource": {"uri": "u", "text": "t"}}]
        attempt(client, {"jsonrpc": "2.0", "id": 5, "result": {"content": content}})
        client.expect(6, "tools/list")
        tools = [{"name": "a", "inputSchema": {"type": "object"}}]
        attempt(client, {"jsonrpc": "2.0", "id": 6, "result": {"tools": tools}})
        done.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(len(done))
"""


def test_threads_building_codecs_of_every_revision_at_once() -> None:
    """The crash of issue 11: 32 threads building codecs of every revision and decoding at
    once (before the fix, 5 runs in 10 of this died with a segfault)."""
    for _ in range(6):
        proc = run(CODECS)
        assert proc.returncode == 0, explain(proc)
        assert proc.stdout.split() == ["32"], proc.stdout
