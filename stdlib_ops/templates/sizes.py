"""Binding a template's size parameters to constants or to the task's symbolic dimensions.

A template is written once, with every size it depends on as an `i32` parameter (`m: i32, k: i32, a: f32[m, k]`).
A task fixes each size either to an int (known at build time) or to a string (a symbolic dimension, known only
at run time). `bind_sizes` rewrites the template's kernel to the kernel contract: every size given an int
becomes that constant (in the body, the tensor annotations and the launch configuration) and leaves the
parameter list; sizes given the same string share one `i32` parameter named like it; the remaining size
parameters are ordered by their first appearance in the shapes of the tensor parameters, inputs then outputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from hidet_lang.frontend.script import ScriptFunction, ScriptModule
from hidet_lang.ir import expr as E
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import collect, substitute
from hidet_lang.ir.types import TensorType, int32
from stdlib_ops.templates.params import Size


def bind_sizes(module: ScriptModule, kernel: str, sizes: Mapping[str, Size]) -> ScriptModule:
    """A copy of `module` whose function `kernel` has its size parameters (named by `sizes`' keys) bound.

    An int binds the parameter to that constant; a string makes it the symbolic size parameter of that name.
    """
    return _rewritten(module, kernel, lambda func: _bind_function(func, sizes))


def drop_params(module: ScriptModule, kernel: str, names: list[str]) -> ScriptModule:
    """A copy of `module` whose function `kernel` lacks the parameters `names`, which its body must not use (a
    template's optional tensor, left unread by a static `if`). ValueError when it uses one."""

    def drop(func: Function) -> Function:
        dropped = [p for p in func.params if p.name in names]
        used = set(collect(func.body, E.Var))
        if any(p in used for p in dropped):
            raise ValueError(f"'{kernel}' uses a parameter among {', '.join(names)}, which cannot be dropped")
        return dataclasses.replace(func, params=tuple(p for p in func.params if p not in dropped))

    return _rewritten(module, kernel, drop)


def _rewritten(module: ScriptModule, kernel: str, rewrite: Callable[[Function], Function]) -> ScriptModule:
    """A copy of `module` with the IR of its function `kernel` replaced by `rewrite(IR)`."""
    if all(f.name != kernel for f in module.functions):
        raise ValueError(f"the module has no function '{kernel}'")
    result = ScriptModule()
    for f in module.functions:
        result.add(ScriptFunction(f.py_func, rewrite(f.ir), f.callees) if f.name == kernel else f)
    return result


def _bind_function(func: Function, sizes: Mapping[str, Size]) -> Function:
    size_params = {p.name: p for p in func.params if p.name in sizes}
    missing = set(sizes) - set(size_params)
    if missing:
        raise ValueError(f"'{func.name}' has no size parameter named {', '.join(sorted(missing))}")
    symbols: dict[str, E.Var] = {}
    mapping: dict[E.Expr, E.Expr] = {}
    for name, param in size_params.items():
        size = sizes[name]
        if isinstance(size, str):
            mapping[param] = symbols.setdefault(size, E.Var(size, int32))
        else:
            mapping[param] = E.Constant(size, int32)
    tensors: list[E.Var] = []
    for p in func.params:
        if p.name in sizes:
            continue
        new_type = p.var_type
        if isinstance(new_type, TensorType):
            new_type = dataclasses.replace(new_type, shape=tuple(substitute(d, mapping) for d in new_type.shape))
        new_param = dataclasses.replace(p, var_type=new_type)
        mapping[p] = new_param
        tensors.append(new_param)
    order = _symbols_in_order_of_appearance(tensors, set(symbols.values()))
    cuda = func.attrs.cuda
    if cuda is not None:
        cuda = cuda.with_exprs(lambda e: substitute(e, mapping))
    return dataclasses.replace(
        func,
        params=tuple(order) + tuple(tensors),
        body=substitute(func.body, mapping),
        attrs=dataclasses.replace(func.attrs, cuda=cuda),
    )


def _symbols_in_order_of_appearance(tensors: list[E.Var], symbols: set[E.Var]) -> list[E.Var]:
    order: list[E.Var] = []
    for t in tensors:
        shape = t.var_type.shape if isinstance(t.var_type, TensorType) else ()
        for dim in shape:
            for v in collect(dim, E.Var):
                if v in symbols and v not in order:
                    order.append(v)
    unused = [v for v in symbols if v not in order]
    if unused:
        raise ValueError(f"symbolic sizes {', '.join(v.name for v in unused)} appear in no tensor shape")
    return order

