"""What handlers return, as results: built once in the newest revision's generated classes (text,
bytes, structured values, generated content blocks and results of any revision, projected to the
newest), then projected to each request's revision with the overlay's ``[[loss]]`` rules
(``mcpbind.bridge.losses.convey``), every loss logged with its JSON path."""

from __future__ import annotations

import base64
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import msgspec

from .._support import convert
from ..bridge.losses import convey
from ..projection import project, revision_of_class
from .revision import Build, Rev, attribute, latest

__all__ = ["Results", "generated", "json_text"]

log = logging.getLogger("mcpbind.app")

# A text that stands for any text in the specimens projected once per revision (projection
# copies strings as they are).
_SPECIMEN = "specimen"
_UNSEEN: Any = object()
# The types of values a result may share with another (_direct_text)
_IMMUTABLE = frozenset({type(None), type(msgspec.UNSET), str, int, float, bool})


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
        self.revision = r.revision
        self.module = M = r.module
        self._hints = {"cache_scope": cache_scope, "ttl_ms": ttl_ms}
        fixed = _fixed(r, self._hints)
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
        # revision -> how a text result is built there directly (None: it is conveyed)
        self._texts: dict[str, tuple[Callable[..., Any], Any] | None] = {}
        self._lock = threading.Lock()

    # -- into the request's revision --------------------------------------------------------------

    def to(self, result: Any, r: Rev, what: str, name: Any = "") -> Any:
        """A result of the newest revision in revision ``r``, what it cannot carry following
        the ``[[loss]]`` rules; each loss is logged (``what`` and ``name`` say whose result)."""
        if r.revision == self.revision:
            return result
        value, lost = convey(result, r.revision)
        for loss in lost:
            log.info("%s %r into MCP %s: %s", what, name, r.revision, loss.describe())
        return value

    def text_result(self, text: str, r: Rev, what: str, name: Any, error: bool = False) -> Any:
        """The call result of one text block (a tool error when ``error``) in revision ``r``.

        The commonest result, so its projection is worked out once per revision: a specimen is
        built in the newest revision and conveyed; where that equals the same result built in
        ``r`` and lost nothing, results of this shape are built in ``r`` directly (what the
        projection would give); else each is built in the newest revision and conveyed."""
        direct = self._texts.get(r.revision, _UNSEEN)
        if direct is _UNSEEN:
            direct = self._direct_text(r)
        if direct is not None:
            result, block = direct
            if error:
                return result(content=[block(text=text)], is_error=True)
            return result(content=[block(text=text)])
        extra = {"is_error": True} if error else {}
        return self.to(self.call_tool(content=[self.text(text=text)], **extra), r, what, name)

    def _direct_text(self, r: Rev) -> tuple[Callable[..., Any], Any] | None:
        """(the result class with the values every result carries, the text block class) of
        revision ``r`` when the projection of text results into ``r`` is building them there,
        else None."""
        cls, block = r.result("call_tool"), r.module.TextContent
        fixed = Build(cls, _fixed(r, self._hints)).fixed
        build: Callable[..., Any] = functools.partial(cls, **fixed)
        if fixed:
            # A partial with keywords merges them with the call's in a dict of its own each
            # time; a result made as a copy of one holding the fixed values (msgspec's replace:
            # the same __init__ checks and __post_init__) is half the cost, where every other
            # value it would share with that one cannot change (None, UNSET, a str, a number)
            model = cls(content=[], **fixed)
            if all(
                type(getattr(model, f)) in _IMMUTABLE
                for f in cls.__struct_fields__
                if f != "content"
            ):
                build = functools.partial(msgspec.structs.replace, model)
        direct: tuple[Callable[..., Any], Any] | None = (build, block)
        for extra in ({}, {"is_error": True}):
            specimen = self.call_tool(content=[self.text(text=_SPECIMEN)], **extra)
            projected, lost = convey(specimen, r.revision)
            if lost or projected != cls(content=[block(text=_SPECIMEN)], **extra, **fixed):
                direct = None
        with self._lock:
            return self._texts.setdefault(r.revision, direct)

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


def _fixed(r: Rev, hints: dict[str, Any]) -> dict[str, Any]:
    """What every result of revision ``r`` carries (``Build`` keeps those a class has): the cache
    hints, and the result kind meaning "the method's own result"."""
    fixed = dict(hints)
    kinds = r.facts.result_kinds
    if kinds is not None:
        kind = attribute(r.result("call_tool"), kinds.key)
        if kind is not None:
            fixed[kind] = kinds.own
    return fixed
