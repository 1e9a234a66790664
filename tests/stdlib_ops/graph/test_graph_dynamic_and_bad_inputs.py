"""One compiled graph with a symbolic dimension serves batch 1, 3 and 64 without building anything again; bad
arguments (wrong rank, dtype, fixed dimension, a symbolic dimension bound twice, wrong count) raise an exception
naming the graph input and the shapes before any kernel runs."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops
from hidet_lang.testing import DLPackOnly, example_count
from stdlib_ops.runtime import kernels

W = np.random.default_rng(0).standard_normal((33, 7)).astype(np.float32)


def mlp_like(target: str) -> ops.CompiledGraph:
    xs = ops.symbol(["batch", 33])
    h = ops.matmul(ops.tanh(xs * 2.0), ops.asarray(W))
    out = ops.sum(ops.exp(h) - 1.0, axis=-1) * 3.0 + ops.max(xs, axis=1)
    return ops.optimize(ops.trace_from([out, h], [xs])).build(target)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_one_graph_serves_every_batch_without_a_rebuild(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = mlp_like(target)
    anchor = "matmul_packed*" if target == "cpu" else "matmul*"  # on the CPU, on the weights packed at build
    assert compiled.kernels == [f"mul + tanh + {anchor}", "max", "exp + sub + sum* + mul + add"]

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("a compiled graph was rebuilt")

    monkeypatch.setattr(kernels, "build_module", no_build)
    for batch in (1, 3, 64):
        x = np.random.standard_normal((batch, 33)).astype(np.float32)
        out, h = compiled(x)
        hidden = np.tanh(x * 2) @ W
        assert out.shape == (batch,) and h.shape == (batch, 7)
        # 33-term f32 dot products (a few ulps), then exp of values up to ~20, summed: relative 1e-5
        np.testing.assert_allclose(h.numpy(), hidden, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out.numpy(), (np.exp(hidden) - 1).sum(-1) * 3 + x.max(1), rtol=1e-5, atol=1e-4)




def test_inputs_as_arrays_tensors_and_dlpack_objects() -> None:
    xs, ys = ops.symbol(["n"]), ops.symbol(["n"], dtype="int32")
    compiled = ops.optimize(ops.trace_from([xs * 2.0, ys + 1], [xs, ys])).build("cpu")
    x, y = np.arange(5, dtype=np.float32), np.arange(5, dtype=np.int32)
    for args in ((x, y), (ops.asarray(x), ops.asarray(y)), (DLPackOnly(x), DLPackOnly(y))):
        a, b = compiled(*args)
        np.testing.assert_array_equal(a.numpy(), x * 2)
        np.testing.assert_array_equal(b.numpy(), y + 1)
        assert (a.dtype, b.dtype) == ("float32", "int32")


class Launches:
    """Counts kernel launches of a compiled graph."""

    def __init__(self, compiled: ops.CompiledGraph) -> None:
        self.count = 0
        modules = compiled.modules

        def counting(module: object) -> object:
            def call(*args: object) -> None:
                self.count += 1
                module(*args)
            return call

        compiled.modules = [counting(m) for m in modules]


def test_bad_inputs_raise_before_any_kernel_runs() -> None:
    xs, ys = ops.symbol(["batch", 4]), ops.symbol(["batch"])
    compiled = ops.optimize(ops.trace_from(ops.sum(xs, axis=1) + ys, [xs, ys])).build("cpu")
    launches = Launches(compiled)
    good_x, good_y = np.ones((3, 4), np.float32), np.ones(3, np.float32)
    cases = [
        ((np.ones((3, 4, 1), np.float32), good_y), ValueError, r"input %x0: float32 \(batch, 4\) has rank 2, got an "
                                                               r"array of shape \(3, 4, 1\)"),
        ((good_x.astype(np.float64), good_y), TypeError, r"%x0: float32 \(batch, 4\) has dtype float32, got an array "
                                                         r"of dtype float64 \(shape \(3, 4\)\)"),
        ((np.ones((3, 5), np.float32), good_y), ValueError, r"size 4 in dimension 1, got an array of shape \(3, 5\)"),
        ((good_x, np.ones(2, np.float32)), ValueError, r"'batch' is 3 in input %x0: float32 \(batch, 4\) \(an array "
                                                       r"of shape \(3, 4\)\) but 2 in input %x1: float32 \(batch,\)"),
        ((good_x,), TypeError, r"takes 2 inputs"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            compiled(*args)
    assert launches.count == 0
    np.testing.assert_array_equal(compiled(good_x, good_y).numpy(), np.full(3, 5, np.float32))
    assert launches.count == 1


def test_build_rejects_an_unknown_target() -> None:
    xs = ops.symbol([3])
    graph = ops.trace_from(xs + 1.0, [xs])
    with pytest.raises(ValueError, match=re.escape("build: unknown or unavailable target 'tpu'; available: cpu, "
                                                   "cuda (or 'cuda:<arch>', e.g. 'cuda:sm_90a')")):
        graph.build("tpu")
    with pytest.raises(ValueError, match=re.escape("build: invalid CUDA architecture 'sm_9'")):
        graph.build("cuda:sm_9")


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@settings(max_examples=example_count(4), deadline=None)
@given(data=st.data())
def test_reshapes_keep_a_symbolic_dimension_whole(target: str, data: st.DataObject) -> None:
    heads, width = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 7))
    seq = data.draw(st.integers(1, 9))
    xs = ops.symbol(["batch", seq, heads * width])
    split = ops.reshape(xs, ["batch", -1, heads, width])  # the -1 works out as seq
    moved = ops.transpose(split, (0, 2, 1, 3))  # [batch, heads, seq, width]
    merged = ops.reshape(ops.transpose(moved * 2.0, (0, 2, 1, 3)), ["batch", seq, heads * width])
    assert split.shape == ("batch", seq, heads, width)
    compiled = ops.optimize(ops.trace_from([moved, merged], [xs])).build(target)
    for batch in (1, 3):
        x = np.random.standard_normal((batch, seq, heads * width)).astype(np.float32)
        got_moved, got_merged = compiled(x)
        np.testing.assert_array_equal(got_moved.numpy(), x.reshape(batch, seq, heads, width).transpose(0, 2, 1, 3))
        np.testing.assert_array_equal(got_merged.numpy(), x * 2.0)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_reshapes_merge_a_symbolic_dimension_with_others(target: str) -> None:
    xs = ops.symbol(["batch", 4, 8, 16])
    merged = ops.reshape(xs, [-1, 8, 16])  # what an exported attention does with batch and heads
    assert merged.shape == ("batch*4", 8, 16)
    back = ops.reshape(ops.transpose(merged, (0, 2, 1)), ["batch", 4, 16, 8])
    assert ops.flatten(xs, 0, 2).shape == ("batch*32", 16) and ops.reshape(xs, [2, -1]).shape == (2, "batch*256")
    compiled = ops.optimize(ops.trace_from([back * 2.0, ops.sum(merged, axis=0)], [xs])).build(target)
    for batch in (1, 3):
        x = np.random.standard_normal((batch, 4, 8, 16)).astype(np.float32)
        got_back, got_sum = compiled(x)
        want = x.reshape(-1, 8, 16).transpose(0, 2, 1).reshape(batch, 4, 16, 8) * 2
        np.testing.assert_array_equal(got_back.numpy(), want)
        # sums of 4 * batch terms of |x| < ~5: a few ulps
        np.testing.assert_allclose(got_sum.numpy(), x.reshape(-1, 8, 16).sum(0), rtol=0, atol=1e-5)


def test_a_reshape_that_would_split_a_symbol_or_change_the_size_is_refused() -> None:
    xs = ops.symbol(["batch", 6])
    with pytest.raises(ValueError, match=r"cannot reshape array of size batch\*6 into shape \('batch', 4\)"):
        ops.reshape(xs, ["batch", 4])
    with pytest.raises(ValueError, match=r"cannot reshape array of size batch\*6 into shape \('batch', 4, -1\)"):
        ops.reshape(xs, ["batch", 4, -1])
    with pytest.raises(ValueError, match=r"cannot reshape array of size batch\*6 into shape \('n', -1\)"):
        ops.reshape(xs, ["n", -1])
    with pytest.raises(ValueError, match=r"named by an identifier such as 'batch', got 'b\*2'"):
        ops.symbol(["b*2", 3])


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_an_operator_on_constants_with_a_symbolic_size_is_recorded(target: str) -> None:
    xs = ops.symbol(["n", 3])
    row = ops.broadcast_to(ops.asarray(np.arange(3, dtype=np.float32)), ["n", 3])  # its size is the graph's n
    assert row.is_symbolic
    compiled = ops.optimize(ops.trace_from(xs * row, [xs])).build(target)
    for n in (1, 4):
        x = np.random.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(compiled(x).numpy(), x * np.arange(3, dtype=np.float32))


def test_zero_dimensional_arrays_stay_zero_dimensional(tmp_path: object) -> None:
    five = ops.asarray(np.asarray(5.0, np.float32))
    assert five.shape == () and (five + 1.0).shape == ()
    xs = ops.symbol([])
    compiled = ops.optimize(ops.trace_from(xs * five, [xs])).build("cpu")
    result = compiled(np.asarray(2.0, np.float32))
    assert result.shape == () and float(result.numpy()) == 10.0
    path = f"{tmp_path}/scalar.hlgraph"
    ops.trace_from(xs * 2.0 + five, [xs]).build("cpu").save(path)  # a 0-d constant through the saved file
    assert float(ops.load(path)(np.asarray(1.0, np.float32)).numpy()) == 7.0
    with pytest.raises(ValueError, match=r"has rank 0, got an array of shape \(1,\)"):
        compiled(np.ones(1, np.float32))
