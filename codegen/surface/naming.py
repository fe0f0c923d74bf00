"""``codegen.names``' snake and pascal, remembered: a server's tools repeat the same keys, and
a 1,000-tool package asks for tens of thousands of names."""

from __future__ import annotations

from functools import lru_cache

from .. import names

__all__ = ["pascal", "snake"]

snake = lru_cache(maxsize=1 << 16)(names.snake)
pascal = lru_cache(maxsize=1 << 16)(names.pascal)
