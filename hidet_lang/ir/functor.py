"""The generic IR rewriter and visitor.

A subclass overrides `visit_<NodeClass>` only for the node types it cares about. Everything else is handled
by walking the dataclass fields: the rewriter rebuilds a node from its visited children and returns the very
same object when nothing changed, so a new node type costs no code in passes that ignore it.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from functools import cache
from typing import Any

from hidet_lang.ir.expr import Expr
from hidet_lang.ir.node import Node, child_field_names


class _Dispatcher:
    """Finds (and caches per node class) the `visit_<NodeClass>` method of a subclass."""

    def __init__(self) -> None:
        self._methods: dict[type, Callable[[Any], Any] | None] = {}

    def method_for(self, cls: type) -> Callable[[Any], Any] | None:
        """The subclass's `visit_<cls name>`, or None."""
        try:
            return self._methods[cls]
        except KeyError:
            method = self._methods[cls] = getattr(self, "visit_" + cls.__name__, None)
            return method


class IRRewriter(_Dispatcher):
    """Rewrites IR bottom-up; returns the input object itself when nothing below changed."""

    def visit(self, node: Any) -> Any:
        """Rewrite `node` (a node, a tuple of nodes, or a non-IR value, returned unchanged)."""
        if isinstance(node, Node):
            method = self.method_for(type(node))
            if method is not None:
                return method(node)
            return self.rebuild(node)
        if isinstance(node, tuple):
            items = tuple(self.visit(item) for item in node)
            return node if all(a is b for a, b in zip(items, node)) else items
        return node

    def rebuild(self, node: Node) -> Node:
        """`node` with every child visited; the same object when no child changed."""
        changes = {}
        for name in child_field_names(type(node)):
            value = getattr(node, name)
            new = self.visit(value)
            if new is not value:
                changes[name] = new
        return dataclasses.replace(node, **changes) if changes else node


class IRVisitor(_Dispatcher):
    """Walks IR top-down; `visit_<NodeClass>` methods see their nodes and call `self.visit_children` to go on."""

    def visit(self, node: Any) -> None:
        """Visit `node` (a node, a tuple of nodes, or a non-IR value, which is ignored)."""
        if isinstance(node, Node):
            method = self.method_for(type(node))
            if method is not None:
                method(node)
            else:
                self.visit_children(node)
        elif isinstance(node, tuple):
            for item in node:
                self.visit(item)

    def visit_children(self, node: Node) -> None:
        """Visit every child of `node`."""
        for name in child_field_names(type(node)):
            self.visit(getattr(node, name))


def collect(node: Any, cls: type | tuple[type, ...]) -> list[Any]:
    """Every node of class `cls` in `node`, in pre-order."""
    found: list[Any] = []
    stack = [node]
    pop, extend = stack.pop, stack.extend
    while stack:
        n = pop()
        if isinstance(n, Node):
            if isinstance(n, cls):
                found.append(n)
            extend(_children_last_first(type(n))(n))
        elif isinstance(n, tuple):
            extend(reversed(n))
    return found


@cache
def _children_last_first(cls: type) -> Callable[[Node], tuple[Any, ...]]:
    """A function giving the children of a node of class `cls`, last field first (a stack pops them in order)."""
    names = tuple(reversed(child_field_names(cls)))
    if not names:
        return lambda _: ()
    getter = operator.attrgetter(*names)
    return getter if len(names) > 1 else lambda n: (getter(n),)


def own_expressions(stmt: Node) -> tuple[Expr, ...]:
    """The expressions of statement `stmt` itself, not of the statements nested in it."""
    out: list[Expr] = []
    for name in child_field_names(type(stmt)):
        value = getattr(stmt, name)
        out.extend(v for v in (value if isinstance(value, tuple) else (value,)) if isinstance(v, Expr))
    return tuple(out)


def substitute(node: Any, mapping: dict[Any, Any]) -> Any:
    """`node` with every sub-expression that is a key of `mapping` replaced by its value."""

    class _Substitute(IRRewriter):
        def visit(self, n: Any) -> Any:
            if isinstance(n, Node) and n in mapping:
                return mapping[n]
            return super().visit(n)

    return _Substitute().visit(node)
