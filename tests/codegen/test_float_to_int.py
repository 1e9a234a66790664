"""Float -> integer conversions are defined on every target: rounded toward zero, saturated to the integer type's
range, NaN to 0 (as the GPU's `cvt.rzi.sat`), bit for bit the same on the CPU, the CUDA emulator, the IR
interpreter and in constant folding, for every float type and every integer type. Checking mode reports a
conversion out of range as a `ConversionWarning` at its DSL line; the CUDA source of the conversions compiles with
NVRTC for sm_80 (no GPU needed).

One module per target computes every pair on the edge values, so the tests build three modules in all.
"""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from codegen.emit.float_to_int import known_to_fit
from hidet_lang.errors import ConversionWarning
from hidet_lang.frontend.semantics import convert_to
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import DataType, bfloat16, float16, float32, float64, int8, int32, uint8, uint16
from hidet_lang.passes.simplify import simplify
from hidet_lang.testing.interpret import run_function
from hidet_lang.testing.programs import load_module

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


def module_source(target: str) -> str:
    """A script module with one function converting the input of each float type to every integer type: the
    output `o_<int>` holds the conversions of float type k at `k * N + i`."""
    floats = CPU_FLOATS if target == "cpu" else CUDA_FLOATS
    params = [f"x_{f}: {f}[{N}]" for f in floats] + [f"o_{t}: {t}[{len(floats) * N}]" for t in INT_TYPES]
    lines = ["import hidet_lang as hidet", "from hidet_lang import attrs, bf16, f16, f32, f64",
             "from hidet_lang import i8, i16, i32, i64, u8, u16, u32, u64", "from hidet_lang.cuda import threadIdx",
             "", "with hidet.script_module() as module:", "    @hidet.script",
             f"    def convert_all({', '.join(params)}):"]
    if target == "cpu":
        lines += ["        attrs.func_kind = 'public'", f"        for i in range({N}):"]
    else:
        lines += ["        attrs.func_kind = 'cuda_kernel'", "        attrs.cuda.grid_dim = 1",
                  f"        attrs.cuda.block_dim = {N}", "        i = threadIdx.x", "        if True:"]
    lines += [f"            o_{t}[{k * N} + i] = {t}(x_{f}[i])" for t in INT_TYPES for k, f in enumerate(floats)]
    return "\n".join(lines) + "\n"


_MODULES: dict[str, object] = {}


def script_module(target: str) -> object:
    """The script module of `module_source(target)`, loaded once."""
    if target not in _MODULES:
        _MODULES[target] = load_module(module_source(target))
    return _MODULES[target]


def inputs(floats: tuple[str, ...]) -> list[np.ndarray]:
    """The edge values as an array of each float type (rounded to it: past f16's range they are infinite)."""
    with np.errstate(over="ignore"):
        return [np.array(VALUES, np.float64).astype(NUMPY_FLOATS[f]) for f in floats]


def run(fn: object, floats: tuple[str, ...]) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Call `fn` on the edge values; the inputs and the outputs by integer type."""
    xs = inputs(floats)
    outs = {t: np.zeros(len(floats) * N, numpy_int(t)) for t in INT_TYPES}
    fn(*xs, *outs.values())
    return xs, outs


def assert_every_pair(xs: list[np.ndarray], outs: dict[str, np.ndarray], floats: tuple[str, ...]) -> None:
    """Each pair's outputs equal the numpy reference bit for bit."""
    for t in INT_TYPES:
        for k, (f, x) in enumerate(zip(floats, xs)):
            got, want = outs[t][k * N:(k + 1) * N], reference(x, t)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, f"{f} -> {t}: " + ", ".join(
                f"{float(x[j])!r} gave {got[j]}, expected {want[j]}" for j in bad[:5])


def test_every_float_converts_to_every_integer_type_on_the_cpu_as_the_rule_says() -> None:
    xs, outs = run(script_module("cpu").build(), CPU_FLOATS)
    assert_every_pair(xs, outs, CPU_FLOATS)


def test_every_float_converts_to_every_integer_type_on_the_emulator_as_the_rule_says() -> None:
    xs, outs = run(script_module("cuda").build(), CUDA_FLOATS)
    assert_every_pair(xs, outs, CUDA_FLOATS)


def test_the_interpreter_converts_as_the_targets_do() -> None:
    ir = script_module("cpu").ir_module()
    xs, outs = run(lambda *args: run_function(ir, "convert_all", *args), CPU_FLOATS)
    assert_every_pair(xs, outs, CPU_FLOATS)


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


def _int_dtype(t: str) -> DataType:
    from hidet_lang.ir.types import dtype_from_name

    return dtype_from_name(("int" if t[0] == "i" else "uint") + t[1:])


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
    source = script_module("cpu").build().source()
    assert "hl_cvt_f16_i8(" in source and "hl_cvt_f64_u64(" in source


VECTOR_LOOPS = """\
import hidet_lang as hidet
from hidet_lang import attrs, f32, f64, i8, i32, u16

with hidet.script_module() as module:
    @hidet.script
    def loops(n: i32, x: "f32[n]", y: "f64[n]", a: "i32[n]", b: "i8[n]", c: "u16[n]", d: "i32[n]"):
        attrs.func_kind = 'public'
        attrs.no_alias = True
        for i in range(n):
            a[i] = i32(x[i])
        for i in range(n):
            b[i] = i8(x[i])
        for i in range(n):
            c[i] = u16(x[i])
        for i in range(n):
            d[i] = i32(y[i])
"""


def test_a_loop_of_conversions_vectorizes_as_a_loop_of_c_casts_would() -> None:
    """The CPU's helpers are straight-line code: the C compiler vectorizes a loop of float -> i32, i8, u16 and
    f64 -> i32 conversions (its vectorization report, with the workarounds' flags: loop if-conversion is off on GCC
    12 and 13)."""
    report = load_module(VECTOR_LOOPS).build().report()
    assert len(report) == 4
    for loop in report:
        assert loop.vectorized, (loop.source, loop.reason)


CHECKED = """\
import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, u8
from hidet_lang.cuda import threadIdx

with hidet.script_module() as cpu:
    @hidet.script
    def narrow(x: f32[4], o: u8[4]):
        attrs.func_kind = 'public'
        for i in range(4):
            o[i] = u8(x[i])

with hidet.script_module() as cuda:
    @hidet.script
    def narrow(x: f32[4], o: i32[4]):
        attrs.func_kind = 'cuda_kernel'
        attrs.cuda.grid_dim = 1
        attrs.cuda.block_dim = 4
        o[threadIdx.x] = i32(x[threadIdx.x])

module = (cpu, cuda)
"""


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_checking_mode_warns_of_a_conversion_out_of_range_at_its_line(target: str) -> None:
    """The first conversion out of range is reported with its DSL line, value and types, and how many more the call
    made; in range there is no warning; `simplefilter("error")` turns the warning into an exception."""
    cpu, cuda = load_module(CHECKED)
    built = (cpu if target == "cpu" else cuda).build(check=True)
    out_type, line = (np.uint8, 10) if target == "cpu" else (np.int32, 18)
    out = np.zeros(4, out_type)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built(np.array([1.5, 2.0, 3.0, 4.0], np.float32), out)
    assert not caught
    with pytest.warns(ConversionWarning) as caught:
        built(np.array([3e9, math.nan, -1.0, 7.9], np.float32), out)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert f".py:{line}:" in message and "more conversions out of range" in message, message
    if target == "cpu":  # the loop's first element
        assert message.endswith(":10: 3e+09 (f32) is outside the range of u8: the conversion saturates "
                                "(and 2 more conversions out of range in this call)"), message
    else:  # which thread is first is the emulator's choice
        assert message.startswith("CUDA emulator: kernel 'narrow', block (0, 0, 0): thread "), message
    np.testing.assert_array_equal(out, reference(np.array([3e9, math.nan, -1.0, 7.9], np.float32),
                                                 "u8" if target == "cpu" else "i32"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        with pytest.raises(ConversionWarning, match="NaN|outside the range"):
            built(np.array([math.nan, 0.0, 0.0, 0.0], np.float32), out)


def test_the_cuda_source_of_every_conversion_compiles_for_sm_80() -> None:
    """NVRTC compiles the GPU's bodies of the helpers (cvt.rzi, clamped for 8- and 16-bit results)."""
    from codegen.toolchain.headers import INCLUDE_DIR
    from codegen.toolchain.nvrtc import compile_ptx

    source = script_module("cuda").build().source("cuda")
    ptx = compile_ptx(source, "sm_80", include_dirs=[str(INCLUDE_DIR)])
    for instruction in ("cvt.rzi.s32.f32", "cvt.rzi.u32.f32", "cvt.rzi.s64.f64", "cvt.rzi.u64.f64"):
        assert instruction in ptx, instruction
