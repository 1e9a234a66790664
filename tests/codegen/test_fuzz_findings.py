"""Bugs the fuzzers found (hidet_lang.testing.programs, .frontend_fuzz), each as a minimal program: a regression
test once fixed; `xfail(strict=True)` while open (a fix makes the test pass and the mark must go).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, meta
from hidet_lang.errors import DSLError
from hidet_lang.testing import example_count
from hidet_lang.testing.interpret import run_function
from hidet_lang.testing.programs import load_module

_HEADER = "import hidet_lang as hidet\nfrom hidet_lang import attrs, f16, f64, i8, i32, i64, u8, u16\n" \
          "with hidet.script_module() as module:\n    @hidet.script\n"


def _cpu_and_interpreter(body: str, tmp_path: Path, *args: np.ndarray) -> tuple[list[int | float], list]:
    """Run a public kernel `k(x, o)` (`x`, `o` the last two of `args`) with `body` on the CPU and in the
    interpreter; return both outputs."""
    head = f"    def k(x: i64[2], o: f64[{args[-1].size}]):\n        attrs.func_kind = 'public'\n"
    module = load_module(_HEADER + head + "".join(f"        {line}\n" for line in body.splitlines()), str(tmp_path))
    results = []
    for run in (module.build(), lambda *a: run_function(module.ir_module(), "k", *a)):
        copies = [a.copy() for a in args]
        run(*copies)
        results.append(copies[-1].tolist())
    return results[0], results[1]


def test_mixed_signedness_small_operands(tmp_path: Path) -> None:
    x = np.array([-1, 2], np.int64)
    cpu, reference = _cpu_and_interpreter(
        "o[0] = f64(u8(1) | i8(x[0]))\no[1] = f64(u8(200) < i8(x[0]))\no[2] = f64(u16(x[1]) // i8(-2))",
        tmp_path, x, np.zeros(3))
    assert cpu == reference == [255, 1, 0]  # C's integer promotion gave [-1, 0, 65535]


def test_signed_overflow_wraps(tmp_path: Path) -> None:
    x = np.array([2 ** 31 - 1, 0], np.int64)
    cpu, reference = _cpu_and_interpreter("v: i32 = i32(x[0])\no[0] = f64(v + 1 > v)\no[1] = f64(v + 1)", tmp_path,
                                          x, np.zeros(2))
    assert cpu == reference == [0, -2147483648]  # without -fwrapv, C folds `v + 1 > v` to true


def test_float_multiply_add_rounds_twice(tmp_path: Path) -> None:
    a = np.array([1 + 2.0 ** -30, 1 - 2.0 ** -30])
    source = (_HEADER + "    def k(a: f64[2], o: f64[2]):\n        attrs.func_kind = 'public'\n"
              "        o[0] = a[0] * a[1] - f64(1.0)\n")
    module = load_module(source, str(tmp_path))
    cpu, reference = np.zeros(2), np.zeros(2)
    module.build()(a, cpu)
    run_function(module.ir_module(), "k", a, reference)
    assert cpu[0] == reference[0] == 0.0  # the product rounds to 1.0; a fused multiply-add gives -2**-60


def test_half_with_integer_operand_in_cuda(tmp_path: Path) -> None:
    source = (_HEADER + "    def k(x: f64[2], o: f64[2]):\n        attrs.func_kind = 'cuda_kernel'\n"
              "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n"
              "        o[0] = f64(f16(x[0]) + u8(1))\n        o[1] = f64(f16(x[0]) <= i32(3))\n")
    module = load_module(source, str(tmp_path))
    out = np.zeros(2)
    module.build()(np.array([2.0, 0.0]), out)  # the emulator build fails: ambiguous overload for 'operator+'
    assert out.tolist() == [3.0, 1.0]


@pytest.mark.parametrize("kind", ["public", "cuda_kernel"])
def test_float_constants_past_single_precision_are_infinite(kind: str, tmp_path: Path) -> None:
    """An f32 or f16 constant beyond f32's range is infinite, as the interpreter and numpy have it: its C literal
    is `INFINITY`, not `1e+300f` (which NVRTC rejects: 'floating constant is out of range'); one that rounds to
    f32's largest value stays finite."""
    launch = "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n" if kind == "cuda_kernel" else ""
    body = ["o[0] = f64(f32(x[0]) * f32(1e300))", "o[1] = f64(f16(x[0]) * f16(-1e300))",
            "o[2] = f64(f32(x[0]) * f32(3.4028235e38))", "o[3] = f64(f32(x[1]) * f32(1e300))"]
    head = f"    def k(x: f64[2], o: f64[4]):\n        attrs.func_kind = '{kind}'\n"
    source = _HEADER.replace("f16,", "f16, f32,") + head + launch + "".join(f"        {line}\n" for line in body)
    module = load_module(source, str(tmp_path))
    x = np.array([1.0, 0.0])
    compiled, interpreted = np.zeros(4), np.zeros(4)
    module.build()(x, compiled)
    run_function(module.ir_module(), "k", x, interpreted)
    expected = [np.inf, -np.inf, float(np.finfo(np.float32).max), np.nan]
    np.testing.assert_array_equal(compiled, expected)
    np.testing.assert_array_equal(interpreted, expected)


def test_oversized_register_tensor_is_a_dsl_error(tmp_path: Path) -> None:
    source = (_HEADER.replace("attrs,", "attrs, register_tensor,") + "    def k(o: f64[1]):\n"
              "        attrs.func_kind = 'public'\n        a = register_tensor(f64, [10 ** 30])\n"
              "        a[0] = f64(1.0)\n        o[0] = a[0]\n")
    with pytest.raises(DSLError):
        load_module(source, str(tmp_path)).build()


@pytest.mark.parametrize("kind, limit", [("public", 4 * 1024 * 1024), ("cuda_kernel", 512 * 1024)])
def test_local_arrays_up_to_the_limit_build(kind: str, limit: int, tmp_path: Path) -> None:
    """The CPU's stack limit and CUDA's local memory per thread: the largest array builds, one element more not."""
    launch = "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n" if kind == "cuda_kernel" else ""

    def source(elements: int) -> str:
        return (_HEADER.replace("attrs,", "attrs, register_tensor,") + "    def k(o: f64[1]):\n"
                f"        attrs.func_kind = '{kind}'\n{launch}        a = register_tensor(u8, [{elements}])\n"
                "        a[0] = u8(1)\n        o[0] = f64(a[0])\n")

    with pytest.raises(DSLError, match=f"takes {limit + 1} bytes") as caught:
        load_module(source(limit + 1), str(tmp_path)).build()
    lines = source(limit + 1).splitlines()
    assert caught.value.span is not None and "register_tensor" in lines[caught.value.span.line - 1]
    out = np.zeros(1)
    load_module(source(limit), str(tmp_path)).build()(out)
    assert out[0] == 1.0


SIGNED_ZERO_LINES = (
    "o[0] = f64(f32(0.0) - f32(x[0]))",
    "o[1] = f64(0.0) + (-f64(x[1]))",
    "o[2] = f64(0.0) - f64(x[0])",
    "o[3] = f64(f32(0.0) - f32(i64(x[1]) % i64(5)))",
    "o[4] = (-f64(x[0])) + f64(0.0)",
    "o[5] = f64(0.0) - abs(f64(x[1]))",
)


def _signed_zero_kernel(kind: str) -> str:
    """The kernel `k(x: i64[2], o: f64[6])` of `SIGNED_ZERO_LINES`, a public CPU function or a CUDA kernel."""
    launch = "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n" if kind == "cuda_kernel" else ""
    body = "".join(f"        {line}\n" for line in SIGNED_ZERO_LINES)
    return (_HEADER.replace("attrs,", "attrs, f32,") + f"    def k(x: i64[2], o: f64[{len(SIGNED_ZERO_LINES)}]):\n"
            f"        attrs.func_kind = '{kind}'\n{launch}{body}")


def _signed_zero_reference(x: np.ndarray) -> np.ndarray:
    """`SIGNED_ZERO_LINES` computed by numpy's IEEE arithmetic (`np.fmod` is C's `%` on integers)."""
    f32_zero, a, b = np.float32(0.0), np.float64(x[0]), np.float64(x[1])
    return np.array([np.float64(f32_zero - np.float32(x[0])), 0.0 + (-b), 0.0 - a,
                     np.float64(f32_zero - np.float32(np.fmod(x[1], 5))), (-a) + 0.0, 0.0 - abs(b)])


@pytest.mark.parametrize("kind", ["public", "cuda_kernel"])
def test_zero_minus_a_value_that_is_zero_is_positive_zero(kind: str, tmp_path: Path) -> None:
    """`0.0 - x` and `0.0 + (-x)` are `-x` in IEEE arithmetic except for x = +0.0, where they give +0.0. GCC (12 and
    13) folded them into `-x` where it could tell that x is not -0.0 (an integer converted to a float, an absolute
    value), even at -O0; the C emitter keeps such operands from its front end (`CEmitter.kept_operand`). Checked
    bit for bit (the sign of zero) on the CPU or the emulator, the interpreter and numpy."""
    module = load_module(_signed_zero_kernel(kind), str(tmp_path))
    built = module.build()
    for values in ([0, 0], [0, 5], [3, -7], [-(2**31), 10], [2**53 + 1, -5]):
        x = np.array(values, np.int64)
        compiled, interpreted = np.full(len(SIGNED_ZERO_LINES), 7.0), np.full(len(SIGNED_ZERO_LINES), 7.0)
        built(x.copy(), compiled)
        run_function(module.ir_module(), "k", x.copy(), interpreted)
        expected = _signed_zero_reference(x)
        assert compiled.view(np.int64).tolist() == expected.view(np.int64).tolist(), (values, compiled, expected)
        assert interpreted.view(np.int64).tolist() == expected.view(np.int64).tolist(), (values, interpreted)


def test_conditional_with_a_tensor_branch_is_a_dsl_error(tmp_path: Path) -> None:
    source = (_HEADER.replace("attrs,", "attrs, register_tensor,") + "    def k(x: f64[1], o: f64[1]):\n"
              "        attrs.func_kind = 'public'\n        a = register_tensor(i8, [2])\n        a[0] = i8(1)\n"
              "        o[0] = f64((i8(1) if x[0] > f64(0.0) else a) ^ i8(1))\n")
    with pytest.raises(DSLError):
        load_module(source, str(tmp_path)).build()


def test_min_helper_in_host_and_device_code(tmp_path: Path) -> None:
    source = (_HEADER + "    def helper(a: f16) -> f16:\n        return min(a, f16(1.0))\n\n"
              "    @hidet.script\n    def k(x: f64[1], o: f64[1]):\n        attrs.func_kind = 'cuda_kernel'\n"
              "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n"
              "        o[0] = f64(min(f16(x[0]), f16(2.0)))\n")
    out = np.zeros(1)
    load_module(source, str(tmp_path)).build()(np.array([3.0]), out)
    assert out[0] == 2.0


def test_infinite_block_dim_is_a_dsl_error(tmp_path: Path) -> None:
    source = (_HEADER + "    def k(o: f64[1]):\n        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1e309\n"
              "        o[0] = f64(1.0)\n")
    with pytest.raises(DSLError):
        load_module(source, str(tmp_path)).build()


def test_calling_a_list_is_a_dsl_error(tmp_path: Path) -> None:
    source = _HEADER + "    def k(o: f64[1]):\n        attrs.func_kind = 'public'\n        o[0] = [1](f64(2.0))\n"
    with pytest.raises(DSLError):
        load_module(source, str(tmp_path))


def test_adjacent_f32_roundings_survive_vectorization(tmp_path: Path) -> None:
    """GCC 12's SLP vectorizer dropped the f32 rounding of `f64(f32(x))` in pairs (compiler.workaround_flags)."""
    x = np.array([-48.021929841293776, 7.850189831105169])
    source = (_HEADER.replace("attrs,", "attrs, f32, register_tensor,") + "    def k(x: f64[2], o: f64[2]):\n"
              "        attrs.func_kind = 'public'\n        a = register_tensor(f32, [3])\n"
              "        for i in range(3):\n            a[i] = f32(x[1])\n        v: f32 = f32(x[0])\n"
              "        o[0] = f64(v)\n        o[1] = f64(a[2])\n")
    out = np.zeros(2)
    load_module(source, str(tmp_path)).build()(x, out)
    assert out.tolist() == x.astype(np.float32).astype(np.float64).tolist()


@pytest.mark.parametrize("group", [2, 3, 5])
@settings(max_examples=example_count(6), deadline=None)
@given(rows=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_conditional_loads_in_groups_of_any_size(group: int, rows: int, seed: int) -> None:
    """GCC 12 (12.2) and 13 (13.3) vectorize a loop whose body selects between loads at `group` consecutive
    addresses with one mask for the whole group when `group` is not a power of two, so most selects took the wrong
    operand; first seen as `torch.where(a > b, a, b)` on a [3, 2, 3] tensor, whose inner loop of 3 GCC had
    unrolled. Their loop if-conversion is turned off (compiler.workaround_flags)."""
    with hidet.script_module() as module:

        @hidet.script
        def select(n: i32, c0: f32[n, group], c1: f32[n, group], x1: f32[n, group],  # noqa: F821
                   x2: f32[n, group], out: f32[n, group]):  # noqa: F821
            attrs.func_kind = "public"
            for i in range(n):
                for k in meta.range(group):
                    out[i, k] = x1[i, k] if c0[i, k] > c1[i, k] else x2[i, k]

    c0, c1, x1, x2 = np.random.default_rng(seed).standard_normal((4, rows, group)).astype(np.float32)
    out = np.zeros_like(c0)
    module.build()(rows, c0, c1, x1, x2, out)
    np.testing.assert_array_equal(out, np.where(c0 > c1, x1, x2))


def test_half_modulo_inside_an_expression_in_cuda(tmp_path: Path) -> None:
    """The f16 `%` is computed in float: its result is rounded back to f16 before the enclosing operator (the
    emulator's `__half` has no `float + __half`)."""
    source = (_HEADER + "    def k(x: f64[2], o: f64[2]):\n        attrs.func_kind = 'cuda_kernel'\n"
              "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n"
              "        o[0] = f64((f16(x[0]) % f16(3.0)) + f16(0.25))\n"
              "        o[1] = f64(x[1] if (f16(x[1]) % u16(4)) > f16(1.0) else -x[1])\n")
    out = np.zeros(2)
    load_module(source, str(tmp_path)).build()(np.array([-6.5, 7.0]), out)
    assert out.tolist() == [2.75, 7.0]


@pytest.mark.parametrize("jump", ["break", "continue"])
def test_leaving_a_task_mapping_loop_is_a_dsl_error(jump: str, tmp_path: Path) -> None:
    """A mapping loop of one task has no loop left after lowering (the `break` reached the C compiler); of several
    dimensions, a `break` would leave only the innermost of the loops it becomes."""
    source = (_HEADER.replace("attrs,", "attrs, spatial,") + "    def k(o: f64[4]):\n"
              "        attrs.func_kind = 'public'\n        for w in range(2):\n"
              "            for i, j in spatial(1, 2).on(w):\n                o[w] = f64(1.0)\n"
              f"                {jump}\n")
    with pytest.raises(DSLError, match="cannot leave a task-mapping loop") as caught:
        load_module(source, str(tmp_path)).build()
    assert caught.value.span is not None and caught.value.span.line == 10


@pytest.mark.parametrize("kind", ["public", "cuda_kernel"])
def test_an_integer_beyond_the_range_of_f16_converts_to_infinity(kind: str, tmp_path: Path) -> None:
    """`f16(u32(x))` is inf above 65519, and inf * 0.0 is NaN: GCC 13 (13.3 seen) took an unsigned integer converted
    to `_Float16` for finite at -O2 and folded the product to 0.0 (the C emitter converts through float,
    `CEmitter.converted`)."""
    launch = "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n" if kind == "cuda_kernel" else ""
    source = (_HEADER.replace("u8,", "u8, u32,") + "    def k(x: i64[2], o: f64[3]):\n"
              f"        attrs.func_kind = '{kind}'\n{launch}        o[0] = f64(f16(u32(x[0])) * f16(0.0))\n"
              "        o[1] = f64(f16(u16(x[1])) * f16(0.0))\n        o[2] = f64(f16(u32(x[1])) - f16(x[1]))\n")
    module = load_module(source, str(tmp_path))
    for values in ([2**32 - 1, 65535], [65504, 65519], [7, 0]):
        x = np.array(values, np.int64)
        with np.errstate(over="ignore", invalid="ignore"):
            big, small = np.float16(np.uint32(x[0])), np.float16(np.uint16(x[1]))
            expected = np.array([big * np.float16(0.0), small * np.float16(0.0),
                                 np.float16(np.uint32(x[1])) - np.float16(x[1])], np.float64)
        for run in (module.build(), lambda *a: run_function(module.ir_module(), "k", *a)):
            out = np.zeros(3)
            run(x.copy(), out)
            np.testing.assert_array_equal(out, expected)
