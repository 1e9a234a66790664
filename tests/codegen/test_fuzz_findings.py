"""Bugs the fuzzers found (hidet_lang.testing.programs, .frontend_fuzz), each as a minimal program that is expected
to fail until the bug is fixed (`xfail(strict=True)`: a fix makes the test pass and the mark must go).

The fuzz tests avoid exactly these cases (see the generator's and the frontend fuzzer's docstrings).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hidet_lang.errors import DSLError
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


@pytest.mark.xfail(strict=True, reason="C computes `u8 | i8`, `u8 < i8` and `u16 // i8(-2)` in int (integer "
                   "promotion); the DSL converts both operands to the unsigned type: the C emitter does not convert a "
                   "signed operand of a u8/u16 operation (division only by a constant: other divisors go through "
                   "hl_div_<t>, which converts)")
def test_mixed_signedness_small_operands(tmp_path: Path) -> None:
    x = np.array([-1, 2], np.int64)
    cpu, reference = _cpu_and_interpreter(
        "o[0] = f64(u8(1) | i8(x[0]))\no[1] = f64(u8(200) < i8(x[0]))\no[2] = f64(u16(x[1]) // i8(-2))",
        tmp_path, x, np.zeros(3))
    assert cpu == reference  # reference: [255, 1, 0]; the CPU gives [-1, 0, 65535]


@pytest.mark.xfail(strict=True, reason="signed i32/i64 overflow is undefined in C and the C code is compiled "
                   "without -fwrapv: `v + 1 > v` is folded to true although the DSL says the addition wraps")
def test_signed_overflow_wraps(tmp_path: Path) -> None:
    x = np.array([2 ** 31 - 1, 0], np.int64)
    cpu, reference = _cpu_and_interpreter("v: i32 = i32(x[0])\no[0] = f64(v + 1 > v)\no[1] = f64(v + 1)", tmp_path,
                                          x, np.zeros(2))
    assert cpu == reference  # reference: [0, -2147483648]; the CPU gives [1, -2147483648]


def _has_fma() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and " fma " in cpuinfo.read_text()


@pytest.mark.skipif(not _has_fma(), reason="-march=native contracts into FMA only where the CPU has it")
@pytest.mark.xfail(strict=True, reason="the C code is compiled with -O3 -march=native and GCC's default "
                   "-ffp-contract=fast: `a * b + c` becomes a fused multiply-add (one rounding, not two)")
def test_float_multiply_add_rounds_twice(tmp_path: Path) -> None:
    a = np.array([1 + 2.0 ** -30, 1 - 2.0 ** -30])
    source = (_HEADER + "    def k(a: f64[2], o: f64[2]):\n        attrs.func_kind = 'public'\n"
              "        o[0] = a[0] * a[1] - f64(1.0)\n")
    module = load_module(source, str(tmp_path))
    cpu, reference = np.zeros(2), np.zeros(2)
    module.build()(a, cpu)
    run_function(module.ir_module(), "k", a, reference)
    assert cpu[0] == reference[0]  # reference: 0.0 (the product rounds to 1.0); the CPU gives -2**-60


@pytest.mark.xfail(strict=True, reason="CUDA code: an operator on f16 and an integer type (`f16 + u8`, `f16 <= i32`)"
                   " is emitted without a conversion, and the emulator's `__half` has ambiguous overloads for it")
def test_half_with_integer_operand_in_cuda(tmp_path: Path) -> None:
    source = (_HEADER + "    def k(x: f64[2], o: f64[2]):\n        attrs.func_kind = 'cuda_kernel'\n"
              "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n"
              "        o[0] = f64(f16(x[0]) + u8(1))\n        o[1] = f64(f16(x[0]) <= i32(3))\n")
    module = load_module(source, str(tmp_path))
    out = np.zeros(2)
    module.build()(np.array([2.0, 0.0]), out)  # the emulator build fails: ambiguous overload for 'operator+'
    assert out.tolist() == [3.0, 1.0]


@pytest.mark.xfail(strict=True, reason="the size of a register_tensor is not checked: an extent past what C allows "
                   "(10**30 elements) reaches the C compiler ('size of array exceeds maximum object size')")
def test_oversized_register_tensor_is_a_dsl_error(tmp_path: Path) -> None:
    source = (_HEADER.replace("attrs,", "attrs, register_tensor,") + "    def k(o: f64[1]):\n"
              "        attrs.func_kind = 'public'\n        a = register_tensor(f64, [10 ** 30])\n"
              "        a[0] = f64(1.0)\n        o[0] = a[0]\n")
    with pytest.raises(DSLError):
        load_module(source, str(tmp_path)).build()


@pytest.mark.xfail(strict=True, reason="simplify rewrites the float `0.0 + x` into `x`, which is wrong for x = -0.0 "
                   "(0.0 + -0.0 is +0.0 in IEEE arithmetic)")
def test_float_zero_plus_negative_zero(tmp_path: Path) -> None:
    x = np.array([0, 0], np.int64)
    cpu, reference = _cpu_and_interpreter("o[0] = f64(0.0) + (-f64(x[0]))", tmp_path, x, np.zeros(1))
    assert np.copysign(1.0, cpu[0]) == np.copysign(1.0, reference[0])  # reference +0.0; the CPU gives -0.0


@pytest.mark.xfail(strict=True, reason="`c if cond else tensor` is accepted by the frontend (no type check of the "
                   "branches) and reaches the C compiler: 'invalid operands to binary ^ (have int8_t *)'")
def test_conditional_with_a_tensor_branch_is_a_dsl_error(tmp_path: Path) -> None:
    source = (_HEADER.replace("attrs,", "attrs, register_tensor,") + "    def k(x: f64[1], o: f64[1]):\n"
              "        attrs.func_kind = 'public'\n        a = register_tensor(i8, [2])\n        a[0] = i8(1)\n"
              "        o[0] = f64((i8(1) if x[0] > f64(0.0) else a) ^ i8(1))\n")
    with pytest.raises(DSLError):
        load_module(source, str(tmp_path)).build()


@pytest.mark.xfail(strict=True, reason="a CUDA module with a function of no kind that nothing calls (so a CPU "
                   "function) and a kernel, both using min on f16: the emulator's translation unit defines the "
                   "helper hl_min_f16 twice ('redefinition of hl_min_f16')")
def test_min_helper_in_host_and_device_code(tmp_path: Path) -> None:
    source = (_HEADER + "    def helper(a: f16) -> f16:\n        return min(a, f16(1.0))\n\n"
              "    @hidet.script\n    def k(x: f64[1], o: f64[1]):\n        attrs.func_kind = 'cuda_kernel'\n"
              "        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1\n"
              "        o[0] = f64(min(f16(x[0]), f16(2.0)))\n")
    out = np.zeros(1)
    load_module(source, str(tmp_path)).build()(np.array([3.0]), out)
    assert out[0] == 2.0


@pytest.mark.xfail(strict=True, reason="a float launch dimension (`attrs.cuda.block_dim = 1e309`, an infinity) is not "
                   "refused by the frontend; the pipeline's launch check raises OverflowError from int(inf)")
def test_infinite_block_dim_is_a_dsl_error(tmp_path: Path) -> None:
    source = (_HEADER + "    def k(o: f64[1]):\n        attrs.cuda.grid_dim = 1\n        attrs.cuda.block_dim = 1e309\n"
              "        o[0] = f64(1.0)\n")
    with pytest.raises(DSLError):
        load_module(source, str(tmp_path)).build()


@pytest.mark.xfail(strict=True, reason="calling a list inside a kernel (`[1](x)`) raises a bare TypeError "
                   "('unhashable type: list') from the frontend instead of a located DSL error")
def test_calling_a_list_is_a_dsl_error(tmp_path: Path) -> None:
    source = _HEADER + "    def k(o: f64[1]):\n        attrs.func_kind = 'public'\n        o[0] = [1](f64(2.0))\n"
    with pytest.raises(DSLError):
        load_module(source, str(tmp_path))


def _gcc_major() -> int | None:
    """The major version of `cc` when it is GCC, else None."""
    cc = shutil.which("cc")
    if cc is None:
        return None
    about = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    version = subprocess.run([cc, "-dumpversion"], capture_output=True, text=True).stdout.strip()
    if "Free Software Foundation" not in about or not version.split(".")[0].isdigit():
        return None
    return int(version.split(".")[0])


@pytest.mark.skipif(_gcc_major() != 12 or not _has_fma(), reason="seen with GCC 12.2 -O3 -march=native (x86-64)")
@pytest.mark.xfail(strict=True, reason="GCC 12.2 at -O3 -march=native drops the f32 rounding of `f64(f32(x))` when "
                   "the SLP vectorizer pairs two such stores (right with -fno-tree-slp-vectorize): the compiled "
                   "kernel returns x unrounded; a compiler bug the project's flags expose")
def test_adjacent_f32_roundings_survive_vectorization(tmp_path: Path) -> None:
    x = np.array([-48.021929841293776, 7.850189831105169])
    source = (_HEADER.replace("attrs,", "attrs, f32, register_tensor,") + "    def k(x: f64[2], o: f64[2]):\n"
              "        attrs.func_kind = 'public'\n        a = register_tensor(f32, [3])\n"
              "        for i in range(3):\n            a[i] = f32(x[1])\n        v: f32 = f32(x[0])\n"
              "        o[0] = f64(v)\n        o[1] = f64(a[2])\n")
    out = np.zeros(2)
    load_module(source, str(tmp_path)).build()(x, out)
    assert out.tolist() == x.astype(np.float32).astype(np.float64).tolist()
