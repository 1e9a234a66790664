"""The rule-based CUDA schedule with 128-bit accesses (`stdlib_ops.schedule.cuda_vectors`): outputs whose innermost
extent is a multiple of a vector's lanes are computed a vector at a time (the others element by element), equal
numpy's results on random shapes, dtypes and broadcasts in the emulator's checking mode (which reports a
misaligned vector copy), fall back to element accesses for misaligned arguments, stay one kernel under fusion,
and compile to LDG.E.128 / STG.E.128."""

from __future__ import annotations

import dataclasses
import functools
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import stdlib_ops as ops
from codegen.build import build_module
from codegen.runtime.arrays import uses_gpu
from codegen.toolchain.sass import find_tool
from hidet_lang.ir.expr import Cast, Intrinsic
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.stmt import IfStmt
from hidet_lang.ir.types import float16
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.compute import compute, tensor_input
from stdlib_ops.fusion import Prologue, fuse
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.task import Task

CUOBJDUMP = find_tool("cuobjdump")
LANES = {"float32": 4, "float16": 8, "float64": 2}


@functools.cache
def broadcast_task(dtype: str, cols: int) -> Task:
    """out[r, c] = x[r, c] * 3 + row[c] - column[r, 0] + scalar[0]: a full input, a row vector read in vectors, a
    column and a scalar read once per vector."""
    x = tensor_input("x", dtype, ["rows", cols])
    row = tensor_input("row", dtype, [cols])
    column = tensor_input("column", dtype, ["rows", 1])
    scalar = tensor_input("scalar", dtype, [1])
    out = compute("out", ["rows", cols], lambda r, c: x[r, c] * 3 + row[c] - column[r, 0] + scalar[0])
    return Task(f"vector_broadcast_{dtype}_{cols}", (x, row, column, scalar), (out,))


@functools.cache
def built(dtype: str, cols: int) -> object:
    return build_module(auto_schedule(broadcast_task(dtype, cols), Target.of("cuda")), "cuda", check=True)


def vector_copies(module: IRModule) -> list[str]:
    """The vector copies the module's kernel makes."""
    return [i.name for i in collect(the_kernel(module).body, Intrinsic) if i.name.startswith("copy_vector_")]


def inputs(rng: np.random.Generator, dtype: str, rows: int, cols: int) -> tuple[np.ndarray, ...]:
    def draw(shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(-50, 50, shape).astype(dtype)  # small integers: every result exact in each dtype

    return draw((rows, cols)), draw((cols,)), draw((rows, 1)), draw((1,))


def expected(x: np.ndarray, row: np.ndarray, column: np.ndarray, scalar: np.ndarray) -> np.ndarray:
    return x * x.dtype.type(3) + row - column + scalar[0]


@settings(max_examples=example_count(10), deadline=None)
@given(dtype=st.sampled_from(sorted(LANES)), rows=st.integers(0, 9), odd=st.booleans(), seed=st.integers(0, 2**32 - 1))
@example(dtype="float32", rows=0, odd=False, seed=0)  # an empty output: no address of its elements
def test_broadcasts_equal_numpy_vectorized_or_not(dtype: str, rows: int, odd: bool, seed: int) -> None:
    cols = LANES[dtype] * 3 + (1 if odd else 0)  # rows of three vectors, or of one element more
    copies = vector_copies(auto_schedule(broadcast_task(dtype, cols), Target.of("cuda")))
    # x, the row vector and the output in vectors of 16 bytes, the column and the scalar read once per vector
    assert copies == ([] if odd else ["copy_vector_16"] * 3 * 2), copies  # two vectors a thread and round
    x, row, column, scalar = inputs(np.random.default_rng(seed), dtype, rows, cols)
    out = np.zeros((rows, cols), dtype)
    built(dtype, cols)(rows, x, row, column, scalar, out)
    np.testing.assert_array_equal(out, expected(x, row, column, scalar))


def misaligned(a: np.ndarray) -> np.ndarray:
    """A copy of `a` at an address one element past a 16-byte boundary (the emulator takes it without a copy)."""
    storage = np.empty(a.size + 16, a.dtype)
    start = next(k for k in range(16) if (storage.ctypes.data + k * a.itemsize) % 16 == a.itemsize % 16)
    view = storage[start:start + a.size].reshape(a.shape)
    view[...] = a
    assert view.ctypes.data % 16 != 0
    return view


@pytest.mark.parametrize("which", ["x", "row", "out"])
def test_a_misaligned_argument_takes_the_element_path(which: str) -> None:
    rows, cols = 5, 16
    x, row, column, scalar = inputs(np.random.default_rng(7), "float32", rows, cols)
    out = np.zeros((rows, cols), np.float32)
    args = {"x": x, "row": row, "out": out}
    args[which] = misaligned(args[which])
    built("float32", cols)(rows, args["x"], args["row"], column, scalar, args["out"])
    np.testing.assert_array_equal(args["out"], expected(x, row, column, scalar))


@pytest.mark.skipif(uses_gpu(), reason="a GPU call copies numpy arguments to aligned device memory; the emulator "
                    "takes them as they are")
def test_without_the_alignment_test_the_checking_mode_reports_the_misaligned_copy() -> None:
    """The test the kernel makes is what keeps a misaligned vector copy from happening (the GPU would fault)."""
    module = auto_schedule(broadcast_task("float32", 8), Target.of("cuda"))
    kernel = the_kernel(module)
    assert isinstance(kernel.body, IfStmt)
    unguarded = IRModule((dataclasses.replace(kernel, name="unguarded", body=kernel.body.then_body),))
    x, row, column, scalar = inputs(np.random.default_rng(3), "float32", 2, 8)
    with pytest.raises(Exception, match="vector copy .* must be 16-byte aligned"):
        build_module(unguarded, "cuda", check=True)(2, misaligned(x), row, column, scalar, np.zeros((2, 8), np.float32))


def test_mixed_widths_and_reads_that_are_not_contiguous() -> None:
    """f16 output from an f32 input (8 lanes: the f32 reads are 32 bytes, read element by element) and a flipped
    read (never a vector)."""
    x = tensor_input("x", "float32", [3, 16])
    y = tensor_input("y", "float16", [3, 16])
    out = compute("out", [3, 16], lambda r, c: Cast(x[r, 15 - c], float16) + y[r, c])
    module = auto_schedule(Task("mixed_widths", (x, y), (out,)), Target.of("cuda"))
    assert vector_copies(module) == ["copy_vector_16"] * 2 * 2  # y and the output
    rng = np.random.default_rng(0)
    xv, yv = rng.integers(-9, 9, (3, 16)).astype(np.float32), rng.integers(-9, 9, (3, 16)).astype(np.float16)
    result = np.zeros((3, 16), np.float16)
    build_module(module, "cuda", check=True)(xv, yv, result)
    np.testing.assert_array_equal(result, xv[:, ::-1].astype(np.float16) + yv)


@functools.cache
def fused_square() -> IRModule:
    """`x * x` with the prologue `x = a + b[j]`: the anchor's vector load of x becomes vector loads of a and b."""
    x = tensor_input("x", "float32", ["rows", 8])
    out = compute("out", ["rows", 8], lambda r, c: x[r, c] * x[r, c])
    anchor = auto_schedule(Task("square", (x,), (out,)), Target.of("cuda"))
    a = tensor_input("a", "float32", ["rows", 8])
    b = tensor_input("b", "float32", [8])
    return fuse(anchor, {"x": Prologue((a, b), lambda idx: a[idx] + b[idx[-1]])})


@pytest.mark.parametrize("shift", [False, True], ids=["aligned", "misaligned"])
def test_a_prologue_keeps_one_kernel_loading_its_inputs_as_vectors(shift: bool) -> None:
    # a and b loaded, the output stored, in vectors; two vectors a thread and round
    assert vector_copies(fused_square()) == ["copy_vector_16"] * 3 * 2
    rng = np.random.default_rng(1)
    av, bv = rng.integers(-9, 9, (6, 8)).astype(np.float32), rng.integers(-9, 9, 8).astype(np.float32)
    result = np.zeros((6, 8), np.float32)
    build_module(fused_square(), "cuda", check=True)(6, misaligned(av) if shift else av, bv, result)
    np.testing.assert_array_equal(result, (av + bv) ** 2)


def test_a_prologue_read_across_rows_is_read_element_by_element() -> None:
    """A prologue reading its input transposed (`x = a[j, i]`) loads nothing as vectors; the result is right."""
    x = tensor_input("x", "float32", [4, 8])
    out = compute("out", [4, 8], lambda r, c: x[r, c] + 1.0)
    anchor = auto_schedule(Task("plus_one", (x,), (out,)), Target.of("cuda"))
    a = tensor_input("a", "float32", [8, 4])
    fused = fuse(anchor, {"x": Prologue((a,), lambda idx: a[idx[1], idx[0]])})
    assert vector_copies(fused) == ["copy_vector_16"] * 2  # the output's stores only
    av = np.random.default_rng(2).integers(-9, 9, (8, 4)).astype(np.float32)
    result = np.zeros((4, 8), np.float32)
    build_module(fused, "cuda", check=True)(av, result)
    np.testing.assert_array_equal(result, av.T + np.float32(1))


def test_a_graph_chain_with_broadcasts_is_one_kernel_loading_in_vectors() -> None:
    """relu(x * column + row) from a graph: one kernel whose loads of x and of the row are vectors (the column read
    once per vector), equal to numpy."""
    xs, cs, rs = (ops.symbol(shape, dtype="float32") for shape in ([6, 16], [6, 1], [16]))
    graph = ops.optimize(ops.trace_from(ops.relu(xs * cs + rs), inputs=[xs, cs, rs]))
    compiled = graph.build(target="cuda")
    assert compiled.kernels == ["mul + add + relu*"]
    (module,) = compiled.ir_modules
    assert vector_copies(module) == ["copy_vector_16"] * 3 * 2  # x, the row, the output; two vectors a round
    rng = np.random.default_rng(4)
    x, c, r = (rng.integers(-9, 9, shape).astype(np.float32) for shape in ((6, 16), (6, 1), (16,)))
    np.testing.assert_array_equal(compiled(x, c, r).numpy(), np.maximum(x * c + r, 0))


def sass_opcodes(module: IRModule) -> list[str]:
    """The SASS instructions (with their modifiers) of `module` built for sm_90."""
    cubin = build_module(module, "cuda:sm_90").cubin
    path = Path(f"/tmp/hl_vectors_{id(cubin)}.cubin")
    path.write_bytes(cubin)
    try:
        sass = subprocess.run([CUOBJDUMP, "-sass", str(path)], check=True, capture_output=True, text=True).stdout
    finally:
        path.unlink()
    return re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)


def count(ops: list[str], prefix: str) -> int:
    return sum(op == prefix or op.startswith(prefix + ".") for op in ops)


@pytest.mark.machine_code
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump is not installed: the machine code cannot be read")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_machine_code_loads_and_stores_128_bits(dtype: str) -> None:
    ops = sass_opcodes(auto_schedule(broadcast_task(dtype, 64), Target.of("cuda:sm_90")))
    # x and the row, two vectors a thread; the output's two vectors; the registers never spill to local memory
    assert count(ops, "LDG.E.128") == 2 * 2 and count(ops, "STG.E.128") == 2, ops
    assert count(ops, "LDL") == 0 and count(ops, "STL") == 0


@pytest.mark.machine_code
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump is not installed: the machine code cannot be read")
def test_the_fused_machine_code_loads_the_prologue_inputs_128_bits_at_a_time() -> None:
    ops = sass_opcodes(fused_square())
    # a vector of a and one of b a vector stored (the compiler may unroll the loop over the rows' vectors)
    stores = count(ops, "STG.E.128")
    assert stores >= 2 and count(ops, "LDG.E.128") == 2 * stores, ops
    assert count(ops, "LDL") == 0 and count(ops, "STL") == 0
