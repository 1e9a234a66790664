"""The DSL's vector accesses (`copy_vector`, `address_aligned`): a kernel moving rows of four f32 with one 16-byte
load and store each equals numpy in the emulator's checking mode, takes its element path for a misaligned
argument, and without that test has the misaligned copy reported at its DSL line; bad widths are refused. Fused
with a prologue and an epilogue it loads the prologue's input as vectors and stores through the epilogue; a copy
straight from a fused input to a fused output breaks the fusion contract."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import hidet_lang as hidet
from codegen.build import build_module
from codegen.runtime.arrays import uses_gpu
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import address_aligned, blockIdx, copy_vector, register_tensor, threadIdx
from hidet_lang.ir import expr as E
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import TensorType, float32
from stdlib_ops.fusion import Epilogue, FusionContractError, Prologue, Store, fuse


def scale_module(guarded: bool) -> hidet.ScriptModule:
    """y = 2 x over rows of four, a vector a thread (element by element where the test fails, when `guarded`)."""
    with hidet.script_module() as module:

        @hidet.script
        def scale(n: i32, x: f32[n, 4], y: f32[n, 4]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = (n + 31) // 32
            attrs.cuda.block_dim = 32
            i = blockIdx.x * 32 + threadIdx.x
            if i < n:
                if (not guarded) or (address_aligned(~x[0, 0], 16) and address_aligned(~y[0, 0], 16)):
                    v = register_tensor(f32, [4])
                    copy_vector(~v[0], ~x[i, 0], 16)  # VECTOR-LOAD
                    for k in range(4):
                        v[k] = v[k] * 2.0
                    copy_vector(~y[i, 0], ~v[0], 16)
                else:
                    for k in range(4):
                        y[i, k] = x[i, k] * 2.0

    return module


def misaligned(a: np.ndarray) -> np.ndarray:
    """A copy of `a` 4 bytes past a 16-byte boundary."""
    storage = np.empty(a.size + 8, np.float32)
    start = next(k for k in range(4) if (storage.ctypes.data + 4 * k) % 16 == 4)
    view = storage[start:start + a.size].reshape(a.shape)
    view[...] = a
    return view


@pytest.mark.parametrize("shift", [False, True], ids=["aligned", "misaligned"])
def test_rows_of_four_move_as_vectors(shift: bool) -> None:
    x = np.random.default_rng(0).standard_normal((37, 4)).astype(np.float32)
    y = np.zeros_like(x)
    scale_module(True).build(target="cuda", check=True)(37, misaligned(x) if shift else x, y)
    np.testing.assert_array_equal(y, x * np.float32(2))


@pytest.mark.skipif(uses_gpu(), reason="a GPU call copies numpy arguments to aligned device memory")
def test_a_misaligned_vector_copy_is_reported_at_its_line() -> None:
    lines, first = inspect.getsourcelines(scale_module)
    line = first + next(k for k, text in enumerate(lines) if "VECTOR-LOAD" in text)
    x = misaligned(np.ones((5, 4), np.float32))
    with pytest.raises(Exception, match=rf":{line}\b.*must be 16-byte aligned|must be 16-byte aligned.*:{line}\b"):
        scale_module(False).build(target="cuda", check=True)(5, x, np.zeros((5, 4), np.float32))


def test_bad_widths_are_refused() -> None:
    with pytest.raises(ValueError, match="copy_vector copies 4, 8 or 16 bytes"):
        copy_vector(None, None, 32)
    with pytest.raises(ValueError, match="address_aligned takes a power of two"):
        address_aligned(None, 12)


def copies_input_to_output(n: i32, x: f32[n, 4], y: f32[n, 4]):  # noqa: F821 (parameters)
    attrs.func_kind = "cuda_kernel"
    attrs.cuda.grid_dim = 1
    attrs.cuda.block_dim = 32
    if threadIdx.x < n:
        copy_vector(~y[threadIdx.x, 0], ~x[threadIdx.x, 0], 16)  # VIOLATION


def test_fusion_computes_the_vectors_from_a_prologue_and_stores_them_through_an_epilogue() -> None:
    """A prologue on x (x = a - 1, a's rows loaded as vectors) and an epilogue on y (z = y + 0.5, one element
    store a lane), aligned and misaligned, equal numpy in the checking mode."""
    module = scale_module(True).ir_module()
    kernel = module.functions[0]
    n = kernel.params[0]
    a = E.Var("a", TensorType(float32, (n, 4)))
    z = E.Var("z", TensorType(float32, (n, 4)))
    fused = fuse(module, {"x": Prologue((a,), lambda idx: E.binary("-", E.TensorElement(a, idx), 1.0))},
                 {"y": Epilogue((z,), lambda idx, v: [Store(z, idx, E.binary("+", v, 0.5))])})
    names = [i.name for i in collect(fused.functions[0].body, E.Intrinsic) if i.name.startswith("copy_vector")]
    assert names == ["copy_vector_16"]  # a's load; y's store is element stores through the epilogue
    built = build_module(fused, "cuda", check=True)
    av = np.random.default_rng(5).integers(-9, 9, (9, 4)).astype(np.float32)
    for arg in (av, misaligned(av)):
        zv = np.zeros((9, 4), np.float32)
        built(9, arg, zv)
        np.testing.assert_array_equal(zv, (av - 1) * 2 + np.float32(0.5))


def test_a_vector_copy_between_fused_tensors_breaks_the_contract() -> None:
    with hidet.script_module() as m:
        hidet.script(copies_input_to_output)
    lines, first = inspect.getsourcelines(copies_input_to_output)
    line = first + next(k for k, text in enumerate(lines) if "# VIOLATION" in text)
    module = m.ir_module()
    x = module.functions[0].params[1]
    a, z = E.Var("a", x.type), E.Var("z", x.type)
    with pytest.raises(FusionContractError, match=rf":{line}:"):
        fuse(module, {"x": Prologue((a,), lambda idx: E.TensorElement(a, idx))},
             {"y": Epilogue((z,), lambda idx, v: [Store(z, idx, v)])})
