"""``mcpbind bridge`` over stdio: the sans-IO ``Bridge`` (``bridge``, with the session facing the
client in ``front`` and its request records in ``requests``), its tasks translations
(``tasks_extension_to_core``, ``tasks_core_to_extension``) and the process around it
(``process``: ``serve``, ``run``)."""

from __future__ import annotations

from .bridge import Bridge
from .process import GRACE, LINGER, run, serve

__all__ = ["GRACE", "LINGER", "Bridge", "run", "serve"]
