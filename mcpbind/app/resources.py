"""Resources: fixed URIs and URI templates (RFC 6570 simple ``{var}`` and reserved ``{+var}``
expressions), each read by a function, and their definitions in the newest revision."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from .handler import Handler, definition, describe
from .revision import latest

__all__ = ["Resource", "Template", "template_variables"]

_EXPRESSION = re.compile(r"\{(\+?)([A-Za-z0-9_]+)\}")


def template_variables(uri: str) -> list[str]:
    """The variable names of a URI template, in order (empty for a fixed URI)."""
    return [m.group(2) for m in _EXPRESSION.finditer(uri)]


class Resource:
    """A resource at a fixed URI; its function takes no arguments."""

    kind = "resource"
    uri_key = "uri"  # the definition's key holding the URI

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
        what = f"{self.kind} {uri!r}"
        self.handler = Handler(func, what, strict=False)
        self._check(what)
        data = {
            self.uri_key: uri,
            "name": name or func.__name__,
            "title": title,
            "description": description or describe(func),
            "mimeType": mime_type,
            latest().facts.meta_key: meta,  # built in the newest revision, as below
        }
        self.definition = definition(self._class(), data, what)

    def _class(self) -> Any:
        return latest().module.Resource

    def _check(self, what: str) -> None:
        if self.handler.parameters.required:
            raise TypeError(f"{what}: a fixed URI's function takes no arguments")


class Template(Resource):
    """Resources whose URIs match the template ``uri``; the function takes its variables."""

    kind = "resource template"
    uri_key = "uriTemplate"

    def _class(self) -> Any:
        return latest().module.ResourceTemplate

    def _check(self, what: str) -> None:
        template = self.uri
        variables = template_variables(template)
        if sorted(variables) != sorted(self.handler.parameters.names):
            raise TypeError(
                f"{what}: the function's parameters {list(self.handler.parameters.names)} must "
                f"be the template's variables {variables}"
            )
        self._reserved = {m.group(2) for m in _EXPRESSION.finditer(template) if m.group(1)}
        pattern, at = "", 0
        for m in _EXPRESSION.finditer(template):
            pattern += re.escape(template[at : m.start()])
            pattern += f"(?P<{m.group(2)}>.+?)" if m.group(1) else f"(?P<{m.group(2)}>[^/?#]+)"
            at = m.end()
        self._pattern = re.compile(pattern + re.escape(template[at:]))

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` when it matches the template, else None."""
        m = self._pattern.fullmatch(uri)
        if m is None:
            return None
        return {k: v if k in self._reserved else unquote(v) for k, v in m.groupdict().items()}
