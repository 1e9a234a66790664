"""Which tensor a pointer variable points into, so that checks follow a view to the memory it views.

`view(a, f32[64])`, `as_tensor_pointer(a, ...)` and `cast(a, ~f32)` declare pointer variables whose type says
nothing true about the memory behind them: a view of a 16-element tensor may claim 64 elements. The code
generator checks accesses through such a pointer against its origin, the tensor it was made from (a parameter
of known size or a declared array), in bytes, whatever the pointer is viewed as. A pointer into a CUDA block's
dynamic shared memory (`dynamic_shared_memory(offset, dtype)`) has the origin `DYNAMIC_SHARED`, whose size is
the launch's.
"""

from __future__ import annotations

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import PointerType, TensorType, uint8

DYNAMIC_SHARED = E.Var("dynamic_shared_memory", PointerType(uint8))
"""The origin of pointers into the block's dynamic shared memory (a stand-in: no function declares it)."""


def pointer_origins(f: Function) -> dict[E.Var, E.Var]:
    """The origin of each pointer variable of `f` whose every value points into one tensor variable of known
    size: a tensor parameter or a tensor declared in `f`, or `DYNAMIC_SHARED` (pointer parameters, and pointers
    whose values may come from different tensors or from elsewhere, have none)."""
    tensors = {p for p in f.params if _known_size(p)}
    tensors |= {s.var for s in collect(f.body, S.DeclareStmt) if isinstance(s.var.type, TensorType)}
    values: dict[E.Var, list[E.Expr | None]] = {}
    for s in collect(f.body, S.DeclareStmt):
        if isinstance(s.var.type, PointerType):
            values.setdefault(s.var, []).append(s.init)
    for s in collect(f.body, S.AssignStmt):
        if s.var in values:
            values[s.var].append(s.value)
    origins: dict[E.Var, E.Var] = {}
    changed = True
    while changed:  # a pointer made from another pointer gets its origin once that one has it
        changed = False
        for var, exprs in values.items():
            if var in origins:
                continue
            roots = {_root(e, tensors, origins) for e in exprs if e is not None}
            if len(roots) == 1 and None not in roots:
                origins[var] = roots.pop()
                changed = True
    return origins


def _known_size(v: E.Var) -> bool:
    t = v.type
    return isinstance(t, TensorType) or isinstance(t, PointerType) and isinstance(t.base, TensorType)


def _root(e: E.Expr, tensors: set[E.Var], origins: dict[E.Var, E.Var]) -> E.Var | None:
    """The tensor variable the pointer value `e` points into, if it is known."""
    if isinstance(e, E.Intrinsic) and e.name == "dynamic_shared_memory":
        return DYNAMIC_SHARED
    if isinstance(e, E.Var):
        return e if e in tensors else origins.get(e)
    if isinstance(e, E.Reinterpret):
        return _root(e.expr, tensors, origins)
    if isinstance(e, E.Address) and isinstance(e.expr, E.TensorElement):
        return _root(e.expr.base, tensors, origins)
    if isinstance(e, E.BinaryOp) and e.op in ("+", "-") and isinstance(e.a.type, PointerType):
        return _root(e.a, tensors, origins)
    if isinstance(e, E.BinaryOp) and e.op == "+" and isinstance(e.b.type, PointerType):
        return _root(e.b, tensors, origins)
    return None
