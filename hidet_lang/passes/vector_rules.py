"""Where the vector types of CPU functions (`f32x4`, `f32x8`, `f32x16`) may be used: `check_vector_support`.

A step of `pipeline.lower`, after the kinds are settled. Vectors are values of CPU code only: a CUDA function
(on a GPU or the CUDA emulator), or any function of a module built for CUDA, that has one is refused; so is a
vector parameter of a function called from Python, which cannot pass one. And each vector type needs an
instruction-set extension of the CPU (`REQUIRED_FEATURE`; the fused multiply-add and the exp of f32x4 and f32x8 need
FMA as well): when the target knows the features its C compiler enables (`Target.cpu_features`), a use of one it lacks
is refused at its line, naming the extension.
"""

from __future__ import annotations

from hidet_lang.errors import DSLTypeError
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import DEVICE_KINDS, HOST_CALLABLE_KINDS, Function, IRModule
from hidet_lang.ir.functor import collect, own_expressions
from hidet_lang.ir.intrinsics import VECTOR_INTRINSICS
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import Type, VectorType
from hidet_lang.target import Target, TargetKind

REQUIRED_FEATURE = {4: "sse", 8: "avx", 16: "avx512f"}
"""The extension each vector type needs, by its number of lanes (as `Target.cpu_features` names them)."""

FMA_OPERATIONS = {"fma": "a fused multiply-add", "exp": "made of fused multiply-adds"}
"""The operations that need FMA as well on f32x4 and f32x8 (AVX-512F has it), and how an error says why."""

FEATURE_NAMES = {"sse": "SSE", "avx": "AVX", "fma": "FMA", "avx512f": "AVX-512F"}
"""How errors name the extensions."""


def check_vector_support(module: IRModule, target: Target) -> None:
    """Raise a DSLTypeError at the first use of a vector type that `target` or its function cannot have (see
    the module docstring)."""
    for f in module.functions:
        for p in f.params:
            if isinstance(p.type, VectorType):
                span = p.span or f.span
                _check_use(f, target, p.type, span)
                if f.attrs.kind in HOST_CALLABLE_KINDS:
                    raise DSLTypeError(f"parameter '{p.name}': a '{f.attrs.kind}' function is called from Python, "
                                       f"which cannot pass a vector ({p.type}); take an f32 tensor and load from it",
                                       span)
        if isinstance(f.ret_type, VectorType):
            _check_use(f, target, f.ret_type, f.span)
        for stmt in collect(f.body, S.Stmt):
            for t, operation in _vector_uses(stmt):
                _check_use(f, target, t, stmt.span, operation)


def uses_vector_types(module: IRModule) -> bool:
    """Whether a function of `module` has a vector parameter, return value, variable or operation."""
    return any(isinstance(t, VectorType) for f in module.functions for t in (*(p.type for p in f.params), f.ret_type)) \
        or any(_vector_uses(stmt) for f in module.functions for stmt in collect(f.body, S.Stmt))


def _vector_uses(stmt: S.Stmt) -> list[tuple[VectorType, str | None]]:
    """The vector types statement `stmt` itself declares or computes with, each with the operation of
    `FMA_OPERATIONS` that computes it (None for any other use). Every vector value comes from a variable, an
    intrinsic or a call, so those are enough."""
    uses: list[tuple[Type, str | None]] = []
    if isinstance(stmt, S.DeclareStmt):
        uses.append((stmt.var.type, None))
    for e in own_expressions(stmt):
        for x in collect(e, (E.Var, E.Intrinsic, E.Call)):
            operation = x.name.split("_", 1)[1] if isinstance(x, E.Intrinsic) and x.name in VECTOR_INTRINSICS else None
            uses.append((x.type, operation if operation in FMA_OPERATIONS else None))
    return [(t, operation) for t, operation in uses if isinstance(t, VectorType)]


def _check_use(f: Function, target: Target, t: VectorType, span: Span | None, operation: str | None = None) -> None:
    """A DSLTypeError at `span` if function `f` may not use vector type `t` (in `operation`, one of
    `FMA_OPERATIONS`, when given)."""
    if f.attrs.kind in DEVICE_KINDS:
        raise DSLTypeError(f"vector types ({t}) are for CPU functions, and '{f.name}' is a '{f.attrs.kind}' function "
                           "(CUDA code, on a GPU or the CUDA emulator)", span)
    if target.kind != TargetKind.CPU:
        raise DSLTypeError(f"vector types ({t}) are for CPU functions, and '{f.name}' is host code of a module built "
                           f"for target '{target}'; build it for 'cpu'", span)
    if target.cpu_features is None:
        return
    needed = [REQUIRED_FEATURE[t.lanes]] + (["fma"] if operation is not None and t.lanes < 16 else [])
    for feature in needed:
        if feature not in target.cpu_features:
            what = f"{t}_{operation} ({FMA_OPERATIONS[operation]})" if feature == "fma" else t.short_name
            raise DSLTypeError(f"{what} needs {FEATURE_NAMES[feature]}, which this machine's C compiler "
                               "(-march=native) does not enable", span)
