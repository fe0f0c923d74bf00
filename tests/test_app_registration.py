"""Registering on an App: a mistake raises when the decorator runs, naming the function (and the
parameter), never later and never silently. pydantic's models and constraints are refused with the
msgspec spelling of the same thing (docs/app.md, Registering)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import msgspec
import pydantic
import pytest

from mcpbind import App, Client


def call(app: App, name: str, arguments: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with Client(app) as client:
            return await client.call_tool(name, arguments)

    return asyncio.run(main())


# -- a decorator used without its required argument ------------------------------------------------


def test_a_resource_decorator_without_its_uri_raises_naming_the_function():
    app = App("notes")
    with pytest.raises(TypeError, match=r"@app.resource needs the resource's URI.*\bnotes\b"):

        @app.resource  # type: ignore[arg-type]
        def notes() -> str:
            return "hi"


def test_a_completion_decorator_without_what_it_completes_raises_naming_the_function():
    app = App("notes")
    with pytest.raises(TypeError, match=r"@app.completion needs what it completes.*\bsuggest\b"):

        @app.completion  # type: ignore[arg-type]
        def suggest(value: str, arguments: dict[str, str]) -> list[str]:
            return []


@pytest.mark.parametrize("decorator", ["tool", "prompt"])
def test_a_name_given_positionally_is_refused_with_the_keyword_spelling(decorator: str):
    app = App("notes")
    with pytest.raises(TypeError, match=rf"@app.{decorator}\(name='greet'\)"):
        getattr(app, decorator)("greet")


# -- duplicate names ---------------------------------------------------------------------------------


def test_a_second_tool_of_the_same_name_raises_naming_both_functions():
    app = App("calc")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValueError, match=r"tool 'add' is registered already \(by .*\badd\).*plus"):

        @app.tool(name="add")
        def plus(a: int, b: int) -> int:
            return 0

    assert call(app, "add", {"a": 2, "b": 3}).content[0].text == "5"  # the first one stays


def test_replace_true_replaces_a_registration():
    app = App("calc")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    @app.tool(name="add", replace=True)
    def add_twice(a: int, b: int) -> int:
        return 2 * (a + b)

    assert call(app, "add", {"a": 2, "b": 3}).content[0].text == "10"


def test_duplicate_prompts_resources_templates_and_completions_raise():
    app = App("notes")

    @app.prompt
    def review(code: str) -> str:
        return code

    @app.resource("note://today")
    def today() -> str:
        return "today"

    @app.resource("note://{name}")
    def note(name: str) -> str:
        return name

    @app.completion(argument="code", prompt="review")
    def codes(value: str, arguments: dict[str, str]) -> list[str]:
        return []

    with pytest.raises(ValueError, match="prompt 'review' is registered already"):
        app.prompt(name="review")(lambda code: code)
    with pytest.raises(ValueError, match="resource 'note://today' is registered already"):
        app.resource("note://today")(lambda: "again")
    with pytest.raises(ValueError, match=r"resource template 'note://\{name\}' is registered"):
        app.resource("note://{name}")(lambda name: name)
    with pytest.raises(ValueError, match="completion of 'code' of prompt 'review' is registered"):
        app.completion(argument="code", prompt="review")(lambda value, arguments: [])
    app.resource("note://{name}", replace=True)(lambda name: name.upper())
    assert len(app._server.templates) == 1


# -- parameter types -------------------------------------------------------------------------------


class Point(pydantic.BaseModel):
    x: int
    y: int


def test_a_pydantic_model_parameter_is_refused_naming_tool_parameter_and_msgspec():
    app = App("shapes")
    with pytest.raises(TypeError) as raised:

        @app.tool
        def scale(point: Point, factor: int) -> str:
            return ""

    message = str(raised.value)
    assert message.startswith("tool 'scale': parameter 'point' of ")
    assert "is a pydantic model (Point)" in message and "msgspec.Struct" in message


def test_a_pydantic_model_result_is_refused():
    app = App("shapes")
    with pytest.raises(TypeError, match=r"tool 'origin': its return annotation is a pydantic"):

        @app.tool
        def origin() -> Point:
            return Point(x=0, y=0)


@pytest.mark.parametrize(
    "annotation",
    [
        Annotated[int, pydantic.Field(ge=0)],
        list[Annotated[int, pydantic.Field(ge=0)]],
        Annotated[int, pydantic.Field(ge=0)] | None,
    ],
)
def test_a_pydantic_field_constraint_is_refused_not_ignored(annotation: Any):
    app = App("counter")

    def count(n: int) -> str:
        return str(n)

    count.__annotations__["n"] = annotation
    with pytest.raises(TypeError) as raised:
        app.tool(count)
    message = str(raised.value)
    assert "tool 'count': parameter 'n'" in message and "pydantic constraint" in message
    assert "Annotated[int, msgspec.Meta(ge=0)]" in message


def test_a_pydantic_field_default_is_refused():
    app = App("counter")
    with pytest.raises(TypeError, match=r"parameter 'n' .* pydantic Field as its default"):

        @app.tool
        def count(n: int = pydantic.Field(default=1, ge=0)) -> str:
            return str(n)


def test_the_msgspec_spelling_of_the_constraint_is_checked():
    app = App("counter")

    @app.tool
    def count(n: Annotated[int, msgspec.Meta(ge=0)]) -> str:
        return str(n)

    result = call(app, "count", {"n": -3})
    assert result.is_error is True
    assert result.content[0].text.endswith("Expected `int` >= 0 - at `$.n`")


def test_an_unsupported_parameter_type_names_tool_parameter_and_what_is_supported():
    app = App("maths")
    with pytest.raises(TypeError) as raised:

        @app.tool
        def root(z: complex) -> str:
            return ""

    message = str(raised.value)
    assert message.startswith("tool 'root': parameter 'z' of ")
    assert "has type complex, which msgspec cannot check" in message
    assert "supported: str, int, float, bool" in message and "msgspec.Struct" in message


def test_an_unsupported_template_variable_type_names_the_template():
    app = App("maths")
    with pytest.raises(TypeError, match=r"resource template 'n://\{z\}': parameter 'z'"):

        @app.resource("n://{z}")
        def number(z: complex) -> str:
            return ""
