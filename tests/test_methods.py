"""METHODS of every revision against the schema itself, derived independently of the generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mcpbind
from mcpbind._support import _runtime_classes

SCHEMAS = Path(__file__).resolve().parents[2] / "shared" / "schemas"


def _schema(revision: str) -> dict[str, Any]:
    path = SCHEMAS / revision / "schema.json"
    if not path.exists():
        pytest.skip(f"{path} is not there")
    return json.loads(path.read_text())


def _defs(schema: dict[str, Any]) -> dict[str, Any]:
    return schema.get("$defs") or schema["definitions"]


def _members(defs: dict[str, Any], union: str) -> list[str]:
    node = defs.get(union)
    if node is None:
        return []
    if "$ref" in node:  # a union of one member is the member itself
        return [node["$ref"].rsplit("/", 1)[1]]
    const = node.get("properties", {}).get("method", {}).get("const")
    if const is not None:  # 2026-07-28: ClientNotification is an inline copy of its one member
        return [
            k
            for k, v in defs.items()
            if k != union
            and k.endswith(("Request", "Notification"))
            and v.get("properties", {}).get("method", {}).get("const") == const
        ]
    return [
        m["$ref"].rsplit("/", 1)[1]
        for m in node.get("anyOf") or node.get("oneOf") or []
        if "$ref" in m
    ]


def _method(defs: dict[str, Any], name: str) -> str:
    return str(defs[name]["properties"]["method"]["const"])


def _expected(revision: str) -> dict[str, dict[str, Any]]:
    defs = _defs(_schema(revision))
    out: dict[str, dict[str, Any]] = {}
    for side in ("Client", "Server"):
        results = set(_members(defs, f"{'Server' if side == 'Client' else 'Client'}Result"))
        for kind, union in (("request", f"{side}Request"), ("notification", f"{side}Notification")):
            for name in _members(defs, union):
                method = _method(defs, name)
                entry = out.setdefault(method, {"kind": kind, "senders": set(), "message": name})
                entry["senders"].add(side.lower())
                params = defs[name]["properties"].get("params", {})
                entry["params"] = params["$ref"].rsplit("/", 1)[1] if "$ref" in params else None
                entry["params_required"] = "params" in defs[name].get("required", [])
                base = name.removesuffix("Request")
                entry["result"] = (
                    f"{base}Result" if kind == "request" and f"{base}Result" in results else None
                )
                response = defs.get(
                    f"{base}ResultResponse"
                )  # 2026-07-28+: the schema names the pair
                if kind == "request" and response is not None:
                    result = response["properties"]["result"]
                    refs = [m["$ref"] for m in result.get("anyOf", [result]) if "$ref" in m]
                    entry["result_members"] = {r.rsplit("/", 1)[1] for r in refs}
    return out


@pytest.mark.parametrize("revision", mcpbind.REVISIONS)
def test_methods_match_schema(revision: str) -> None:
    M = mcpbind.bindings(revision)
    expected = _expected(revision)
    assert set(M.METHODS) == set(expected)
    for method, want in expected.items():
        spec = M.METHODS[method]
        assert spec.method == method
        assert spec.kind == want["kind"], method
        senders = want["senders"]
        assert spec.sender == ("both" if len(senders) == 2 else next(iter(senders))), method
        assert spec.message is getattr(M, want["message"]), method
        assert spec.params_required == want["params_required"], method
        if want["params"] is not None:
            assert spec.params is getattr(M, want["params"]), method
        if want["kind"] == "notification":
            assert spec.result is None
        elif "result_members" in want:
            classes = {c.__name__ for c in _runtime_classes([spec.result])}
            assert want["result_members"] <= classes, (method, classes)
        elif want["result"] is not None:
            assert spec.result is getattr(M, want["result"]), method
        else:
            assert spec.result is not None, method


@pytest.mark.parametrize("revision", mcpbind.REVISIONS)
def test_capability_gates_name_real_capabilities(revision: str) -> None:
    M = mcpbind.bindings(revision)
    for spec in M.METHODS.values():
        if spec.capability is None:
            continue
        side = M.ClientCapabilities if spec.capability_side == "client" else M.ServerCapabilities
        node: Any = side
        for key in spec.capability.split("."):
            fields = {f.encode_name: f.type for f in __import__("msgspec").structs.fields(node)}
            assert key in fields, (revision, spec.method, spec.capability)
            tp = fields[key]
            node = next(
                (a for a in getattr(tp, "__args__", (tp,)) if hasattr(a, "__struct_fields__")), None
            )
            if node is None:
                break


def test_gates_from_the_issue() -> None:
    M = mcpbind.bindings("2025-11-25")
    gates = {m: (s.capability, s.capability_side) for m, s in M.METHODS.items()}
    assert gates["tools/call"] == ("tools", "server")
    assert gates["resources/subscribe"] == ("resources.subscribe", "server")
    assert gates["completion/complete"] == ("completions", "server")
    assert gates["logging/setLevel"] == ("logging", "server")
    assert gates["sampling/createMessage"] == ("sampling", "client")
    assert gates["elicitation/create"] == ("elicitation", "client")
    assert gates["roots/list"] == ("roots", "client")
