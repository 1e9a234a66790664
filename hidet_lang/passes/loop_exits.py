"""What leaves a loop: the `break`s (and `continue`s) and `return`s of its body that end the loop itself."""

from __future__ import annotations

from hidet_lang.ir import stmt as S
from hidet_lang.ir.node import child_field_names

_LOOPS = (S.ForStmt, S.WhileStmt, S.ForMappingStmt)


def statements_leaving(loop: S.ForStmt | S.WhileStmt | S.ForMappingStmt, *, continues: bool = False,
                       returns: bool = True) -> list[S.Stmt]:
    """The `break`s of `loop`'s body that leave `loop` itself (not an inner loop), its `continue`s too with
    `continues`, and with `returns` every `return` in it."""
    jumps = (S.BreakStmt, S.ContinueStmt) if continues else (S.BreakStmt,)
    leaving: list[S.Stmt] = []

    def walk(node: S.Stmt, in_inner_loop: bool) -> None:
        if (returns and isinstance(node, S.ReturnStmt)) or (isinstance(node, jumps) and not in_inner_loop):
            leaving.append(node)
        inner = in_inner_loop or isinstance(node, _LOOPS)
        for name in child_field_names(type(node)):
            child = getattr(node, name)
            for c in child if isinstance(child, tuple) else (child,):
                if isinstance(c, S.Stmt):
                    walk(c, inner)

    walk(loop.body, False)
    return leaving
