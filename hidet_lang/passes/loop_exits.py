"""What leaves a loop: the `break`s and `return`s of its body that end the loop itself."""

from __future__ import annotations

from hidet_lang.ir import stmt as S
from hidet_lang.ir.node import child_field_names


def statements_leaving(loop: S.ForStmt | S.WhileStmt) -> list[S.Stmt]:
    """The `break`s of `loop`'s body that leave `loop` itself (not an inner loop), and every `return` in it."""
    leaving: list[S.Stmt] = []

    def walk(node: S.Stmt, in_inner_loop: bool) -> None:
        if isinstance(node, S.ReturnStmt) or (isinstance(node, S.BreakStmt) and not in_inner_loop):
            leaving.append(node)
        inner = in_inner_loop or isinstance(node, (S.ForStmt, S.WhileStmt))
        for name in child_field_names(type(node)):
            child = getattr(node, name)
            for c in child if isinstance(child, tuple) else (child,):
                if isinstance(c, S.Stmt):
                    walk(c, inner)

    walk(loop.body, False)
    return leaving
