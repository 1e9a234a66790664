"""Float -> integer conversions are defined on every target: rounded toward zero, saturated to the integer type's
range, NaN to 0 (as the GPU's `cvt.rzi.sat`), bit for bit the same on the CPU, the CUDA emulator, the IR
interpreter and in constant folding, for every float type and every integer type. Checking mode reports a
conversion out of range as a `ConversionWarning` at its DSL line; the CUDA source of the conversions compiles with
NVRTC for sm_80 (no GPU needed).

One module per target computes every pair on the edge values (the kernels unroll over the pairs with `meta.range`).
"""

from __future__ import annotations

import inspect
import math
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

import hidet_lang as hidet
from codegen.emit.float_to_int import known_to_fit
from hidet_lang import attrs, bf16, f16, f32, f64, i8, i32, i64, meta, u8, u16
from hidet_lang.cuda import threadIdx
from hidet_lang.errors import ConversionWarning
from hidet_lang.frontend.semantics import convert_to
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import (
    DataType,
    bfloat16,
    dtype_from_name,
    float16,
    float32,
    float64,
    int8,
    int32,
    int64,
    uint8,
    uint16,
)
from hidet_lang.passes.simplify import simplify
from hidet_lang.testing.interpret import run_function

INT_TYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
NUMPY_FLOATS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
DTYPES = {"f16": float16, "bf16": bfloat16, "f32": float32, "f64": float64}
CPU_FLOATS = ("f16", "f32", "f64")  # bf16 is for CUDA functions
CUDA_FLOATS = ("f16", "bf16", "f32", "f64")


def edge_values() -> list[float]:
    """±0, ±1.5, ±inf, NaN, ±3e9, and each integer type's least and greatest value, one past them, and half-way
    there (one past, truncated, is out of range; half-way is not)."""
    values = [0.0, -0.0, 1.5, -1.5, math.inf, -math.inf, math.nan, 3e9, -3e9]
    for t in INT_TYPES:
        info = np.iinfo(t.replace("i", "int") if t[0] == "i" else t.replace("u", "uint"))
        lo, hi = int(info.min), int(info.max)
        values += [float(lo), float(lo - 1), lo - 0.5, float(hi), float(hi + 1), hi + 0.5]
    return values


VALUES = edge_values()
N = len(VALUES)


def numpy_int(t: str) -> np.dtype:
    """The numpy dtype of integer type `t` (`i8` -> int8)."""
    return np.dtype(("int" if t[0] == "i" else "uint") + t[1:])


def _int_dtype(t: str) -> DataType:
    """The IR type of integer type `t` (`i8` -> int8)."""
    return dtype_from_name(("int" if t[0] == "i" else "uint") + t[1:])


def reference(x: np.ndarray, t: str) -> np.ndarray:
    """The rule in numpy: `x` (of any float type) rounded toward zero, saturated to integer type `t`, NaN 0."""
    info = np.iinfo(numpy_int(t))
    truncated = np.trunc(x.astype(np.float64))  # exact: every f16, bf16 and f32 is a double
    low, high = truncated < float(info.min), truncated >= float(info.max + 1)  # both ends are powers of two
    nan = np.isnan(truncated)
    inside = ~(low | high | nan)
    out = np.zeros(len(x), numpy_int(t))
    out[inside] = truncated[inside].astype(numpy_int(t))
    out[low], out[high] = info.min, info.max
    return out


PAIRS = {target: [(f, t) for t in INT_TYPES for f in floats] for target, floats in
         (("cpu", CPU_FLOATS), ("cuda", CUDA_FLOATS))}
"""The (float type, integer type) pairs each module converts, in the order of its outputs."""


def converted(target: str, k: int, *xs: E.Expr) -> E.Expr:
    """Pair `k` of `target`'s conversions of the element `xs[j]` of the j-th float type's input: converted to the
    pair's integer type, then widened to i64 (exactly; a u64 past i64's range wraps, as numpy's view of it)."""
    f, t = PAIRS[target][k]
    x = xs[(CPU_FLOATS if target == "cpu" else CUDA_FLOATS).index(f)]
    return E.Cast(E.Cast(x, _int_dtype(t)), int64)


with hidet.script_module() as cpu_module:

    @hidet.script
    def convert_all(x16: f16[N], x32: f32[N], x64: f64[N], out: i64[len(PAIRS["cpu"]) * N]):
        attrs.func_kind = "public"
        for i in range(N):
            for k in meta.range(len(PAIRS["cpu"])):
                out[k * N + i] = converted("cpu", k, x16[i], x32[i], x64[i])


with hidet.script_module() as cuda_module:

    @hidet.script
    def convert_all(x16: f16[N], xb16: bf16[N], x32: f32[N], x64: f64[N],  # noqa: F811
                    out: i64[len(PAIRS["cuda"]) * N]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = 1
        attrs.cuda.block_dim = N
        i = threadIdx.x
        for k in meta.range(len(PAIRS["cuda"])):
            out[k * N + i] = converted("cuda", k, x16[i], xb16[i], x32[i], x64[i])


MODULES = {"cpu": cpu_module, "cuda": cuda_module}


def inputs(floats: tuple[str, ...]) -> list[np.ndarray]:
    """The edge values as an array of each float type (rounded to it: past f16's range they are infinite)."""
    with np.errstate(over="ignore"):
        return [np.array(VALUES, np.float64).astype(NUMPY_FLOATS[f]) for f in floats]


def run(fn: object, target: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Call `fn` (a build of `MODULES[target]`, or the interpreter) on the edge values: the inputs by float type, and
    the output."""
    floats = CPU_FLOATS if target == "cpu" else CUDA_FLOATS
    xs = inputs(floats)
    out = np.zeros(len(PAIRS[target]) * N, np.int64)
    fn(*xs, out)
    return dict(zip(floats, xs)), out


def assert_every_pair(xs: dict[str, np.ndarray], out: np.ndarray, target: str) -> None:
    """Each pair's outputs equal the numpy reference bit for bit."""
    for k, (f, t) in enumerate(PAIRS[target]):
        got, want = out[k * N:(k + 1) * N].view(np.uint64), reference(xs[f], t).astype(np.int64).view(np.uint64)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"{f} -> {t}: " + ", ".join(
            f"{float(xs[f][j])!r} gave {got[j]}, expected {want[j]}" for j in bad[:5])


def test_every_float_converts_to_every_integer_type_on_the_cpu_as_the_rule_says() -> None:
    assert_every_pair(*run(cpu_module.build(), "cpu"), "cpu")


def test_every_float_converts_to_every_integer_type_on_the_emulator_as_the_rule_says() -> None:
    assert_every_pair(*run(cuda_module.build(), "cuda"), "cuda")


def test_the_interpreter_converts_as_the_targets_do() -> None:
    ir = cpu_module.ir_module()
    assert_every_pair(*run(lambda *args: run_function(ir, "convert_all", *args), "cpu"), "cpu")


@pytest.mark.parametrize("f", CUDA_FLOATS)
def test_a_constant_conversion_folds_to_what_the_targets_compute(f: str) -> None:
    """`simplify` folds a cast of a constant of every float type (bf16 included), and the frontend's conversion of a
    literal (`i8(300.0)`) gives the same value."""
    x = inputs((f,))[0]
    for t in INT_TYPES:
        dtype = _int_dtype(t)
        folded = []
        for v in x:
            constant = E.Constant(float(v), DTYPES[f])
            e = simplify(E.Cast(constant, dtype))
            assert isinstance(e, E.Constant) and e.type == dtype, e
            assert convert_to(constant, dtype).value == e.value
            folded.append(e.value)
        np.testing.assert_array_equal(np.array(folded, numpy_int(t)), reference(x, t), err_msg=f"{f} -> {t}")


def test_the_emitters_call_the_helper_unless_the_value_is_known_to_fit() -> None:
    """A constant in range, or an integer of a narrower range converted to a float on the way, converts with a
    plain cast; the conversion of i32's greatest value, rounded to f32 (2**31), does not fit in i32."""
    assert known_to_fit(E.Constant(127.9, float32), int8)
    assert not known_to_fit(E.Constant(128.0, float32), int8)
    assert not known_to_fit(E.Constant(math.nan, float64), uint8)
    u8_var = E.Var("v", uint8)
    assert known_to_fit(E.Cast(u8_var, float32), int32)
    assert known_to_fit(E.Cast(u8_var, float16), uint16)
    assert not known_to_fit(E.Cast(E.Var("w", int32), float32), int32)
    assert not known_to_fit(E.Var("x", float32), int32)
    source = cpu_module.build().source()
    assert "hl_cvt_f16_i8(" in source and "hl_cvt_f64_u64(" in source


with hidet.script_module() as loops_module:

    @hidet.script
    def loops(x: f32[1024], y: f64[1024], a: i32[1024], b: i8[1024], c: u16[1024], d: i32[1024]):
        attrs.func_kind = "public"
        attrs.no_alias = True
        for i in range(1024):
            a[i] = i32(x[i])
        for i in range(1024):
            b[i] = i8(x[i])
        for i in range(1024):
            c[i] = u16(x[i])
        for i in range(1024):
            d[i] = i32(y[i])


def test_a_loop_of_conversions_vectorizes_as_a_loop_of_c_casts_would() -> None:
    """The CPU's helpers are straight-line code: the C compiler vectorizes a loop of float -> i32, i8, u16 and
    f64 -> i32 conversions (its vectorization report, with the workarounds' flags: loop if-conversion is off on GCC
    12 and 13)."""
    report = loops_module.build().report()
    assert len(report) == 4
    for loop in report:
        assert loop.vectorized, (loop.source, loop.reason)


with hidet.script_module() as checked_cpu:

    @hidet.script
    def narrow(x: f32[4], o: u8[4]):
        attrs.func_kind = "public"
        for i in range(4):
            o[i] = u8(x[i])  # CONVERSION: cpu


with hidet.script_module() as checked_cuda:

    @hidet.script
    def narrow(x: f32[4], o: i32[4]):  # noqa: F811
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = 1
        attrs.cuda.block_dim = 4
        o[threadIdx.x] = i32(x[threadIdx.x])  # CONVERSION: cuda


def dsl_line(tag: str) -> int:
    """The line of this file carrying the comment `# CONVERSION: <tag>`."""
    lines, _ = inspect.getsourcelines(sys.modules[__name__])
    return next(n for n, text in enumerate(lines, start=1) if text.rstrip().endswith(f"# CONVERSION: {tag}"))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_checking_mode_warns_of_a_conversion_out_of_range_at_its_line(target: str) -> None:
    """The first conversion out of range is reported with its DSL line, value and types, and how many more the call
    made; in range there is no warning; `simplefilter("error")` turns the warning into an exception."""
    built = (checked_cpu if target == "cpu" else checked_cuda).build(check=True)
    out_type, int_type = (np.uint8, "u8") if target == "cpu" else (np.int32, "i32")
    out = np.zeros(4, out_type)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built(np.array([1.5, 2.0, 3.0, 4.0], np.float32), out)
    assert not caught
    values = np.array([3e9, math.nan, -1.0, 7.9], np.float32)
    with pytest.warns(ConversionWarning) as caught:
        built(values, out)
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    where = f"{__file__}:{dsl_line(target)}: "
    if target == "cpu":  # the loop's first element
        assert message == (where + "3e+09 (f32) is outside the range of u8: the conversion saturates "
                           "(and 2 more conversions out of range in this call)"), message
    else:  # which thread is first is the emulator's choice
        assert message.startswith("CUDA emulator: kernel 'narrow', block (0, 0, 0): thread "), message
        assert where in message and message.endswith("(and 1 more conversions out of range in this call)"), message
    np.testing.assert_array_equal(out, reference(values, int_type))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        with pytest.raises(ConversionWarning, match="NaN|outside the range"):
            built(np.array([math.nan, 0.0, 0.0, 0.0], np.float32), out)


def test_the_cuda_source_of_every_conversion_compiles_for_sm_80() -> None:
    """NVRTC compiles the GPU's bodies of the helpers (cvt.rzi, clamped for 8- and 16-bit results)."""
    from codegen.toolchain.headers import INCLUDE_DIR
    from codegen.toolchain.nvrtc import compile_ptx

    source = cuda_module.build().source("cuda")
    ptx = compile_ptx(source, "sm_80", include_dirs=[str(INCLUDE_DIR)])
    for instruction in ("cvt.rzi.s32.f32", "cvt.rzi.u32.f32", "cvt.rzi.s64.f64", "cvt.rzi.u64.f64"):
        assert instruction in ptx, instruction
