"""What each function kind may contain, who may call whom, and what a target supports: the checks of
`pipeline.lower`, each a named step, so that every error a program can have is found before emission.

`check_entry_points` wants a function callable from Python; `resolve_inferred_kinds` (module -> module) settles
the kinds a program left unset; `check_kind_rules` checks each function's body against its kind (CUDA constructs
only in CUDA functions, recursion only in 'cpu_internal' functions, OpenMP loops that nothing leaves and
bf16-free host code of a CUDA module (the CPU's C computes bf16 through f32; a CUDA module's host code holds a bf16
as its bits only), launch attributes and local arrays within CUDA's limits, local arrays on the CPU within
`MAX_CPU_LOCAL_ARRAY_BYTES`); `check_module_rules` checks the calls between
functions and what host code of a CUDA module touches; `check_target_support` refuses what the chosen target
cannot run (an intrinsic newer than its CUDA architecture: the intrinsic table's `min_arch`; a cluster below
sm_90; inline PTX, or a cluster kernel's static shared memory, on the emulator). Errors name the offending line.
"""

from __future__ import annotations

import dataclasses

from hidet_lang.cuda_limits import (
    MAX_BLOCK_DIM,
    MAX_GRID_DIM,
    MAX_LOCAL_BYTES_PER_THREAD,
    MAX_STATIC_SHARED_BYTES,
    MAX_THREADS_PER_BLOCK,
    MIN_CLUSTER_ARCH,
    arch_number,
)
from hidet_lang.errors import DSLSyntaxError, DSLTypeError, DSLValueError
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import DEVICE_KINDS, HOST_CALLABLE_KINDS, FuncKind, Function, IRModule
from hidet_lang.ir.functor import collect, own_expressions
from hidet_lang.ir.intrinsics import CUDA_INTRINSICS, INTRINSICS
from hidet_lang.ir.span import Span
from hidet_lang.ir.stmt import DeclScope, LoopKind
from hidet_lang.ir.types import TensorType, bfloat16, int32
from hidet_lang.passes.loop_exits import statements_leaving
from hidet_lang.target import Target

MAX_CPU_LOCAL_ARRAY_BYTES = 4 * 1024 * 1024
"""The largest local array of a CPU function: it lives on the stack, of a thread of OpenMP's too (8 MB by default
on Linux), so a larger one would crash the process instead of raising an error."""


HOST_BF16 = "bf16 is computed in CUDA functions, and in CPU modules through f32"
"""Where bf16 is computed, as the errors of bf16 in a CUDA module's host code say."""


def _is_bf16(t: object) -> bool:
    return getattr(t, "dtype", t) is bfloat16


def check_entry_points(module: IRModule) -> None:
    """A module to build has functions, one of them callable from Python (ValueError otherwise)."""
    if not module.functions:
        raise ValueError("the module is empty: define functions with @hidet.script inside `with script_module()`")
    if not any(f.attrs.kind in HOST_CALLABLE_KINDS for f in module.functions):
        names = ", ".join(f"{f.name} ({f.attrs.kind})" for f in module.functions)
        raise ValueError(f"the module has no function callable from Python ({names}); mark the entry point with "
                         "attrs.func_kind = 'public'")


def check_kind_rules(module: IRModule) -> None:
    """Raise a DSL error at the first statement that its function's kind does not allow, or at a launch
    attribute whose constant value no launch could accept. Runs after `resolve_inferred_kinds`."""
    cuda_module = any(f.attrs.kind in DEVICE_KINDS for f in module.functions)
    for func in module.functions:
        _check_function_kind(func, cuda_module)


def _check_function_kind(func: Function, cuda_module: bool) -> None:
    kind = func.attrs.kind
    is_cuda = kind in DEVICE_KINDS
    if not is_cuda and cuda_module:
        for p in func.params:
            if _is_bf16(p.type):
                raise DSLTypeError(f"parameter '{p.name}': bf16 is not supported in the host code of a CUDA "
                                   f"module ({HOST_BF16})",
                                   p.span or func.span)
    for stmt in collect(func.body, S.Stmt):
        if isinstance(stmt, S.DeclareStmt) and stmt.scope == DeclScope.LOCAL:
            _check_local_array_size(func, stmt, is_cuda)
        if isinstance(stmt, S.ForMappingStmt):
            for jump in statements_leaving(stmt, continues=True, returns=False):
                raise DSLSyntaxError("`break`/`continue` cannot leave a task-mapping loop (`mapping.on(w)`): its "
                                     "tasks become one or several loops, or none; guard the work with `if` instead",
                                     jump.span)
        if kind != FuncKind.CPU_INTERNAL and any(c.func_name == func.name
                                                 for c in collect(own_expressions(stmt), E.Call)):
            raise DSLTypeError(f"'{func.name}' calls itself; recursion is supported in 'cpu_internal' functions only "
                               f"(CUDA device functions are inlined), and '{func.name}' is a '{kind}' function",
                               stmt.span)
        if not is_cuda:
            for e in collect(own_expressions(stmt), (E.Cast, E.Constant, E.Var, E.Intrinsic)):
                if isinstance(e, E.Intrinsic):
                    if e.name in CUDA_INTRINSICS:
                        raise DSLTypeError(
                            f"{e.name} is a CUDA construct and '{func.name}' is a '{kind}' function; "
                            "use it in a function with attrs.func_kind = 'cuda_kernel' or 'cuda_internal'",
                            stmt.span)
                elif cuda_module and _is_bf16(e.type):
                    raise DSLTypeError(f"bf16 is not supported in the host code of a CUDA module, and "
                                       f"'{func.name}' is a '{kind}' function ({HOST_BF16})", stmt.span)
            if isinstance(stmt, S.AsmStmt):
                raise DSLTypeError(f"inline PTX (asm) is not supported on the CPU: it runs in CUDA functions only, "
                                   f"and '{func.name}' is a '{kind}' function", stmt.span)
            if isinstance(stmt, S.DeclareStmt) and stmt.scope == DeclScope.SHARED:
                raise DSLTypeError(f"shared memory exists only in CUDA functions, and '{func.name}' is a '{kind}' "
                                   "function", stmt.span)
            if isinstance(stmt, S.ForStmt) and stmt.kind == LoopKind.PARALLEL:
                for leaving in statements_leaving(stmt):
                    raise DSLSyntaxError("`break`/`return` cannot leave a parallel loop", leaving.span)
        elif isinstance(stmt, S.ForStmt) and stmt.kind == LoopKind.PARALLEL:
            raise DSLTypeError("parallel loops (grid attrs 'p') are for CPU functions; in a CUDA kernel, spread "
                               "the work over threads instead", stmt.span)
    if is_cuda and func.attrs.noinline:
        raise DSLValueError(f"attrs.noinline applies to CPU functions (CUDA device functions are inlined), and "
                            f"'{func.name}' is a '{kind}' function", func.span)
    if kind == FuncKind.CUDA_KERNEL:
        cuda = func.attrs.cuda
        missing = [n for n in ("grid_dim", "block_dim") if cuda is None or not getattr(cuda, n)]
        if missing:
            raise DSLValueError(f"cuda_kernel '{func.name}' needs " + " and ".join(f"attrs.cuda.{n}" for n in missing),
                                func.span)
        _check_launch_dims(func)
    elif func.attrs.cuda is not None:
        raise DSLValueError(f"attrs.cuda.* applies to cuda_kernel functions, and '{func.name}' is a '{kind}' function",
                            func.span)


def _check_local_array_size(func: Function, decl: S.DeclareStmt, is_cuda: bool) -> None:
    """A local array within what a thread may hold: CUDA's local memory, or the CPU limit of the stack."""
    t = decl.var.type
    size = t.storage_size if isinstance(t, TensorType) else None
    if size is None:
        return
    nbytes, limit = t.dtype.nbytes * size, MAX_LOCAL_BYTES_PER_THREAD if is_cuda else MAX_CPU_LOCAL_ARRAY_BYTES
    if nbytes > limit:
        where = "a CUDA thread's local memory" if is_cuda else "the stack of a CPU function"
        raise DSLValueError(f"the local array '{decl.var.name}' of '{func.name}' takes {nbytes} bytes; {where} holds "
                            f"at most {limit} per array (use a tensor argument or shared memory)", decl.span)


def _check_launch_dims(func: Function) -> None:
    """Constant block and grid dimensions within CUDA's limits; static shared memory within 48 KB."""
    cuda = func.attrs.cuda
    assert cuda is not None
    for attr, dims, limits in (("block_dim", cuda.block_dim, MAX_BLOCK_DIM), ("grid_dim", cuda.grid_dim, MAX_GRID_DIM)):
        values = [int(d.value) if isinstance(d, E.Constant) else None for d in dims]
        where = cuda.span_of(attr) or func.span
        for axis, value, limit in zip("xyz", values, limits):
            if value is not None and not 1 <= value <= limit:
                raise DSLValueError(f"kernel '{func.name}': {attr}.{axis} = {value} is outside [1, {limit}]", where)
        if attr == "block_dim" and all(v is not None for v in values):
            threads = 1
            for v in values:
                threads *= v  # type: ignore[operator]
            if threads > MAX_THREADS_PER_BLOCK:
                raise DSLValueError(f"kernel '{func.name}': block_dim {tuple(values)} has {threads} threads; a block "
                                    f"has at most {MAX_THREADS_PER_BLOCK}", where)
    _check_cluster_grid(func)
    total = 0
    for decl, nbytes in shared_memory_declarations(func):
        total += nbytes
        if total > MAX_STATIC_SHARED_BYTES:
            raise DSLValueError(f"kernel '{func.name}': static shared memory reaches {total} bytes here; the "
                                f"limit is {MAX_STATIC_SHARED_BYTES} (use dynamic_shared_memory for more)", decl.span)


def _check_cluster_grid(func: Function) -> None:
    """A constant grid dimension that is a multiple of the cluster's (a computed one is checked at the launch)."""
    cuda = func.attrs.cuda
    assert cuda is not None
    for axis, cluster, grid in zip("xyz", cuda.cluster_dim, cuda.grid_dim + (E.Constant(1, int32),) * 3):
        if isinstance(grid, E.Constant) and int(grid.value) % cluster != 0:
            raise DSLValueError(f"kernel '{func.name}': grid_dim.{axis} = {grid.value} is not a multiple of "
                                f"cluster_dim.{axis} = {cluster}", cuda.span_of("grid_dim") or func.span)


def _check_clusters(module: IRModule, target: Target) -> None:
    """Clusters need sm_90; on the emulator, whose blocks of a cluster share one OS thread (and so its static
    shared memory), a cluster kernel's shared memory is dynamic."""
    for f in module.functions:
        cuda = f.attrs.cuda
        if cuda is None or not cuda.cluster_dim:
            continue
        where = cuda.span_of("cluster_dim") or f.span
        if target.arch is not None and arch_number(target.arch) < MIN_CLUSTER_ARCH:
            raise DSLTypeError(f"kernel '{f.name}': thread block clusters (attrs.cuda.cluster_dim) need CUDA "
                               f"architecture sm_90 or later, and the module is built for {target.arch}; build it "
                               "with target='cuda:sm_90'", where)
        declared = shared_memory_declarations(f)
        if target.emulated and declared:
            raise DSLTypeError(f"kernel '{f.name}' has a cluster, and the CUDA emulator runs the blocks of a cluster "
                               "on one OS thread, which holds static shared memory: declare its shared memory with "
                               "dynamic_shared_memory", declared[0][0].span)


def shared_memory_declarations(func: Function) -> list[tuple[S.DeclareStmt, int]]:
    """The shared tensors `func` declares in its own body, each with its size in bytes."""
    return [(decl, decl.var.type.dtype.nbytes * int(decl.var.type.storage_size))
            for decl in collect(func.body, S.DeclareStmt)
            if decl.scope == DeclScope.SHARED and isinstance(decl.var.type, TensorType)]


def resolve_inferred_kinds(module: IRModule) -> IRModule:
    """Functions whose kind the program left unset and that only CUDA code calls become 'cuda_internal'."""
    callers: dict[str, set[str]] = {f.name: set() for f in module.functions}
    for f in module.functions:
        for call in collect(f.body, E.Call):
            if call.func_name != f.name:  # a recursive call says nothing about who else calls it
                callers[call.func_name].add(f.name)
    kinds = {f.name: f.attrs.kind for f in module.functions}
    changed = True
    while changed:
        changed = False
        for f in module.functions:
            if f.attrs.kind_inferred and kinds[f.name] == FuncKind.CPU_INTERNAL and callers[f.name] and all(
                    kinds[c] in DEVICE_KINDS for c in callers[f.name]):
                kinds[f.name] = FuncKind.CUDA_INTERNAL
                changed = True
    if all(kinds[f.name] == f.attrs.kind for f in module.functions):
        return module
    return IRModule(tuple(
        f if kinds[f.name] == f.attrs.kind else dataclasses.replace(
            f, attrs=dataclasses.replace(f.attrs, kind=kinds[f.name])) for f in module.functions))


def check_module_rules(module: IRModule) -> None:
    """Rules between the functions of a module: who may call whom, and what host code of a CUDA module may
    touch. Raises a DSL error at the offending statement."""
    kinds = {f.name: f.attrs.kind for f in module.functions}
    no_alias = {f.name for f in module.functions if f.attrs.no_alias}
    has_cuda = any(k in DEVICE_KINDS for k in kinds.values())
    for f in module.functions:
        on_device = f.attrs.kind in DEVICE_KINDS
        if f.attrs.no_alias and f.attrs.kind not in HOST_CALLABLE_KINDS:
            raise DSLValueError(f"attrs.no_alias applies to functions called from Python (public, cpu_kernel, "
                                f"cuda_kernel), whose calls check it, and '{f.name}' is a '{f.attrs.kind}' function",
                                f.span)
        for stmt in collect(f.body, S.Stmt):
            expressions = own_expressions(stmt)
            for call in (c for e in expressions for c in collect(e, E.Call)):
                callee_kind = kinds[call.func_name]
                if call.func_name in no_alias:
                    raise DSLValueError(f"'{call.func_name}' has attrs.no_alias, which calls from Python check; "
                                        f"a call from '{f.name}' could not be checked", stmt.span)
                if on_device and callee_kind not in DEVICE_KINDS:
                    raise DSLTypeError(f"'{call.func_name}' is a '{callee_kind}' function and cannot be called from "
                                       f"CUDA code", stmt.span)
                if on_device and callee_kind == FuncKind.CUDA_KERNEL:
                    raise DSLTypeError(f"'{call.func_name}' is a kernel; kernels are launched from host code",
                                       stmt.span)
                if not on_device and callee_kind == FuncKind.CUDA_INTERNAL:
                    raise DSLTypeError(f"'{call.func_name}' is a cuda_internal function; host code can only launch "
                                       "cuda_kernel functions", stmt.span)
            if has_cuda and not on_device:
                bases = [e.base for x in expressions for e in collect(x, E.TensorElement)]
                if isinstance(stmt, S.BufferStoreStmt):
                    bases.append(stmt.buf)
                if any(b in f.params for b in bases):
                    raise DSLTypeError("a host function of a CUDA module cannot read or write the elements of its "
                                       "tensor arguments: they live on the device; do it in a kernel", stmt.span)


def check_target_support(module: IRModule, target: Target) -> None:
    """What `target` cannot run: an intrinsic whose minimum architecture its CUDA architecture does not reach
    (where the target names one), on a GPU and on the emulator alike; inline PTX, which needs a GPU, on the CUDA
    emulator. DSLTypeErrors, as `check_kind_rules` raises for a CUDA intrinsic or inline PTX in a CPU function."""
    _check_clusters(module, target)
    if target.arch is not None:
        _check_architecture(module, target)
    if not target.emulated:
        return
    for f in module.functions:
        for stmt in collect(f.body, S.AsmStmt):
            raise DSLTypeError("inline PTX (asm) is not supported on this target: it cannot run on the CUDA "
                               "emulator and needs a GPU (HIDET_LANG_CUDA=gpu)", stmt.span)


def _check_architecture(module: IRModule, target: Target) -> None:
    """A DSLTypeError at the first statement with an intrinsic that `target`'s architecture lacks."""
    found = intrinsic_lacking(module, target)
    if found is not None:
        name, min_arch, span = found
        needed = min_arch if min_arch.endswith("a") else f"{min_arch} or later"
        raise DSLTypeError(f"{name} needs CUDA architecture {needed}, and the module is built for {target.arch}; "
                           f"build it with target='cuda:{min_arch}'", span)


def intrinsic_lacking(module: IRModule, target: Target) -> tuple[str, str, Span | None] | None:
    """The first intrinsic of `module` that `target`'s CUDA architecture lacks: its name, the minimum architecture
    it needs and the span of its statement; None when there is none (the module is read only when the architecture
    lacks one of the table's minimum architectures)."""
    lacking = {arch for arch in {spec.min_arch for spec in INTRINSICS.values()} - {None} if not target.has_arch(arch)}
    if not lacking:
        return None
    for f in module.functions:
        for stmt in collect(f.body, S.Stmt):
            for e in collect(own_expressions(stmt), E.Intrinsic):
                spec = INTRINSICS.get(e.name)
                if spec is not None and spec.min_arch in lacking:
                    return e.name, spec.min_arch, stmt.span
    return None
