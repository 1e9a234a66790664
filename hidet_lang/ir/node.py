"""The common base of IR nodes: fields, printing, and the span every node carries.

A node's span is set by construction: a node made without an explicit `span=` takes the span of the
innermost `at(span)` block around its construction. The parser opens such a block for every Python AST node it
visits, so everything built while translating that node, by the parser or by the helpers it calls, carries the
user's source position without passing it by hand. Passes open one around the nodes they make for a statement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache

from hidet_lang.ir.span import Span

_current_span: ContextVar[Span | None] = ContextVar("hidet_lang_current_span", default=None)


def current_span() -> Span | None:
    """The span that nodes constructed now receive: that of the innermost `at` block, or None."""
    return _current_span.get()


@contextmanager
def at(span: Span | None) -> Iterator[None]:
    """Nodes constructed inside the block carry `span` (a None span keeps the enclosing block's)."""
    if span is None:
        yield
        return
    token = _current_span.set(span)
    try:
        yield
    finally:
        _current_span.reset(token)


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """Base of every IR node: frozen, slotted dataclasses. `span` is keyword-only and not part of equality."""

    span: Span | None = field(default_factory=current_span, kw_only=True, compare=False, repr=False)

    def __str__(self) -> str:
        from hidet_lang.ir.printer import to_text  # cycle: the printer imports the nodes

        return to_text(self)


@cache
def child_field_names(cls: type) -> tuple[str, ...]:
    """The dataclass fields of node class `cls` that a rewriter walks: all but `span`."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "span")
