"""Graph rewrites and the partition: constant folding of operators that read only constants, cancelling
transposes and reshapes, what a group absorbs (and what it must not), and buffer reuse by liveness."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import stdlib_ops as ops
from hidet_lang.testing import example_count
from stdlib_ops.graph.memory_plan import plan_memory
from tests.stdlib_ops.operators.references import conv2d_reference

FINITE = st.floats(-4, 4, width=32)


def test_constant_folding_after_binding_weights() -> None:
    xs, ws = ops.symbol(["m", 4]), ops.symbol([4, 3])
    graph = ops.trace_from(ops.matmul(xs, ops.transpose(ops.tanh(ws)).T * 2.0), inputs=[xs, ws])
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    bound = graph.bind({ws: w})
    assert [op.name for op in bound.nodes] == ["tanh", "transpose", "transpose", "mul", "matmul"]
    optimized = ops.optimize(bound)
    assert [op.name for op in optimized.nodes] == ["matmul"] and len(optimized.inputs) == 1
    folded = optimized.constants
    np.testing.assert_allclose(folded[0].numpy(), np.tanh(w) * 2, rtol=1e-6)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(optimized.build("cpu")(x).numpy(), x @ (np.tanh(w) * 2), rtol=1e-5, atol=1e-6)


@settings(max_examples=example_count(10), deadline=None)
@given(x=arrays(np.float32, (2, 3, 5), elements=FINITE), perm=st.permutations([0, 1, 2]))
def test_transposes_and_reshapes_cancel(x: np.ndarray, perm: list[int]) -> None:
    xs = ops.symbol([2, 3, 5])
    back = ops.transpose(ops.transpose(xs, perm), np.argsort(perm).tolist())
    twice = ops.transpose(ops.transpose(xs, perm), perm)
    reshaped = ops.reshape(ops.reshape(xs, (6, 5)), (30,))
    same = ops.reshape(xs, (2, 3, 5))
    graph = ops.optimize(ops.trace_from([back + 1.0, twice, reshaped, same], [xs]))
    names = [op.name for op in graph.nodes]
    twice_is_identity = [perm[p] for p in perm] == [0, 1, 2]
    assert names.count("transpose") == (0 if twice_is_identity else 1) and names.count("reshape") == 1
    a, b, c, d = graph.build("cpu")(x)
    np.testing.assert_array_equal(a.numpy(), x + 1)
    np.testing.assert_array_equal(b.numpy(), x.transpose(perm).transpose(perm))
    np.testing.assert_array_equal(c.numpy(), x.reshape(30))
    np.testing.assert_array_equal(d.numpy(), x)


def test_a_shared_or_returned_tensor_is_not_an_epilogue() -> None:
    xs = ops.symbol(["m", 4])
    s = ops.sum(xs, axis=1)
    shared = ops.optimize(ops.trace_from([ops.exp(s), ops.neg(s)], [xs]))
    assert [g.title for g in shared.groups] == ["sum", "exp", "neg"]
    returned = ops.optimize(ops.trace_from([s, ops.exp(s)], [xs]))
    assert [g.title for g in returned.groups] == ["sum", "exp"]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    e, n = shared.build("cpu")(x)
    np.testing.assert_allclose(e.numpy(), np.exp(x.sum(1)), rtol=1e-6)
    np.testing.assert_array_equal(n.numpy(), -x.sum(1))


def test_a_prologue_used_twice_inside_the_group_and_a_chain_of_anchors() -> None:
    xs = ops.symbol(["m", 6])
    t = ops.tanh(xs)
    y = ops.softmax(ops.softmax(ops.softmax(t * t, axis=1), axis=1) + t, axis=1)
    graph = ops.optimize(ops.trace_from(y, [xs]))
    # tanh has readers in two groups, so it is a kernel of its own; the add is the middle softmax's epilogue
    assert [g.title for g in graph.groups] == ["tanh", "mul + softmax*", "softmax* + add", "softmax"]
    x = np.random.default_rng(2).standard_normal((7, 6)).astype(np.float32)
    tt = np.tanh(x)

    def softmax(v: np.ndarray) -> np.ndarray:
        e = np.exp(v - v.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    np.testing.assert_allclose(graph.build("cpu")(x).numpy(), softmax(softmax(softmax(tt * tt)) + tt), rtol=1e-5)


def test_intermediate_buffers_are_reused_after_their_last_reader() -> None:
    steps = [([0], [1]), ([1], [2]), ([2], [3]), ([3, 1], [4]), ([4], [5])]
    shapes = {i: (("batch", 4), "float32") for i in (1, 2, 3, 4)}
    plan = plan_memory(steps, shapes)
    assert plan.slot_of[1] != plan.slot_of[2] and plan.slot_of[3] != plan.slot_of[1]
    assert plan.slot_of[3] == plan.slot_of[2] or plan.slot_of[4] == plan.slot_of[2]
    assert len(plan.slots) == 3
    xs = ops.symbol(["m", 5])
    y = xs
    for _ in range(4):
        y = ops.softmax(y, axis=1)
    compiled = ops.optimize(ops.trace_from(y, [xs])).build("cpu")
    assert len(compiled.plan.buffers) == 3 and len(compiled.plan.slots) == 2


@settings(max_examples=example_count(6), deadline=None)
@given(data=st.data())
def test_batch_norm_after_a_convolution_folds_into_its_weights(data: st.DataObject) -> None:
    groups = data.draw(st.sampled_from([1, 2]))
    c, o = groups * data.draw(st.integers(1, 3)), groups * data.draw(st.integers(1, 3))
    h, w = data.draw(st.integers(3, 9)), data.draw(st.integers(3, 9))
    stride, padding, with_bias = data.draw(st.integers(1, 2)), data.draw(st.integers(0, 1)), data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    weight = rng.standard_normal((o, c // groups, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32) if with_bias else None
    mean, beta = rng.standard_normal(o).astype(np.float32), rng.standard_normal(o).astype(np.float32)
    var, gamma = rng.uniform(0.5, 2, o).astype(np.float32), rng.standard_normal(o).astype(np.float32)
    xs = ops.symbol(["n", c, h, w])
    conv = ops.conv2d(xs, ops.asarray(weight), None if bias is None else ops.asarray(bias), stride=stride,
                      padding=padding, groups=groups)
    out = ops.relu(ops.batch_norm(conv, ops.asarray(mean), ops.asarray(var), ops.asarray(gamma), ops.asarray(beta)))
    graph = ops.optimize(ops.trace_from(out, [xs]))
    assert [op.name for op in graph.nodes] == ["conv2d", "relu"]
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    args = ((stride, stride), (padding, padding), (1, 1), groups)
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5)
    shift = (beta - mean * scale).reshape(1, -1, 1, 1)
    want = np.maximum(conv2d_reference(x, weight, bias, *args) * scale.reshape(1, -1, 1, 1) + shift, 0)
    # Each output: 9 * c / groups f32 products summed (one rounding each) with the folded weight's and bias's own
    # roundings and the per-channel steps: (terms + 6) ulps of the magnitudes involved.
    terms = 9 * c // groups
    magnitude = conv2d_reference(np.abs(x), np.abs(weight) * np.abs(scale).reshape(-1, 1, 1, 1), None, *args)
    magnitude += np.abs(shift) + (np.abs(bias * scale).reshape(1, -1, 1, 1) if bias is not None else 0)
    got = graph.build("cpu")(x).numpy()
    assert (np.abs(got - want) <= (terms + 6) * 2.0**-24 * magnitude + 1e-30).all()


def test_a_convolution_read_elsewhere_or_returned_keeps_its_batch_norm() -> None:
    xs = ops.symbol([1, 2, 5, 5])
    conv = ops.conv2d(xs, ops.asarray(np.ones((2, 2, 3, 3), np.float32)))
    scaled = conv * ops.asarray(np.array([1, 2], np.float32).reshape(1, 2, 1, 1))
    shared = ops.optimize(ops.trace_from([scaled + 1.0, ops.relu(conv)], [xs]))
    assert sorted(op.name for op in shared.nodes) == ["add", "conv2d", "mul", "relu"]
    returned = ops.optimize(ops.trace_from([scaled, conv], [xs]))
    assert sorted(op.name for op in returned.nodes) == ["conv2d", "mul"]
    per_pixel = conv * ops.asarray(np.full((1, 1, 3, 3), 2.0, np.float32))
    assert sorted(op.name for op in ops.optimize(ops.trace_from(per_pixel, [xs])).nodes) == ["conv2d", "mul"]
    folded = ops.optimize(ops.trace_from(scaled - 1.0, [xs]))
    assert [op.name for op in folded.nodes] == ["conv2d"]
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    want = conv2d_reference(x, np.ones((2, 2, 3, 3), np.float32), None, (1, 1), (0, 0), (1, 1), 1)
    np.testing.assert_allclose(folded.build("cpu")(x).numpy(), want * np.array([1, 2]).reshape(1, 2, 1, 1) - 1,
                               rtol=1e-5, atol=1e-5)
