"""Resources: fixed URIs and URI templates (RFC 6570 simple ``{var}`` and reserved ``{+var}``
expressions), each read by a function, and their definitions in the newest revision."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

import msgspec

from .._support import convert
from .handler import Handler, describe
from .revision import latest

__all__ = ["Resource", "Template", "template_variables"]

_EXPRESSION = re.compile(r"\{(\+?)([A-Za-z0-9_]+)\}")


def template_variables(uri: str) -> list[str]:
    """The variable names of a URI template, in order (empty for a fixed URI)."""
    return [m.group(2) for m in _EXPRESSION.finditer(uri)]


def _definition(cls: Any, data: dict[str, Any], what: str) -> Any:
    try:
        return convert({k: v for k, v in data.items() if v is not None}, cls)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{what} cannot be described in MCP: {exc}") from None


class Resource:
    """A resource at a fixed URI."""

    def __init__(
        self,
        func: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.uri = uri
        self.mime_type = mime_type
        what = f"resource {uri!r}"
        self.handler = Handler(func, what, strict=False)
        if self.handler.parameters.required:
            raise TypeError(f"{what}: a fixed URI's function takes no arguments")
        self.definition = _definition(
            latest().module.Resource,
            {
                "uri": uri,
                "name": name or func.__name__,
                "title": title,
                "description": description or describe(func),
                "mimeType": mime_type,
                "_meta": meta,
            },
            what,
        )


class Template:
    """Resources whose URIs match a template; the function takes its variables."""

    def __init__(
        self,
        func: Callable[..., Any],
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.uri_template = uri_template
        self.mime_type = mime_type
        what = f"resource template {uri_template!r}"
        self.handler = Handler(func, what, strict=False)
        variables = template_variables(uri_template)
        if sorted(variables) != sorted(self.handler.parameters.names):
            raise TypeError(
                f"{what}: the function's parameters {list(self.handler.parameters.names)} must "
                f"be the template's variables {variables}"
            )
        self._reserved = {m.group(2) for m in _EXPRESSION.finditer(uri_template) if m.group(1)}
        pattern, at = "", 0
        for m in _EXPRESSION.finditer(uri_template):
            pattern += re.escape(uri_template[at : m.start()])
            pattern += f"(?P<{m.group(2)}>.+?)" if m.group(1) else f"(?P<{m.group(2)}>[^/?#]+)"
            at = m.end()
        self._pattern = re.compile(pattern + re.escape(uri_template[at:]))
        self.definition = _definition(
            latest().module.ResourceTemplate,
            {
                "uriTemplate": uri_template,
                "name": name or func.__name__,
                "title": title,
                "description": description or describe(func),
                "mimeType": mime_type,
                "_meta": meta,
            },
            what,
        )

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` when it matches the template, else None."""
        m = self._pattern.fullmatch(uri)
        if m is None:
            return None
        return {k: v if k in self._reserved else unquote(v) for k, v in m.groupdict().items()}
