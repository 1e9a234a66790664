"""What a CUDA module's IR says about launching each kernel, for the report of its cubin: the threads a block and
the dynamic shared memory a block, where they are constants."""

from __future__ import annotations

import math

from codegen.emit.c_emitter import c_function_name
from codegen.toolchain.cubin_report import KernelLaunch
from hidet_lang.ir.expr import Constant, Expr
from hidet_lang.ir.func import FuncKind, IRModule

__all__ = ["kernel_launches"]


def _constant(expr: Expr) -> int | None:
    """The value of an integer constant expression; None for anything else (an expression of the arguments)."""
    return int(expr.value) if isinstance(expr, Constant) and isinstance(expr.value, int) else None


def kernel_launches(module: IRModule) -> dict[str, KernelLaunch]:
    """The launch of each kernel of the lowered CUDA `module`, by its device symbol: its threads a block (the
    product of its block dimensions) and dynamic shared memory bytes, each None where it depends on arguments."""
    launches = {}
    for f in module.functions:
        cuda = f.attrs.cuda
        if f.attrs.kind != FuncKind.CUDA_KERNEL or cuda is None:
            continue
        dims = [d for d in map(_constant, cuda.block_dim) if d is not None]
        threads = math.prod(dims) if dims and len(dims) == len(cuda.block_dim) else None
        smem = cuda.dynamic_smem_bytes
        dynamic_smem = 0 if smem is None else _constant(smem)
        launches[c_function_name(f)] = KernelLaunch(threads=threads, dynamic_smem=dynamic_smem)
    return launches
