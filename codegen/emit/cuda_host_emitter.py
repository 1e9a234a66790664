"""IR -> the host source of a CUDA module: its `public` and `cpu_internal` functions, and one launcher a kernel.

The host source is C (for a GPU, built by the system C compiler and bound to the CUDA driver at load time) or,
for the CUDA emulator, C++ compiled in one translation unit after the emulator's device source. Calling a kernel
from a host function, or from Python, calls its launcher `launch_<kernel>`, which evaluates the launch
configuration and hands it to `hl_launch` (hidet_lang/cuda_launch.h), which checks it and launches.
"""

from __future__ import annotations

from collections.abc import Callable

from codegen.emit.c_emitter import CEmitter, c_string
from codegen.emit.cuda_device_emitter import CUDA_SCALARS
from codegen.emit.kernel_plan import ModulePlan
from codegen.toolchain.source_files import SourceFiles
from hidet_lang.ir import expr as E
from hidet_lang.ir.func import FuncKind, Function, IRModule
from hidet_lang.ir.intrinsics import CP_ASYNC_COPIES
from hidet_lang.ir.span import Span
from hidet_lang.ir.tensor_map import TensorMapType
from hidet_lang.ir.types import DataType


class CudaHostEmitter(CEmitter):
    """Prints the host source of a planned CUDA module for a GPU: `emit_module(plan.host_module)`.

    Launches with more shared memory a block than `smem_limit` bytes are refused (0: no limit; a GPU's binding
    sets the device's limit instead).
    """

    def __init__(self, plan: ModulePlan, smem_limit: int = 0, files: SourceFiles | None = None) -> None:
        super().__init__(files=files)
        self.plan = plan
        self.smem_limit = smem_limit

    def function_names_of(self, module: IRModule) -> dict[str, str]:
        """The C names of the host functions and of the kernels' launchers, from the plan."""
        return dict(self.plan.host_names)

    def scalar(self, t: DataType) -> str:
        # host C for a GPU holds a bf16 as its 16 bits (converted by `hl_bf16_bits`)
        return "uint16_t" if t.name == "bfloat16" else t.c_name

    def float_param_conversion(self, t: DataType, name: str) -> str:
        if t.name == "bfloat16":
            return f"hl_bf16_bits({name})"
        return super().float_param_conversion(t, name)

    def prelude(self) -> str:
        # the shared memory a block may have (static + dynamic); on a GPU the binding sets the device's
        return (super().prelude() + f"#define HL_NUM_KERNELS {len(self.plan.kernels)}\n"
                + self.kernel_tables() + f"static long long hl_smem_limit = {self.smem_limit};\n"
                + '#include "hidet_lang/cuda_launch.h"\n')

    def kernel_tables(self) -> str:
        """The tables of the kernels' plans that cuda_launch.h reads: their static shared memory."""
        return self.kernel_table("hl_static_smem", "static_smem")

    def kernel_table(self, name: str, field: str) -> str:
        """`static long long <name>[HL_NUM_KERNELS + 1]`: a field of each kernel's plan, in kernel order."""
        values = "".join(f"{getattr(self.plan.kernel_plans[k.name], field)}, " for k in self.plan.kernels)
        return f"static long long {name}[HL_NUM_KERNELS + 1] = {{{values}0}};\n"

    def emit_function(self, f: Function) -> None:
        if f.attrs.kind == FuncKind.CUDA_KERNEL:
            self.emit_launcher(f)
        else:
            super().emit_function(f)

    def emit_launcher(self, f: Function) -> None:
        """`void launch_<kernel>(params)`: evaluates the launch configuration and launches."""
        self.current = f
        index = self.plan.kernels.index(f)
        cuda = f.attrs.cuda
        def where(span: Span | None) -> str:
            span = span or f.span
            return c_string(self.files.where(span.file, span.line) if span is not None else f.name)

        places = [cuda.span_of(a) if cuda else None for a in ("grid_dim", "block_dim", "dynamic_smem_bytes")]
        wheres = ", ".join(where(s) for s in [*places, None])
        self.line(self.signature(f) + " {")
        self.depth += 1
        self.unpack_float_params(f)
        grid = self.dims(cuda.grid_dim if cuda else ())
        block = self.dims(cuda.block_dim if cuda else ())
        smem = self.expr(cuda.dynamic_smem_bytes) if cuda and cuda.dynamic_smem_bytes is not None else "0"
        self.encode_tensor_maps(f, where(None))
        self.check_alignment(f, where)
        args = ", ".join(f"(void *)&{self.var_name(p)}{'__map' if isinstance(p.type, TensorMapType) else ''}"
                         for p in f.params) or "0"
        plan = self.plan.kernel_plans[f.name]
        fibers = int(plan.needs_fibers)
        self.line("#ifdef HIDET_LANG_EMULATOR")
        kernel = self.plan.device_names[f.name]
        block_fn = f"{kernel}__block" if plan.fast_path else "0"
        cluster = ", ".join(map(str, (*(cuda.cluster_dim if cuda else ()), 1, 1, 1)[:3]))
        self.line(f'static const hl_kernel_info info = {{{kernel}__entry, "{f.name}", {fibers}, {block_fn}, '
                  f'{{{cluster}}}}};')
        self.line("#else")
        self.line(f'static const hl_kernel_info info = {{0, "{f.name}", {fibers}, 0, {{{cluster}}}}};')
        self.line("#endif")
        self.line(f"void *args[] = {{{args}}};")
        self.line(f"static const char *const where[] = {{{wheres}}};")
        self.line(f"hl_launch({index}, &info, where, {', '.join(grid)}, {', '.join(block)}, "
                  f"(long long)({smem}), args);")
        self.depth -= 1
        self.line("}")

    def encode_tensor_maps(self, f: Function, where: str) -> None:
        """Declare `<param>__map` for each tensor-map parameter and encode it from the tensor (tensor_map_host.h);
        the launcher returns if one fails (the launch error names the kernel's line)."""
        for p in f.params:
            t = p.type
            if not isinstance(t, TensorMapType):
                continue
            name = self.var_name(p)
            shape = ", ".join(f"(long long)({self.expr(E.convert(d))})" for d in t.shape)
            box = ", ".join(str(b) for b in t.box)
            self.line(f"hl_tensor_map {name}__map;")
            self.line(f"const long long {name}__shape[] = {{{shape}}}, {name}__box[] = {{{box}}};")
            self.line(f"if (hl_encode_tensor_map(&{name}__map, {name}, {t.dtype.nbytes}, {len(t.shape)}, "
                      f"{name}__shape, {name}__box, {t.swizzle}, \"{f.name}\", {where})) return;")

    def check_alignment(self, f: Function, where: Callable[[Span | None], str]) -> None:
        """Refuse the launch (a launch error at the copy's DSL line) when a tensor argument that an asynchronous
        copy reads from, or an untested vector copy accesses, is not aligned to the copy's size
        (`KernelPlan.aligned_params`): on a GPU the copy would fault, on the emulator it would work where the GPU
        does not."""
        for p, nbytes, span, copy in self.plan.kernel_plans[f.name].aligned_params:
            name = self.var_name(p)
            kind = "asynchronous copy (cp_async) reads from" if copy in CP_ASYNC_COPIES else \
                "vector copy (copy_vector) accesses"
            self.line(f"if ((uintptr_t)({name}) % {nbytes} != 0) {{")
            self.line(f'    hl_launch_error(-1, "{f.name}", {where(span)}, "the argument \'{p.name}\' is at %p, '
                      f"which a {nbytes}-byte {kind}: it must be {nbytes}-byte "
                      f'aligned", (void *)({name}));')
            self.line("    return;")
            self.line("}")

    def dims(self, dims: tuple[E.Expr, ...]) -> list[str]:
        """Three `long long` dimensions from up to three expressions (missing ones are 1)."""
        out = [f"(long long)({self.expr(d)})" for d in dims]
        return out + ["1LL"] * (3 - len(out))


class EmulatorHostEmitter(CudaHostEmitter):
    """Prints the host source of a planned CUDA module for the emulator, as C++: the emulator's header spells the
    half-precision types as CUDA does, so they are passed as they are. With `check` (the emulator's checking
    mode) the host functions' element accesses are bounds-checked as on the CPU (see `CEmitter`)."""

    helper_prefix = "hl_host_"  # the device code's helpers are in the same translation unit

    def __init__(self, plan: ModulePlan, smem_limit: int = 0, check: bool = False,
                 files: SourceFiles | None = None) -> None:
        super().__init__(plan, smem_limit, files)
        self.check = check

    def scalar(self, t: DataType) -> str:
        return CUDA_SCALARS.get(t.name, t.c_name)

    def float_param_conversion(self, t: DataType, name: str) -> str:
        return CEmitter.float_param_conversion(self, t, name)

    def kernel_tables(self) -> str:
        """Also the bytes of each kernel's local arrays, which the emulator adds to its threads' stacks."""
        return super().kernel_tables() + self.kernel_table("hl_local_bytes", "local_bytes")
