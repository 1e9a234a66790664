"""What each function kind may contain: CUDA constructs only in CUDA functions, OpenMP loops only on the CPU.

Checked when a function is parsed, so the error names the offending line.
"""

from __future__ import annotations

from hidet_lang.errors import DSLTypeError, DSLValueError
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import collect
from hidet_lang.ir.intrinsics import CUDA_INTRINSICS
from hidet_lang.ir.node import child_field_names


def _own_expressions(stmt: S.Stmt) -> list[E.Expr]:
    """The expressions of `stmt` itself, not of the statements nested in it."""
    out: list[E.Expr] = []
    for name in child_field_names(type(stmt)):
        value = getattr(stmt, name)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, E.Expr):
                out.append(v)
    return out


def check_kind_rules(func: Function) -> None:
    """Raise a DSL error at the first statement that `func`'s kind does not allow."""
    kind = func.attrs.kind
    is_cuda = kind.startswith("cuda")
    for stmt in collect(func.body, S.Stmt):
        if not is_cuda:
            for e in _own_expressions(stmt):
                for intrinsic in collect(e, E.Intrinsic):
                    if intrinsic.name in CUDA_INTRINSICS:
                        raise DSLTypeError(
                            f"{intrinsic.name} is a CUDA construct and '{func.name}' is a '{kind}' function; "
                            "use it in a function with attrs.func_kind = 'cuda_kernel' or 'cuda_internal'",
                            stmt.span)
            if isinstance(stmt, S.DeclareStmt) and stmt.scope == "shared":
                raise DSLTypeError(f"shared memory exists only in CUDA functions, and '{func.name}' is a '{kind}' "
                                   "function", stmt.span)
        elif isinstance(stmt, S.ForStmt) and stmt.kind == "parallel":
            raise DSLTypeError("parallel loops (grid attrs 'p') are for CPU functions; in a CUDA kernel, spread "
                               "the work over threads instead", stmt.span)
    if kind == "cuda_kernel":
        cuda = func.attrs.cuda
        missing = [n for n in ("grid_dim", "block_dim") if cuda is None or not getattr(cuda, n)]
        if missing:
            raise DSLValueError(f"cuda_kernel '{func.name}' needs " + " and ".join(f"attrs.cuda.{n}" for n in missing),
                                func.span)
    elif func.attrs.cuda is not None:
        raise DSLValueError(f"attrs.cuda.* applies to cuda_kernel functions, and '{func.name}' is a '{kind}' function",
                            func.span)
