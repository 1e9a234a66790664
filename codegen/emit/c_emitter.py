"""IR -> C source for the CPU target.

The emitter prints one C translation unit per module: a prelude (the `#include` of the project's host runtime,
`hidet_lang/host_runtime.h`: standard headers, the assertion channel, bounds checks), the typed helpers it used
(min/max/abs, the float `%` and `//`, shifts by a count not known to be within the width, the identity that keeps
an operand of a float `+` or `-` from the compiler's front end: `CEmitter.kept_operand`), forward declarations,
then the functions. Before the code of each DSL statement it writes a marker comment `// <file N>:<line>`, so
compiler diagnostics map back to the user's line. The source names the user's files only by such tokens, never by
their paths (`codegen.toolchain.source_files`: the emitter's `files` is the table, which the module keeps): the same
program in another directory gives the same source, and its compiled library is found in the cache.
Target-specific emitters (CUDA) subclass `CEmitter` and override the spelling of types, functions and
intrinsics.

Vector types (`f32x8`, CPU functions only) are printed as the GCC/Clang vector-extension types of the project's
header `hidet_lang/cpu_vectors.h` (`hl_f32x8`), included when a module uses one. Vector extensions make `+ - *`
plain C operators, portable between GCC and Clang and held to the same flags as scalar code (`-ffp-contract=off`:
never fused), with no intrinsic per operation; the header implements the operations whose meaning must be exact
(the fused multiply-add, max/min, broadcast) with `<immintrin.h>` intrinsics, and each intrinsic of the IR
(`f32x8_load`) becomes a call of its helper there (`hl_f32x8_load`).

With `own_math` (the CPU target's emitter), f32 `erf` (and half precision's, computed in float) calls the
project's `hl_erf_f32` of `hidet_lang/cpu_math.h` instead of the C library's `erff`: straight-line C that the C
compiler vectorizes in strict code (a GELU epilogue), the same bits in a vector lane as in a scalar call.
"""

from __future__ import annotations

import json
import math

import numpy as np

from codegen.emit.bf16_in_float import BF16_STRUCT, bf16_bits, is_bf16, through_float
from codegen.emit.float_to_int import float_to_int_call, is_float_to_int, known_to_fit
from codegen.emit.int_division import guarded_division, needs_guard
from codegen.emit.parallel_work import enough_work
from codegen.emit.pointer_origins import pointer_origins
from codegen.toolchain.source_files import SourceFiles
from codegen.toolchain.vector_math import alias_declaration, alias_name
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import HOST_CALLABLE_KINDS, Function, IRModule
from hidet_lang.ir.intrinsics import VECTOR_INTRINSICS
from hidet_lang.ir.types import (
    DataType,
    PointerType,
    TensorType,
    Type,
    VectorType,
    VoidType,
    bfloat16,
    float16,
    float32,
    promote,
    uint64,
    unsigned_of,
)
from hidet_lang.passes.pipeline import LoweredModule, require_lowered

C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long register
restrict return short signed sizeof static struct switch typedef union unsigned void volatile while bool true false
main printf abs fabs exp log sqrt sin cos tan tanh erf floor ceil pow fmod round trunc min max errno NULL
div ldiv lldiv labs llabs rand srand random time clock exit abort free malloc calloc realloc signal raise
select index rindex puts putchar getchar fflush memcpy memset strlen j0 j1 jn y0 y1 yn gamma lgamma tgamma
erfc log10 exp2 log2 atan atan2 asin acos sinh cosh log1p expm1 cbrt hypot nan isnan isinf remainder
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t half bfloat16 dim3 threadIdx blockIdx blockDim
gridDim warpSize new delete class namespace template this operator private public protected virtual friend
std size_t assert typename using nullptr constexpr mutable explicit export
""".split()) | frozenset(
    variant for name in """
abs exp exp2 exp10 expm1 log log2 log10 log1p logb ilogb sqrt rsqrt cbrt rcbrt sin cos tan sinh cosh tanh asin acos
atan atan2 asinh acosh atanh sinpi cospi sincos sincospi erf erfc erfinv erfcinv erfcx normcdf normcdfinv lgamma
tgamma j0 j1 jn y0 y1 yn floor ceil round trunc rint nearbyint lrint llrint lround llround modf frexp ldexp scalbn
scalbln fmod remainder remquo fma fmin fmax fdim copysign nextafter hypot rhypot norm3d rnorm3d norm4d rnorm4d
nan cyl_bessel_i0 cyl_bessel_i1 signbit isfinite isnan isinf saturate fdividef
""".split() for variant in (name, name + "f"))
"""Names a generated identifier must not take: C and C++ keywords, and the C, CUDA and C++ library names a
translation unit declares (math functions in their `f` variants too), which a kernel or variable named like an
operator (`rsqrt`, `std`) would collide with."""

ASSERT_STATUS_SYMBOL = "hidet_lang_assert_status"
FLUSH_SYMBOL = "hidet_lang_flush"

OWN_MATH = {"erff": "hl_erf_f32"}
"""The C library's functions that the CPU target's C computes with the project's own (`hidet_lang/cpu_math.h`)."""

_MATH_F32 = {
    "fabs": "fabsf", "exp": "expf", "log": "logf", "sqrt": "sqrtf", "sin": "sinf", "cos": "cosf", "tan": "tanf",
    "tanh": "tanhf",
    "erf": "erff", "floor": "floorf", "ceil": "ceilf", "pow": "powf", "log2": "log2f", "exp2": "exp2f",
    "atan": "atanf", "asin": "asinf", "acos": "acosf", "sinh": "sinhf", "cosh": "coshf", "log1p": "log1pf",
    "expm1": "expm1f", "atan2": "atan2f", "fmod": "fmodf", "round": "roundf", "trunc": "truncf",
}

def c_function_name(f: Function) -> str:
    """The C identifier of function `f` (its DSL name unless that is a C keyword or library name)."""
    return f.name + "_" if f.name in C_KEYWORDS else f.name


def tensor_label(base: E.Expr) -> str:
    """The C string naming the tensor of an access in a checking-mode report."""
    return c_string(base.name if isinstance(base, E.Var) else "pointer")


def c_string(text: str) -> str:
    """A C string literal for `text`."""
    return json.dumps(text).replace("?", "\\?")


def shift_in_range(t: DataType, count: E.Expr) -> bool:
    """True when `count` is a constant within [0, width of `t`): a shift of a `t` by it is C's plain shift; any
    other count goes through the shift helper (`CEmitter.helper`), which gives numpy's results beyond the width."""
    return isinstance(count, E.Constant) and 0 <= int(count.value) < 8 * t.nbytes


def as_single(value: float) -> np.float32:
    """`value` rounded to the nearest single-precision float (past its range: an infinity), which a literal of a
    32-bit or narrower float type spells: C rejects or warns of a float literal out of range (`1e300f`), where the
    IR's constant of that type is infinite; and a decimal rounded straight to float can differ from the double the
    constant holds rounded to float."""
    with np.errstate(over="ignore"):
        return np.float32(value)

class CEmitter:
    """Prints an IRModule as C.

    With `check`, every element access of a tensor whose size is known is bounds-checked (an access through a
    pointer made from a tensor, e.g. a `view`, against the bytes of that tensor: `codegen.emit.pointer_origins`): an
    index outside the tensor records the first failure (reported to Python as an IndexError after the call) and
    the access goes to a scratch buffer instead of memory outside the tensor; an integer division or modulo by
    zero is recorded too (a ZeroDivisionError), and a float converted to an integer type that cannot hold it (a
    `ConversionWarning`). Integer `/` and `%` by a divisor that may be 0 or -1 go through the guarded helpers of
    `codegen.emit.int_division` on every target, and a float converted to an integer type through those of
    `codegen.emit.float_to_int`.

    `files` numbers the user's files the source names (a module's emitters share one; a new one by default).
    """

    parallel_pragma = "#pragma omp parallel for schedule(static)"
    helper_qualifiers = "HL_HELPER"  # of the helper functions (`helper`): always inlined (host_runtime.h)
    restrict_qualifier = "__restrict"  # of a no-alias function's tensor parameters
    helper_prefix = "hl_"  # of their names
    division_fail = "hl_division_by_zero"  # checking mode: what a zero integer divisor calls (int_division.h)
    conversion_warn = "hl_conversion_warning"  # checking mode: what a float an integer cannot hold calls

    def __init__(self, check: bool = False, vector_math: frozenset[str] = frozenset(),
                 files: SourceFiles | None = None, own_math: bool = False) -> None:
        self.check = check
        self.own_math = OWN_MATH if own_math else {}  # C math functions computed by the project's (`OWN_MATH`)
        self.uses_math = False  # whether it calls one of them (it then includes cpu_math.h)
        self.files = SourceFiles() if files is None else files
        self.vector_math = vector_math  # the C math functions with vector versions (`codegen.toolchain.vector_math`)
        self.vector_math_used: set[str] = set()  # those a fast-math function called
        self.lines: list[str] = []
        self.depth = 0
        self.names: dict[E.Var, str] = {}
        self.taken: set[str] = set()
        self.function_names: dict[str, str] = {}
        self.last_marker: tuple[str, int] | None = None
        self.parallel_depth = 0
        self.current: Function | None = None
        self.helpers: dict[str, str] = {}
        self.float_params: dict[E.Var, str] = {}
        self.origins: dict[E.Var, E.Var] = {}  # the tensor each pointer points into (`origins_of`)
        self.uses_vectors = False  # whether the module has a vector type (it then includes cpu_vectors.h)
        self.uses_parallel = False  # whether it has a parallel loop (it then includes cpu_threads.h)
        self.uses_bf16 = False  # whether it stores bf16 values as `hl_bf16` (it then includes cpu_bfloat16.h)

    # ---------------------------------------------------------------------------------------------- types
    def scalar(self, t: DataType) -> str:
        """The C spelling of a scalar type (a bf16: its bits in a struct, computed through float:
        `codegen.emit.bf16_in_float`)."""
        return BF16_STRUCT if is_bf16(t) else t.c_name

    def bf16_in_float(self) -> bool:
        """Whether bf16 values are stored as `hl_bf16` and computed through float (the CPU's C; targets with bf16
        arithmetic spell it otherwise)."""
        return self.scalar(bfloat16) == BF16_STRUCT

    def type_name(self, t: Type) -> str:
        """The C spelling of a parameter or variable type (tensors decay to pointers)."""
        if isinstance(t, DataType):
            return self.scalar(t)
        if isinstance(t, PointerType) and t.is_void:
            return "void *"
        if isinstance(t, (TensorType, PointerType)):
            return self.scalar(t.dtype) + " *"
        if isinstance(t, VoidType):
            return "void"
        if isinstance(t, VectorType):
            self.uses_vectors = True
            return f"{self.helper_prefix}{t}"
        raise TypeError(f"no C type for {t}")

    # ---------------------------------------------------------------------------------------------- names
    def var_name(self, v: E.Var) -> str:
        """A unique C identifier for `v`."""
        name = self.names.get(v)
        if name is None:
            base = v.name if v.name.isidentifier() else "v"
            name, k = base, 1
            while name in self.taken or name in C_KEYWORDS or name in self.function_names.values():
                name, k = f"{base}_{k}", k + 1
            self.names[v] = name
            self.taken.add(name)
        return name

    def func_name(self, name: str) -> str:
        """The C identifier of the module function `name`."""
        return self.function_names[name]

    # ---------------------------------------------------------------------------------------------- output
    def line(self, text: str) -> None:
        """Append a line at the current indentation."""
        self.lines.append("    " * self.depth + text)

    def marker(self, node: S.Stmt) -> None:
        """Write `// <file N>:line` before a statement from a new DSL line."""
        span = node.span
        if span is None or (span.file, span.line) == self.last_marker:
            return
        self.last_marker = (span.file, span.line)
        self.line(f"// {self.files.where(span.file, span.line)}")

    # ---------------------------------------------------------------------------------------------- module
    def emit_module(self, module: LoweredModule) -> str:
        """The C source of `module`, the output of `hidet_lang.passes.pipeline.lower` (or a part of it)."""
        require_lowered(module)
        self.function_names = self.function_names_of(module)
        declarations = [self.signature(f) + ";" for f in module.functions]
        for f in module.functions:
            self.lines.append("")
            self.emit_function(f)
        helpers = [self.helpers[name] for name in sorted(self.helpers)]
        vector_math = [alias_declaration(name) for name in sorted(self.vector_math_used)]
        body = "\n".join([*vector_math, *helpers, "", *declarations, *self.lines])
        self.uses_bf16 = self.bf16_in_float() and BF16_STRUCT in body
        return "\n".join([self.prelude(), body]) + "\n"

    def function_names_of(self, module: IRModule) -> dict[str, str]:
        """The C identifiers of the functions of `module` (see `c_function_name`)."""
        return {f.name: c_function_name(f) for f in module.functions}

    def prelude(self) -> str:
        """What the generated code starts with: the vector types' header where the module uses them (first, so that
        the compiler may read it precompiled: `codegen.toolchain.precompiled_headers`), the project's host runtime
        (headers, the assertion channel), and the parallel loops' thread count where it has one (`emit_module` asks
        after printing the functions)."""
        vectors = '#include "hidet_lang/cpu_vectors.h"\n' if self.uses_vectors or self.uses_math else ""
        math_h = '#include "hidet_lang/cpu_math.h"\n' if self.uses_math else ""
        threads = '#include "hidet_lang/cpu_threads.h"\n' if self.uses_parallel else ""
        bf16 = '#include "hidet_lang/cpu_bfloat16.h"\n' if self.uses_bf16 else ""
        return vectors + '#include "hidet_lang/host_runtime.h"\n' + math_h + bf16 + threads

    def helper(self, name: str, t: DataType) -> str:
        """The name of the typed helper `hl_<name>_<type>` (min, max, abs; for floats, mod and floordiv: the
        float `%` and `//`, as Python's; for integers, shl and shr: `<<` and `>>` by any count, as
        `hidet_lang.ir.evaluate.shift` defines them; for floats, keep: the identity, see `kept_operand`), defining
        it on first use."""
        c, helper = self.scalar(t), f"{self.helper_prefix}{name}_{t.short_name}"
        if helper not in self.helpers:
            f = "f" if t.nbytes <= 4 else ""
            if name in ("shl", "shr"):  # the count, of any integer type, as unsigned: a negative one is too large
                body = f"{c} a, {self.scalar(uint64)} b) {{ return b < {8 * t.nbytes} ? {self.shifted(name, t)} : "
                body += f"({c})({'a < 0 ? -1 : 0' if name == 'shr' and t.kind == 'int' else '0'}); }}"
            elif name == "mod":
                body = (f"{c} a, {c} b) {{ {c} r = fmod{f}(a, b); if (r != 0) {{ if ((r < 0) != (b < 0)) r += b; }} "
                        f"else r = copysign{f}(({c})0, b); return r; }}")
            elif name == "floordiv":  # numpy's and Python's divmod: the quotient that goes with `mod`
                body = (f"{c} a, {c} b) {{ if (b == 0) return a / b; {c} m = fmod{f}(a, b); {c} d = (a - m) / b; "
                        f"if (m != 0 && ((b < 0) != (m < 0))) d -= 1; if (d == 0) return copysign{f}(({c})0, a / b); "
                        f"{c} q = floor{f}(d); if (d - q > ({c})0.5) q += 1; return q; }}")
            elif name == "abs":
                body = f"{c} a) {{ return a < 0 ? ({c})-a : a; }}" if t.kind != "uint" else f"{c} a) {{ return a; }}"
            elif name == "keep":
                body = f"{c} a) {{ return a; }}"
            else:
                body = f"{c} a, {c} b) {{ return a {'<' if name == 'min' else '>'} b ? a : b; }}"
            self.helpers[helper] = f"{self.helper_qualifiers} {c} {helper}({body}"
        return helper

    def shifted(self, name: str, t: DataType) -> str:
        """The C shift of the helper `hl_<name>_<t>` (shl or shr) of `a` by a count `b` within the width: `<<` on
        the unsigned type of `t`'s width (C leaves shifting a 1 into or past a signed type's sign bit undefined),
        `>>` as C shifts (arithmetic on signed types), both wrapped to `t` (C computes narrow types in int)."""
        c = self.scalar(t)
        if name == "shr":
            return f"({c})(a >> b)"
        u = c if t.kind != "int" else self.scalar(unsigned_of(t))
        return f"({c})(({u})a << b)"

    def qualifiers(self, f: Function) -> str:
        """Storage class and attributes of a function."""
        noinline = "HL_NOINLINE " if f.attrs.noinline else ""  # host_runtime.h
        fast_math = "HL_FAST_MATH " if f.attrs.fast_math else ""
        return noinline + fast_math + ("HL_EXPORT " if f.attrs.kind in HOST_CALLABLE_KINDS else "static ")

    @staticmethod
    def passed_as_float(f: Function, p: E.Var) -> bool:
        """True for a half-precision scalar parameter of a host-callable function.

        ctypes has no half-precision type, so the host passes a `float` (see
        `codegen.runtime.argument_checks.ctype_of`); the C function takes it as `<name>_f32` and converts it to the
        parameter's type on entry.
        """
        t = p.type
        return f.attrs.kind in HOST_CALLABLE_KINDS and isinstance(t, DataType) and t.is_float and t.nbytes == 2

    def float_param_name(self, p: E.Var) -> str:
        """The C name of the `float` a half-precision host parameter arrives in (`<name>_f32`, made unique)."""
        base = self.var_name(p) + "_f32"
        name, k = base, 1
        while name in self.taken or name in C_KEYWORDS or name in self.function_names.values():
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        self.float_params[p] = name
        return name

    def float_param_conversion(self, t: DataType, name: str) -> str:
        """C text converting the `float` a half-precision parameter arrives in to the parameter's type."""
        if is_bf16(t) and self.bf16_in_float():
            return f"hl_f32_to_bf16({name})"
        return f"({self.scalar(t)}){name}"

    def unpack_float_params(self, f: Function) -> None:
        """Declare each half-precision parameter from the `float` it arrived in (see `passed_as_float`)."""
        for p in f.params:
            if self.passed_as_float(f, p):
                assert isinstance(p.type, DataType)
                conversion = self.float_param_conversion(p.type, self.float_params[p])
                self.line(f"{self.type_name(p.type)} {self.var_name(p)} = {conversion};")

    def param_decl(self, f: Function, p: E.Var) -> str:
        """The C declaration of one parameter."""
        if self.passed_as_float(f, p):
            return f"float {self.float_param_name(p)}"
        if f.attrs.no_alias and isinstance(p.type, TensorType):
            return f"{self.type_name(p.type)}{self.restrict_qualifier} {self.var_name(p)}"
        return f"{self.type_name(p.type)} {self.var_name(p)}"

    def signature(self, f: Function) -> str:
        """The C prototype of `f`."""
        self.names = {}
        self.taken = set()
        self.float_params = {}
        params = ", ".join(self.param_decl(f, p) for p in f.params) or "void"
        return f"{self.qualifiers(f)}{self.type_name(f.ret_type)} {self.func_name(f.name)}({params})"

    def emit_function(self, f: Function) -> None:
        """Print the definition of `f`."""
        self.current = f
        self.origins = self.origins_of(f)
        self.last_marker = None
        if f.span is not None:
            self.line(f"// {self.files.where(f.span.file, f.span.line)}")
        self.line(self.signature(f) + " {")
        self.depth += 1
        self.unpack_float_params(f)
        self.stmt(f.body)
        self.depth -= 1
        self.line("}")

    # ---------------------------------------------------------------------------------------------- statements
    def stmt(self, s: S.Stmt) -> None:
        """Print statement `s`."""
        if not isinstance(s, S.SeqStmt):
            self.marker(s)
        getattr(self, "stmt_" + type(s).__name__)(s)

    def body(self, s: S.Stmt) -> None:
        """Print a nested block."""
        self.depth += 1
        self.stmt(s)
        self.depth -= 1

    def stmt_SeqStmt(self, s: S.SeqStmt) -> None:
        for item in s.stmts:
            self.stmt(item)

    def stmt_DeclareStmt(self, s: S.DeclareStmt) -> None:
        t = s.var.type
        name = self.var_name(s.var)
        if isinstance(t, TensorType):
            size = t.layout.size if t.layout is not None else math.prod(int(d) for d in t.shape)  # the storage
            self.line(f"{self.storage_prefix(s)}{self.scalar(t.dtype)} {name}[{size}];")
            return
        init = "" if s.init is None else f" = {self.expr(s.init)}"
        self.line(f"{self.type_name(t)} {name}{init};")

    def storage_prefix(self, s: S.DeclareStmt) -> str:
        """What goes before a local array's declaration (nothing on the CPU)."""
        return ""

    def stmt_AssignStmt(self, s: S.AssignStmt) -> None:
        self.line(f"{self.var_name(s.var)} = {self.expr(s.value)};")

    def stmt_BufferStoreStmt(self, s: S.BufferStoreStmt) -> None:
        address = self.bounds_checked(s.buf, s.indices[0], write=True)
        if address is not None:
            self.line(f"*{address} = {self.expr(s.value)};")
            return
        self.line(f"{self.expr(s.buf)}[{self.expr(s.indices[0])}] = {self.expr(s.value)};")

    def extent(self, base: E.Expr) -> str:
        """The number of elements a tensor (or tensor pointer) holds, as C text; -1 when unknown. For a tensor
        type with a layout, that is the layout's size (its storage), not the product of its shape."""
        t = base.type
        tensor = t if isinstance(t, TensorType) else t.base if (
            isinstance(t, PointerType) and isinstance(t.base, TensorType)) else None
        if tensor is None:
            return "-1LL"
        if tensor.layout is not None:
            return f"{tensor.layout.size}LL"
        return " * ".join(f"(long long)({self.expr(E.convert(d))})" for d in tensor.shape)

    def origins_of(self, f: Function) -> dict[E.Var, E.Var]:
        """The pointers of `f` whose accesses are checked against the tensor they point into (checking mode:
        every one `codegen.emit.pointer_origins` finds)."""
        return pointer_origins(f) if self.check else {}

    def byte_size(self, tensor: E.Var) -> str:
        """The bytes a tensor (or tensor pointer) variable of known size holds, as C text."""
        t = tensor.type
        dtype = t.dtype if isinstance(t, (TensorType, PointerType)) else None
        assert dtype is not None
        return f"({self.extent(tensor)} * (long long)sizeof({self.scalar(dtype)}))"

    def where(self) -> str:
        """The DSL location of the statement being printed, as a C string."""
        return c_string(self.files.where(*self.last_marker) if self.last_marker else "?")

    def bounds_checked(self, base: E.Expr, index: E.Expr, write: bool = False,
                       address_only: bool = False) -> str | None:
        """In checking mode, the address of `base[index]` behind a bounds check (None: a plain access).
        `write`: the access stores; `address_only`: it is `~base[index]` (the CUDA emulator's checks tell
        these apart; on the CPU every checked access is the same)."""
        return self.span_checked(base, index, 1)

    def span_checked(self, base: E.Expr, index: E.Expr, count: int) -> str | None:
        """In checking mode, the address of `base[index]` behind a check that the `count` elements from there lie
        in the tensor (a vector load or store reads or writes its lanes); None outside checking mode or where the
        tensor's size is unknown."""
        if not self.check:
            return None
        origin = self.origins.get(base) if isinstance(base, E.Var) else None
        if origin is not None:  # a view: checked against the bytes of the tensor it points into
            return (f"HL_CHECKED_IN({self.expr(base)}, {self.expr(index)}, {count}, {self.expr(origin)}, "
                    f"{self.byte_size(origin)}, {tensor_label(base)}, {tensor_label(origin)}, {self.where()})")
        extent = self.extent(base)
        if extent == "-1LL":
            return None
        return (f"HL_CHECKED({self.expr(base)}, {self.expr(index)}, {count}, {extent}, {tensor_label(base)}, "
                f"{self.where()})")

    def stmt_EvaluateStmt(self, s: S.EvaluateStmt) -> None:
        self.line(f"{self.expr(s.expr)};")

    def stmt_IfStmt(self, s: S.IfStmt) -> None:
        self.line(f"if ({self.if_condition(s)}) {{")
        self.body(s.then_body)
        if s.else_body is not None:
            self.line("} else {")
            self.body(s.else_body)
        self.line("}")

    def if_condition(self, s: S.IfStmt) -> str:
        """The condition the `if` of `s` tests."""
        return self.expr(s.cond)

    def loop_condition(self, s: S.ForStmt) -> str:
        """The condition the `for` of loop `s` tests before each iteration."""
        name, step = self.var_name(s.var), s.step
        if isinstance(step, E.Constant):
            return f"{name} {'<' if step.value > 0 else '>'} {self.expr(s.stop)}"
        return f"({self.expr(step)} > 0 ? {name} < {self.expr(s.stop)} : {name} > {self.expr(s.stop)})"

    def stmt_ForStmt(self, s: S.ForStmt) -> None:
        name = self.var_name(s.var)
        step = s.step
        cond = self.loop_condition(s)
        incr = f"{name}++" if isinstance(step, E.Constant) and step.value == 1 else f"{name} += {self.expr(step)}"
        parallel = s.kind == S.LoopKind.PARALLEL and self.parallel_depth == 0
        if parallel:
            # a count the loop names ('p4'), else, given the work for several, the cores other processes leave free
            threads = f" num_threads({s.factor})" if s.factor > 0 else \
                f" num_threads(hl_cpu_threads({enough_work(s, self.expr)}))"
            self.uses_parallel = self.uses_parallel or s.factor == 0
            self.line(self.parallel_pragma + self.collapse_clause(s) + threads + self.reduction_clauses(s))
        elif s.kind == S.LoopKind.UNROLL:
            for text in self.unroll_line(s.factor).split("\n"):
                self.line(text)
        self.line(f"for ({self.type_name(s.var.type)} {name} = {self.expr(s.start)}; {cond}; {incr}) {{")
        self.parallel_depth += parallel
        self.body(s.body)
        self.parallel_depth -= parallel
        self.line("}")

    def unroll_line(self, factor: int) -> str:
        """The pragma of a loop unrolled by `factor` (`ForStmt.factor`), in each compiler's own spelling (lines):
        Clang's `#pragma unroll` (as CUDA and Hidet write it; alone, a complete unroll) and, for GCC, which ignores
        that one, `#pragma GCC unroll`; 64 for the compiler's choice, and GCC's largest factor for `FULL_UNROLL`."""
        clang = "#pragma unroll" if factor == S.FULL_UNROLL else f"#pragma unroll {factor or 64}"
        gcc = f"#pragma GCC unroll {65534 if factor == S.FULL_UNROLL else factor or 64}"
        return f"#if defined(__clang__)\n{clang}\n#else\n{gcc}\n#endif"

    def reduction_clauses(self, s: S.ForStmt) -> str:
        """` reduction(op:name)` for each scalar the parallel loop reduces into (see `ForStmt.reductions`)."""
        return "".join(f" reduction({op}:{self.var_name(v)})" for op, v in s.reductions)

    def collapse_clause(self, s: S.ForStmt) -> str:
        """` collapse(n)` for perfectly nested parallel loops."""
        n, inner = 1, s.body
        while isinstance(inner, S.ForStmt) and inner.kind == S.LoopKind.PARALLEL:
            n, inner = n + 1, inner.body
        return f" collapse({n})" if n > 1 else ""

    def stmt_WhileStmt(self, s: S.WhileStmt) -> None:
        self.line(f"while ({self.expr(s.cond)}) {{")
        self.body(s.body)
        self.line("}")

    def stmt_BreakStmt(self, s: S.BreakStmt) -> None:
        self.line("break;")

    def stmt_ContinueStmt(self, s: S.ContinueStmt) -> None:
        self.line("continue;")

    def stmt_ReturnStmt(self, s: S.ReturnStmt) -> None:
        self.line("return;" if s.value is None else f"return {self.expr(s.value)};")

    def stmt_AssertStmt(self, s: S.AssertStmt) -> None:
        line = s.span.line if s.span is not None else 0
        where = f"{self.files.where(s.span.file, line)}: " if s.span is not None else ""
        self.line(f"if (!({self.expr(s.cond)})) {{")
        self.depth += 1
        self.line(f"hl_host_assert_fail({c_string(where + s.message)}, {line});")
        if self.parallel_depth == 0:
            self.line(self.early_return())
        self.depth -= 1
        self.line("}")

    def early_return(self) -> str:
        """Leave the current function after a failed assertion."""
        assert self.current is not None
        t = self.current.ret_type
        return "return;" if isinstance(t, VoidType) else f"return ({self.type_name(t)})0;"

    # ---------------------------------------------------------------------------------------------- expressions
    def expr(self, e: E.Expr) -> str:
        """The C text of expression `e` (fully parenthesized where it matters); an operation on bf16 values in
        float where C has no bf16 arithmetic (`bf16_in_float`)."""
        if self.bf16_in_float():
            widened = through_float(e)
            e = e if widened is None else widened
        return getattr(self, "expr_" + type(e).__name__)(e)

    def expr_Var(self, e: E.Var) -> str:
        return self.var_name(e)

    def expr_Constant(self, e: E.Constant) -> str:
        return self.constant(e.value, e.dtype)

    def constant(self, value: int | float | bool, t: DataType) -> str:
        """A C literal of type `t`."""
        if t.is_bool:
            return "true" if value else "false"
        if is_bf16(t) and self.bf16_in_float():
            return f"(({BF16_STRUCT}){{{hex(bf16_bits(float(value)))}}})"
        if t.is_float:
            single = None if t.nbytes == 8 else as_single(float(value))
            v = float(value) if single is None else float(single)
            if not math.isfinite(v):
                return self.non_finite(v, t)
            text = repr(v) if single is None else f"{str(single)}f"  # the shortest text of the f32 value
            return text if t.nbytes in (4, 8) else f"(({self.scalar(t)}){text})"
        v = int(value)
        if t.kind == "int" and v == -(2 ** (t.nbytes * 8 - 1)):
            return f"(({self.scalar(t)})({v + 1} - 1))"
        suffix = {("int", 8): "LL", ("uint", 8): "ULL", ("uint", 4): "U"}.get((t.kind, t.nbytes), "")
        text = f"{v}{suffix}"
        return text if t.nbytes >= 4 and v >= 0 else f"(({self.scalar(t)}){text})"

    def non_finite(self, value: float, t: DataType) -> str:
        """The C text of a NaN or an infinity of float type `t` (math.h's macros)."""
        text = "NAN" if math.isnan(value) else "INFINITY" if value > 0 else "(-INFINITY)"
        return text if t.nbytes in (4, 8) and text[0] != "(" else f"(({self.scalar(t)}){text})"

    def expr_StringLiteral(self, e: E.StringLiteral) -> str:
        return c_string(e.value)

    def expr_BinaryOp(self, e: E.BinaryOp) -> str:
        a, b = self.operand(e.a, e), self.operand(e.b, e)
        t = e.type
        if e.op in ("/", "%") and isinstance(t, DataType) and needs_guard(t, e.b):
            return guarded_division(e.op, t, a, b, *((self.where(), self.division_fail) if self.check else ()))
        if e.op == "%" and isinstance(t, DataType) and t.is_float:  # the floor modulo (`evaluate.floor_mod`)
            text = f"{self.helper('mod', float32 if t.nbytes <= 4 else t)}({a}, {b})"
            return text if t.nbytes >= 4 else f"(({self.scalar(t)}){text})"  # half precision: computed in float
        if e.op in ("<<", ">>") and isinstance(t, DataType) and not shift_in_range(t, e.b):
            return f"{self.helper('shl' if e.op == '<<' else 'shr', t)}({a}, {b})"  # numpy's results past the width
        if e.op in ("+", "-") and isinstance(t, DataType) and t.is_float and not self.in_fast_math():
            a = self.kept_operand(e.a, a, t) if e.op == "+" else a
            b = self.kept_operand(e.b, b, t)
        text = f"({a} {e.op} {b})"
        if isinstance(t, DataType) and t.nbytes < 4 and e.op in ("+", "-", "*", "/", "%", "<<"):
            text = f"(({self.scalar(t)}){text})"  # C computes in int: wrap back to the IR's type
        return text

    def operand(self, x: E.Expr, e: E.BinaryOp) -> str:
        """The C text of operand `x` of `e`, converted to the type the IR computes `e` in where it differs (C would
        compute `u8 | i8` in int, and `__half + uint8_t` has no single overload)."""
        text = self.expr(x)
        if e.op in E.LOGICAL_OPS or e.op in ("<<", ">>"):
            return text
        ta, tb = e.a.type, e.b.type
        if not (isinstance(ta, DataType) and isinstance(tb, DataType)) or ta == tb:
            return text
        common = promote(ta, tb)
        return text if x.type == common else self.converted(text, x.type, common)

    def kept_operand(self, x: E.Expr, text: str, t: DataType) -> str:
        """Operand `x` (printed as `text`) of a float `+` or `-` of type `t`, passed through the identity helper
        `hl_keep_<t>` unless it is a constant, or a variable or element of type `t`.

        The C compiler's front end folds each expression before any optimization, and GCC (12 and 13 seen) rewrites
        `0.0 - x` there as `-x` when it can tell from the expression that `x` is not -0.0 (an integer converted to a
        float, an absolute value), also after turning `0.0 + (-x)` and `(-x) + 0.0` into `0.0 - x`: that gives -0.0
        for x = +0.0, where IEEE arithmetic gives +0.0. It does not look into a call; its optimizers, which see
        through the inlined helper later, keep the sign. A subtraction's left operand needs no helper (`x - 0.0`
        is `x`)."""
        if isinstance(x, E.Constant) or (isinstance(x, (E.Var, E.TensorElement)) and x.type == t):
            return text
        return f"{self.helper('keep', t)}({text})"

    def in_fast_math(self) -> bool:
        """Whether the function being printed is a fast-math one (`attrs.fast_math`: signs of zeros may change)."""
        return self.current is not None and self.current.attrs.fast_math

    def expr_UnaryOp(self, e: E.UnaryOp) -> str:
        text = f"({e.op}{self.expr(e.a)})"
        t = e.type
        if isinstance(t, DataType) and t.nbytes < 4 and not t.is_bool:
            text = f"(({self.scalar(t)}){text})"
        return text

    def expr_Cast(self, e: E.Cast) -> str:
        text, source = self.expr(e.expr), e.expr.type
        if is_bf16(source) and self.bf16_in_float():  # exact in float, then as a float converts
            text, source = f"hl_bf16_to_f32({text})", float32
            if e.dtype == float32:
                return text
        if is_float_to_int(source, e.dtype) and not known_to_fit(e.expr, e.dtype):
            assert isinstance(source, DataType)
            checked = (self.where(), self.conversion_warn) if self.check else ()
            return float_to_int_call(source, e.dtype, text, *checked)
        return self.converted(text, source, e.dtype)

    def converted(self, text: str, source: Type, target: DataType) -> str:
        """`text`, a value of type `source`, converted to `target`: through float for an integer converted to f16,
        which gives the same value (every integer that f16 does not round to infinity is a float) where GCC 13
        (13.3 seen) takes an unsigned integer converted to `_Float16` for finite at -O2, above 65519 too (where the
        conversion gives infinity), and folds `x * 0.0` to 0.0."""
        if target == float16 and isinstance(source, DataType) and source.is_integer:
            text = f"(float)({text})"
        if is_bf16(target) and self.bf16_in_float():
            return text if is_bf16(source) else f"hl_f32_to_bf16((float)({text}))"
        return f"(({self.scalar(target)})({text}))"

    def expr_Reinterpret(self, e: E.Reinterpret) -> str:
        return f"(({self.type_name(e.target)})({self.expr(e.expr)}))"

    def expr_IfThenElse(self, e: E.IfThenElse) -> str:
        return f"({self.expr(e.cond)} ? {self.expr(e.then_expr)} : {self.expr(e.else_expr)})"

    def expr_Call(self, e: E.Call) -> str:
        return f"{self.func_name(e.func_name)}({', '.join(self.expr(a) for a in e.args)})"

    def expr_TensorElement(self, e: E.TensorElement) -> str:
        address = self.bounds_checked(e.base, e.indices[0])
        if address is not None:
            return f"(*{address})"
        return f"{self.expr(e.base)}[{self.expr(e.indices[0])}]"

    def expr_Address(self, e: E.Address) -> str:
        if isinstance(e.expr.type, VectorType):  # its first lane's address (GCC and Clang let a vector alias its lanes)
            return f"(({self.type_name(e.type)})&{self.expr(e.expr)})"
        return f"(&{self.expr(e.expr)})"

    def expr_Dereference(self, e: E.Dereference) -> str:
        return f"(*{self.expr(e.expr)})"

    def expr_Intrinsic(self, e: E.Intrinsic) -> str:
        args = [self.expr(a) for a in e.args]
        if e.name in VECTOR_INTRINSICS:  # a helper of cpu_vectors.h
            self.uses_vectors = True
            for index, checked in self.vector_accesses_checked(e).items():
                args[index] = checked
            return f"{self.helper_prefix}{e.name}({', '.join(args)})"
        return self.intrinsic(e.name, args, e.ret_type)

    def vector_accesses_checked(self, e: E.Intrinsic) -> dict[int, str]:
        """In checking mode, each pointer a vector operation reads or writes through into a tensor (`~a[i]`, or the
        tensor itself) behind a check that covers every element it touches, by the pointer's argument index (a
        load's or a store's lanes, `dot_bf16`'s pair and its pair a lane); none for other operations and raw
        pointers."""
        vector, operation = e.name.split("_", 1)
        lanes = int(vector.split("x")[1])
        spans = {"load": ((0, lanes),), "load_aligned": ((0, lanes),), "store": ((0, lanes),),
                 "store_aligned": ((0, lanes),), "dot_bf16": ((1, 2), (2, 2 * lanes))}.get(operation, ())
        checked: dict[int, str] = {}
        for index, elements in spans:
            pointer, text = e.args[index], None
            if isinstance(pointer, E.Address) and isinstance(pointer.expr, E.TensorElement):
                text = self.span_checked(pointer.expr.base, pointer.expr.indices[0], elements)
            elif isinstance(pointer, E.Var) and isinstance(pointer.type, TensorType):
                text = self.span_checked(pointer, E.convert(0), elements)
            if text is not None:
                checked[index] = text
        return checked

    def intrinsic(self, name: str, args: list[str], t: Type) -> str:
        """The C text of a built-in operation on already-printed arguments."""
        if name == "printf":
            return f"printf({', '.join(args)})"
        assert isinstance(t, DataType)
        if name == "abs" and t.is_float:
            name = "fabs"  # not a comparison: |-0.0| must be +0.0
        elif name in ("min", "max", "abs"):
            return f"{self.helper(name, t)}({', '.join(args)})"
        if name == "floordiv":  # the float `//`, computed in float for half precision
            text = f"{self.helper(name, float32 if t.nbytes <= 4 else t)}({', '.join(args)})"
            return text if t.nbytes >= 4 else f"(({self.scalar(t)}){text})"
        if name == "rsqrt":
            return f"(({self.scalar(t)})1 / {self.math_function('sqrt', t)}({args[0]}))"
        func = self.math_function(name, t)
        if t.nbytes == 2:  # half precision: compute in float, round back
            return f"(({self.scalar(t)}){func}({', '.join(f'(float)({a})' for a in args)}))"
        return f"{func}({', '.join(args)})"

    def math_function(self, name: str, t: DataType) -> str:
        """The C math function for `name` on type `t`; in a fast-math function, its alias with vector versions
        where the C library has them (`codegen.toolchain.vector_math.alias_declaration`); otherwise the project's own
        where it has one (`OWN_MATH`, with `own_math`)."""
        c_name = name if t.nbytes == 8 else _MATH_F32[name]
        if self.in_fast_math() and c_name in self.vector_math:
            self.vector_math_used.add(c_name)
            return alias_name(c_name)
        if c_name in self.own_math:
            self.uses_math = True
            return self.own_math[c_name]
        return c_name
