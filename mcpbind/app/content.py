"""What handlers return, as the newest revision's generated results: text, bytes, structured
values, generated content blocks and results (of any revision, projected to the newest)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import msgspec

from .._support import convert
from ..projection import project, revision_of_class
from .revision import Build, latest

__all__ = ["Results", "generated", "json_text"]


def generated(value: Any) -> bool:
    """Whether ``value`` is an instance of a generated class (of any revision)."""
    cls: Any = type(value)  # a class is hashable (the stubs of lru_cache do not say so)
    return _generated_class(cls)


@lru_cache(maxsize=1024)
def _generated_class(cls: Any) -> bool:
    try:
        revision_of_class(cls)
    except TypeError:
        return False
    return True


def newest(value: Any) -> Any:
    """A generated value in the newest revision (projected when it is of another)."""
    return project(value, to=latest().revision)


def json_text(data: Any) -> str:
    return msgspec.json.encode(data).decode()


class Results:
    """The newest revision's result and content classes, and the values every result carries
    (``cache_scope`` and ``ttl_ms`` where a result has cache hints)."""

    def __init__(self, cache_scope: str, ttl_ms: int) -> None:
        r = latest()
        self.module = M = r.module
        fixed: dict[str, Any] = {"cache_scope": cache_scope, "ttl_ms": ttl_ms}
        kinds = r.facts.result_kinds
        if kinds is not None:
            kind = next(a for a, k in _fields(r.result("call_tool")).items() if k == kinds.key)
            fixed[kind] = kinds.own
        self.call_tool = Build(r.result("call_tool"), fixed)
        self.list_tools = Build(r.result("list_tools"), fixed)
        self.list_resources = Build(r.result("list_resources"), fixed)
        self.list_templates = Build(r.result("list_resource_templates"), fixed)
        self.read_resource = Build(r.result("read_resource"), fixed)
        self.list_prompts = Build(r.result("list_prompts"), fixed)
        self.get_prompt = Build(r.result("get_prompt"), fixed)
        self.complete = Build(r.result("complete"), fixed)
        self.text = M.TextContent
        self.text_contents = M.TextResourceContents
        self.blob_contents = M.BlobResourceContents
        self.message = M.PromptMessage
        self.completion = M.CompleteResultCompletion

    # -- tools ----------------------------------------------------------------------------------

    def tool_content(self, value: Any) -> list[Any]:
        """The content blocks of an unstructured tool return value."""
        if value is None:
            return []
        if type(value) is str:
            return [self.text(text=value)]
        if generated(value):
            return [newest(value)]
        if isinstance(value, (list, tuple)) and all(generated(v) for v in value):
            return [newest(v) for v in value]
        return [self.text(text=json_text(msgspec.to_builtins(value)))]

    def tool_error(self, message: str) -> Any:
        return self.call_tool(content=[self.text(text=message)], is_error=True)

    # -- resources --------------------------------------------------------------------------------

    def contents(self, uri: str, mime_type: str | None, value: Any) -> Any:
        """The read result of one resource from what its handler returned."""
        if generated(value):
            value = newest(value)
            if isinstance(value, self.read_resource.cls):
                return value
            value = [value]
        elif isinstance(value, (list, tuple)) and value and all(generated(v) for v in value):
            value = [newest(v) for v in value]
        else:
            value = [self._one(uri, mime_type, value)]
        return self.read_resource(contents=value)

    def _one(self, uri: str, mime_type: str | None, value: Any) -> Any:
        mime: Any = msgspec.UNSET if mime_type is None else mime_type
        if isinstance(value, str):
            return self.text_contents(uri=uri, text=value, mime_type=mime)
        if isinstance(value, (bytes, bytearray, memoryview)):
            blob = base64.b64encode(bytes(value)).decode()
            return self.blob_contents(uri=uri, blob=blob, mime_type=mime)
        text = json_text(msgspec.to_builtins(value))
        return self.text_contents(
            uri=uri, text=text, mime_type="application/json" if mime_type is None else mime_type
        )

    # -- prompts ----------------------------------------------------------------------------------

    def prompt(self, value: Any, description: str | None) -> Any:
        """The get-prompt result from what a prompt handler returned."""
        if generated(value):
            value = newest(value)
            if isinstance(value, self.get_prompt.cls):
                return value
            value = [value]
        items: Sequence[Any] = [value] if isinstance(value, str | dict) else value
        messages = [self._message(v) for v in items]
        extra = {} if description is None else {"description": description}
        return self.get_prompt(messages=messages, **extra)

    def _message(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.message(role="user", content=self.text(text=value))
        if generated(value):
            return newest(value)
        return convert(value, self.message)


def _fields(cls: Any) -> dict[str, str]:
    return {f.name: f.encode_name for f in msgspec.structs.fields(cls)}
