"""IR -> CUDA C: the device source of a CUDA module, as NVRTC compiles it for a GPU.

The device source holds the `cuda_kernel` and `cuda_internal` functions; it includes the project's primitives
header `hidet_lang/cuda_primitives.h`, through which every warp, atomic and PTX-level operation goes, so that
the same text compiles with NVRTC for a GPU and with the C++ compiler for the CUDA emulator (whose variant of
the source, `codegen.emit.emulator_emitter`, adds what the emulator needs). Each CUDA intrinsic is printed with its
spelling in the intrinsic table (`hidet_lang.ir.intrinsics.INTRINSICS`).
"""

from __future__ import annotations

from typing import NamedTuple

from codegen.emit.c_emitter import CEmitter, c_string
from codegen.emit.kernel_plan import ModulePlan
from codegen.toolchain.source_files import SourceFiles
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FuncKind, Function, IRModule
from hidet_lang.ir.intrinsics import INDEX_VARIABLES, INTRINSICS, IntrinsicSpec
from hidet_lang.ir.layout import SwizzledLayout, swizzle_alignment
from hidet_lang.ir.tensor_map import TensorMapType
from hidet_lang.ir.types import DataType, PointerType, TensorType, Type, float32

CUDA_SCALARS = {"float16": "half", "bfloat16": "__nv_bfloat16"}
"""The CUDA spelling of the scalar types whose C spelling differs."""


class Dim3Text(NamedTuple):
    """The C text of the three components of one of CUDA's index variables: the fields `{threadIdx.x}` ... of an
    intrinsic's spelling."""

    x: str
    y: str
    z: str


CUDA_INDEX_VARIABLES = {v: Dim3Text(f"{v}.x", f"{v}.y", f"{v}.z") for v in INDEX_VARIABLES}
"""The index variables as CUDA spells them."""


FAST_MATH_F32 = {
    "exp": "__expf", "log": "__logf", "sin": "__sinf", "cos": "__cosf", "tan": "__tanf", "pow": "__powf",
    "log2": "__log2f", "exp2": "hl_ex2_approx",
}
"""The single-precision math functions of a fast-math device function: CUDA's approximate intrinsics (a few
instructions on the special function units; `exp2` the one `ex2.approx.ftz` instruction, `cuda_primitives.h`)."""


def asm_constraint(t: Type) -> str:
    """The inline-PTX operand constraint of a scalar type ('h' 16-bit, 'r' 32-bit, 'l' 64-bit, 'f', 'd') or of a
    pointer (an address: 'l')."""
    if isinstance(t, PointerType):
        return "l"
    assert isinstance(t, DataType)
    if t.is_float:
        return {2: "h", 4: "f", 8: "d"}[t.nbytes]
    return {1: "r", 2: "h", 4: "r", 8: "l"}[t.nbytes]


class CudaDeviceEmitter(CEmitter):
    """Prints the device functions of a planned CUDA module as CUDA C: `emit_module(plan.device_module)`."""

    helper_qualifiers = "static __device__ __forceinline__"
    restrict_qualifier = "__restrict__"

    def __init__(self, plan: ModulePlan, files: SourceFiles | None = None) -> None:
        super().__init__(files=files)
        self.plan = plan

    def unroll_line(self, factor: int) -> str:
        """CUDA's pragma: `#pragma unroll` (completely where the trip count is known), `#pragma unroll N`."""
        return "#pragma unroll" if factor in (0, S.FULL_UNROLL) else f"#pragma unroll {factor}"

    def function_names_of(self, module: IRModule) -> dict[str, str]:
        """The C names of the device functions, from the plan."""
        return dict(self.plan.device_names)

    def scalar(self, t: DataType) -> str:
        return CUDA_SCALARS.get(t.name, t.c_name)

    @staticmethod
    def passed_as_float(f: Function, p: E.Var) -> bool:
        """Never on the device: a kernel takes its half-precision scalars as they are (the host launcher converts
        the `float` it is called with and passes the 16-bit value)."""
        return False

    def prelude(self) -> str:
        return '#include "hidet_lang/cuda_primitives.h"\n'

    def qualifiers(self, f: Function) -> str:
        if f.attrs.kind == FuncKind.CUDA_KERNEL:
            bounds = self.launch_bounds(f)
            return f'extern "C" __global__ {bounds}{self.cluster_dims(f)}'
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

    @staticmethod
    def cluster_dims(f: Function) -> str:
        """`HL_CLUSTER_DIMS(x, y, z)` (`__cluster_dims__` from sm_90: hopper_cluster.h) for a kernel with a thread
        block cluster (the compile-time shape, which a plain launch honours)."""
        cuda = f.attrs.cuda
        if cuda is None or not cuda.cluster_dim:
            return ""
        dims = (*cuda.cluster_dim, 1, 1)[:3]
        return f"HL_CLUSTER_DIMS({', '.join(map(str, dims))}) "

    def storage_prefix(self, s: S.DeclareStmt) -> str:
        if s.scope != S.DeclScope.SHARED:
            return ""
        t = s.var.type
        if isinstance(t, TensorType) and isinstance(t.layout, SwizzledLayout):  # TMA's and wgmma's alignment
            return f"__shared__ __align__({swizzle_alignment(t.layout.swizzle)}) "
        return "__shared__ "

    # Tensor-map parameters (hidet_lang.ir.tensor_map): the map itself, passed by value (tensor_map.h).
    def type_name(self, t: Type) -> str:
        if isinstance(t, TensorMapType):
            return "hl_tensor_map"
        return super().type_name(t)

    def param_decl(self, f: Function, p: E.Var) -> str:
        if isinstance(p.type, TensorMapType):
            return f"const __grid_constant__ hl_tensor_map {self.var_name(p)}"
        return super().param_decl(f, p)

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

    def non_finite(self, value: float, t: DataType) -> str:
        """A NaN or an infinity as a division by zero (NVRTC has no math.h macros)."""
        if value != value:
            return f"(({self.scalar(t)})(0.0f / 0.0f))"
        return f"(({self.scalar(t)})({'-' if value < 0 else ''}1.0f / 0.0f))"

    def intrinsic(self, name: str, args: list[str], t: Type) -> str:
        """A CUDA intrinsic in its spelling of the intrinsic table; the math functions and printf as in C."""
        spec = INTRINSICS.get(name)
        if name in ("min", "max") and self.in_fast_math() and t == float32:  # no NaN: one FMNMX
            return f"f{name}f({', '.join(args)})"
        if spec is None:
            return super().intrinsic(name, args, t)
        return self.spelling(spec).format(*args, args=", ".join(args), type=self.type_name(t), where=self.where(),
                                          dynamic_smem=self.dynamic_smem(), **self.index_variables())

    def spelling(self, spec: IntrinsicSpec) -> str:
        """The template `spec` is printed with (`IntrinsicSpec.cuda`)."""
        return spec.cuda

    def index_variables(self) -> dict[str, Dim3Text]:
        """The C text of the index variables (`threadIdx` ...), by name."""
        return CUDA_INDEX_VARIABLES

    def math_function(self, name: str, t: DataType) -> str:
        """In a fast-math device function, CUDA's approximate intrinsic for a single-precision `name` where there
        is one (`FAST_MATH_F32`); the IEEE function otherwise."""
        if self.in_fast_math() and t.nbytes == 4 and name in FAST_MATH_F32:
            return FAST_MATH_F32[name]
        return super().math_function(name, t)

    def dynamic_smem(self) -> str:
        """C text of the block's dynamic shared memory (a `char *`)."""
        return "hl_dynamic_smem()"
