"""DSL programs that call other script functions and use host values from globals and closures.

Runtime-sized parameters use string annotations (see test_programs_control_flow.py for why).
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, spatial
from hidet_lang.testing import arrays, check_kernel, example_count

SETTINGS = settings(max_examples=example_count(30), deadline=None)


# A script function defined outside any `with script_module()` block: modules that call it import it.
@hidet.script
def smooth_step(x: f32, lo: f32, hi: f32) -> f32:
    t = (x - lo) / (hi - lo)
    if t < 0.0:
        return 0.0
    if t > 1.0:
        return 1.0
    return t * t * (3.0 - 2.0 * t)


@hidet.script
def sign(x: f32):  # no annotation: `return 1` and `return x` make the return type f32, as `1 + x` would
    if x > 0.0:
        return 1
    if x < 0.0:
        return -1
    return x


def smooth_step_ref(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    t = (x - np.float32(lo)) / np.float32(hi - lo)
    return np.where(t < 0, 0, np.where(t > 1, 1, t * t * (np.float32(3) - np.float32(2) * t))).astype(np.float32)


with hidet.script_module() as call_module:

    @hidet.script
    def clamp_count(x: i32, lo: i32, hi: i32) -> i32:  # a cpu_internal function defined inside the block
        attrs.func_kind = "cpu_internal"
        return min(max(x, lo), hi)

    @hidet.script
    def apply(n: i32, a: "f32[n]", out: "f32[n, 3]"):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            out[i, 0] = smooth_step(a[i], -1.0, hi=2.0)  # a keyword argument
            out[i, 1] = sign(x=a[i]) * f32(clamp_count(hi=3, x=i, lo=1))  # keywords in any order
            out[i, 2] = smooth_step(hi=4.0, lo=0.0, x=a[i])


def apply_ref(n: int, a: np.ndarray, out: np.ndarray) -> None:
    out[:, 0] = smooth_step_ref(a, -1.0, 2.0)
    out[:, 1] = np.sign(a) * np.clip(np.arange(n), 1, 3).astype(np.float32)
    out[:, 2] = smooth_step_ref(a, 0.0, 4.0)


@SETTINGS
@given(arrays("float32", st.integers(1, 31), elements=st.sampled_from([0.0, 0.5, -0.5]) | st.floats(-3, 5, width=32)))
def test_calls_with_return_values_and_keyword_arguments(a: np.ndarray) -> None:
    check_kernel(call_module.build(), apply_ref, len(a), a, np.zeros((len(a), 3), np.float32))


def test_functions_defined_outside_the_block_join_the_module() -> None:
    names = [f.name for f in call_module.functions]
    assert names.index("smooth_step") < names.index("apply") and "sign" in names and "clamp_count" in names
    assert call_module.build().ir.lookup("sign").ret_type == f32


with hidet.script_module() as second_module:

    @hidet.script
    def reuse(n: i32, a: "f32[n]"):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            a[i] = smooth_step(a[i], 0.0, 1.0)


@SETTINGS
@given(arrays("float32", st.integers(1, 20)))
def test_a_script_function_serves_several_modules(a: np.ndarray) -> None:
    def ref(n: int, a: np.ndarray) -> None:
        a[:] = smooth_step_ref(a, 0.0, 1.0)

    check_kernel(second_module.build(), ref, len(a), a)


# ------------------------------------------------------------------------------------------------ host values
ROWS, COLS = 3, 5
OFFSET = 0.25
SHAPE = (ROWS, COLS)
LAYOUT = spatial(ROWS, COLS)


def idx(i, j):
    """A helper that computes with IR values while the kernel is parsed."""
    return i * COLS + j


def make_kernel(scale: float, bias: int) -> hidet.ScriptModule:
    """A kernel specialised to closure values (a float, an int, a helper closure)."""

    def shifted(v):
        return v + bias

    with hidet.script_module() as module:

        @hidet.script
        def fill(out: f32[ROWS * COLS], grid_: i32[SHAPE[0], SHAPE[1]]):
            attrs.func_kind = "public"
            for w in range(LAYOUT.num_workers):
                for i, j in LAYOUT.on(w):
                    out[idx(i, j)] = f32(shifted(w)) * scale + OFFSET
                    grid_[i, j] = idx(i, j) // 2

    return module


@settings(max_examples=example_count(10), deadline=None)
@given(st.sampled_from([(0.5, 1), (-2.0, 7)]))
def test_host_values_from_globals_and_closures(params: tuple[float, int]) -> None:
    scale, bias = params
    module = make_kernel(scale, bias)

    def ref(out: np.ndarray, grid_: np.ndarray) -> None:
        w = np.arange(ROWS * COLS)
        out[:] = (w + bias).astype(np.float32) * np.float32(scale) + np.float32(OFFSET)
        grid_[:] = (w // 2).reshape(SHAPE)

    check_kernel(module.build(), ref, np.zeros(ROWS * COLS, np.float32), np.zeros(SHAPE, np.int32))


def test_a_noinline_function_stays_out_of_line() -> None:
    """`attrs.noinline = True` keeps a CPU function a function of its own in the C (its registers its own), and
    computes the same; the IR printout says so."""
    with hidet.script_module() as module:
        @hidet.script
        def twice(x: f32) -> f32:
            attrs.noinline = True
            return x + x

        @hidet.script
        def apply(n: i32, a: f32[16], out: f32[16]):
            attrs.func_kind = "public"
            for i in range(n):
                out[i] = twice(a[i])

    assert "# cpu_internal, noinline" in str(module.ir_module())
    built = module.build()
    assert "HL_NOINLINE static float twice(" in built.source()
    a, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    built(16, a, out)
    np.testing.assert_array_equal(out, a + a)
