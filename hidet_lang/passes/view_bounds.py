"""Views that claim more memory than the tensor they view: `check_view_bounds`.

A step of `pipeline.lower`. `view(buf, f32[64])` (or a `cast` of a tensor to a pointer to a tensor) of a tensor
`buf: f32[16]` is refused at its line when both sizes are constants: every access of the view's upper part would
fall outside `buf`. A view whose size, or whose tensor's size, is known only at run time is not checked here; the
checking mode (`build(check=True)`) checks its accesses against the tensor it points into when the program runs.
"""

from __future__ import annotations

from hidet_lang.errors import DSLTypeError
from hidet_lang.ir import expr as E
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import TensorType


def check_view_bounds(module: IRModule) -> None:
    """Raise a DSLTypeError at the first view of a whole tensor of constant size as a larger tensor of constant
    size."""
    for f in module.functions:
        for view in collect(f.body, E.Reinterpret):
            viewed = _viewed_tensor(view)
            target = view.target.base
            if viewed is None or not isinstance(target, TensorType):
                continue
            t = viewed.type
            assert isinstance(t, TensorType)
            if t.storage_size is None or target.storage_size is None:
                continue
            have, need = t.storage_size * t.dtype.nbytes, target.storage_size * target.dtype.nbytes
            if need > have:
                what = f"'{viewed.name}' ({t})" if isinstance(viewed, E.Var) else f"a tensor ({t})"
                raise DSLTypeError(f"view() of {what} ({have} bytes) as {target} ({need} bytes): the view is larger "
                                   "than the tensor it views", view.span or f.span)


def _viewed_tensor(view: E.Reinterpret) -> E.Expr | None:
    """The tensor a view starts at the first element of (`~buf[0, ..., 0]`, how `view` and `cast` take a
    tensor), or None for a view of anything else (a pointer, an element inside a tensor)."""
    source = view.expr
    if not isinstance(source, E.Address) or not isinstance(source.expr, E.TensorElement):
        return None
    element = source.expr
    if not isinstance(element.base.type, TensorType):
        return None
    if not all(isinstance(i, E.Constant) and i.value == 0 for i in element.indices):
        return None
    return element.base
