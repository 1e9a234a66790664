"""IR -> the CUDA emulator's variant of a CUDA module's device source.

`EmulatorEmitter` prints the device source as the emulator compiles it (C++ with `-DHIDET_LANG_EMULATOR`, in one
translation unit with the host source): the same functions as for a GPU, with one entry trampoline per kernel,
every store into a kernel's tensor arguments guarded (`hl_emu_store_guard`: an index outside the tensor stops the
launch with an error instead of overwriting the Python process's memory; `hl_emu_store_guard_in` for a store
through a view of an argument or into the dynamic shared memory, against the bytes of that memory: see
`codegen.emit.pointer_origins`), and for each kernel with a fast path its block function, printed by a
`BlockFunctionEmitter`. In checking mode every element access goes through
`hl_emu_checked` (bounds of every tensor, and the emulator's shared-memory checks: uninitialized reads and races
between barriers), shared arrays are registered when declared, and there are no block functions.

In the profile build (`profile`: a `ProfileSites` the emitter numbers its sites in; compiled with `-DHL_EMU_PROFILE`,
hidet_lang/emulator_profile.h) there are no block functions either, and every counted place records an event:
each element access of global or shared memory goes through `hl_emu_prof` (local arrays are not counted), the
memory intrinsics (vector copies, cp.async, ldmatrix, TMA, warpgroup MMA) record their accesses beside their
call, an `if` on a value and each test of a loop's condition (but an unrolled loop's) record its outcome, and a
statement with counted arithmetic (`profile_sites.statement_ops`) its execution.
"""

from __future__ import annotations

from codegen.emit.c_emitter import c_string, tensor_label
from codegen.emit.cuda_device_emitter import CudaDeviceEmitter, Dim3Text
from codegen.emit.kernel_plan import ModulePlan
from codegen.emit.pointer_origins import DYNAMIC_SHARED, pointer_origins
from codegen.emit.profile_sites import (
    PROFILE_ANY,
    PROFILE_GLOBAL,
    PROFILE_SHARED,
    ProfileSite,
    ProfileSites,
    statement_ops,
)
from codegen.toolchain.source_files import SourceFiles
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FuncKind, Function, IRModule
from hidet_lang.ir.intrinsics import IntrinsicSpec
from hidet_lang.ir.types import TensorType, Type

# Access flags of the emulator's checked accesses (see emulator_checks.h).
ACCESS_READ, ACCESS_WRITE, SPACE_GLOBAL, SPACE_SHARED, SPACE_LOCAL = 1, 2, 4, 8, 16
SPACE_DYNAMIC = 32  # the emitter's own: the dynamic shared memory (SPACE_SHARED in the flags it emits)

# Names of the block function's own variables (kept from the kernel's variables).
_FAST_NAMES = frozenset({"hl_fast", "hl_fast_args", "hl_fast_bad", "hl_fast_h", "hl_fast_row", "hl_fast_tx",
                         "hl_fast_ty", "hl_fast_tz", "hl_fast_v", "hl_fast_k", "hl_fast_n", "hl_fast_o",
                         "hl_fast_sites"})


class EmulatorEmitter(CudaDeviceEmitter):
    """Prints the emulator's device source of a planned CUDA module: `emit_module(plan.device_module)`; `check`:
    the checking mode, `profile`: the profile build, whose sites it numbers there (the plan of either has no fast
    paths: `ModulePlan.without_fast_paths`)."""

    division_fail = "hl_emu_division_by_zero"
    conversion_warn = "hl_emu_conversion_warning"

    def __init__(self, plan: ModulePlan, check: bool = False, files: SourceFiles | None = None,
                 profile: ProfileSites | None = None) -> None:
        super().__init__(plan, files)
        self.check = check
        self.profile = profile
        self.printing: list[E.Intrinsic] = []  # the intrinsics being printed, innermost last
        self.spaces: dict[E.Var, int] = {}  # the memory each tensor variable of the function lives in
        self.statements: list[S.Stmt] = []  # the statements being printed, innermost last (profile build)

    def emit_module(self, module: IRModule) -> str:
        source = super().emit_module(module)
        kernels = self.plan.kernels
        source += "\n" + "\n".join(self.entry_trampoline(f) for f in kernels) + "\n"
        for f in kernels:
            kind = self.plan.kernel_plans[f.name].fast_path
            if kind is not None:
                source += "\n" + BlockFunctionEmitter(self.plan, f, kind, self.files).emit() + "\n"
        return source

    def entry_trampoline(self, f: Function) -> str:
        """The emulator's `<kernel>__entry(void **args)`, which unpacks the launch arguments; in checking mode a
        cluster kernel's threads first register their block's dynamic shared memory, before another block's
        copies and writes can reach it (emulator_cluster.h)."""
        args = ", ".join(f"*({self.type_name(p.type)} *)args[{i}]" for i, p in enumerate(f.params))
        register = ""
        if self.check and f.attrs.cuda is not None and f.attrs.cuda.cluster_dim:
            place = self.files.where(f.span.file, f.span.line) if f.span is not None else f.name
            register = f"hl_emu_dynamic_shared({c_string(place)}); "
        return (f'extern "C" void {self.func_name(f.name)}__entry(void **args) {{ {register}'
                f'{self.func_name(f.name)}({args}); }}')

    def emit_function(self, f: Function) -> None:
        self.spaces = {p: SPACE_GLOBAL for p in f.params} | {DYNAMIC_SHARED: SPACE_DYNAMIC}
        super().emit_function(f)

    def origins_of(self, f: Function) -> dict[E.Var, E.Var]:
        """Every pointer with a known origin: a store through a view of a tensor argument, or into the dynamic
        shared memory, is guarded against its origin's bytes even outside checking mode."""
        return pointer_origins(f)

    def stmt_DeclareStmt(self, s: S.DeclareStmt) -> None:
        super().stmt_DeclareStmt(s)
        if isinstance(s.var.type, TensorType):
            self.spaces[s.var] = SPACE_SHARED if s.scope == S.DeclScope.SHARED else SPACE_LOCAL
            name = self.var_name(s.var)
            if self.check and s.scope == S.DeclScope.SHARED:
                self.line(f'hl_emu_shared_declared({name}, sizeof({name}), "{s.var.name}", {self.where()});')
            if self.profile is not None and s.scope == S.DeclScope.SHARED:
                self.line(f"hl_emu_prof_shared({name}, sizeof({name}));")

    def stmt(self, s: S.Stmt) -> None:
        """Print statement `s`; in the profile build, after an execution event where it has counted arithmetic."""
        if self.profile is None or isinstance(s, S.SeqStmt):
            super().stmt(s)
            return
        self.marker(s)
        self.statements.append(s)
        ops = statement_ops(s)
        if ops:
            self.line(f"hl_emu_prof_ops({self.site('ops', ops=tuple(sorted(ops.items())))});")
        super().stmt(s)
        self.statements.pop()

    def if_condition(self, s: S.IfStmt) -> str:
        """The `if`'s condition; in the profile build, a branch counted (unless it is a constant)."""
        cond = super().if_condition(s)
        if self.profile is None or isinstance(s.cond, E.Constant):
            return cond
        return f"hl_emu_prof_branch({cond}, {self.site('branch')})"

    def loop_condition(self, s: S.ForStmt) -> str:
        """The loop's condition; in the profile build, each test of it is a branch (the `for` of a loop marked
        unrolled is not: the GPU's compiler unrolls it)."""
        cond = super().loop_condition(s)
        if self.profile is None or s.kind == S.LoopKind.UNROLL:
            return cond
        return f"hl_emu_prof_branch({cond}, {self.site('branch')})"

    def site(self, kind: str, op: str = "", ops: tuple[tuple[str, int], ...] = ()) -> int:
        """The number of a new profile site of the statement being printed (see `ProfileSite`): at its DSL line, or
        in code without one, at its function and IR statement."""
        assert self.profile is not None
        if self.last_marker:
            return self.profile.add(ProfileSite(*self.last_marker, kind, op, ops))
        function = self.current.name if self.current is not None else None
        statement = str(self.statements[-1]).strip().splitlines()[0] if self.statements else None
        return self.profile.add(ProfileSite(None, None, kind, op, ops, function, statement))

    def bounds_checked(self, base: E.Expr, index: E.Expr, write: bool = False,
                       address_only: bool = False) -> str | None:
        """The instrumented address of `base[index]` (None when the access is left plain): a store guard outside
        checking mode, `hl_emu_checked` in it; in the profile build, an access of global or shared memory records
        its event (`hl_emu_prof`).

        `address_only` is for `~x[i]` (e.g. an atomic's target): its bounds are checked, but it is not a plain
        read or write for the shared-memory checks (nor an access the profile counts)."""
        address = self.guarded(base, index, write, address_only)
        if self.profile is None or address_only:
            return address
        space = self.space_of(base)
        if space == SPACE_LOCAL:
            return address
        flags = {SPACE_SHARED: PROFILE_SHARED, SPACE_DYNAMIC: PROFILE_SHARED}.get(space, PROFILE_ANY)
        if space == SPACE_GLOBAL and self.current is not None and self.current.attrs.kind == FuncKind.CUDA_KERNEL:
            flags = PROFILE_GLOBAL
        pointer = address if address is not None else f"(&{self.expr(base)}[{self.expr(index)}])"
        site = self.site("store" if write else "load", "element")
        return f"hl_emu_prof({pointer}, {site}, {flags}, {self.allocation_of(base)})"

    def allocation_of(self, pointer: E.Expr) -> str:
        """C text of the kernel's tensor argument that `pointer` (a tensor, a view, or the address of an element of
        one) points into, whose start the profile counts global sectors from as if it were 256-byte aligned (as a
        GPU's allocations are); `nullptr` when it is not one."""
        while True:  # through element addresses and views (`view(x, ...)`: a Reinterpret of it) to the tensor
            if isinstance(pointer, E.Address) and isinstance(pointer.expr, E.TensorElement):
                pointer = pointer.expr.base
            elif isinstance(pointer, E.Reinterpret):
                pointer = pointer.expr
            else:
                break
        if not isinstance(pointer, E.Var) or self.current is None or self.current.attrs.kind != FuncKind.CUDA_KERNEL:
            return "nullptr"
        origin = self.origins.get(pointer, pointer)
        return self.expr(origin) if self.spaces.get(origin) == SPACE_GLOBAL else "nullptr"

    def storage_prefix(self, s: S.DeclareStmt) -> str:
        """In the profile build, a shared array without an alignment of its own is 128-byte aligned, so that its
        banks are those of a GPU's shared memory, whose arrays start at its base (on the emulator they are
        thread-local variables)."""
        prefix = super().storage_prefix(s)
        return prefix + "__align__(128) " if self.profile is not None and prefix == "__shared__ " else prefix

    def expr_Intrinsic(self, e: E.Intrinsic) -> str:
        self.printing.append(e)  # the memory intrinsics' profile events read their pointers' origins
        try:
            return super().expr_Intrinsic(e)
        finally:
            self.printing.pop()

    def space_of(self, base: E.Expr) -> int | None:
        """The memory `base` (a tensor or pointer) lives in, as far as the function tells (None: unknown)."""
        if not isinstance(base, E.Var):
            return None
        origin = self.origins.get(base)
        return self.spaces.get(base if origin is None else origin)

    def guarded(self, base: E.Expr, index: E.Expr, write: bool, address_only: bool) -> str | None:
        """`bounds_checked`'s address of `base[index]` before the profile's event."""
        origin = self.origins.get(base) if isinstance(base, E.Var) else None
        space = self.space_of(base)
        if not self.check and not (write and space in (SPACE_GLOBAL, SPACE_DYNAMIC)):
            return None
        name = tensor_label(base)
        if origin is None:
            args, suffix = f"{self.expr(base)}, (long long)({self.expr(index)}), {self.extent(base)}", ""
        else:  # a view: guarded by the bytes of the tensor it points into, whatever it is viewed as
            args = (f"{self.expr(base)}, (long long)({self.expr(index)}), {self.origin_address(origin)}, "
                    f"{self.byte_size(origin)}, {tensor_label(origin)}")
            suffix = "_in"
        if space == SPACE_DYNAMIC:
            space = SPACE_SHARED
        if not self.check:
            return f"hl_emu_store_guard{suffix}({args}, {name}, {self.where()})"
        in_kernel = self.current is not None and self.current.attrs.kind == FuncKind.CUDA_KERNEL
        if space is None or (space == SPACE_GLOBAL and not in_kernel):
            space = SPACE_SHARED  # a pointer, or a device function's parameter, may be shared memory: look it up
        flags = 0 if address_only else (ACCESS_WRITE if write else ACCESS_READ) | space
        return f"hl_emu_checked{suffix}({args}, {flags}, {name}, {self.where()})"

    def origin_address(self, origin: E.Var) -> str:
        """C text of the start of an access's origin (`codegen.emit.pointer_origins`); in checking mode the dynamic
        shared memory is registered for the shared-memory checks by its block's first checked access."""
        if origin is not DYNAMIC_SHARED:
            return self.expr(origin)
        return f"hl_emu_dynamic_shared({self.where()})" if self.check else self.dynamic_smem()

    def byte_size(self, tensor: E.Var) -> str:
        return "hl_emu_dynamic_smem_bytes()" if tensor is DYNAMIC_SHARED else super().byte_size(tensor)

    def expr_Address(self, e: E.Address) -> str:
        target = e.expr
        if isinstance(target, E.TensorElement):
            address = self.bounds_checked(target.base, target.indices[0], address_only=True)
            if address is not None:
                return f"({address})"
            if self.profile is not None:  # an address, not an access the profile counts
                return f"(&{self.expr(target.base)}[{self.expr(target.indices[0])}])"
        return super().expr_Address(e)

    def spelling(self, spec: IntrinsicSpec) -> str:
        """In checking mode, the variant whose memory accesses the checks see, where `spec` has one."""
        if self.check and spec.emulator_checked is not None:
            return spec.emulator_checked
        return super().spelling(spec)

    def intrinsic(self, name: str, args: list[str], t: Type) -> str:
        """The intrinsic's text; in the profile build, a memory intrinsic's with the events of its accesses."""
        text = super().intrinsic(name, args, t)
        if self.profile is None:
            return text
        before, after = self.profile_events(name, args)
        return f"({', '.join([*before, text, *after])})" if before or after else text

    def profile_events(self, name: str, args: list[str]) -> tuple[list[str], list[str]]:
        """The profile events of the memory intrinsic `name` on printed `args`: those printed before its call (the
        accesses of a copy, made as the call makes it) and after it (those read through what the call checks: a
        tensor map, wgmma descriptors)."""
        rest = name.rpartition("_")[2]
        current = self.printing[-1] if self.printing else None  # not an intrinsic its arguments hold
        ir = current.args if current is not None and current.name == name else ()
        src, dst = (self.allocation_of(ir[1]), self.allocation_of(ir[0])) if len(ir) >= 2 else ("nullptr", "nullptr")
        if name.startswith("cp_async_") and rest.isdigit():
            load, store = self.site("load", "cp.async"), self.site("store", "cp.async")
            return [f"hl_emu_prof_bytes({args[1]}, {rest}, {load}, {PROFILE_GLOBAL}, {src})",
                    f"hl_emu_prof_bytes({args[0]}, {rest}, {store}, {PROFILE_SHARED}, nullptr)"], []
        if name.startswith("copy_vector_") and rest.isdigit():
            load, store = self.site("load", "vector"), self.site("store", "vector")
            return [f"hl_emu_prof_bytes({args[1]}, {rest}, {load}, {PROFILE_ANY}, {src})",
                    f"hl_emu_prof_bytes({args[0]}, {rest}, {store}, {PROFILE_ANY}, {dst})"], []
        if name in ("ldmatrix_x4", "ldmatrix_x4_trans"):
            site = self.site("load", "ldmatrix")
            return [f"hl_emu_prof_bytes({args[1]}, 16, {site}, {PROFILE_SHARED}, nullptr)"], []
        if name.startswith("tma_load_"):  # (dst, map, bar, [mask,] coordinates...)
            coords = args[4:] if "multicast" in name else args[3:]
            sites = f"{self.site('load', 'tma')}, {self.site('store', 'tma')}"
            return [], [f"hl_emu_prof_tma({sites}, {args[1]}, {', '.join(coords)})"]
        if name.startswith("tma_store_"):  # (map, src, coordinates...)
            sites = f"{self.site('store', 'tma')}, {self.site('load', 'tma')}"
            return [], [f"hl_emu_prof_tma({sites}, {args[0]}, {', '.join(args[2:])})"]
        if name.startswith("wgmma_mma_async_") and rest == "ss":  # (N, TA, TB, desc_a, desc_b, d, scale)
            site = self.site("load", "wgmma")
            return [], [f"hl_emu_prof_wgmma({site}, {args[3]}, {args[4]}, {args[0]}, {args[1]}, {args[2]}, 0)"]
        if name.startswith("wgmma_mma_async_") and rest == "rs":  # (N, TB, a, desc_b, d, scale)
            site = self.site("load", "wgmma")
            return [], [f"hl_emu_prof_wgmma({site}, 0, {args[3]}, {args[0]}, 0, {args[1]}, 1)"]
        return [], []


class BlockFunctionEmitter(EmulatorEmitter):
    """Prints the block function of one kernel with a fast path: `<kernel>__block(void **args)`, which runs every
    thread of one block, in a loop over threadIdx.z, .y, .x whose body is the kernel's, inlined as a lambda (its
    `return` ends one thread); the indices are the loop variables, the block's constants are read once (see
    FastBlock in emulator_checks.h).

    `kind` (see `KernelPlan.fast_path`): "registers": the loop over threadIdx.x is `omp simd`, and a store guard
    that fails is recorded and ends the thread, reported after the loop; "header": the thread's indices are
    stored where device functions and the guards' slow path read them, and the threads run in order.
    """

    def __init__(self, plan: ModulePlan, kernel: Function, kind: str, files: SourceFiles | None = None) -> None:
        super().__init__(plan, files=files)
        self.kernel = kernel
        self.kind = kind
        self.function_names = self.function_names_of(plan.device_module)
        self.taken = set(_FAST_NAMES)
        self.sites: list[tuple[str, str, str]] = []  # (tensor, where, origin or "0") of each deferred store guard
        cuda = kernel.attrs.cuda
        block = list(cuda.block_dim if cuda else ())
        # constant dimensions are the launch's too: the launcher evaluates them
        self.dims = Dim3Text(*(f"{int(d.value)}U" if isinstance(d, E.Constant) else f"hl_fast.block_dim.{axis}"
                               for d, axis in zip([*block, *[E.convert(1)] * (3 - len(block))], "xyz")))
        # the loop variables, the block's constants (FastBlock) and its dimensions
        self.index_text = {"threadIdx": Dim3Text("hl_fast_tx", "hl_fast_ty", "hl_fast_tz"), "blockDim": self.dims,
                           "blockIdx": Dim3Text(*(f"hl_fast.block_idx.{axis}" for axis in "xyz")),
                           "gridDim": Dim3Text(*(f"hl_fast.grid_dim.{axis}" for axis in "xyz"))}

    def emit(self) -> str:
        """The text of the block function."""
        f, kind = self.kernel, self.kind
        dx, dy, dz = self.dims
        self.current = f
        self.spaces = {p: SPACE_GLOBAL for p in f.params} | {DYNAMIC_SHARED: SPACE_DYNAMIC}
        self.origins = self.origins_of(f)
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
        if kind == "registers" and self.sites:
            sites = ", ".join(", ".join(site) for site in self.sites)
            self.line("if (hl_fast_bad) {")
            self.line(f"    static const char *const hl_fast_sites[] = {{{sites}}};")
            self.line("    ::hl_emu::fast_store_failed(hl_fast, hl_fast_sites);")
            self.line("}")
        self.depth -= 1
        self.line("}")
        return "\n".join(self.lines)

    def stmt_BufferStoreStmt(self, s: S.BufferStoreStmt) -> None:
        origin = self.origins.get(s.buf)
        space = self.spaces.get(s.buf if origin is None else origin)
        if self.kind == "registers" and space in (SPACE_GLOBAL, SPACE_DYNAMIC):  # a guarded store
            self.deferred_store(s, origin)
        else:
            super().stmt_BufferStoreStmt(s)

    def deferred_store(self, s: S.BufferStoreStmt, origin: E.Var | None) -> None:
        """A guarded store in a "registers" block function (`origin`: of a store through a view): a failed guard
        is recorded and ends the thread."""
        self.sites.append((tensor_label(s.buf), self.where(), "0" if origin is None else tensor_label(origin)))
        thread, site = "hl_fast_row + (int)hl_fast_tx", len(self.sites)
        self.line("{")
        self.depth += 1
        self.line(f"auto hl_fast_v = {self.expr(s.value)};")
        if origin is None:
            self.line(f"const long long hl_fast_k = (long long)({self.expr(s.indices[0])}), "
                      f"hl_fast_n = {self.extent(s.buf)};")
            self.line("if (__builtin_expect(hl_fast_n >= 0 && (unsigned long long)hl_fast_k >= "
                      "(unsigned long long)hl_fast_n, 0)) {")
            self.line(f"    hl_fast_bad |= ::hl_emu::fast_store_fail(hl_fast, {thread}, hl_fast_k, hl_fast_n, {site});")
        else:
            self.line(f"const long long hl_fast_k = (long long)({self.expr(s.indices[0])}), "
                      f"hl_fast_n = {self.byte_size(origin)};")
            self.line("long long hl_fast_o;")
            self.line(f"if (__builtin_expect(::hl_emu::outside({self.expr(s.buf)}, hl_fast_k, "
                      f"{self.origin_address(origin)}, hl_fast_n, &hl_fast_o), 0)) {{")
            self.line(f"    hl_fast_bad |= ::hl_emu::fast_view_store_fail(hl_fast, {thread}, hl_fast_k, hl_fast_o, "
                      f"hl_fast_n, {site});")
        self.line("    return;")
        self.line("}")
        self.line(f"{self.expr(s.buf)}[hl_fast_k] = hl_fast_v;")
        self.depth -= 1
        self.line("}")

    def byte_size(self, tensor: E.Var) -> str:
        return "(long long)hl_fast.smem_bytes" if tensor is DYNAMIC_SHARED else super().byte_size(tensor)

    def index_variables(self) -> dict[str, Dim3Text]:
        """The block function's: its loop variables (threadIdx), its block's constants and dimensions."""
        return self.index_text

    def dynamic_smem(self) -> str:
        return "hl_fast.smem"
