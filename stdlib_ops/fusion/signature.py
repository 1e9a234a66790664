"""The parameters of a fused kernel, and the renaming that binds a fusion description to them.

A description's tensors may use their own size variables; each is matched by name to the kernel's size parameter
of that name, or becomes a new size parameter (one per name). A description tensor whose shape changes under
that matching is re-made with the kernel's variables, and `renames` maps the description's variables to the
fused kernel's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import collect, substitute
from hidet_lang.ir.types import TensorType
from stdlib_ops.fusion.spec import Epilogue, Prologue


@dataclass(frozen=True, slots=True)
class FusedSignature:
    """The fused kernel's parameters (size parameters, inputs, outputs) and the renaming of description
    variables to them."""

    params: tuple[E.Var, ...]
    renames: dict[E.Var, E.Var]


def fused_signature(kernel: Function, prologues: dict[E.Var, Prologue],
                    epilogues: dict[E.Var, Epilogue]) -> FusedSignature:
    """The signature of `kernel` with `prologues` on its inputs and `epilogues` on its outputs (see `fuse`)."""
    scalars = [p for p in kernel.params if not isinstance(p.type, TensorType)]
    stored = {s.buf for s in collect(kernel.body, S.BufferStoreStmt)}
    tensors = [p for p in kernel.params if isinstance(p.type, TensorType)]
    anchor_outputs = [p for p in tensors if p in epilogues or p in stored]
    anchor_inputs = [p for p in tensors if p not in anchor_outputs]

    inputs: list[E.Var] = []
    for p in anchor_inputs:
        inputs.extend(prologues[p].inputs if p in prologues else (p,))
    for p in anchor_outputs:
        inputs.extend(epilogues[p].inputs if p in epilogues else ())
    outputs: list[E.Var] = []
    for p in anchor_outputs:
        outputs.extend(epilogues[p].outputs if p in epilogues else (p,))

    renames = _bind_sizes(scalars, [*inputs, *outputs])
    inputs = _unique(renames.get(p, p) for p in inputs)
    outputs = _unique(renames.get(p, p) for p in outputs)
    sizes = _unique([*_shape_vars([*inputs, *outputs]), *scalars])
    params = (*sizes, *inputs, *outputs)
    _require_unique_names(params, kernel.name)
    return FusedSignature(params, renames)


def _bind_sizes(scalars: list[E.Var], tensors: list[E.Var]) -> dict[E.Var, E.Var]:
    """Renames of the size variables in `tensors`' shapes (to the kernel's scalar of the same name, or to the first
    variable of that name) and of the tensors whose shapes they change."""
    by_name = {p.name: p for p in scalars}
    renames: dict[E.Var, E.Var] = {}
    for v in _shape_vars(tensors):
        canonical = by_name.setdefault(v.name, v)
        if canonical is not v:
            renames[v] = canonical
    if not renames:
        return renames
    for p in tensors:
        t = p.type
        assert isinstance(t, TensorType)
        shape = tuple(substitute(d, renames) if isinstance(d, E.Expr) else d for d in t.shape)
        if shape != t.shape:
            renames[p] = E.Var(p.name, TensorType(t.dtype, shape, t.layout), span=p.span)
    return renames


def _shape_vars(tensors: Iterable[E.Var]) -> list[E.Var]:
    """The variables in the shapes of `tensors`, in order of first appearance."""
    found: list[E.Var] = []
    for p in tensors:
        t = p.type
        assert isinstance(t, TensorType)
        for d in t.shape:
            if isinstance(d, E.Expr):
                found.extend(collect(d, E.Var))
    return _unique(found)


def _unique(items: Iterable[E.Var]) -> list[E.Var]:
    seen: set[E.Var] = set()
    return [v for v in items if not (v in seen or seen.add(v))]


def _require_unique_names(params: tuple[E.Var, ...], kernel: str) -> None:
    names = [p.name for p in params]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"the fused kernel '{kernel}' would have two parameters named {', '.join(repeated)}; "
                         f"give the description's tensors other names")
