"""The projection runtime's shortcuts agree with msgspec, and failures name their JSON path."""

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mcpbind
from mcpbind import v2024_11_05 as old
from mcpbind import v2026_07_28 as new
from mcpbind.projection import _plain_check, fits

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
PLAIN_TYPES = [
    list[str],
    dict[str, dict[str, Any]],
    dict[str, Any],
    list[int],
    dict[str, list[str]],
    list[bool],
]


@pytest.mark.parametrize("tp", PLAIN_TYPES, ids=str)
@settings(max_examples=200, deadline=None, derandomize=True)
@given(value=JSON)
def test_the_plain_json_shortcut_accepts_only_what_msgspec_accepts_unchanged(tp, value):
    check = _plain_check(tp)
    assert check is not None
    try:
        converted = msgspec.convert(value, tp)
    except msgspec.ValidationError:
        assert not check(value)
    else:
        assert check(value) == (
            converted == value and msgspec.json.encode(converted) == msgspec.json.encode(value)
        )


def test_types_with_constraints_or_structs_are_left_to_msgspec():
    assert _plain_check(float) is None
    assert _plain_check(new.Tool) is None


def test_fits_accepts_exact_plain_json_only_and_leaves_the_rest_to_msgspec():
    schemas = fits(dict[str, dict[str, Any]])
    assert schemas({"p": {"type": "string"}}) and schemas({})
    assert not schemas({"p": 5}) and not schemas({1: {}}) and not schemas({"p": {1: 2}})
    assert not schemas([]) and not fits(list[str])(["a", 1]) and fits(list[str])(["a"])
    assert fits(float)(1.5) is False  # no shortcut: Ctx.check asks msgspec


def test_an_open_object_projects_to_the_target_class_keeping_every_key():
    schema = new.ToolInputSchema(
        {"properties": {"p": {"type": "string"}}, "required": ["p"], "x-vendor": [1]},
        type="object",
    )
    out = mcpbind.project(new.Tool(name="t", input_schema=schema), "2024-11-05").input_schema
    assert type(out) is old.ToolInputSchema and out is not schema
    assert dict(out) == dict(schema) and out.type == "object"
    assert out["properties"] is schema["properties"]  # plain JSON that fits is shared, not copied
    out["x-more"] = 1  # the projection's own object: the source is left as it was
    assert "x-more" not in schema


def test_a_failure_deep_inside_names_its_full_json_path():
    tools = new.ListToolsResult(
        result_type="complete",
        cache_scope="public",
        ttl_ms=0,
        tools=[
            new.Tool(name="ok", input_schema=new.ToolInputSchema(type="object")),
            new.Tool(
                name="bad",
                input_schema=new.ToolInputSchema({"properties": {"p": 5}}, type="object"),
            ),
        ],
    )
    with pytest.raises(mcpbind.ProjectionError) as info:
        mcpbind.project(tools, "2024-11-05")
    assert info.value.path == "$.tools[1].inputSchema.properties"
    assert (info.value.source, info.value.target) == ("2026-07-28", "2024-11-05")
    kept, dropped = mcpbind.project_lossy(tools, "2024-11-05")
    assert dropped == ["$.tools[1].inputSchema.properties"]
    assert [t.name for t in kept.tools] == ["ok", "bad"]
    assert isinstance(kept, old.ListToolsResult)


MALFORMED = [
    # (what was built by hand, target, path, what msgspec says about it)
    (
        lambda m: m.CallToolResult(content=[m.TextContent(text="a"), 5]),
        "2025-06-18",
        "$.content[1]",
        "Expected `object`, got `int`",
    ),
    (
        lambda m: m.CallToolResult(content=[m.TextContent(text="a"), 5]),
        "2024-11-05",
        "$.content[1]",
        "Expected `object`, got `int`",
    ),
    (
        lambda m: m.CallToolResult(content=5),
        "2024-11-05",
        "$.content",
        "Expected `array`, got `int`",
    ),
    (
        lambda m: m.ListToolsResult(tools=[m.Tool(name="x", input_schema="zzz")]),
        "2024-11-05",
        "$.tools[0].inputSchema",
        "got `str`",
    ),
]


@pytest.mark.parametrize(("build", "to", "path", "reason"), MALFORMED)
def test_projecting_a_malformed_object_names_the_first_invalid_value(build, to, path, reason):
    """A Struct built by hand with a value its type does not allow is a ProjectionError with the
    value's full path, never an AttributeError or TypeError from generated code; the lossy mode
    raises it too, or drops the value where it may drop one."""
    obj = build(mcpbind.v2025_11_25)
    with pytest.raises(mcpbind.ProjectionError) as info:
        mcpbind.project(obj, to)
    assert info.value.path == path
    assert reason in info.value.reason
    assert (info.value.source, info.value.target) == ("2025-11-25", to)
    assert info.value.type == type(obj).__name__
    try:
        _, dropped = mcpbind.project_lossy(obj, to)
    except mcpbind.ProjectionError as exc:
        assert exc.path == path
    else:
        assert dropped == [path]


def test_a_valid_object_keeps_its_own_projection_error():
    """The malformed-object check only replaces errors of objects their own type rejects."""
    obj = new.ListToolsResult(
        result_type="input_required", cache_scope="public", ttl_ms=0, tools=[]
    )
    with pytest.raises(mcpbind.ProjectionError) as info:
        mcpbind.project(obj, "2025-11-25")
    assert info.value.path == "$.resultType"


def test_the_projection_runtime_evaluates_no_source_text():
    """Target types come from generated expressions over the target module, not from eval."""
    import ast
    import inspect

    import mcpbind.projection as runtime

    calls = {
        n.func.id
        for n in ast.walk(ast.parse(inspect.getsource(runtime)))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert not calls & {"eval", "exec", "compile"}
