"""IR -> CUDA C: the device source of a CUDA module, and the host source that launches its kernels.

The device source holds the `cuda_kernel` and `cuda_internal` functions; it includes the project's primitives
header `hidet_lang/cuda_primitives.h`, through which every warp, atomic and PTX-level operation goes, so that
the same text compiles with NVRTC for a GPU and with the C++ compiler for the CUDA emulator (which defines
`HIDET_LANG_EMULATOR`). The host source (C, also valid C++) holds the `public` and `cpu_internal` functions
and one launcher per kernel, named like the kernel: calling a kernel from a host function, or from Python,
calls its launcher, which evaluates the launch configuration, checks it and launches through the backend
bound at load time (the CUDA driver, or the emulator).
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass

from codegen.c_emitter import CEmitter, c_string, tensor_label
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import DEVICE_KINDS, Function, IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.intrinsics import SYNC_INTRINSICS
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import DataType, TensorType, Type
from hidet_lang.passes.cuda_limits import MAX_BLOCK_DIM, MAX_GRID_DIM, MAX_STATIC_SHARED_BYTES, MAX_THREADS_PER_BLOCK
from hidet_lang.passes.kind_rules import shared_memory_declarations

CUDA_SCALARS = {"float16": "half", "bfloat16": "__nv_bfloat16"}

_DEVICE_PRELUDE = '#include "hidet_lang/cuda_primitives.h"\n'

_CUDA_CALLS = {
    "syncthreads": "__syncthreads", "syncthreads_and": "__syncthreads_and", "syncthreads_or": "__syncthreads_or",
    "syncthreads_count": "__syncthreads_count", "syncwarp": "hl_syncwarp", "shfl_sync": "hl_shfl_sync",
    "shfl_up_sync": "hl_shfl_up_sync", "shfl_down_sync": "hl_shfl_down_sync", "shfl_xor_sync": "hl_shfl_xor_sync",
    "ballot_sync": "hl_ballot_sync", "any_sync": "hl_any_sync", "all_sync": "hl_all_sync",
    "atomic_add": "hl_atomic_add", "atomic_sub": "hl_atomic_sub", "atomic_min": "hl_atomic_min",
    "atomic_max": "hl_atomic_max", "atomic_exchange": "hl_atomic_exchange", "atomic_cas": "hl_atomic_cas",
    "mma_m16n8k16_f16_f32": "hl_mma_m16n8k16_f16_f32", "ldmatrix_x4": "hl_ldmatrix_x4",
    "cp_async_4": "hl_cp_async_4", "cp_async_8": "hl_cp_async_8", "cp_async_16": "hl_cp_async_16",
    "cp_async_commit_group": "hl_cp_async_commit_group", "cp_async_wait_all": "hl_cp_async_wait_all",
}


def device_functions(module: IRModule, kernel: Function) -> list[Function]:
    """`kernel` and every device function it calls, directly or not."""
    found: dict[str, Function] = {}
    pending = [kernel]
    while pending:
        f = pending.pop()
        if f.name not in found:
            found[f.name] = f
            pending.extend(module.lookup(c.func_name) for c in collect(f.body, E.Call))
    return list(found.values())


@dataclass(frozen=True)
class KernelPlan:
    """What the device and host halves of a CUDA module must agree on about one kernel.

    `needs_fibers`: the kernel (or a device function it calls) uses a barrier or a warp-collective operation.
    `fast_path`: how the emulator runs its blocks without fibers: None when it needs fibers (or in checking
    mode), else its block function's kind: "registers" when the kernel calls no device function (the thread
    indices are loop variables only, and the loop over threadIdx.x may be vectorized), "header" otherwise (the
    indices are also kept where device functions and the store guards' slow path read them); see
    `CudaDeviceEmitter.block_function` and FastBlock in cuda_emulator.h.
    `static_smem`: the bytes of the shared tensors it and the device functions it calls declare.
    """

    needs_fibers: bool
    fast_path: str | None
    static_smem: int


def plan_kernels(module: IRModule, check: bool) -> dict[str, KernelPlan]:
    """The plan of every kernel of `module` (`check`: the emulator's checking mode, which has no fast path)."""
    plans = {}
    for kernel in (f for f in module.functions if f.attrs.kind == "cuda_kernel"):
        functions = device_functions(module, kernel)
        fibers = any(i.name in SYNC_INTRINSICS for f in functions for i in collect(f.body, E.Intrinsic))
        fast = None if check or fibers else "header" if collect(kernel.body, E.Call) else "registers"
        smem = sum(n for f in functions for _, n in shared_memory_declarations(f))
        plans[kernel.name] = KernelPlan(fibers, fast, smem)
    return plans


# Names of the block function's own variables (kept from the kernel's variables).
_FAST_NAMES = frozenset({"hl_fast", "hl_fast_args", "hl_fast_bad", "hl_fast_h", "hl_fast_row", "hl_fast_tx",
                         "hl_fast_ty", "hl_fast_tz", "hl_fast_v", "hl_fast_k", "hl_fast_n", "hl_fast_sites"})

# Access flags of the emulator's checked accesses (see cuda_emulator.h).
ACCESS_READ, ACCESS_WRITE, SPACE_GLOBAL, SPACE_SHARED, SPACE_LOCAL = 1, 2, 4, 8, 16


def asm_constraint(t: Type) -> str:
    """The inline-PTX operand constraint of a scalar type ('h' 16-bit, 'r' 32-bit, 'l' 64-bit, 'f', 'd')."""
    assert isinstance(t, DataType)
    if t.is_float:
        return {2: "h", 4: "f", 8: "d"}[t.nbytes]
    return {1: "r", 2: "h", 4: "r", 8: "l"}[t.nbytes]


class CudaDeviceEmitter(CEmitter):
    """Prints the device functions of a module as CUDA C.

    With `emulator`, the text is the variant the emulator compiles: it adds one entry trampoline per kernel and
    guards every store into a kernel's tensor arguments (`hl_emu_store_guard`: an index outside the tensor stops
    the launch with an error instead of overwriting the Python process's memory), and for each kernel without
    barriers or warp operations a block function that runs every thread of a block (see `block_function`).
    With `check` as well, every element access goes through `hl_emu_checked` (bounds of every tensor, and the
    emulator's shared-memory checks: uninitialized reads and races between barriers), shared arrays are
    registered when declared, and there are no block functions.
    """

    unroll_pragma = "#pragma unroll"
    helper_qualifiers = "static __device__ __forceinline__"

    def __init__(self, emulator: bool = False, check: bool = False,
                 plans: dict[str, KernelPlan] | None = None) -> None:
        super().__init__()
        self.emulator = emulator
        self.check = check and emulator
        self.plans = plans  # made by `emit_module` when not given
        self.spaces: dict[E.Var, int] = {}
        self.fast: str | None = None  # while printing a block function: its kind (see `KernelPlan`)
        self.fast_dims: tuple[str, str, str] = ("", "", "")
        self.fast_sites: list[tuple[str, str]] = []

    def scalar(self, t: DataType) -> str:
        return CUDA_SCALARS.get(t.name, t.c_name)

    @staticmethod
    def passed_as_float(f: Function, p: E.Var) -> bool:
        """Never on the device: a kernel takes its half-precision scalars as they are (the host launcher converts
        the `float` it is called with and passes the 16-bit value)."""
        return False

    def prelude(self) -> str:
        return _DEVICE_PRELUDE

    def qualifiers(self, f: Function) -> str:
        if f.attrs.kind == "cuda_kernel":
            bounds = self.launch_bounds(f)
            return f'extern "C" __global__ {bounds}'
        return "static __device__ __forceinline__ "

    @staticmethod
    def launch_bounds(f: Function) -> str:
        """`__launch_bounds__(threads[, min_blocks])` when the block size is a constant."""
        cuda = f.attrs.cuda
        if cuda is None or not cuda.block_dim or not all(isinstance(d, E.Constant) for d in cuda.block_dim):
            return ""
        threads = 1
        for d in cuda.block_dim:
            threads *= int(d.value)
        extra = f", {cuda.min_blocks}" if cuda.min_blocks else ""
        return f"__launch_bounds__({threads}{extra}) "

    def emit_module(self, module: IRModule) -> str:
        device = IRModule(tuple(f for f in module.functions if f.attrs.kind in DEVICE_KINDS))
        source = super().emit_module(device)
        if self.emulator:
            plans = self.plans if self.plans is not None else plan_kernels(device, self.check)
            kernels = [f for f in device.functions if f.attrs.kind == "cuda_kernel"]
            source += "\n" + "\n".join(self.entry_trampoline(f) for f in kernels) + "\n"
            for f in kernels:
                kind = plans[f.name].fast_path
                if kind is not None:
                    source += "\n" + self.block_function(f, kind) + "\n"
        return source

    def entry_trampoline(self, f: Function) -> str:
        """The emulator's `<kernel>__entry(void **args)`, which unpacks the launch arguments."""
        args = ", ".join(f"*({self.type_name(p.type)} *)args[{i}]" for i, p in enumerate(f.params))
        return f'extern "C" void {self.func_name(f.name)}__entry(void **args) {{ {self.func_name(f.name)}({args}); }}'

    def block_function(self, f: Function, kind: str) -> str:
        """The emulator's `<kernel>__block(void **args)`: every thread of one block, in a loop over threadIdx.z,
        .y, .x whose body is the kernel's, inlined as a lambda (its `return` ends one thread); the indices are
        the loop variables, the block's constants are read once (see FastBlock in cuda_emulator.h).

        `kind` (see `KernelPlan.fast_path`): "registers": the loop over threadIdx.x is `omp simd`, and a store
        guard that fails is recorded and ends the thread, reported after the loop; "header": the thread's indices
        are stored where device functions and the guards' slow path read them, and the threads run in order."""
        lines, self.lines = self.lines, []
        self.names, self.taken, self.float_params = {}, set(_FAST_NAMES), {}
        self.current, self.last_marker = f, None
        self.spaces = {p: SPACE_GLOBAL for p in f.params}
        self.fast, self.fast_sites = kind, []
        cuda = f.attrs.cuda
        block = list(cuda.block_dim if cuda else ())
        dx, dy, dz = (f"{int(d.value)}U" if isinstance(d, E.Constant) else f"hl_fast.block_dim.{axis}"
                      for d, axis in zip([*block, *[E.convert(1)] * (3 - len(block))], "xyz"))
        self.fast_dims = (dx, dy, dz)  # constant dimensions are the launch's too: the launcher evaluates them
        try:
            self.line(f'extern "C" void {self.func_name(f.name)}__block(void **hl_fast_args) {{')
            self.depth += 1
            for i, p in enumerate(f.params):
                t = self.type_name(p.type)
                self.line(f"{t} {self.var_name(p)} = *({t} *)hl_fast_args[{i}];")
            self.line("const ::hl_emu::FastBlock hl_fast = ::hl_emu::fast_block();")
            if kind == "registers":
                self.line("int hl_fast_bad = 0;")
            else:
                self.line("::hl_emu::Header *const hl_fast_h = ::hl_emu::hdr();")
            self.line(f"for (unsigned hl_fast_tz = 0; hl_fast_tz < {dz}; ++hl_fast_tz) {{")
            self.line(f"    for (unsigned hl_fast_ty = 0; hl_fast_ty < {dy}; ++hl_fast_ty) {{")
            self.depth += 2
            self.line(f"const int hl_fast_row = (int)((hl_fast_tz * {dy} + hl_fast_ty) * {dx});")
            if kind == "registers":
                self.line("#pragma omp simd reduction(|:hl_fast_bad)")
            self.line(f"for (unsigned hl_fast_tx = 0; hl_fast_tx < {dx}; ++hl_fast_tx) {{")
            self.depth += 1
            if kind == "header":
                self.line("hl_fast_h->thread_idx = uint3{hl_fast_tx, hl_fast_ty, hl_fast_tz};")
                self.line("hl_fast_h->linear = hl_fast_row + (int)hl_fast_tx;")
            self.line("[&]() __attribute__((always_inline)) {")
            self.body(f.body)
            self.line("}();")
            self.depth -= 3
            self.line("        }")
            self.line("    }")
            self.line("}")
            if kind == "registers" and self.fast_sites:
                sites = ", ".join(f"{name}, {where}" for name, where in self.fast_sites)
                self.line("if (hl_fast_bad) {")
                self.line(f"    static const char *const hl_fast_sites[] = {{{sites}}};")
                self.line("    ::hl_emu::fast_store_failed(hl_fast, hl_fast_sites);")
                self.line("}")
            self.depth -= 1
            self.line("}")
            return "\n".join(self.lines)
        finally:
            self.lines, self.fast = lines, None

    def deferred_store(self, s: S.BufferStoreStmt) -> None:
        """A guarded store in a "registers" block function: a failed guard is recorded and ends the thread."""
        self.fast_sites.append((tensor_label(s.buf), self.where()))
        self.line("{")
        self.depth += 1
        self.line(f"auto hl_fast_v = {self.expr(s.value)};")
        self.line(f"const long long hl_fast_k = (long long)({self.expr(s.indices[0])}), "
                  f"hl_fast_n = {self.extent(s.buf)};")
        self.line("if (__builtin_expect(hl_fast_n >= 0 && (unsigned long long)hl_fast_k >= "
                  "(unsigned long long)hl_fast_n, 0)) {")
        self.line("    hl_fast_bad |= ::hl_emu::fast_store_fail(hl_fast, hl_fast_row + (int)hl_fast_tx, hl_fast_k, "
                  f"hl_fast_n, {len(self.fast_sites)});")
        self.line("    return;")
        self.line("}")
        self.line(f"{self.expr(s.buf)}[hl_fast_k] = hl_fast_v;")
        self.depth -= 1
        self.line("}")

    def storage_prefix(self, s: S.DeclareStmt) -> str:
        return "__shared__ " if s.scope == "shared" else ""

    def emit_function(self, f: Function) -> None:
        self.spaces = {p: SPACE_GLOBAL for p in f.params}
        super().emit_function(f)

    def stmt_DeclareStmt(self, s: S.DeclareStmt) -> None:
        super().stmt_DeclareStmt(s)
        if isinstance(s.var.type, TensorType):
            self.spaces[s.var] = SPACE_SHARED if s.scope == "shared" else SPACE_LOCAL
            if self.check and s.scope == "shared":
                name = self.var_name(s.var)
                self.line(f'hl_emu_shared_declared({name}, sizeof({name}), "{s.var.name}", {self.where()});')

    def bounds_checked(self, base: E.Expr, index: E.Expr, write: bool = False,
                       address_only: bool = False) -> str | None:
        """The instrumented address of `base[index]` in the emulator (None when the access is left plain): a
        store guard outside checking mode, `hl_emu_checked` in it.

        `address_only` is for `~x[i]` (e.g. an atomic's target): its bounds are checked, but it is not a plain
        read or write for the shared-memory checks."""
        space = self.spaces.get(base) if isinstance(base, E.Var) else None
        if not self.emulator or (not self.check and not (write and space == SPACE_GLOBAL)):
            return None
        name = tensor_label(base)
        args = f"{self.expr(base)}, (long long)({self.expr(index)}), {self.extent(base)}"
        if not self.check:
            return f"hl_emu_store_guard({args}, {name}, {self.where()})"
        if space is None or (space == SPACE_GLOBAL and self.current and self.current.attrs.kind != "cuda_kernel"):
            space = SPACE_SHARED  # a pointer, or a device function's parameter, may be shared memory: look it up
        flags = 0 if address_only else (ACCESS_WRITE if write else ACCESS_READ) | space
        return f"hl_emu_checked({args}, {flags}, {name}, {self.where()})"

    def stmt_BufferStoreStmt(self, s: S.BufferStoreStmt) -> None:
        if self.fast == "registers" and self.spaces.get(s.buf) == SPACE_GLOBAL:  # a guarded store (see below)
            self.deferred_store(s)
        else:
            super().stmt_BufferStoreStmt(s)

    def expr_Address(self, e: E.Address) -> str:
        target = e.expr
        if isinstance(target, E.TensorElement):
            address = self.bounds_checked(target.base, target.indices[0], address_only=True)
            if address is not None:
                return f"({address})"
        return super().expr_Address(e)

    def stmt_AsmStmt(self, s: S.AsmStmt) -> None:
        outputs = ", ".join(f'"={asm_constraint(e.type)}"({self.expr(e)})' for e in s.outputs)
        inputs = ", ".join(f'"{asm_constraint(e.type)}"({self.expr(e)})' for e in s.inputs)
        volatile = " volatile" if s.volatile else ""
        self.line(f"asm{volatile}({c_string(s.template)} : {outputs} : {inputs});")

    def stmt_AssertStmt(self, s: S.AssertStmt) -> None:
        self.line(f"if (!({self.expr(s.cond)})) {{")
        self.depth += 1
        self.line(f"hl_assert_fail({s.span.line if s.span is not None else 0});")
        self.line(self.early_return())
        self.depth -= 1
        self.line("}")

    def constant(self, value: int | float | bool, t: DataType) -> str:
        if t.is_float and value != value:
            return f"(({self.scalar(t)})(0.0f / 0.0f))"
        if t.is_float and value in (float("inf"), float("-inf")):
            return f"(({self.scalar(t)})({'-' if value < 0 else ''}1.0f / 0.0f))"
        return super().constant(value, t)

    def intrinsic(self, name: str, args: list[str], t: Type) -> str:
        if "." in name and self.fast:  # in a block function: its loop variables and FastBlock
            var, axis = name.split(".")
            if var == "threadIdx":
                return f"((int)hl_fast_t{axis})"
            if var == "blockDim":
                return f"((int){self.fast_dims['xyz'.index(axis)]})"
            return f"((int)hl_fast.{'block_idx' if var == 'blockIdx' else 'grid_dim'}.{axis})"
        if "." in name:  # threadIdx.x and friends
            return f"((int){name})"
        if name == "dynamic_shared_memory":
            smem = "hl_fast.smem" if self.fast else "hl_dynamic_smem()"
            return f"(({self.type_name(t)})({smem} + {args[0]}))"
        if name == "cp_async_wait_group":  # the group count is a template argument (an immediate in PTX)
            return f"hl_cp_async_wait_group<{args[0]}>()"
        if self.check and name in ("cp_async_4", "cp_async_8", "cp_async_16"):  # a write the checks track
            return f"hl_emu_cp_async_checked({args[0]}, {args[1]}, {name.rsplit('_', 1)[1]}, {self.where()})"
        if self.check and name == "ldmatrix_x4":  # reads the checks track
            return f"hl_emu_ldmatrix_x4_checked({args[0]}, {args[1]}, {self.where()})"
        if name in _CUDA_CALLS:
            return f"{_CUDA_CALLS[name]}({', '.join(args)})"
        return super().intrinsic(name, args, t)


_HOST_PRELUDE = string.Template(r"""
#include <stdarg.h>
static uint16_t hl_bf16_bits(float x) {  /* round to nearest even, as __float2bfloat16 */
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  /* NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

typedef struct {
    void (*entry)(void **);
    const char *name;
    int needs_fibers;
    void (*block)(void **); /* the emulator's block function (fast path), or 0 */
} hl_kernel_info;
static char hl_launch_message[512];
static int hl_launch_failed = 0;
static int hl_launch_code = 0;

static void hl_launch_error(int code, const char *kernel, const char *where, const char *fmt, ...) {
    if (hl_launch_failed) return;
    hl_launch_failed = 1;
    hl_launch_code = code;
    char detail[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof detail, fmt, args);
    va_end(args);
    snprintf(hl_launch_message, sizeof hl_launch_message, "%s: kernel '%s': %s", where, kernel, detail);
}

HL_EXPORT int hidet_lang_launch_status(const char **message, int *code) {
    int failed = hl_launch_failed;
    if (failed) {
        *message = hl_launch_message;
        *code = hl_launch_code;
        hl_launch_failed = 0;
    }
    return failed;
}

#ifdef HIDET_LANG_EMULATOR
extern "C" int hl_emu_launch_blocks(void (*entry)(void **), void (*block)(void **), const char *kernel_name,
                                    int needs_fibers, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, size_t dynamic_smem_bytes, void **args);
extern "C" const char *hl_emu_error_message(void);
#else
typedef int (*hl_cu_launch_kernel_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned smem, void *stream, void **params, void **extra);
typedef int (*hl_cu_func_set_attribute_t)(void *f, int attribute, int value);
static hl_cu_launch_kernel_t hl_cu_launch_kernel = 0;
static hl_cu_func_set_attribute_t hl_cu_func_set_attribute = 0;
static void *hl_cu_functions[HL_NUM_KERNELS + 1];
static long long hl_cu_dynamic_smem_allowed[HL_NUM_KERNELS + 1];

/* The driver's entry points and the kernels' handles, with each kernel's static shared memory and the
   device's shared memory a block as the driver reports them. A kernel may use up to 48 KB of shared memory in
   all before it must opt in to more. */
HL_EXPORT void hidet_lang_bind_gpu(void *launch_kernel, void *func_set_attribute, void **functions,
                                   const long long *static_smem, long long smem_limit) {
    hl_smem_limit = smem_limit;
    hl_cu_launch_kernel = (hl_cu_launch_kernel_t)launch_kernel;
    hl_cu_func_set_attribute = (hl_cu_func_set_attribute_t)func_set_attribute;
    for (int i = 0; i < HL_NUM_KERNELS; i++) {
        hl_cu_functions[i] = functions[i];
        hl_static_smem[i] = static_smem[i];
        hl_cu_dynamic_smem_allowed[i] = ${max_static_smem} - static_smem[i];
    }
}
#endif

static void hl_launch(int kernel, const hl_kernel_info *info, const char *const *where, long long gx, long long gy,
                      long long gz, long long bx, long long by, long long bz, long long smem, void **args) {
    if (hl_launch_failed) return;
    if (gx < 1 || gy < 1 || gz < 1 || gx > ${grid_x}LL || gy > ${grid_y} || gz > ${grid_z}) {
        hl_launch_error(-1, info->name, where[0], "grid_dim (%lld, %lld, %lld) is invalid: each dimension must be "
                        "at least 1 (at most 2^31-1 in x, ${grid_y} in y and z)", gx, gy, gz);
        return;
    }
    if (bx < 1 || by < 1 || bz < 1 || bx > ${block_x} || by > ${block_y} || bz > ${block_z} ||
        bx * by * bz > ${threads}) {
        hl_launch_error(-1, info->name, where[1], "block_dim (%lld, %lld, %lld) is invalid: at most ${threads} "
                        "threads a block (${block_x} in x and y, ${block_z} in z), at least 1 in each dimension",
                        bx, by, bz);
        return;
    }
    if (smem < 0) {
        hl_launch_error(-1, info->name, where[2], "dynamic_smem_bytes %lld is negative", smem);
        return;
    }
    if (hl_smem_limit > 0 && hl_static_smem[kernel] + smem > hl_smem_limit) {
        hl_launch_error(-1, info->name, where[2], "%lld bytes of static shared memory + dynamic_smem_bytes %lld "
                        "exceed the %lld bytes a block may have on this device", hl_static_smem[kernel], smem,
                        hl_smem_limit);
        return;
    }
#ifdef HIDET_LANG_EMULATOR
    if (hl_emu_launch_blocks(info->entry, info->block, info->name, info->needs_fibers, (unsigned)gx, (unsigned)gy,
                             (unsigned)gz, (unsigned)bx, (unsigned)by, (unsigned)bz, (size_t)smem, args) != 0) {
        hl_launch_failed = 1;
        hl_launch_code = -2;
        snprintf(hl_launch_message, sizeof hl_launch_message, "%s", hl_emu_error_message());
    }
#else
    if (!hl_cu_launch_kernel) {
        hl_launch_error(-3, info->name, where[3], "no GPU is bound to this module");
        return;
    }
    if (smem > hl_cu_dynamic_smem_allowed[kernel]) {
        int rc = hl_cu_func_set_attribute(hl_cu_functions[kernel], 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */,
                                          (int)smem);
        if (rc != 0) {
            hl_launch_error(rc, info->name, where[2], "dynamic_smem_bytes %lld exceeds what the device allows "
                            "(driver error %d)", smem, rc);
            return;
        }
        hl_cu_dynamic_smem_allowed[kernel] = smem;
    }
    int rc = hl_cu_launch_kernel(hl_cu_functions[kernel], (unsigned)gx, (unsigned)gy, (unsigned)gz, (unsigned)bx,
                                 (unsigned)by, (unsigned)bz, (unsigned)smem, 0, args, 0);
    if (rc != 0) {
        hl_launch_error(rc, info->name, where[3], "the launch failed (driver error %d)", rc);
    }
#endif
}
""").substitute(
    grid_x=MAX_GRID_DIM[0], grid_y=MAX_GRID_DIM[1], grid_z=MAX_GRID_DIM[2], block_x=MAX_BLOCK_DIM[0],
    block_y=MAX_BLOCK_DIM[1], block_z=MAX_BLOCK_DIM[2], threads=MAX_THREADS_PER_BLOCK,
    max_static_smem=MAX_STATIC_SHARED_BYTES)


class CudaHostEmitter(CEmitter):
    """Prints the host functions of a CUDA module, and one launcher per kernel, as C."""

    def __init__(self, module: IRModule, emulator: bool = False, check: bool = False, smem_limit: int = 0,
                 plans: dict[str, KernelPlan] | None = None) -> None:
        super().__init__()
        self.module = module
        self.emulator = emulator
        self.check = check and emulator
        self.smem_limit = smem_limit
        self.given_plans = plans
        self.kernels = [f for f in module.functions if f.attrs.kind == "cuda_kernel"]

    @functools.cached_property
    def plans(self) -> dict[str, KernelPlan]:
        """The kernels' plans (given, or made when first needed)."""
        return self.given_plans if self.given_plans is not None else plan_kernels(self.module, self.check)

    def scalar(self, t: DataType) -> str:
        # the emulator's translation unit is C++, where the emulation header's half types stand for f16/bf16;
        # host C for a GPU holds a bf16 as its 16 bits (converted by `hl_bf16_bits`)
        if self.emulator:
            return CUDA_SCALARS.get(t.name, t.c_name)
        return "uint16_t" if t.name == "bfloat16" else t.c_name

    def float_param_conversion(self, t: DataType, name: str) -> str:
        if t.name == "bfloat16" and not self.emulator:
            return f"hl_bf16_bits({name})"
        return super().float_param_conversion(t, name)

    def prelude(self) -> str:
        static_smem = "".join(f"{self.plans[k.name].static_smem}, " for k in self.kernels)
        # the shared memory a block may have (static + dynamic); on a GPU the binding sets the device's
        return (super().prelude() + f"#define HL_NUM_KERNELS {len(self.kernels)}\n"
                + f"static long long hl_static_smem[HL_NUM_KERNELS + 1] = {{{static_smem}0}};\n"
                + f"static long long hl_smem_limit = {self.smem_limit};\n" + _HOST_PRELUDE)

    def emit_module(self, module: IRModule) -> str:
        host = IRModule(tuple(f for f in module.functions if f.attrs.kind != "cuda_internal"))
        return super().emit_module(host)

    def qualifiers(self, f: Function) -> str:
        return "HL_EXPORT " if f.attrs.kind in ("public", "cpu_kernel", "cuda_kernel") else "static "

    def names_of(self, module: IRModule) -> dict[str, str]:
        """The C names of the module's functions in the host library (kernels: their launchers)."""
        return {f.name: self.c_function_name(f) for f in module.functions}

    def c_function_name(self, f: Function) -> str:
        """Kernels are launched through `launch_<kernel>`; the kernel's own name stays the device symbol's."""
        return "launch_" + f.name if f.attrs.kind == "cuda_kernel" else super().c_function_name(f)

    def emit_function(self, f: Function) -> None:
        if f.attrs.kind == "cuda_kernel":
            self.emit_launcher(f)
        else:
            super().emit_function(f)

    def emit_launcher(self, f: Function) -> None:
        """`void <kernel>(params)`: evaluates the launch configuration and launches."""
        self.current = f
        index = self.kernels.index(f)
        cuda = f.attrs.cuda
        def where(span: Span | None) -> str:
            span = span or f.span
            return c_string(f"{span.file}:{span.line}" if span is not None else f.name)

        places = [cuda.span_of(a) if cuda else None for a in ("grid_dim", "block_dim", "dynamic_smem_bytes")]
        wheres = ", ".join(where(s) for s in [*places, None])
        self.line(self.signature(f) + " {")
        self.depth += 1
        self.unpack_float_params(f)
        grid = self.dims(cuda.grid_dim if cuda else ())
        block = self.dims(cuda.block_dim if cuda else ())
        smem = self.expr(cuda.dynamic_smem_bytes) if cuda and cuda.dynamic_smem_bytes is not None else "0"
        args = ", ".join(f"(void *)&{self.var_name(p)}" for p in f.params) or "0"
        plan = self.plans[f.name]
        fibers = int(plan.needs_fibers)
        self.line("#ifdef HIDET_LANG_EMULATOR")
        kernel = CEmitter.c_function_name(self, f)  # the device emitter's name for the kernel
        block_fn = f"{kernel}__block" if plan.fast_path else "0"
        self.line(f'static const hl_kernel_info info = {{{kernel}__entry, "{f.name}", {fibers}, {block_fn}}};')
        self.line("#else")
        self.line(f'static const hl_kernel_info info = {{0, "{f.name}", {fibers}}};')
        self.line("#endif")
        self.line(f"void *args[] = {{{args}}};")
        self.line(f"static const char *const where[] = {{{wheres}}};")
        self.line(f"hl_launch({index}, &info, where, {', '.join(grid)}, {', '.join(block)}, "
                  f"(long long)({smem}), args);")
        self.depth -= 1
        self.line("}")

    def dims(self, dims: tuple[E.Expr, ...]) -> list[str]:
        """Three `long long` dimensions from up to three expressions (missing ones are 1)."""
        out = [f"(long long)({self.expr(d)})" for d in dims]
        return out + ["1LL"] * (3 - len(out))


def emit_cuda(module: IRModule, *, emulator: bool = False, check: bool = False,
              smem_limit: int = 0) -> tuple[str, str]:
    """The device source and the host source of a lowered CUDA module (see `CudaDeviceEmitter` for the
    emulator's variant and its checking mode). The host refuses launches with more shared memory a block than
    `smem_limit` bytes (a GPU's binding sets the device's limit instead)."""
    plans = plan_kernels(module, check and emulator)
    device = CudaDeviceEmitter(emulator=emulator, check=check, plans=plans).emit_module(module)
    host = CudaHostEmitter(module, emulator=emulator, check=check, smem_limit=smem_limit, plans=plans)
    return device, host.emit_module(module)
