"""The common base of IR nodes: fields, printing, and the span every node carries."""

from __future__ import annotations

import dataclasses
from functools import cache


class Node:
    """Base of every IR node. Subclasses are frozen, slotted dataclasses whose last field is `span`."""

    __slots__ = ()

    def __str__(self) -> str:
        from hidet_lang.ir.printer import to_text

        return to_text(self)


@cache
def child_field_names(cls: type) -> tuple[str, ...]:
    """The dataclass fields of node class `cls` that a rewriter walks: all but `span`."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "span")
