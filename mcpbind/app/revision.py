"""What the application layer reads of one revision's facts, worked out once per revision: which
feature each method serves, the result classes, the round trip's fields. No method and no revision
is named here; they all come from the generated ``FACTS`` records."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET

from .._revisions import LATEST
from .._support import Facts, RoundTrip
from ..packages import bindings

__all__ = ["Build", "Rev", "latest", "rev"]


def fields(cls: Any) -> dict[str, str]:
    """Attribute name -> wire key of a generated Struct."""
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return {f.name: f.encode_name for f in msgspec.structs.fields(cls)}
    return {}


def attribute(cls: Any, key: str) -> str | None:
    """The attribute of ``cls`` holding the wire key ``key``, or None."""
    return next((a for a, k in fields(cls).items() if k == key), None)


class Rev:
    """One revision as an application sees it."""

    def __init__(self, revision: str) -> None:
        self.revision = revision
        self.module = bindings(revision)
        facts: Facts = self.module.FACTS
        self.facts = facts
        self.features: Mapping[str, str] = facts.features
        # method -> role: what a request asks the application for (the subscription stream is a
        # lifecycle method the application serves too)
        self.roles = {m: r for r, m in facts.features.items()}
        if "listen" in facts.lifecycle:
            self.roles[facts.lifecycle["listen"]] = "listen"
        self.trip: RoundTrip | None = facts.round_trip
        kinds = facts.result_kinds
        self.input_required: str | None = None
        if kinds is not None and self.trip is not None:
            self.input_required = next(
                (v for v, c in kinds.classes.items() if c is self.trip.result), None
            )
        self.kind_key = kinds.key if kinds is not None else None
        self.argument_errors = facts.tool_argument_errors
        progress = self.module.METHODS.get(facts.lifecycle.get("progress", ""))
        self.progress_message = progress is not None and "message" in fields(progress.params)
        envelope = facts.request_meta
        self.meta = envelope
        self._params: dict[type, tuple[str | None, str | None, Any]] = {}
        self._lock = threading.Lock()

    def result(self, role: str) -> Any:
        """The result class of the method serving ``role``."""
        return self.facts.wires[self.features[role]].result

    def round_trip_fields(self, params_class: type) -> tuple[str | None, str | None, Any]:
        """(attribute of the input responses, attribute of the request state, the type of the
        input responses) of a request's params class; Nones where it has no round trip."""
        found = self._params.get(params_class)
        if found is None:
            trip = self.trip
            responses = state = kind = None
            if trip is not None:
                for f in msgspec.structs.fields(params_class):
                    if f.encode_name == trip.input_responses:
                        responses = f.name
                        kind = _without_unset(f.type)
                    elif f.encode_name == trip.request_state:
                        state = f.name
            found = (responses, state, kind)
            with self._lock:
                self._params[params_class] = found
        return found


def _without_unset(tp: Any) -> Any:
    import typing

    args = [a for a in typing.get_args(tp) if a is not msgspec.UnsetType]
    return args[0] if len(args) == 1 else tp


_REVS: dict[str, Rev] = {}  # one per pinned revision at most
_REVS_LOCK = threading.Lock()


def rev(revision: str) -> Rev:
    """The shared record of ``revision``."""
    found = _REVS.get(revision)
    if found is None:
        with _REVS_LOCK:
            found = _REVS.setdefault(revision, Rev(revision))
    return found


class Build:
    """Builds one generated class of the newest revision with the values every instance of it
    carries: the result kind meaning "the method's own result", and the cache hints."""

    def __init__(self, cls: Any, fixed: Mapping[str, Any]) -> None:
        self.cls = cls
        names = fields(cls)
        self.fixed = {k: v for k, v in fixed.items() if k in names}

    def __call__(self, **values: Any) -> Any:
        return self.cls(**values, **self.fixed)


def latest() -> Rev:
    """The newest released revision: the one the application builds every result in."""
    return rev(LATEST)


def unset(value: Any) -> Any:
    """None for UNSET (an absent optional field)."""
    return None if value is UNSET else value
