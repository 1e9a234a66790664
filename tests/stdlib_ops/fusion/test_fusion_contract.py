"""The fusion contract: a kernel that uses a fused input or output other than by element accesses (or a cp_async
source) gets a FusionContractError naming the kernel and the offending line (marked `# VIOLATION` below); uses of
tensors that receive nothing are allowed; fusing nothing returns the anchor itself; the fused signature follows
the kernel contract."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest
from fusion_anchors import CPU_MATMUL, CUDA_MATMUL, ELEMENTWISE
from fusion_chains import tensor_param
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.build import build_module
from hidet_lang import as_tensor_pointer, attrs, f32, i32, tensor_pointer
from hidet_lang.cuda import cp_async, shared_tensor, threadIdx
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import TensorType, float32, int32
from hidet_lang.testing import example_count
from stdlib_ops.fusion import Epilogue, FusionContractError, Prologue, Store, fuse

with hidet.script_module() as helpers:

    @hidet.script
    def first(r: f32[8]) -> f32:
        attrs.func_kind = "cpu_internal"
        return r[0]


def violation_line(function: object) -> int:
    """The line marked `# VIOLATION` in the source of `function`."""
    lines, start = inspect.getsourcelines(function)
    return start + next(i for i, text in enumerate(lines) if "# VIOLATION" in text)


def passes_a_row(n: i32, x: f32[n, 8], y: f32[n]):  # noqa: F821
    attrs.func_kind = "public"
    for i in range(n):
        y[i] = first(x[i, :])  # VIOLATION


def views_the_input(n: i32, x: f32[n, 8], y: f32[n]):  # noqa: F821
    attrs.func_kind = "public"
    p = as_tensor_pointer(x, f32, [n * 8])  # VIOLATION
    for i in range(n):
        y[i] = p[i * 8]


def aliases_the_input(n: i32, x: f32[n, 8], y: f32[n]):  # noqa: F821
    attrs.func_kind = "public"
    p = tensor_pointer(f32, [n, 8], init=x)  # VIOLATION
    for i in range(n):
        y[i] = p[i, 0]


def stores_to_the_input(n: i32, x: f32[n, 8], y: f32[n]):  # noqa: F821
    attrs.func_kind = "public"
    for i in range(n):
        y[i] = x[i, 0]
        x[i, 0] = 0.0  # VIOLATION


def reads_the_output(n: i32, x: f32[n, 8], y: f32[n]):  # noqa: F821
    attrs.func_kind = "public"
    for i in range(n):
        y[i] = 0.0
        for j in range(8):
            y[i] += x[i, j]  # VIOLATION


def copies_from_the_output(n: i32, x: f32[n, 8], y: f32[n]):  # noqa: F821
    attrs.func_kind = "cuda_kernel"
    attrs.cuda.block_dim = 32
    attrs.cuda.grid_dim = 1
    s = shared_tensor(f32, [32])
    cp_async(~s[threadIdx.x], ~y[threadIdx.x], 4)  # VIOLATION
    y[threadIdx.x] = x[threadIdx.x, 0] + s[threadIdx.x]


def module_of(function: object) -> object:
    with hidet.script_module() as module:
        hidet.script(function)
    return module.ir_module()


def identity_prologue(dims: tuple[str, ...]) -> Prologue:
    source = tensor_param("source", dims)
    return Prologue((source,), lambda idx: E.TensorElement(source, idx))


def copy_epilogue(dims: tuple[str, ...]) -> Epilogue:
    out = tensor_param("out", dims)
    return Epilogue((out,), lambda idx, v: [Store(out, idx, v)])


CASES = [
    (passes_a_row, "x", "passed to the function 'first'"),
    (views_the_input, "x", "viewed as"),
    (aliases_the_input, "x", "used as a whole"),
    (stores_to_the_input, "x", "stored to"),
    (reads_the_output, "y", "read"),
    (copies_from_the_output, "y", "passed to 'cp_async_4'"),
]


@pytest.mark.parametrize(("function", "tensor", "reason"), CASES, ids=[c[0].__name__ for c in CASES])
def test_a_contract_violation_names_the_kernel_and_the_line(function: object, tensor: str, reason: str) -> None:
    module = module_of(function)
    prologues = {"x": identity_prologue(("n", "e"))} if tensor == "x" else {}
    epilogues = {"y": copy_epilogue(("n",))} if tensor == "y" else {}
    with pytest.raises(FusionContractError) as info:
        fuse(module, prologues, epilogues)
    error = info.value
    assert error.kernel == function.__name__ and error.tensor == tensor and reason in error.reason
    assert error.span is not None and error.span.line == violation_line(function)
    assert f":{error.span.line}:" in str(error) and f"kernel '{function.__name__}'" in str(error)


def test_a_violation_on_a_tensor_that_receives_nothing_is_allowed() -> None:
    module = module_of(passes_a_row)  # x is passed to a function, y is only stored to
    fused = fuse(module, {}, {"y": copy_epilogue(("n",))})
    assert [p.name for p in fused.lookup("passes_a_row").params] == ["n", "x", "out"]


def test_fusing_nothing_returns_the_anchor() -> None:
    assert fuse(CPU_MATMUL.module) is CPU_MATMUL.module
    assert fuse(CPU_MATMUL.module, {}, {}) is CPU_MATMUL.module


def test_the_fused_signature_follows_the_kernel_contract() -> None:
    """Size parameters by first appearance (matched by name, new ones added), inputs, extra inputs, outputs."""
    n, batch = E.Var("n", int32), E.Var("batch", int32)
    bias = E.Var("bias", TensorType(float32, (n,)))
    source = E.Var("source", TensorType(float32, (batch, E.Var("n", int32))))
    out_t = E.Var("out_t", TensorType(float32, (E.Var("n", int32), E.Var("m", int32))))
    pro = Prologue((bias, source), lambda idx: E.TensorElement(bias, (idx[1],)) + E.TensorElement(source, (0, idx[1])))
    epi = Epilogue((out_t,), lambda idx, v: [Store(out_t, (idx[1], idx[0]), v)], inputs=(bias,))
    fused = fuse(ELEMENTWISE.module, {"x": pro}, {"y": epi}, name="fused")
    kernel = fused.lookup("fused")
    assert [p.name for p in kernel.params] == ["n", "batch", "m", "bias", "source", "out_t"]
    m_param, n_param = ELEMENTWISE.module.functions[0].params[:2]
    assert kernel.params[0] is n_param and kernel.params[2] is m_param  # the anchor's own size variables
    assert kernel.params[4].type.shape == (batch, n_param)
    assert len(fused.functions) == len(ELEMENTWISE.module.functions)


def test_cp_async_from_a_fused_input_becomes_element_copies() -> None:
    fused = fuse(CUDA_MATMUL.module, {"a": identity_prologue(("m", "k"))}, {})
    text = str(fused)
    assert "cp_async_16" not in text and "~source" not in text  # a's 16-byte copies are now 4 element copies
    assert "cp_async_4(~sb[" in text and "~b[" in text  # b has no prologue: its copies stay asynchronous


def test_bad_keys_and_clashing_names_are_errors() -> None:
    with pytest.raises(ValueError, match="'m', which is no tensor parameter"):
        fuse(ELEMENTWISE.module, {"m": identity_prologue(("m", "n"))})
    clash = tensor_param("y", ("m", "n"))
    with pytest.raises(ValueError, match="two parameters named y"):
        fuse(ELEMENTWISE.module, {"x": Prologue((clash,), lambda idx: E.TensorElement(clash, idx))})


@functools.cache
def two_outputs() -> object:
    """`y = x * 2 + 1` fused with an epilogue storing `y + bias[j]` into `both` and into `transposed` at [j, i]."""
    bias = tensor_param("bias", ("n",))
    both, transposed = tensor_param("both", ("m", "n")), tensor_param("transposed", ("n", "m"))

    def stores(idx: tuple[E.Expr, ...], v: E.Expr) -> list[Store]:
        value = v + E.TensorElement(bias, (idx[1],))
        return [Store(both, idx, value), Store(transposed, (idx[1], idx[0]), value)]

    epi = Epilogue((both, transposed), stores, inputs=(bias,))
    return build_module(fuse(ELEMENTWISE.module, {}, {"y": epi}), "cpu")


@settings(max_examples=example_count(5), deadline=None)
@given(st.sampled_from([1, 7, 33]), st.sampled_from([1, 8, 33]), st.integers(0, 2**32 - 1))
def test_an_epilogue_may_store_several_outputs_at_other_indices(m: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, b = rng.standard_normal((m, n), np.float32), rng.standard_normal(n, np.float32)
    out, out_t = np.zeros((m, n), np.float32), np.zeros((n, m), np.float32)
    two_outputs()(m, n, x, b, out, out_t)
    expected = x * np.float32(2) + np.float32(1) + b  # the C compiler may contract x * 2 + 1 into one rounding
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out_t, out.T)
