"""The plan of a CUDA module: what its device source, its host source and its build agree on, made once a build.

`plan_module` reads a lowered module once: its kernels (in the order the host numbers them), the C names of its
functions in each source, and one `KernelPlan` a kernel (whether it needs fibers, its fast path on the
emulator, its static shared memory). The emitters and `codegen.cuda_build` take the plan instead of working
these out again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from codegen.emit.c_emitter import c_function_name
from codegen.emit.pointer_origins import pointer_origins
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import DEVICE_KINDS, FuncKind, Function, IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.intrinsics import ADDRESS_ALIGNED, CP_ASYNC_COPIES, VECTOR_COPIES, synchronizes
from hidet_lang.ir.span import Span
from hidet_lang.ir.stmt import DeclScope
from hidet_lang.ir.types import TensorType
from hidet_lang.passes.kind_rules import shared_memory_declarations
from hidet_lang.passes.pipeline import LoweredModule, require_lowered


@dataclass(frozen=True)
class KernelPlan:
    """What the device and host halves of a CUDA module must agree on about one kernel.

    `needs_fibers`: the kernel (or a device function it calls) uses a barrier or a warp-collective operation.
    `fast_path`: how the emulator runs its blocks without fibers: None when it needs fibers (or in checking
    mode, see `ModulePlan.without_fast_paths`), else its block function's kind: "registers" when the kernel
    calls no device function (the thread indices are loop variables only, and the loop over threadIdx.x may be
    vectorized), "header" otherwise (the indices are also kept where device functions and the store guards' slow
    path read them); see `codegen.emit.emulator_emitter.BlockFunctionEmitter` and FastBlock in emulator_checks.h.
    `static_smem`: the bytes of the shared tensors it and the device functions it calls declare.
    `local_bytes`: the bytes of the local arrays (`register_tensor`) they declare, all of them together: what a
    thread's stack holds on the emulator besides its frames.
    `aligned_params`: (parameter, bytes, span, copy) for each parameter that an asynchronous copy of `bytes` bytes
    reads from (`cp_async`), or that a vector copy (`copy_vector`) reads or writes where the kernel never tests the
    parameter's alignment itself (`address_aligned`): the largest copy where several do, its DSL place and its
    name. The hardware needs each copy's global address to be a multiple of its size, which the copy's offsets
    keep only if the argument's address is one, so the launcher checks it.
    """

    needs_fibers: bool
    fast_path: str | None
    static_smem: int
    local_bytes: int
    aligned_params: tuple[tuple[E.Var, int, Span | None, str], ...] = ()


@dataclass(frozen=True)
class ModulePlan:
    """A lowered CUDA module, read once for its build.

    `device_module` holds the device functions (the device source's), `host_module` every other function and
    the kernels (the host source's, where a kernel is its launcher). `device_names` and `host_names` map the
    DSL name of each function of those modules to its C name there: a kernel's device symbol, and its launcher
    `launch_<kernel>`. `kernels` are the module's kernels in the order the host numbers them, `kernel_plans`
    their plans by name.
    """

    module: LoweredModule
    device_module: LoweredModule
    host_module: LoweredModule
    kernels: tuple[Function, ...]
    kernel_plans: Mapping[str, KernelPlan]
    device_names: Mapping[str, str]
    host_names: Mapping[str, str]

    @property
    def kernel_symbols(self) -> list[str]:
        """The device symbols of the kernels, in the order the host numbers them."""
        return [self.device_names[k.name] for k in self.kernels]

    def without_fast_paths(self) -> ModulePlan:
        """The plan of the emulator's checking mode, where every kernel runs without its fast path."""
        plans = {name: dataclasses.replace(p, fast_path=None) for name, p in self.kernel_plans.items()}
        return dataclasses.replace(self, kernel_plans=plans)


def plan_module(module: LoweredModule) -> ModulePlan:
    """The plan of the lowered CUDA module `module`."""
    require_lowered(module)
    device = dataclasses.replace(module, functions=tuple(f for f in module.functions if f.attrs.kind in DEVICE_KINDS))
    host = dataclasses.replace(module, functions=tuple(f for f in module.functions
                                                       if f.attrs.kind != FuncKind.CUDA_INTERNAL))
    kernels = tuple(f for f in module.functions if f.attrs.kind == FuncKind.CUDA_KERNEL)
    return ModulePlan(
        module=module,
        device_module=device,
        host_module=host,
        kernels=kernels,
        kernel_plans={k.name: _plan_kernel(module, k) for k in kernels},
        device_names={f.name: c_function_name(f) for f in device.functions},
        host_names={f.name: "launch_" + f.name if f.attrs.kind == FuncKind.CUDA_KERNEL else c_function_name(f)
                    for f in host.functions},
    )


def _device_functions(module: IRModule, kernel: Function) -> list[Function]:
    """`kernel` and every device function it calls, directly or not."""
    found: dict[str, Function] = {}
    pending = [kernel]
    while pending:
        f = pending.pop()
        if f.name not in found:
            found[f.name] = f
            pending.extend(module.lookup(c.func_name) for c in collect(f.body, E.Call))
    return list(found.values())


def _plan_kernel(module: IRModule, kernel: Function) -> KernelPlan:
    """The plan of one kernel of `module`."""
    functions = _device_functions(module, kernel)
    fibers = any(synchronizes(i.name) for f in functions for i in collect(f.body, E.Intrinsic))
    fast = None if fibers else "header" if collect(kernel.body, E.Call) else "registers"
    smem = sum(n for f in functions for _, n in shared_memory_declarations(f))
    return KernelPlan(fibers, fast, smem, sum(_local_array_bytes(f) for f in functions), _aligned_params(kernel))


def _aligned_params(kernel: Function) -> tuple[tuple[E.Var, int, Span | None, str], ...]:
    """The parameters of `kernel` that its asynchronous copies read from, or its vector copies read or write with
    no alignment test of their own, each with the largest copy's bytes, span and intrinsic."""
    params = set(kernel.params)
    origins = pointer_origins(kernel)

    def parameter_of(address: E.Expr) -> E.Var | None:
        base = address.expr.base if isinstance(address, E.Address) and isinstance(address.expr, E.TensorElement) \
            else address
        base = origins.get(base, base) if isinstance(base, E.Var) else None
        return base if base in params else None

    intrinsics = collect(kernel.body, E.Intrinsic)
    tested = {parameter_of(e.args[0]) for e in intrinsics if e.name == ADDRESS_ALIGNED}
    needed: dict[E.Var, tuple[int, Span | None, str]] = {}
    for copy in intrinsics:
        if copy.name in CP_ASYNC_COPIES:
            accessed = [parameter_of(copy.args[1])]
            nbytes = CP_ASYNC_COPIES[copy.name]
        elif copy.name in VECTOR_COPIES:
            accessed = [p for p in map(parameter_of, copy.args) if p not in tested]
            nbytes = VECTOR_COPIES[copy.name]
        else:
            continue
        for p in accessed:
            if p is not None and nbytes > needed.get(p, (0,))[0]:
                needed[p] = (nbytes, copy.span, copy.name)
    return tuple((p, *needed[p]) for p in kernel.params if p in needed)


def _local_array_bytes(f: Function) -> int:
    """The bytes of the local (not shared) arrays `f` declares."""
    return sum(s.var.type.dtype.nbytes * int(s.var.type.storage_size) for s in collect(f.body, S.DeclareStmt)
               if s.scope != DeclScope.SHARED and isinstance(s.var.type, TensorType))
