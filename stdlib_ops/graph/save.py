"""Saving a compiled graph to one file and loading it back: not available yet.

A saved graph must run in a new process without a compiler, which needs the kernels' IR (or their call
signatures) stored next to their libraries; until the IR can be serialized, both functions raise.
"""

from __future__ import annotations

from typing import Any


def save_compiled(compiled: Any, path: str) -> None:
    """Write `compiled` to `path` (not available yet: raises NotImplementedError)."""
    raise NotImplementedError("saving a compiled graph is not available yet: kernel IR cannot be serialized")


def load(path: str) -> Any:
    """The compiled graph saved at `path` (not available yet: raises NotImplementedError)."""
    raise NotImplementedError("loading a compiled graph is not available yet: kernel IR cannot be serialized")
