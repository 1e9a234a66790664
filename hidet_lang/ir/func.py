"""Functions, their typed attributes, and modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hidet_lang.builder import installed_builder
from hidet_lang.ir.expr import Expr, Var
from hidet_lang.ir.node import Node
from hidet_lang.ir.span import Span

if TYPE_CHECKING:
    from hidet_lang.target import Target  # which imports this module
from hidet_lang.ir.stmt import Stmt
from hidet_lang.ir.str_enum import StrEnum
from hidet_lang.ir.types import DataType, Type


class FuncKind(StrEnum):
    """What a function is: where it runs and who may call it. Compares equal to its name as a string."""

    PUBLIC = "public"  # called from Python; runs on the host (may launch kernels)
    CPU_KERNEL = "cpu_kernel"  # called from Python; runs on the CPU
    CPU_INTERNAL = "cpu_internal"  # called by other CPU functions
    CUDA_KERNEL = "cuda_kernel"  # launched on a CUDA device
    CUDA_INTERNAL = "cuda_internal"  # called by CUDA code


FUNC_KINDS = tuple(FuncKind)
HOST_CALLABLE_KINDS = frozenset({FuncKind.PUBLIC, FuncKind.CPU_KERNEL, FuncKind.CUDA_KERNEL})
DEVICE_KINDS = frozenset({FuncKind.CUDA_KERNEL, FuncKind.CUDA_INTERNAL})  # the functions that run on a device


def returnable_to_python(t: Type) -> bool:
    """Whether a 'public' function may return a value of type `t` to its Python caller: a bool, an integer, f32 or
    f64 (the scalars a C function returns as ctypes reads them; half-precision values would need a conversion)."""
    return isinstance(t, DataType) and t.name not in ("float16", "bfloat16")


@dataclass(frozen=True, slots=True)
class CudaAttrs:
    """Launch configuration of a CUDA kernel; dimensions are (x, y, z) expressions over the parameters.

    `cluster_dim` (empty: no cluster) groups the blocks into thread block clusters of that shape, which the grid's
    dimensions are multiples of; a cluster's blocks run at once and reach each other's shared memory.
    `spans` locates each attribute's assignment in the user's source (errors at launch name that line).
    """

    grid_dim: tuple[Expr, ...] = ()
    block_dim: tuple[Expr, ...] = ()
    dynamic_smem_bytes: Expr | None = None
    min_blocks: int | None = None
    cluster_dim: tuple[int, ...] = ()  # a thread block cluster's blocks in x, y, z (sm_90): Python ints
    spans: tuple[tuple[str, Span], ...] = field(default=(), compare=False)

    def span_of(self, attribute: str) -> Span | None:
        """Where `attrs.cuda.<attribute>` was set, if known."""
        return dict(self.spans).get(attribute)

    def with_exprs(self, rewrite: Callable[[Expr], Expr]) -> CudaAttrs:
        """A copy with `rewrite` applied to every launch expression (grid and block dimensions, dynamic shared
        memory), as a pass that rewrites a kernel's parameters must."""
        smem = self.dynamic_smem_bytes
        return replace(self, grid_dim=tuple(rewrite(d) for d in self.grid_dim),
                       block_dim=tuple(rewrite(d) for d in self.block_dim),
                       dynamic_smem_bytes=None if smem is None else rewrite(smem))


@dataclass(frozen=True, slots=True)
class FuncAttrs:
    """What kind of function this is ('public', 'cpu_kernel', 'cpu_internal', 'cuda_kernel', 'cuda_internal').

    `kind_inferred` marks a kind the program did not set: a function with CUDA launch attributes is a
    'cuda_kernel'; any other is 'cpu_internal' until a module finds it called from CUDA code only (then it is a
    'cuda_internal' there, as in Hidet Script). `noinline` keeps a CPU function out of line in the C it becomes
    (`attrs.noinline = True`), compiled on its own whoever calls it (no inlining, cloning or assumptions from the
    callers), so that the C compiler allocates its registers for it alone (a micro-kernel). `fast_math` lets the
    compilers reassociate the function's floating-point arithmetic, assume no NaN or infinity, and use approximate
    or vector math functions (the README's "Fast math"). `no_alias` declares that no tensor parameter the function
    writes shares memory with another parameter (C `restrict`); calls from Python check it.
    """

    kind: FuncKind = FuncKind.CPU_INTERNAL
    cuda: CudaAttrs | None = None
    kind_inferred: bool = field(default=False, compare=False)
    noinline: bool = False
    fast_math: bool = False
    no_alias: bool = False


@dataclass(frozen=True, slots=True)
class Function(Node):
    """A function of a module: parameters, return type, body and attributes."""

    name: str
    params: tuple[Var, ...]
    ret_type: Type
    body: Stmt
    attrs: FuncAttrs


@dataclass(frozen=True, slots=True)
class IRModule(Node):
    """The functions compiled together, in definition order (callees before callers)."""

    functions: tuple[Function, ...]

    def lookup(self, name: str) -> Function:
        """The function called `name`; KeyError naming the module's functions otherwise."""
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"no function {name!r} in the module; it has {', '.join(f.name for f in self.functions)}")

    def build(self, target: Target | str | None = None, **options: Any) -> Any:
        """Compile the module (Hidet's `ir_module.build()`) with the installed builder, as `script_module().build()`
        does: for `target` (a `Target`, or 'cpu', 'cuda', 'cuda:sm_XY'; inferred from the function kinds when
        omitted), with the same options (`check=True`, ...)."""
        return installed_builder()(self, target, **options)
